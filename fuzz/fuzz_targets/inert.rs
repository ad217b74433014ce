//! Inert loading (`LoadOptions::with_inert`): any global becomes an inert object or
//! decoded data, never called. After the load, every walk that must see
//! through inert objects runs (tensors, leaves, objects, what cannot be
//! saved), then the objects are dropped and the rest is saved again.
//!
//! | first byte % 2 | options |
//! |---|---|
//! | 0 | `inert` |
//! | 1 | the decoded table's names allowed (`allow_globals`), not `inert` |
#![no_main]

use libfuzzer_sys::fuzz_target;
use stowage::checkpoint::{decoded, load_bytes, save_to_writer};
use stowage::{LoadOptions, SaveOptions};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, file)) = data.split_first() else {
        return;
    };
    let options = if mode % 2 == 0 {
        LoadOptions::default().with_inert(true)
    } else {
        LoadOptions::default()
            .with_allow_globals(decoded::DECODED.iter().map(|(m, n, _)| format!("{m}.{n}")))
    };
    let Ok(mut ckpt) = load_bytes(file, &options) else {
        return;
    };
    common::walk(&ckpt);
    let _ = ckpt.root_value().leaves_once();
    let _ = ckpt.root_value().objects();
    let _ = ckpt.unsaveable();
    ckpt.drop_objects();
    assert!(matches!(ckpt.unsaveable().as_deref(), Ok([]) | Err(_)));
    let _ = save_to_writer(std::io::sink(), "archive", &ckpt, &SaveOptions::default());
});
