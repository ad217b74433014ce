//! `WrittenDigests`: a save hands over each tensor's bytes as it writes
//! them, and their digests are the tensors' content digests
//! (`content::sha256`, what `stowage manifest` lists), in every format; a
//! tensor the writer cannot give in order is left out, never given a wrong
//! digest.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common;
use stowage::checkpoint::content::{self, WrittenDigests};
use stowage::checkpoint::dcp::{self, DcpSaveOptions, PlannedChunk};
use stowage::checkpoint::{dotted, save_to, Destination};
use stowage::{Checkpoint, DType, SaveOptions, Tensor};

/// Each tensor's content digest, by dotted path.
fn content_digests(ckpt: &Checkpoint) -> BTreeMap<String, String> {
    ckpt.tensors()
        .unwrap()
        .into_iter()
        .map(|(path, t)| (dotted(&path), content::sha256(t, |_| ()).unwrap()))
        .collect()
}

/// What `digests` was fed, as hex digests, once finished.
fn fed(digests: &WrittenDigests) -> BTreeMap<String, String> {
    digests
        .finish()
        .into_iter()
        .map(|(n, d)| (n, hex::encode(d.sha256())))
        .collect()
}

/// What a DCP save of `ckpt` with `options` fed to `threads` hashing
/// threads, as hex digests.
fn dcp_fed(ckpt: &Checkpoint, options: DcpSaveOptions, threads: usize) -> BTreeMap<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let digests = WrittenDigests::with_threads(threads);
    let options = options.with_sync(false).with_digests(digests.clone());
    dcp::save(&dir.path().join("d"), ckpt, &options).unwrap();
    fed(&digests)
}

/// What a save of `ckpt` to `name` in a fresh folder fed to `threads`
/// hashing threads, as hex digests.
fn written(ckpt: &Checkpoint, name: &str, threads: usize) -> BTreeMap<String, String> {
    let dir = tempfile::tempdir().unwrap();
    let digests = WrittenDigests::with_threads(threads);
    let dest = Destination::resolve(dir.path().join(name), None).unwrap();
    save_to(
        ckpt,
        &dest,
        &SaveOptions::default()
            .with_sync(false)
            .with_digests(digests.clone()),
    )
    .unwrap();
    fed(&digests)
}

/// On one hashing thread and on several (each tensor dealt to one).
#[test]
fn every_format_feeds_the_content_digest_of_each_tensor_it_writes() {
    for threads in [1, 3] {
        every_format_feeds(threads);
    }
}

fn every_format_feeds(threads: usize) {
    // One object at many paths (`a`, `b`, `list.0`, …), views, a parameter,
    // bfloat16: every tensor is a contiguous range of its storage.
    let shared = common::load_fixture("same_object");
    let want = content_digests(&shared);
    assert_eq!(written(&shared, "x.pt", threads), want);
    // safetensors writes a tensor at a time: every one, views included.
    let sd = common::load_fixture("views");
    assert_eq!(written(&sd, "x.safetensors", threads), content_digests(&sd));
    // The torch zip writer writes the storage: its strided views (a
    // column, a transpose, a narrowed block) are left out, the rest fed.
    let mut pt = content_digests(&sd);
    pt.retain(|name, _| !["col", "t", "narrow"].contains(&name.as_str()));
    assert_eq!(written(&sd, "x.pt", threads), pt);
    // A DCP of one rank: every top-level tensor; those inside a tuple (one
    // value item) are not fed.
    let mut in_dcp = want.clone();
    in_dcp.retain(|name, _| !name.starts_with("tuple."));
    assert_eq!(
        dcp_fed(&shared, DcpSaveOptions::default().with_ranks(3), threads),
        in_dcp
    );
}

#[test]
fn chunks_that_are_not_rows_in_order_are_left_out() {
    let w = Tensor::arange(0.0, 24.0, 1.0, DType::Float32)
        .unwrap()
        .view(&[4, 6])
        .unwrap();
    let v = Tensor::arange(0.0, 6.0, 1.0, DType::Float32).unwrap();
    let ckpt = Checkpoint::from_state_dict(vec![("w".to_owned(), w), ("v".to_owned(), v)]);
    let want = content_digests(&ckpt);
    // Columns of `w` on two ranks: its bytes never pass in order. `v` is
    // split in rows, highest first: not in order either.
    let plan = Arc::new(|name: &str, shape: &[usize]| match name {
        "w" => (0..2)
            .map(|rank| PlannedChunk {
                rank,
                offsets: vec![0, 3 * rank],
                sizes: vec![shape[0], 3],
            })
            .collect(),
        _ => (0..2)
            .map(|rank| PlannedChunk {
                rank,
                offsets: vec![3 * (1 - rank)],
                sizes: vec![3],
            })
            .collect(),
    });
    let columns = DcpSaveOptions::default().with_ranks(2).with_plan(plan);
    assert!(dcp_fed(&ckpt, columns, 3).is_empty());
    // Rows in order: both fed, each its content digest.
    assert_eq!(
        dcp_fed(&ckpt, DcpSaveOptions::default().with_ranks(3), 2),
        want
    );
    // A clone used after `finish` feeds nothing, and finishing again gives nothing.
    let digests = WrittenDigests::new();
    assert!(fed(&digests).is_empty());
    let dir = tempfile::tempdir().unwrap();
    let options = DcpSaveOptions::default().with_digests(digests.clone());
    dcp::save(&dir.path().join("after"), &ckpt, &options).unwrap();
    assert!(digests.finish().is_empty());
}
