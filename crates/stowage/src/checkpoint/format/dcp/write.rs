//! Saving a checkpoint as a DCP folder that `torch.distributed.checkpoint.load`
//! reads, in one process or several, with any sharding of its own.
//!
//! The state dict is flattened as DCP flattens it ([`flatten`](super::flatten)).
//! Each tensor is split into `ranks` chunks along its first dimension (as
//! `DTensor`'s `Shard(0)` splits it, `torch.chunk`'s sizes) and each chunk
//! saved by `torch.save` into its rank's file `__{rank}_0.distcp`; every
//! other leaf is one `torch.save` item in rank 0's file. A tensor or value
//! at several paths (one object, shared) has its bytes written once, every
//! path's item naming them. `.metadata` is pickled as PyTorch pickles it
//! (`NEWOBJ` and `BUILD` of the dataclasses).

use crate::error::{CheckpointError, ErrorContext, FormatError};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::data_file::{transforms, DataItem, ItemWriter};
use super::flatten::{flatten, Leaf};
use super::metadata::StorageInfo;
use super::write_metadata::pickle_metadata;
use super::{transplant, METADATA_FILE};
use crate::checkpoint::pickle::{NodeId, Value};
use crate::checkpoint::value::graph::{Checkpoint, Object, PathKey, TensorObject};
use crate::layout::Layout;
use crate::{DType, Error, Result, Tensor};

/// A rank's data file of a save.
type RankFile = ItemWriter<std::io::BufWriter<std::fs::File>>;

/// How to save a DCP checkpoint: `DcpSaveOptions::default().with_ranks(4)`.
#[non_exhaustive]
#[derive(Clone)]
pub struct DcpSaveOptions {
    pub(crate) ranks: usize,
    pub(crate) sync: bool,
    pub(crate) zstd: bool,
    pub(crate) plan: Option<ChunkPlan>,
    pub(crate) digests: Option<crate::checkpoint::content::WrittenDigests>,
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

    /// Hands `digests` each tensor's bytes as its chunks are written, when
    /// the chunks are its rows in order (the default plan); a tensor
    /// chunked otherwise, or partly in other processes' files, is not fed
    /// (see [`SaveOptions::with_digests`](crate::SaveOptions::with_digests)).
    pub fn with_digests(mut self, digests: crate::checkpoint::content::WrittenDigests) -> Self {
        self.digests = Some(digests);
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
            .field("digests", &self.digests)
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
            digests: None,
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
    super::index::check_cover(name, &regions, numel.unwrap_or(usize::MAX))
}

/// `torch.chunk(n, ranks)` sizes along a dimension of `n`: `ceil(n / ranks)`
/// each, the last ones shorter or absent.
fn chunk_rows(n: usize, ranks: usize) -> Vec<(usize, usize)> {
    let step = n.div_ceil(ranks.max(1)).max(1);
    (0..n).step_by(step).map(|s| (s, step.min(n - s))).collect()
}

/// What `.metadata` records of one item.
#[derive(Clone)]
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
    let leaves = flatten(ckpt).map_err(|e| e.in_file(dir))?;
    let ranks = options.ranks.max(1);
    let owned =
        |name: &str| name == METADATA_FILE || (name.starts_with("__") && name.ends_with(".distcp"));
    crate::io::replace_dir(dir, options.sync, owned, |staging| {
        let mut files = (0..ranks)
            .map(|r| {
                RankFile::create(
                    &staging.join(rank_file_name(r)),
                    r,
                    options.zstd,
                    options.digests.is_some(),
                )
                .map(Some)
            })
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
    let mut entries: Vec<Entry> = Vec::with_capacity(leaves.len());
    // The entry that wrote each tensor (one `Arc`) and each value node, so
    // that their other paths name the same bytes.
    let mut tensors_at = HashMap::<*const TensorObject, (usize, String)>::new();
    let mut values_at = HashMap::<NodeId, usize>::new();
    for (path, leaf) in leaves {
        let at_path = |e: Error| e.at_path(crate::checkpoint::value::graph::dotted(path));
        let entry = (|| -> Result<Entry> {
            Ok(match leaf {
                Leaf::Tensor(t) => {
                    refuse_unstorable(t)?;
                    let tensor = t.resolved()?;
                    let size = tensor.shape().to_vec();
                    let name = crate::checkpoint::value::graph::dotted(path);
                    let planned = match &options.plan {
                        Some(plan) => plan(&name, &size),
                        None => rows_plan(&size, ranks),
                    };
                    check_plan(&name, &size, ranks, &planned)?;
                    let before = tensors_at
                        .get(&std::ptr::from_ref(*t))
                        .map(|(i, first)| (&entries[*i], first));
                    if let Some((entry, first)) = before.filter(|(e, _)| same_chunks(e, &planned)) {
                        if let Some(d) = &options.digests {
                            d.alias(&name, first);
                        }
                        return Ok(entry.clone());
                    }
                    tensors_at.insert(std::ptr::from_ref(*t), (entries.len(), name.clone()));
                    // The tensor's bytes are its chunks' in turn when they are
                    // its rows in order, all written here.
                    let feed = options.digests.as_ref().filter(|_| {
                        in_row_order(&size, &planned)
                            && planned.iter().all(|c| files[c.rank].is_some())
                    });
                    let feed = feed.map(|d| {
                        let name: std::sync::Arc<str> = name.as_str().into();
                        d.begin(
                            &name,
                            crate::checkpoint::content::logical_len(&tensor) as u64,
                        );
                        (d, name)
                    });
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
                        // source keeps nothing (streaming conversion stays bounded),
                        // into the allocator's memory, which the next part reuses
                        // (a large `Tensor::empty` is a mapping of its own, faulted
                        // in and unmapped a page at a time for every chunk).
                        let part = if view.is_contiguous() {
                            let from = view.storage_offset() * view.element_size();
                            let mut bytes = crate::storage::zeroed_bytes(view.nbytes())?;
                            view.untyped_storage().read_at(from, &mut bytes)?;
                            let storage = crate::UntypedStorage::from_vec(bytes);
                            Tensor::from_parts(
                                storage,
                                view.dtype(),
                                Layout::contiguous(view.shape())?,
                            )?
                        } else {
                            let part = Tensor::empty(view.shape(), view.dtype())?;
                            part.copy_(&view)?;
                            part
                        };
                        if let Some((d, name)) = &feed {
                            // `part` is new and compact, and only this save
                            // holds it: its storage is its elements, hashed
                            // where they lie.
                            let storage = part.untyped_storage();
                            d.stored(name, storage, 0..storage.nbytes());
                        }
                        let mut single = Checkpoint::new();
                        single.root = Value::Ext(Object::Tensor(std::sync::Arc::new(
                            TensorObject::new(part),
                        )));
                        chunks.push((c.offsets, c.sizes, file.put(DataItem::Archive(&single))?));
                    }
                    Entry::Tensor {
                        dtype: tensor.dtype(),
                        size,
                        requires_grad: tensor.requires_grad(),
                        chunks,
                    }
                }
                Leaf::Value(v) => {
                    let before = v.as_node().and_then(|id| values_at.get(&id));
                    match (before.map(|&i| &entries[i]), files[0].as_mut()) {
                        (Some(entry), _) => entry.clone(),
                        (None, Some(file)) => {
                            if let Some(id) = v.as_node() {
                                values_at.insert(id, entries.len());
                            }
                            let mut single = Checkpoint::new();
                            single.root = transplant(ckpt, v, &mut single);
                            Entry::Bytes(file.put(DataItem::Archive(&single))?)
                        }
                        (None, None) => Entry::Bytes(elsewhere(0)),
                    }
                }
            })
        })()
        .map_err(at_path)?;
        entries.push(entry);
    }
    Ok(entries)
}

/// Refuses a tensor a DCP cannot store, as `dcp.save` fails on it too: a
/// sparse or nested one (DCP's items are a strided tensor's chunks; PyTorch:
/// "Cannot access storage of SparseTensorImpl"), and a packed quantized
/// dtype (several elements a byte cannot be cut into chunks of rows;
/// PyTorch: "copy_kernel not implemented for 'QUInt4x2'").
fn refuse_unstorable(t: &TensorObject) -> Result<()> {
    if !t.kind().is_strided() {
        return Err(Error::Checkpoint(CheckpointError::Unsupported {
            what: format!(
                "a {} tensor in a DCP: its items are strided tensors' chunks (dcp.save refuses it too); convert to .pt, or to safetensors, which stores its components",
                t.kind().layout_name()
            ),
        }));
    }
    if t.tensor.dtype().elements_per_byte() > 1 {
        return Err(Error::Tensor(crate::error::TensorError::DTypeUnsupported {
            op: "saving to a DCP (dcp.save refuses it too)",
            dtype: t.tensor.dtype(),
        }));
    }
    Ok(())
}

/// Whether the chunks `planned` of a tensor of sizes `size` are its rows
/// in order: each whole in every other dimension, each starting where the
/// one before ends, together all of it; so their bytes, one after another,
/// are the tensor's.
fn in_row_order(size: &[usize], planned: &[PlannedChunk]) -> bool {
    let mut next = 0;
    for c in planned {
        let whole = c.offsets.iter().skip(1).all(|&o| o == 0) && c.sizes.get(1..) == size.get(1..);
        if !whole || c.offsets.first().copied().unwrap_or(0) != next {
            return false;
        }
        next += c.sizes.first().copied().unwrap_or(1);
    }
    next == size.first().copied().unwrap_or(1)
}

/// Whether `entry` stores a tensor in the chunks `planned`, each in its
/// rank's file (a shared tensor planned alike at another path).
fn same_chunks(entry: &Entry, planned: &[PlannedChunk]) -> bool {
    let Entry::Tensor { chunks, .. } = entry else {
        return false;
    };
    chunks.len() == planned.len()
        && chunks
            .iter()
            .zip(planned)
            .all(|((offsets, sizes, info), c)| {
                *offsets == c.offsets
                    && *sizes == c.sizes
                    && info.relative_path == rank_file_name(c.rank)
            })
}
