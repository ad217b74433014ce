//! `convert --manifest`, differential: the manifest a conversion makes from
//! the bytes as it writes them (`WrittenDigests`: pieces held and hashed
//! sixteen, two or one at a time on threads of their own) must be the one
//! `manifest` gives by reading the output back; and its tensors must be
//! the input's, entry for entry (name, dtype, shape, digest): the same
//! manifest in every form, a DCP's chunks composing into the tensors.
//!
//! The first input byte picks the output, the rest is the checkpoint:
//!
//! | first byte % 5 | OUT |
//! |---|---|
//! | 0 | a `.pt` (torch zip) |
//! | 1 | a `.safetensors` file (values left out) |
//! | 2 | a sharded safetensors set of 4 KB shards (values left out) |
//! | 3 | a DCP folder of 2, 1, 3 or 4 ranks' files (`first byte / 5 % 4`) |
//! | 4 | a `.pt`, objects `torch.load(weights_only=True)` refuses dropped |
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use stowage::checkpoint::FolderFormat;
use stowage_commands::convert::{convert, ConvertOptions};
use stowage_commands::manifest::manifest;
use stowage_commands::Context;

fn scratch() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("stowage-fuzz-convert-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, file)) = data.split_first() else {
        return;
    };
    let dir = scratch();
    let src = dir.join("in");
    if std::fs::write(&src, file).is_err() {
        return;
    }
    let options = ConvertOptions::default()
        .with_manifest(true)
        .with_sync(false);
    let (out, options) = match pick % 5 {
        0 => (dir.join("out.pt"), options),
        1 => (dir.join("out.safetensors"), options.with_drop_values(true)),
        2 => (
            dir.join("set"),
            options
                .with_to(Some(FolderFormat::Safetensors))
                .with_max_shard_size("4KB")
                .with_drop_values(true),
        ),
        3 => (
            dir.join("dcp"),
            options
                .with_to(Some(FolderFormat::Dcp))
                .with_ranks(Some([2, 1, 3, 4][usize::from(pick / 5 % 4)])),
        ),
        _ => (dir.join("out.pt"), options.with_drop_objects(true)),
    };
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_dir_all(&out);
    let cx = Context::default();
    let Ok(done) = convert(&src, &out, &cx, &options) else {
        return;
    };
    let written = done.manifest().expect("asked for a manifest");
    let read = manifest(&out, &cx, &Default::default()).expect("the output reads back");
    assert_eq!(
        written.differences(&read),
        Vec::<String>::new(),
        "the manifest written against the output's"
    );
    assert_eq!(written, &read);
    let Ok(source) = manifest(&src, &cx, &Default::default()) else {
        return;
    };
    assert_eq!(
        source.tensors(),
        read.tensors(),
        "the input's tensors against the output's"
    );
});
