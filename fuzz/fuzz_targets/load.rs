//! `stowage::checkpoint::load_bytes` on the raw input (format detected from
//! the content), then every tensor's logical bytes; seeded with load inputs.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| common::load_and_walk(data));
