//! A DCP checkpoint's `.metadata`: a pickle of
//! `torch.distributed.checkpoint.metadata.Metadata`. Its chunk count is
//! tensors × ranks, so a large job's file holds millions (issue 44).
//!
//! Two readers share one result (`parts.rs`: the dataclasses as flat
//! records, checked and joined in one place):
//! - `decode.rs`, a compact decoder for the stream PyTorch's pickler
//!   writes: each dataclass becomes a record as it is built, no generic node
//!   graph is made, and a local file is read a block at a time;
//! - `graph.rs`, the generic pickle machine with hooks that know the same
//!   classes, for every stream the compact decoder does not take (a shared
//!   mutable object, text opcodes, a shape it does not know). Its errors
//!   are the errors users see.
//!
//! The chunks end in one flat table (`table.rs`), which [`TensorMeta`] and
//! [`Chunk`] borrow from.
//!
//! Either way only the data classes of `metadata.py` and `filesystem.py`
//! (and their older `torch.distributed._shard` spellings), `torch.Size`,
//! dtypes, layouts, memory formats and `pathlib` paths may be named: every
//! class is data, nothing is imported or called, and any other global is
//! refused. (PyTorch itself reads this file with a plain `pickle.load`.)

mod decode;
mod graph;
mod input;
mod parts;
mod table;

use std::sync::Arc;

use crate::checkpoint::pickle::Limits;
use crate::checkpoint::value::graph::PathKey;
use crate::io::{ReadAt, ReadCost};
use crate::{DType, Result};

use self::parts::Parts;
use self::table::ChunkTable;

/// A data class the metadata may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Metadata,
    TensorStorageMetadata,
    BytesStorageMetadata,
    ChunkStorageMetadata,
    TensorProperties,
    MetadataIndex,
    StorageInfo,
    StorageMeta,
    MemoryFormat,
    Path,
}

/// Every global a `.metadata` pickle may name, besides `torch.Size`, dtypes
/// and `torch.serialization._get_layout` (from the checkpoint allowlist).
const CLASSES: &[(&str, &str, Class)] = &[
    (
        "torch.distributed.checkpoint.metadata",
        "Metadata",
        Class::Metadata,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "TensorStorageMetadata",
        Class::TensorStorageMetadata,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "BytesStorageMetadata",
        Class::BytesStorageMetadata,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "ChunkStorageMetadata",
        Class::ChunkStorageMetadata,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "TensorProperties",
        Class::TensorProperties,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "MetadataIndex",
        Class::MetadataIndex,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "StorageMeta",
        Class::StorageMeta,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "_MEM_FORMAT_ENCODING",
        Class::MemoryFormat,
    ),
    (
        "torch.distributed.checkpoint.filesystem",
        "_StorageInfo",
        Class::StorageInfo,
    ),
    (
        "torch.distributed._shard.sharded_tensor.metadata",
        "TensorProperties",
        Class::TensorProperties,
    ),
    (
        "torch.distributed._shard.sharded_tensor.metadata",
        "MEM_FORMAT_ENCODING",
        Class::MemoryFormat,
    ),
    ("pathlib", "PosixPath", Class::Path),
    ("pathlib", "PurePosixPath", Class::Path),
    ("pathlib", "Path", Class::Path),
];

/// The data class `module.name`, if a `.metadata` pickle may name it.
fn class(module: &str, name: &str) -> Option<Class> {
    CLASSES
        .iter()
        .find(|(m, n, _)| *m == module && *n == name)
        .map(|(_, _, c)| *c)
}

/// Whether `module.name` is one of the data classes a `.metadata` pickle may
/// name (read as data by this reader; `stowage scan` judges a DCP
/// `.metadata` by them).
pub(crate) fn is_metadata_class(module: &str, name: &str) -> bool {
    class(module, name).is_some()
}

/// Where an item's bytes are: `_StorageInfo`, owned (a value item's, or one
/// being written). A chunk's is a [`StorageRef`] into its metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageInfo {
    /// The file, relative to the checkpoint's folder (a plain file name).
    pub relative_path: String,
    /// The item's first byte in the file.
    pub offset: u64,
    /// The item's length in bytes, as stored (after any transforms).
    pub length: u64,
    /// Stream transforms applied when saving, in order (`stream.zstd/1`).
    pub transforms: Vec<String>,
}

impl StorageInfo {
    /// Borrowed, as a chunk's storage is.
    pub fn as_ref(&self) -> StorageRef<'_> {
        StorageRef {
            relative_path: &self.relative_path,
            offset: self.offset,
            length: self.length,
            transforms: &self.transforms,
        }
    }
}

/// Where an item's bytes are (`_StorageInfo`), borrowed from the metadata:
/// a million chunks name a handful of files, each stored once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StorageRef<'a> {
    /// The file, relative to the checkpoint's folder (a plain file name).
    pub relative_path: &'a str,
    /// The item's first byte in the file.
    pub offset: u64,
    /// The item's length in bytes, as stored (after any transforms).
    pub length: u64,
    /// Stream transforms applied when saving, in order (`stream.zstd/1`).
    pub transforms: &'a [String],
}

impl StorageRef<'_> {
    /// An owned copy.
    pub fn to_info(self) -> StorageInfo {
        StorageInfo {
            relative_path: self.relative_path.to_owned(),
            offset: self.offset,
            length: self.length,
            transforms: self.transforms.to_vec(),
        }
    }
}

/// One stored chunk of a tensor: its region of the whole tensor and its
/// bytes, borrowed from the metadata's flat tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk<'a> {
    /// Where the chunk starts in each dimension.
    pub offsets: &'a [usize],
    /// The chunk's extent in each dimension.
    pub sizes: &'a [usize],
    /// Where its bytes are.
    pub storage: StorageRef<'a>,
}

/// A tensor of a DCP checkpoint, stored as chunks.
#[derive(Clone, Debug)]
pub struct TensorMeta {
    /// The element type.
    pub dtype: DType,
    /// The whole tensor's shape.
    pub size: Vec<usize>,
    /// As saved.
    pub requires_grad: bool,
    /// Its chunks: a range of the checkpoint's table.
    chunks: table::Span,
}

impl TensorMeta {
    /// How many chunks it is stored in (from every rank).
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// Its chunk `i`, in metadata order.
    pub fn chunk(&self, i: usize) -> Option<Chunk<'_>> {
        self.chunks.get(i)
    }

    /// Its chunks, in metadata order.
    pub fn chunks(&self) -> impl ExactSizeIterator<Item = Chunk<'_>> + '_ {
        (0..self.chunk_count()).map(move |i| self.chunks.at(i))
    }
}

impl PartialEq for TensorMeta {
    fn eq(&self, other: &Self) -> bool {
        self.dtype == other.dtype
            && self.size == other.size
            && self.requires_grad == other.requires_grad
            && self.chunks().eq(other.chunks())
    }
}

/// What an entry of the state dict is.
#[derive(Clone, Debug, PartialEq)]
pub enum ItemKind {
    /// A tensor, in chunks.
    Tensor(TensorMeta),
    /// Any other value, stored as one `torch.save` archive.
    Bytes(StorageInfo),
}

/// One entry of the flattened state dict.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// The flattened name (`model.layers.0.weight`).
    pub fqn: String,
    /// The keys from the root of the original state dict (`planner_data`),
    /// or the name split at dots when the metadata has none.
    pub path: Vec<PathKey>,
    /// Tensor or value.
    pub kind: ItemKind,
}

/// A parsed `.metadata`.
#[derive(Clone, Debug, PartialEq)]
pub struct DcpMetadata {
    /// Every entry, in the metadata's order.
    pub items: Vec<Item>,
    /// The checkpoint format version (`"1.0.0"`), when recorded.
    pub version: Option<String>,
}

impl DcpMetadata {
    /// Every file its items name, once each, in the order first named.
    pub fn files(&self) -> Vec<&str> {
        let mut files: Vec<&str> = Vec::new();
        // The chunks' files by their number in the shared table (a million
        // chunks name a handful of files); values' by name.
        let mut seen_ids: Vec<bool> = Vec::new();
        let mut first_table: Option<*const ChunkTable> = None;
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for item in &self.items {
            match &item.kind {
                ItemKind::Bytes(info) => {
                    if seen.insert(&info.relative_path) {
                        files.push(&info.relative_path);
                    }
                }
                ItemKind::Tensor(t) => {
                    let table = t.chunks.table();
                    // Numbers are compared only within the first table (a
                    // parsed metadata has one).
                    let shared = *first_table.get_or_insert(Arc::as_ptr(table));
                    let by_id = std::ptr::eq(shared, Arc::as_ptr(table));
                    seen_ids.resize(table.file_count(), false);
                    for id in t.chunks.file_ids() {
                        if by_id && std::mem::replace(&mut seen_ids[id as usize], true) {
                            continue;
                        }
                        let name = table.file(id);
                        if seen.insert(name) {
                            files.push(name);
                        }
                    }
                }
            }
        }
        files
    }
}

/// Parses a `.metadata` file's bytes.
///
/// # Errors
/// [`CheckpointError::GlobalNotAllowed`](crate::CheckpointError::GlobalNotAllowed)
/// for a global outside the DCP data classes;
/// [`FormatError::Pickle`](crate::FormatError::Pickle) for a malformed pickle
/// or one past `limits`; [`FormatError::BadObject`](crate::FormatError::BadObject)
/// when the objects are not a DCP `Metadata` (a chunk outside its tensor, a
/// storage file outside the folder, a chunk without storage …);
/// [`TensorError::SizeOverflow`](crate::TensorError::SizeOverflow) for sizes
/// past `usize`.
pub fn parse(bytes: &[u8], limits: &Limits) -> Result<DcpMetadata> {
    parts::assemble(read(bytes, limits)?)
}

/// [`parse`] of the `.metadata` file `file`: a local file is decoded a
/// block at a time (a large job's is hundreds of MB, and only the records
/// are kept); one in object storage, or one the compact decoder does not
/// take, is read whole (at most `max` bytes).
///
/// # Errors
/// As [`parse`]; [`CheckpointError::LimitExceeded`](crate::CheckpointError::LimitExceeded)
/// for a file past `max`; I/O errors.
pub(super) fn parse_file(file: &dyn ReadAt, max: u64, limits: &Limits) -> Result<DcpMetadata> {
    let len = file.len();
    if len > max {
        return Err(crate::Error::Checkpoint(
            crate::CheckpointError::LimitExceeded {
                limit: crate::Limit::PickleBytes,
                value: len,
                max,
            },
        ));
    }
    if file.read_cost() == ReadCost::Local {
        if let Some(parts) = decode::decode_input(input::Input::file(file)) {
            return parts::assemble(parts);
        }
    }
    let mut bytes = vec![0; len as usize];
    file.read_exact_at(&mut bytes, 0)?;
    let parts = read(&bytes, limits)?;
    drop(bytes);
    parts::assemble(parts)
}

/// The records of a `.metadata` stream: by the compact decoder where it
/// takes the stream, else by the generic reader.
fn read(bytes: &[u8], limits: &Limits) -> Result<Parts> {
    match decode::decode_input(input::Input::memory(bytes)) {
        Some(parts) => Ok(parts),
        None => graph::read(bytes, limits),
    }
}

/// A tensor's metadata from its chunks, for tests of the readers built on it.
#[cfg(test)]
pub(super) fn tensor_for_test(
    dtype: DType,
    size: &[usize],
    chunks: &[(&[usize], &[usize], StorageInfo)],
) -> TensorMeta {
    let mut t = table::Builder::default();
    let first = t.len();
    for (offsets, sizes, info) in chunks {
        t.push(offsets, sizes, info.as_ref());
    }
    let table = Arc::new(t.finish());
    TensorMeta {
        dtype,
        size: size.to_vec(),
        requires_grad: false,
        chunks: table::Span::new(table, first, chunks.len(), size.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dcp");

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(format!("{FIXTURES}/{name}/.metadata")).unwrap()
    }

    /// What the generic reader alone makes of `bytes`.
    fn generic(bytes: &[u8]) -> Result<DcpMetadata> {
        parts::assemble(graph::read(bytes, &Limits::default())?)
    }

    /// `parse` (the compact decoder where it takes the stream) and the
    /// generic reader agree: both fail, or both give the same metadata.
    fn agree(bytes: &[u8], what: &str) {
        match (parse(bytes, &Limits::default()), generic(bytes)) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{what}"),
            (Err(_), Err(_)) => {}
            (a, b) => panic!(
                "{what}: parse {}, generic {}",
                a.map_or_else(|e| e.to_string(), |_| "Ok".into()),
                b.map_or_else(|e| e.to_string(), |_| "Ok".into())
            ),
        }
    }

    /// Files PyTorch wrote, at worlds 1 and 4, with values, zstd streams
    /// and safetensors items: the compact decoder takes each, and gives what
    /// the generic reader gives.
    #[test]
    fn the_compact_decoder_reads_what_pytorch_writes_as_the_generic_reader_does() {
        for name in ["one", "four", "zstd", "safetensors"] {
            let bytes = fixture(name);
            assert!(
                decode::decode(&bytes).is_some(),
                "{name}: decoded compactly"
            );
            agree(&bytes, name);
            let m = parse(&bytes, &Limits::default()).unwrap();
            assert!(m
                .items
                .iter()
                .any(|i| matches!(i.kind, ItemKind::Tensor(_))));
        }
        // A `_StorageInfo` shared between two entries (a memo read of a
        // mutable object) is left to the generic reader.
        let shared = fixture("hostile/overlap");
        assert!(decode::decode(&shared).is_none());
        agree(&shared, "hostile/overlap");
    }

    /// A file read a few bytes at a time decodes as the whole stream in
    /// memory does: every operand, string and line across block ends.
    #[test]
    fn a_tensor_prints_its_own_chunks_not_the_table() {
        let parsed = parse(&fixture("four"), &Limits::default()).unwrap();
        let mut tensors = 0;
        for item in &parsed.items {
            if let ItemKind::Tensor(t) = &item.kind {
                let text = format!("{t:?}");
                assert_eq!(text.matches("Chunk {").count(), t.chunk_count(), "{text}");
                tensors += 1;
            }
        }
        assert!(tensors > 1);
    }

    #[test]
    fn blocks_of_any_size_decode_as_the_whole_stream() {
        for name in ["four", "zstd"] {
            let bytes = fixture(name);
            let whole = parts::assemble(decode::decode(&bytes).unwrap()).unwrap();
            for block in [1, 2, 3, 5, 8, 13, 64, 1000] {
                let input = input::Input::file_by(&bytes, block);
                let parts = decode::decode_input(input).unwrap();
                assert_eq!(parts::assemble(parts).unwrap(), whole, "{name}, {block}");
            }
            // Cut short, by blocks too: no answer, and no panic.
            for cut in [1, 100, bytes.len() / 2, bytes.len() - 1] {
                let short = &bytes[..cut];
                assert!(decode::decode_input(input::Input::file_by(&short, 7)).is_none());
            }
        }
    }

    /// What stowage's own save writes (`GLOBAL` and `BINPUT` rather than
    /// `STACK_GLOBAL` and `MEMOIZE`, chunk index hints, zstd transforms)
    /// is decoded compactly too, as the generic reader reads it.
    #[test]
    fn the_compact_decoder_reads_what_stowage_writes() {
        let ckpt = crate::load(format!("{FIXTURES}/four")).unwrap();
        let out = tempfile::tempdir().unwrap();
        let options = super::super::DcpSaveOptions::default()
            .with_ranks(3)
            .with_sync(false)
            .with_zstd(cfg!(feature = "zstd"));
        super::super::save(out.path(), &ckpt, &options).unwrap();
        let bytes = std::fs::read(out.path().join(".metadata")).unwrap();
        assert!(decode::decode(&bytes).is_some());
        agree(&bytes, "saved by stowage");
        let m = parse(&bytes, &Limits::default()).unwrap();
        // With zstd built in, every item names its transform.
        let zstd = m.items.iter().all(|i| match &i.kind {
            ItemKind::Tensor(t) => t
                .chunks()
                .all(|c| c.storage.transforms == ["stream.zstd/1"]),
            ItemKind::Bytes(info) => info.transforms == ["stream.zstd/1"],
        });
        assert_eq!(zstd, cfg!(feature = "zstd"));
    }

    /// Containers nested a million deep (lists, tuples, dicts) are left to
    /// the generic reader, which refuses them by its depth limit: no stack
    /// overflows in either, building or dropping.
    #[test]
    fn deep_nesting_is_refused_without_recursion() {
        let deep = 1_000_000;
        let mut lists = vec![0x80, 4];
        lists.extend(std::iter::repeat_n(b']', deep));
        lists.extend(std::iter::repeat_n(b'a', deep));
        lists.push(b'.');
        let mut tuples = vec![0x80, 4, b'N'];
        tuples.extend(std::iter::repeat_n(0x85, deep));
        tuples.push(b'.');
        let mut dicts = vec![0x80, 4];
        for _ in 0..deep {
            dicts.extend_from_slice(b"}\x8c\x01k");
        }
        dicts.push(b'}');
        dicts.extend(std::iter::repeat_n(b's', deep));
        dicts.push(b'.');
        for (what, bytes) in [("lists", lists), ("tuples", tuples), ("dicts", dicts)] {
            assert!(decode::decode(&bytes).is_none(), "{what}");
            assert!(parse(&bytes, &Limits::default()).is_err(), "{what}");
        }
    }

    /// Every stream one byte away from a real one (each byte replaced by a
    /// few values, and each prefix): never a panic, and the two readers
    /// agree on every one.
    #[test]
    fn the_readers_agree_on_every_corrupted_stream() {
        let bytes = fixture("four");
        for at in 0..bytes.len() {
            for v in [0u8, 1, 0x7f, 0xff, bytes[at] ^ 0x20] {
                let mut b = bytes.clone();
                b[at] = v;
                agree(&b, &format!("byte {at} = {v}"));
            }
            agree(&bytes[..at], &format!("prefix {at}"));
        }
    }

    /// Streams a few random bytes away from real ones (a fixed seed, so
    /// that a failure repeats): the two readers agree on each.
    #[test]
    fn the_readers_agree_on_randomly_corrupted_streams() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            // xorshift64*: enough to scatter the changes.
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            seed.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        for name in ["four", "one", "zstd", "safetensors", "hostile/overlap"] {
            let bytes = fixture(name);
            for round in 0..1000 {
                let mut b = bytes.clone();
                for _ in 0..1 + next() % 4 {
                    let at = (next() % b.len() as u64) as usize;
                    b[at] = next() as u8;
                }
                agree(&b, &format!("{name}, round {round}"));
            }
        }
    }
}
