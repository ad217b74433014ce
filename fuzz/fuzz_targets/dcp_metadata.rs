//! `stowage::checkpoint::dcp::metadata::parse` on the raw input (a DCP
//! `.metadata` pickle), then every chunk's region; seeded with the DCP
//! fixtures' `.metadata` files. The parser must refuse, never panic, and
//! never accept a chunk outside its tensor.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stowage::checkpoint::dcp::metadata::{parse, ItemKind};
use stowage::checkpoint::pickle::Limits;

fuzz_target!(|data: &[u8]| {
    let Ok(md) = parse(data, &Limits::default()) else {
        return;
    };
    for item in &md.items {
        if let ItemKind::Tensor(t) = &item.kind {
            assert_eq!(t.chunks().len(), t.chunk_count());
            for c in t.chunks() {
                assert_eq!(c.offsets.len(), t.size.len());
                for ((o, s), n) in c.offsets.iter().zip(c.sizes).zip(&t.size) {
                    assert!(o + s <= *n, "chunk outside its tensor");
                }
                assert!(!c.storage.relative_path.contains('/'));
            }
        }
    }
});
