//! `stowage::checkpoint::sharded::ShardIndex::parse` on the input as text (a
//! Hugging Face `*.index.json`); seeded with the sharded fixtures' indexes.
//! Every shard it accepts must be a plain file name in the index's folder.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stowage::checkpoint::sharded::ShardIndex;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(index) = ShardIndex::parse(text) {
        for file in index.files() {
            assert!(!file.contains('/') && file != ".." && !file.is_empty());
        }
    }
});
