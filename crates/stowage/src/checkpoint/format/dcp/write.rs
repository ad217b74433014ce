//! Saving a checkpoint as a DCP folder that `torch.distributed.checkpoint.load`
//! reads, in one process or several, with any sharding of its own.
//!
//! The state dict is flattened as DCP flattens it (`_traverse.py`): dicts are
//! walked (keys as `str(key)`), lists are walked when they hold tensors,
//! dicts or such lists, and everything else is a leaf. Each tensor is split
//! into `ranks` chunks along its first dimension (as `DTensor`'s `Shard(0)`
//! splits it, `torch.chunk`'s sizes) and each chunk saved by `torch.save` into
//! its rank's file `__{rank}_0.distcp`; every other leaf is one `torch.save`
//! item in rank 0's file. `.metadata` is pickled as PyTorch pickles it
//! (`NEWOBJ` and `BUILD` of the dataclasses).

use crate::error::{CheckpointError, ErrorContext, FormatError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use super::metadata::StorageInfo;
use super::{transplant, METADATA_FILE};
use crate::checkpoint::format::torch_zip::save_to_writer;
use crate::checkpoint::globals::allowlist::Global;
use crate::checkpoint::options::SaveOptions;
use crate::checkpoint::pickle::{Node, Pickler, Value, WriteError};
use crate::checkpoint::value::graph::{Checkpoint, Object, PathKey, TensorObject, MAX_PATHS};
use crate::io::Location;
use crate::{DType, Error, Result, Tensor};

/// How to save a DCP checkpoint: `DcpSaveOptions::default().with_ranks(4)`.
#[non_exhaustive]
#[derive(Clone)]
pub struct DcpSaveOptions {
    pub(crate) ranks: usize,
    pub(crate) sync: bool,
    pub(crate) zstd: bool,
    pub(crate) plan: Option<ChunkPlan>,
}

impl DcpSaveOptions {
    /// How many ranks' files to write. Without a
    /// [`with_plan`](Self::with_plan), each tensor is split over them along
    /// its first dimension. 1 (the default) writes one file, as `dcp.save`
    /// in a single process does.
    pub fn with_ranks(mut self, ranks: usize) -> Self {
        self.ranks = ranks;
        self
    }

    /// Syncs the files before the folder replaces the old one (on by default).
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// Compresses each item as one zstd frame, with its content checksum
    /// (`stream.zstd/1`, as `FileSystemWriter(_extensions=[ZStandard()])`
    /// writes it; PyTorch's reader needs `zstandard` or `pyzstd` to read
    /// it). Off by default. Needs the `zstd` feature: without it, a save
    /// asking for it is refused.
    pub fn with_zstd(mut self, zstd: bool) -> Self {
        self.zstd = zstd;
        self
    }

    /// The chunks to store each tensor as, given its name and shape (as a
    /// sharded model's ranks hold it: columns for a row-parallel layer,
    /// say). The chunks must tile the tensor, and name ranks below the
    /// [`with_ranks`](Self::with_ranks) count.
    pub fn with_plan(mut self, plan: ChunkPlan) -> Self {
        self.plan = Some(plan);
        self
    }
}

/// Chooses the chunks of a tensor, given its dotted name and shape.
pub type ChunkPlan = Arc<dyn Fn(&str, &[usize]) -> Vec<PlannedChunk> + Send + Sync>;

/// One chunk of a [`ChunkPlan`]: a region of the tensor and the rank whose
/// file stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedChunk {
    /// The rank (`__{rank}_0.distcp`).
    pub rank: usize,
    /// Where the chunk starts in each dimension.
    pub offsets: Vec<usize>,
    /// Its extent in each dimension.
    pub sizes: Vec<usize>,
}

impl std::fmt::Debug for DcpSaveOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DcpSaveOptions")
            .field("ranks", &self.ranks)
            .field("sync", &self.sync)
            .field("zstd", &self.zstd)
            .field("plan", &self.plan.as_ref().map(|_| "…"))
            .finish()
    }
}

impl Default for DcpSaveOptions {
    fn default() -> Self {
        DcpSaveOptions {
            ranks: 1,
            sync: true,
            zstd: false,
            plan: None,
        }
    }
}

/// The default plan: rows split over `ranks` with `torch.chunk`'s sizes (a
/// 0-dim or empty tensor is one chunk on rank 0).
fn rows_plan(shape: &[usize], ranks: usize) -> Vec<PlannedChunk> {
    match shape.first() {
        Some(&n) if n > 0 => chunk_rows(n, ranks)
            .into_iter()
            .enumerate()
            .map(|(rank, (start, len))| {
                let mut offsets = vec![0; shape.len()];
                offsets[0] = start;
                let mut sizes = shape.to_vec();
                sizes[0] = len;
                PlannedChunk {
                    rank,
                    offsets,
                    sizes,
                }
            })
            .collect(),
        _ => vec![PlannedChunk {
            rank: 0,
            offsets: vec![0; shape.len()],
            sizes: shape.to_vec(),
        }],
    }
}

/// Checks that a plan's chunks lie inside the tensor, name existing ranks,
/// and tile it.
fn check_plan(name: &str, shape: &[usize], ranks: usize, plan: &[PlannedChunk]) -> Result<()> {
    let bad = |found: String| {
        Error::Format(FormatError::BadObject {
            context: "DCP chunk plan",
            expected: "chunks inside the tensor, on ranks below `ranks`, tiling it",
            found,
        })
    };
    let mut regions = Vec::new();
    for c in plan {
        let inside = c.rank < ranks
            && c.offsets.len() == shape.len()
            && c.sizes.len() == shape.len()
            && c.offsets
                .iter()
                .zip(&c.sizes)
                .zip(shape)
                .all(|((o, s), n)| o.checked_add(*s).is_some_and(|e| e <= *n));
        if !inside {
            return Err(bad(format!(
                "{name}: {c:?} for shape {shape:?} and {ranks} ranks"
            )));
        }
        if c.sizes.iter().all(|&n| n > 0) {
            regions.push(
                c.offsets
                    .iter()
                    .copied()
                    .zip(c.sizes.iter().copied())
                    .collect(),
            );
        }
    }
    let numel = shape.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
    super::check_cover(name, &regions, numel.unwrap_or(usize::MAX))
}

/// A leaf of the flattened state dict.
pub(super) enum Leaf<'a> {
    Tensor(&'a TensorObject),
    Value(Value<Object>),
}

/// DCP's flattening of the root dict.
pub(super) fn flatten(ckpt: &Checkpoint) -> Result<Vec<(Vec<PathKey>, Leaf<'_>)>> {
    let Some(Node::Dict(_)) = ckpt.root.as_node().map(|id| ckpt.graph.get(id)) else {
        return Err(Error::Format(FormatError::BadObject {
            context: "DCP save",
            expected: "a dict at the root (a state dict)",
            found: "another object".into(),
        }));
    };
    let mut out = Vec::new();
    let mut stack = vec![(Vec::new(), &ckpt.root)];
    let mut budget = MAX_PATHS;
    while let Some((path, v)) = stack.pop() {
        budget = budget.checked_sub(path.len() + 1).ok_or(Error::Checkpoint(
            CheckpointError::LimitExceeded {
                limit: "paths walked",
                value: MAX_PATHS as u64,
                max: MAX_PATHS as u64,
            },
        ))?;
        let node = v.as_node().map(|id| ckpt.graph.get(id));
        match (v, node) {
            (_, Some(Node::Dict(d))) => {
                for (k, x) in d.iter().rev() {
                    let key = match k {
                        Value::Str(s) => s.to_string(),
                        Value::Int(i) => i.to_string(),
                        _ => {
                            return Err(Error::Format(FormatError::BadObject {
                                context: "DCP save",
                                expected: "string or integer dict keys",
                                found: format!("another key under {path:?}"),
                            }))
                        }
                    };
                    let mut p = path.clone();
                    p.push(PathKey::Key(key));
                    stack.push((p, x));
                }
            }
            (_, Some(Node::List(l))) if !terminal(ckpt, l) => {
                for (i, x) in l.iter().enumerate().rev() {
                    let mut p = path.clone();
                    p.push(PathKey::Index(i as i64));
                    stack.push((p, x));
                }
            }
            (Value::Ext(Object::Tensor(t)), _) => out.push((path, Leaf::Tensor(t))),
            _ => out.push((path, Leaf::Value(v.clone()))),
        }
    }
    Ok(out)
}

/// `_is_terminal` of a list: it holds no tensor, no dict, and no list that
/// is itself not terminal (checked without recursion, each list once).
fn terminal(ckpt: &Checkpoint, items: &[Value<Object>]) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![items];
    while let Some(items) = stack.pop() {
        for v in items {
            match v {
                Value::Ext(Object::Tensor(_)) => return false,
                Value::Node(id) => match ckpt.graph.get(*id) {
                    Node::Dict(_) => return false,
                    Node::List(l) if seen.insert(*id) => stack.push(l),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    true
}

/// `torch.chunk(n, ranks)` sizes along a dimension of `n`: `ceil(n / ranks)`
/// each, the last ones shorter or absent.
fn chunk_rows(n: usize, ranks: usize) -> Vec<(usize, usize)> {
    let step = n.div_ceil(ranks.max(1)).max(1);
    (0..n).step_by(step).map(|s| (s, step.min(n - s))).collect()
}

/// One rank's data file, written in order.
pub(super) struct RankFile {
    name: String,
    out: BufWriter<File>,
    at: u64,
    zstd: bool,
}

impl RankFile {
    /// Creates the file of rank `rank` at `path`.
    pub(super) fn create(path: &Path, rank: usize, zstd: bool) -> Result<RankFile> {
        Ok(RankFile {
            out: BufWriter::with_capacity(1 << 22, File::create(path)?),
            name: rank_file_name(rank),
            at: 0,
            zstd,
        })
    }

    /// Flushes the file and gives it back.
    pub(super) fn close(self) -> Result<File> {
        self.out.into_inner().map_err(|e| Error::Io(e.into_error()))
    }

    /// Writes one item, a `torch.save` archive of `ckpt` (PyTorch names the
    /// in-memory archive `archive`), straight into the file: no copy of it
    /// is held, so memory stays that of the largest tensor chunk.
    fn put(&mut self, ckpt: &Checkpoint) -> Result<StorageInfo> {
        let (length, transforms) = put_item(&mut self.out, DataItem::Archive(ckpt), self.zstd)?;
        let info = StorageInfo {
            relative_path: self.name.clone(),
            offset: self.at,
            length,
            transforms,
        };
        self.at += length;
        Ok(info)
    }
}

/// Writes one item to `out`, compressed as one zstd frame when `zstd`;
/// returns its length as stored and its transforms, as `.metadata` records
/// them.
fn put_item<W: Write>(out: &mut W, item: DataItem<'_>, zstd: bool) -> Result<(u64, Vec<String>)> {
    fn raw<W: Write>(out: &mut W, item: DataItem<'_>) -> Result<()> {
        match item {
            DataItem::Archive(ckpt) => {
                save_to_writer(out, "archive", ckpt, &SaveOptions::default()).map(drop)
            }
            DataItem::Bytes(bytes) => Ok(out.write_all(bytes)?),
        }
    }
    let mut counted = Counted {
        inner: out,
        written: 0,
    };
    if !zstd {
        raw(&mut counted, item)?;
        return Ok((counted.written, Vec::new()));
    }
    #[cfg(feature = "zstd")]
    {
        // zstd's default level, as PyTorch's `ZStandard` extension uses.
        let mut encoder = zstd::stream::write::Encoder::new(&mut counted, 3)?;
        encoder.include_checksum(true)?;
        raw(&mut encoder, item)?;
        encoder.finish()?;
        Ok((counted.written, transforms(true)))
    }
    #[cfg(not(feature = "zstd"))]
    Err(Error::Checkpoint(CheckpointError::FeatureDisabled {
        feature: "zstd",
        what: "zstd-compressed DCP items",
    }))
}

/// The transforms `.metadata` records of an item, compressed or not.
fn transforms(zstd: bool) -> Vec<String> {
    if zstd {
        vec!["stream.zstd/1".to_owned()]
    } else {
        Vec::new()
    }
}

/// A writer that counts the bytes written through it.
struct Counted<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One item of a data file written by [`write_items`].
#[non_exhaustive]
#[derive(Clone, Copy)]
pub enum DataItem<'a> {
    /// A checkpoint saved as `torch.save` saves it: an archive of its own
    /// (a tensor chunk, as `FileSystemWriter` stores it).
    Archive(&'a Checkpoint),
    /// Bytes stored as they are (DCP's `BYTE_IO` items, or a whole file
    /// such as `.metadata`).
    Bytes(&'a [u8]),
}

/// Writes `items` back to back as the data file at `location` (a local
/// path or an object-store URL), whole or not at all: a local file through a
/// temporary renamed over it, an object by a multipart upload committed only
/// when every item is written. Returns where each item lies, as
/// `.metadata` records it (`relative_path` is the file's name).
///
/// This is a [`StorageWriter`]'s `write_data` for one rank: each rank writes
/// its own file; the coordinator writes `.metadata` (one [`DataItem::Bytes`])
/// only after every rank's file is complete, so a failure never leaves a
/// `.metadata` that names missing data.
///
/// [`StorageWriter`]: https://pytorch.org/docs/stable/distributed.checkpoint.html
///
/// # Errors
/// What saving an item gives, naming its index; the file system's or the
/// store's errors, naming `location`.
pub fn write_items(
    location: &Location,
    items: &[DataItem<'_>],
    options: &DcpSaveOptions,
) -> Result<Vec<StorageInfo>> {
    let name = location.file_name().unwrap_or_default().to_owned();
    let mut infos = Vec::with_capacity(items.len());
    location.create(options.sync, None, |out| {
        let mut out = BufWriter::with_capacity(1 << 22, out);
        let mut at = 0;
        for (i, item) in items.iter().enumerate() {
            let (length, transforms) = put_item(&mut out, *item, options.zstd)
                .map_err(|e| e.in_entry(format!("item {i}")))?;
            infos.push(StorageInfo {
                relative_path: name.clone(),
                offset: at,
                length,
                transforms,
            });
            at += length;
        }
        out.flush()?;
        Ok(())
    })?;
    Ok(infos)
}

/// What `.metadata` records of one item.
pub(super) enum Entry {
    Tensor {
        dtype: DType,
        size: Vec<usize>,
        requires_grad: bool,
        chunks: Vec<(Vec<usize>, Vec<usize>, StorageInfo)>,
    },
    Bytes(StorageInfo),
}

/// Saves `ckpt` (a dict at its root) as a DCP folder `dir`, replacing what
/// was there as a whole (files other than DCP's stay).
///
/// # Errors
/// [`FormatError::BadObject`] when the root is not a dict or a key is neither a
/// string nor an integer; [`StorageError::NoData`](crate::StorageError::NoData) for meta tensors; what saving
/// an item gives; I/O errors; all wrapped in [`Error::InFile`] naming `dir`.
pub fn save(dir: &Path, ckpt: &Checkpoint, options: &DcpSaveOptions) -> Result<()> {
    let leaves = flatten(ckpt)?;
    let ranks = options.ranks.max(1);
    let owned =
        |name: &str| name == METADATA_FILE || (name.starts_with("__") && name.ends_with(".distcp"));
    crate::io::replace_dir(dir, options.sync, owned, |staging| {
        let mut files = (0..ranks)
            .map(|r| RankFile::create(&staging.join(rank_file_name(r)), r, options.zstd).map(Some))
            .collect::<Result<Vec<_>>>()?;
        let entries = write_entries(ckpt, &leaves, options, &mut files)?;
        for f in files.into_iter().flatten() {
            let file = f.close()?;
            if options.sync {
                file.sync_all()?;
            }
        }
        let metadata = pickle_metadata(&leaves, &entries)
            .map_err(|e| Error::Checkpoint(CheckpointError::PickleWrite(e)))?;
        std::fs::write(staging.join(METADATA_FILE), metadata)?;
        Ok(())
    })
}

/// The data file of rank `rank`, as `FileSystemWriter` names it in a
/// single-file-per-rank save.
pub(super) fn rank_file_name(rank: usize) -> String {
    format!("__{rank}_0.distcp")
}

/// Writes the chunks of every leaf of `leaves` (and the values, to rank 0)
/// into the ranks' files that are open (`Some`), in leaf order, and returns
/// what `.metadata` records of each leaf. A chunk or value of a rank whose
/// file is not open is neither read nor written; its place is recorded with
/// its file's name and transforms, offset and length 0, for the caller to
/// fill in.
pub(super) fn write_entries(
    ckpt: &Checkpoint,
    leaves: &[(Vec<PathKey>, Leaf<'_>)],
    options: &DcpSaveOptions,
    files: &mut [Option<RankFile>],
) -> Result<Vec<Entry>> {
    let ranks = files.len();
    let elsewhere = |rank: usize| StorageInfo {
        relative_path: rank_file_name(rank),
        offset: 0,
        length: 0,
        transforms: transforms(options.zstd),
    };
    let mut entries = Vec::with_capacity(leaves.len());
    for (path, leaf) in leaves {
        let at_path = |e: Error| e.at_path(crate::checkpoint::value::graph::dotted(path));
        let entry = (|| -> Result<Entry> {
            Ok(match leaf {
                Leaf::Tensor(t) => {
                    let tensor = t.resolved()?;
                    let size = tensor.shape().to_vec();
                    let name = crate::checkpoint::value::graph::dotted(path);
                    let planned = match &options.plan {
                        Some(plan) => plan(&name, &size),
                        None => rows_plan(&size, ranks),
                    };
                    check_plan(&name, &size, ranks, &planned)?;
                    let mut chunks = Vec::new();
                    for c in planned {
                        let Some(file) = files[c.rank].as_mut() else {
                            chunks.push((c.offsets, c.sizes, elsewhere(c.rank)));
                            continue;
                        };
                        let mut view = tensor.clone();
                        for (d, (&o, &n)) in c.offsets.iter().zip(&c.sizes).enumerate() {
                            view = view.narrow(d as isize, o as isize, n)?;
                        }
                        // A compact copy: `torch.save` writes a view's whole storage.
                        // A contiguous part is read as bytes, so a lazily loaded
                        // source keeps nothing (streaming conversion stays bounded).
                        let part = Tensor::empty(view.shape(), view.dtype())?;
                        if view.is_contiguous() {
                            let from = view.storage_offset() * view.element_size();
                            let mut bytes = part.untyped_storage().bytes_mut()?;
                            view.untyped_storage().read_at(from, &mut bytes)?;
                        } else {
                            part.copy_(&view)?;
                        }
                        let mut single = Checkpoint::new();
                        single.root = Value::Ext(Object::Tensor(Box::new(TensorObject::new(part))));
                        chunks.push((c.offsets, c.sizes, file.put(&single)?));
                    }
                    Entry::Tensor {
                        dtype: tensor.dtype(),
                        size,
                        requires_grad: tensor.requires_grad(),
                        chunks,
                    }
                }
                Leaf::Value(v) => match files[0].as_mut() {
                    Some(file) => {
                        let mut single = Checkpoint::new();
                        single.root = transplant(ckpt, v, &mut single);
                        Entry::Bytes(file.put(&single)?)
                    }
                    None => Entry::Bytes(elsewhere(0)),
                },
            })
        })()
        .map_err(at_path)?;
        entries.push(entry);
    }
    Ok(entries)
}

const MD: &str = "torch.distributed.checkpoint.metadata";

/// The format version `FileSystemWriter` records (`CURRENT_DCP_VERSION`).
const DCP_VERSION: &str = "1.0.0";

type Written = std::result::Result<(), WriteError>;

/// An instance of `module.class` as PyTorch pickles a dataclass: `NEWOBJ`
/// of an empty tuple, then `BUILD` of a dict that `attrs` fills with key and
/// value pairs.
fn object<W: Write>(
    p: &mut Pickler<W>,
    module: &str,
    class: &str,
    attrs: impl FnOnce(&mut Pickler<W>) -> Written,
) -> Written {
    p.global_memoized(module, class)?;
    p.tuple(0)?;
    p.new_obj()?;
    p.empty_dict()?;
    p.mark()?;
    attrs(p)?;
    p.setitems()?;
    p.build()
}

/// `torch.Size(dims)`.
fn size<W: Write>(p: &mut Pickler<W>, dims: &[usize]) -> Written {
    p.global_memoized("torch", "Size")?;
    p.mark()?;
    for &d in dims {
        p.int(d as i64)?;
    }
    p.tuple_from_mark()?;
    p.tuple(1)?;
    p.reduce()
}

/// `TensorProperties` with the state its `__getstate__` gives: `(dtype,
/// layout, requires_grad, memory format code, pin_memory)`.
fn properties<W: Write>(p: &mut Pickler<W>, dtype: DType, requires_grad: bool) -> Written {
    p.global_memoized(MD, "TensorProperties")?;
    p.tuple(0)?;
    p.new_obj()?;
    p.mark()?;
    let (module, name) = Global::DType(dtype).path();
    p.global_memoized(module, name)?;
    p.global_memoized("torch.serialization", "_get_layout")?;
    p.str_memoized("torch.strided")?;
    p.tuple(1)?;
    p.reduce()?;
    p.bool(requires_grad)?;
    p.global_memoized(MD, "_MEM_FORMAT_ENCODING")?;
    p.int(0)?; // TORCH_CONTIGUOUS_FORMAT
    p.tuple(1)?;
    p.reduce()?;
    p.bool(false)?;
    p.tuple_from_mark()?;
    p.build()
}

fn key<W: Write>(p: &mut Pickler<W>, name: &str) -> Written {
    p.str_memoized(name)
}

/// `MetadataIndex(fqn, offset)` → `_StorageInfo(relative_path, offset, length,
/// transform_descriptors)`.
fn storage_item<W: Write>(
    p: &mut Pickler<W>,
    fqn: &str,
    offset: Option<&[usize]>,
    index: Option<usize>,
    s: &StorageInfo,
) -> Written {
    object(p, MD, "MetadataIndex", |p| {
        key(p, "fqn")?;
        p.str_memoized(fqn)?;
        key(p, "offset")?;
        match offset {
            Some(o) => size(p, o)?,
            None => p.none()?,
        }
        key(p, "index")?;
        match index {
            Some(i) => p.int(i as i64),
            None => p.none(),
        }
    })?;
    object(
        p,
        "torch.distributed.checkpoint.filesystem",
        "_StorageInfo",
        |p| {
            key(p, "relative_path")?;
            p.str_memoized(&s.relative_path)?;
            key(p, "offset")?;
            p.int(s.offset as i64)?;
            key(p, "length")?;
            p.int(s.length as i64)?;
            // Left out without transforms, as PyTorch leaves it out.
            if !s.transforms.is_empty() {
                key(p, "transform_descriptors")?;
                p.empty_list()?;
                p.mark()?;
                for t in &s.transforms {
                    p.str_memoized(t)?;
                }
                p.appends()?;
            }
            Ok(())
        },
    )?;
    p.setitem()
}

/// The `.metadata` pickle:
/// `Metadata(state_dict_metadata, planner_data, storage_data, None, version)`.
pub(super) fn pickle_metadata(
    leaves: &[(Vec<PathKey>, Leaf<'_>)],
    entries: &[Entry],
) -> std::result::Result<Vec<u8>, WriteError> {
    let fqns: Vec<String> = leaves
        .iter()
        .map(|(path, _)| {
            path.iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(".")
        })
        .collect();
    let mut p = Pickler::new(Vec::new())?;
    object(&mut p, MD, "Metadata", |p| {
        key(p, "state_dict_metadata")?;
        p.empty_dict()?;
        for (fqn, entry) in fqns.iter().zip(entries) {
            p.str_memoized(fqn)?;
            match entry {
                Entry::Bytes(_) => object(p, MD, "BytesStorageMetadata", |_| Ok(()))?,
                Entry::Tensor {
                    dtype,
                    size: dims,
                    requires_grad,
                    chunks,
                } => object(p, MD, "TensorStorageMetadata", |p| {
                    key(p, "properties")?;
                    properties(p, *dtype, *requires_grad)?;
                    key(p, "size")?;
                    size(p, dims)?;
                    key(p, "chunks")?;
                    p.empty_list()?;
                    for (offsets, sizes, _) in chunks {
                        object(p, MD, "ChunkStorageMetadata", |p| {
                            key(p, "offsets")?;
                            size(p, offsets)?;
                            key(p, "sizes")?;
                            size(p, sizes)
                        })?;
                        p.append()?;
                    }
                    Ok(())
                })?,
            }
            p.setitem()?;
        }
        key(p, "planner_data")?;
        p.empty_dict()?;
        for (fqn, (path, _)) in fqns.iter().zip(leaves) {
            p.str_memoized(fqn)?;
            p.mark()?;
            for k in path {
                match k {
                    PathKey::Key(s) => p.str_memoized(s)?,
                    PathKey::Index(i) => p.int(*i)?,
                }
            }
            p.tuple_from_mark()?;
            p.setitem()?;
        }
        key(p, "storage_data")?;
        p.empty_dict()?;
        for (fqn, entry) in fqns.iter().zip(entries) {
            match entry {
                Entry::Bytes(s) => storage_item(p, fqn, None, None, s)?,
                Entry::Tensor { chunks, .. } => {
                    for (i, (offsets, _, s)) in chunks.iter().enumerate() {
                        storage_item(p, fqn, Some(offsets), Some(i), s)?;
                    }
                }
            }
        }
        key(p, "storage_meta")?;
        p.none()?;
        key(p, "version")?;
        p.str_memoized(DCP_VERSION)
    })?;
    p.stop()?;
    Ok(p.finish())
}
