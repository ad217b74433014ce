//! The load options other than the default eager load: the first input byte
//! picks one, the rest is the file. The file goes through a real path (mmap
//! and lazy loads need one), then every tensor's logical bytes are read as in
//! the other load targets, which for a lazy load is when its records are read.
//!
//! | first byte % 6 | load |
//! |---|---|
//! | 0 | `load_mmap` |
//! | 1 | `load_with`, `LoadMode::Lazy` |
//! | 2 | `load_with`, `LoadMode::Fake` |
//! | 3 | `load_with`, `verify_crc` |
//! | 4 | `load_with`, `map_location = meta` |
//! | 5 | `load_mmap` with `verify_crc` |
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use stowage::{load_mmap, load_with, LoadMode, LoadOptions};
use stowage::Device;

#[path = "common.rs"]
mod common;

fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        std::env::temp_dir().join(format!("stowage-fuzz-{}.pt", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, file)) = data.split_first() else {
        return;
    };
    let path = scratch();
    // A new inode for every input: nothing mapped from the previous one (all
    // dropped by now anyway) can alias the new bytes.
    let _ = std::fs::remove_file(path);
    if std::fs::write(path, file).is_err() {
        return;
    }
    let options = LoadOptions::default();
    let loaded = match mode % 6 {
        0 | 5 => {
            let options = options.with_verify_crc(mode % 6 == 5);
            // SAFETY: this process alone writes the scratch file, and only
            // before the load and after the checkpoint is dropped.
            unsafe { load_mmap(path, &options) }
        }
        m => {
            let options = match m {
                1 => options.with_mode(LoadMode::Lazy),
                2 => options.with_mode(LoadMode::Fake),
                3 => options.with_verify_crc(true),
                _ => options.with_map_location(Device::META),
            };
            load_with(path, &options)
        }
    };
    if let Ok(ckpt) = loaded {
        common::walk(&ckpt);
    }
});
