//! PyTorch Distributed Checkpoints (`torch.distributed.checkpoint`, DCP): a
//! folder holding `.metadata` (what the state dict holds and where each piece
//! is) and data files (`__0_0.distcp`, one or more per rank). Each tensor is
//! stored as chunks, each a region of the whole tensor saved by one rank;
//! every other value is one item.
//!
//! Read without `torch.distributed` and without running code:
//! - `.metadata` is parsed by the pickle machine with hooks that know only
//!   DCP's data classes ([`metadata`]);
//! - each item is the `(file, offset, length)` its `_StorageInfo` names, after
//!   its stream transforms (`stream.zstd/1`), and is either a `torch.save`
//!   archive (the default format; read with the checkpoint allowlist) or, in
//!   the `SAFETENSORS` serialization format, a tensor of a safetensors blob;
//! - [`DcpCheckpoint::read_region`] reads any region of a tensor from the
//!   chunks that intersect it (one tensor-parallel rank's part, say), and
//!   [`DcpCheckpoint::read_tensor`] the whole tensor;
//! - [`crate::load`] of the folder assembles everything into one [`Checkpoint`] whose nesting is the
//!   original state dict's (`planner_data`).

mod data_file;
mod flatten;
pub(crate) mod hf;
mod index;
mod item;
pub mod metadata;
mod part;
mod prefetch;
mod region;
mod write;
mod write_metadata;

pub use data_file::{write_items, write_rank, DataItem};
pub use part::save_part;
pub use write::{save, ChunkPlan, DcpSaveOptions, PlannedChunk};

use crate::error::{ErrorContext, FormatError, StorageError, TensorError};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use self::metadata::{Chunk, DcpMetadata, Item, ItemKind, StorageRef, TensorMeta};
use crate::checkpoint::options::LoadOptions;
use crate::checkpoint::pickle::{Graph, Node, NodeId, Value};
use crate::checkpoint::records::{Mode, Record, Records};
use crate::checkpoint::value::graph::{
    Checkpoint, Format, Object, PathKey, StorageRecord, TensorObject,
};
use crate::checkpoint::value::origin::{Layout, Origin};
use crate::io::{Location, Opened, Span};
use crate::storage::Fetch;
use crate::{DType, Error, Result, Tensor};

/// The metadata file's name.
pub const METADATA_FILE: &str = ".metadata";

/// An open DCP checkpoint: its parsed metadata, and its folder (a local
/// path, or with the `remote` feature a URL) to read items from.
#[derive(Clone, Debug)]
pub struct DcpCheckpoint {
    dir: Location,
    metadata: DcpMetadata,
    /// Each item's place in `metadata.items`, by name.
    names: Arc<HashMap<String, usize>>,
    options: LoadOptions,
    /// The data files opened so far, each opened once (one `HEAD` for an
    /// object in a store), shared by clones.
    files: Arc<Files>,
    /// For lazy loads: the one tensor being read window by window, assembled
    /// in a buffer reused from tensor to tensor (no fresh pages per tensor).
    assembly: Arc<Mutex<Assembly>>,
    /// For eager loads from object storage: the items of the tensors being
    /// read, fetched ahead together ([`prefetch`]).
    prefetched: Arc<prefetch::Prefetched>,
    /// Each tensor's chunks by extent, built on the first region read.
    index: Arc<index::Indexes>,
}

/// Data files by path, opened on first use.
#[derive(Default)]
struct Files(Mutex<HashMap<PathBuf, crate::io::Opened>>);

impl std::fmt::Debug for Files {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open = self.0.lock().map_or(0, |m| m.len());
        write!(f, "Files({open} open)")
    }
}

/// The tensor a lazy load is reading window by window.
#[derive(Debug, Default)]
struct Assembly {
    /// Whose bytes `bytes` holds, if anyone's.
    fqn: Option<String>,
    bytes: Vec<u8>,
}

impl DcpCheckpoint {
    /// Reads and checks `dir/.metadata`; no data file is read yet. `dir` may
    /// be a URL (`s3://bucket/run/step-100`, feature `remote`): the metadata
    /// and each item are then fetched with ranged requests, each item in one.
    ///
    /// # Errors
    /// [`Error::InFile`] naming `.metadata`, wrapping I/O errors, a refused
    /// global, a malformed pickle or a metadata that is not DCP's
    /// ([`metadata::parse`]).
    pub fn open(dir: impl AsRef<Path>, options: &LoadOptions) -> Result<DcpCheckpoint> {
        Self::at(options.location(dir), options)
    }

    /// [`open`](Self::open) of the folder `dir`, wherever it is.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub(crate) fn at(dir: Location, options: &LoadOptions) -> Result<DcpCheckpoint> {
        // Every file through one handle of the folder: one version of it.
        let dir = dir.anchored();
        let path = dir.join(METADATA_FILE);
        let file = path.open()?;
        let in_file = |e: Error| e.in_file(path.path());
        let metadata =
            metadata::parse_file(&*file, options.max_pickle_bytes, &options.pickle_limits)
                .map_err(in_file)?;
        let names = metadata
            .items
            .iter()
            .enumerate()
            .map(|(i, item)| (item.fqn.clone(), i))
            .collect();
        Ok(DcpCheckpoint {
            dir,
            metadata,
            names: Arc::new(names),
            options: options.clone(),
            files: Arc::default(),
            assembly: Arc::default(),
            prefetched: Arc::default(),
            index: Arc::default(),
        })
    }

    /// The data file `here`, opened on first use.
    fn file(&self, here: &Location) -> Result<item::Source> {
        Ok(self.data_file(here)?.source().clone())
    }

    /// The data file `here`, opened on first use.
    fn data_file(&self, here: &Location) -> Result<Opened> {
        let path = here.path();
        let mut files = self.files.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = files.get(&path) {
            return Ok(f.clone());
        }
        let metadata = || self.dir.join(".metadata").path();
        // The file's name is given with the item's, by the caller.
        let unnamed = |e: Error| match e {
            Error::InFile { source, .. } => *source,
            e => e,
        };
        let f = Opened::open(here).map_err(|e| unnamed(e).or_missing(path.clone(), metadata()))?;
        files.insert(path, f.clone());
        Ok(f)
    }

    /// The parsed metadata: every item, with its chunks and where they are.
    pub fn metadata(&self) -> &DcpMetadata {
        &self.metadata
    }

    /// The item named `fqn`.
    fn item(&self, fqn: &str) -> Result<&Item> {
        self.names
            .get(fqn)
            .and_then(|&i| self.metadata.items.get(i))
            .ok_or_else(|| {
                Error::Format(FormatError::MissingRecord {
                    name: fqn.to_owned(),
                })
            })
    }

    /// The format the tensor items were written in: [`Format::TorchZip`],
    /// a `torch.save` archive each (DCP's default), or
    /// [`Format::Safetensors`] (`SerializationFormat.SAFETENSORS`). The
    /// metadata does not say, so the first bytes of the first tensor item are
    /// read (for an object in a store, from the head block fetched when it
    /// was opened, when the item lies in it). Values are archives in either
    /// format, and a checkpoint without tensors is [`Format::TorchZip`].
    ///
    /// # Errors
    /// [`Error::InFile`] naming the data file: it cannot be opened or read,
    /// or the item is not inside it.
    pub fn item_format(&self) -> Result<Format> {
        let first = self.metadata.items.iter().find_map(|i| match &i.kind {
            ItemKind::Tensor(t) => t.chunk(0).map(|c| c.storage),
            ItemKind::Bytes(_) => None,
        });
        let Some(info) = first else {
            return Ok(Format::TorchZip);
        };
        let here = self.dir.join(info.relative_path);
        let archive = self
            .file(&here)
            .and_then(|file| item::is_archive(&*file, info))
            .map_err(|e| e.in_file(here.path()))?;
        Ok(if archive {
            Format::TorchZip
        } else {
            Format::Safetensors
        })
    }

    /// The stored bytes of item `fqn` (of its chunk `chunk` for a tensor;
    /// `0` for a value) as PyTorch's reader sees them: its stream transforms
    /// undone (`stream.zstd`: each frame decoded, its content checksum
    /// checked where it has one). A tensor chunk's bytes are a `torch.save`
    /// archive, or in the safetensors format its file's one blob, from the
    /// start; a value's are an archive. At most 1 MiB beyond the chunk's
    /// tensor bytes are decoded (a value's: beyond the load options' storage
    /// limit, [`LoadOptions::with_max_storage_bytes`]). `verify` checks the
    /// archives' CRC-32s through it.
    ///
    /// # Errors
    /// [`FormatError::MissingRecord`]: no such item or chunk. [`Error::InFile`]
    /// naming the data file and the item: it cannot be opened or read, the
    /// item is not inside it, a transform fails or is unknown, or the
    /// decoded bytes pass the limit.
    pub fn item_bytes(&self, fqn: &str, chunk: usize) -> Result<Vec<u8>> {
        let missing = || {
            Error::Format(FormatError::MissingRecord {
                name: format!("{fqn} (chunk {chunk})"),
            })
        };
        let (info, limit) = match &self.item(fqn)?.kind {
            ItemKind::Tensor(t) => {
                let c = t.chunk(chunk).ok_or_else(missing)?;
                (c.storage, bytes_of(fqn, t.dtype, c.sizes)? as u64)
            }
            ItemKind::Bytes(info) if chunk == 0 => (info.as_ref(), self.options.max_storage_bytes),
            ItemKind::Bytes(_) => return Err(missing()),
        };
        let here = self.dir.join(info.relative_path);
        let limit = limit.saturating_add(item::ARCHIVE_OVERHEAD);
        self.file(&here)
            .and_then(|file| item::decoded(&*file, info, limit))
            .at_path(fqn)
            .in_file(here.path())
    }

    /// The data file `here` and the window of its item `info`: fetched
    /// ahead with its batch ([`prefetch`]), or opened now.
    fn window(&self, here: &Location, info: StorageRef<'_>) -> Result<(Opened, item::Source)> {
        let file = self.data_file(here)?;
        if let Some(window) = self.prefetched.take(&here.path(), info.offset) {
            return Ok((file, window));
        }
        item::check_inside(&**file.source(), info)?;
        let span = Span {
            file: &file,
            offset: info.offset,
            len: info.length,
        };
        let mut windows = crate::io::windows(&[span]).map_err(|(_, e)| *e)?;
        let window = windows
            .pop()
            .ok_or_else(|| Error::Io(std::io::ErrorKind::UnexpectedEof.into()))?;
        Ok((file, window))
    }

    fn tensor_meta(&self, fqn: &str) -> Result<&TensorMeta> {
        match &self.item(fqn)?.kind {
            ItemKind::Tensor(t) => Ok(t),
            ItemKind::Bytes(_) => Err(Error::Format(FormatError::BadObject {
                context: "DCP item",
                expected: "a tensor",
                found: format!("{fqn} is a value"),
            })),
        }
    }

    /// The whole tensor `fqn`, assembled from its chunks.
    ///
    /// # Errors
    /// As [`read_region`](Self::read_region).
    pub fn read_tensor(&self, fqn: &str) -> Result<Tensor> {
        let size = self.tensor_meta(fqn)?.size.clone();
        self.read_region(fqn, &vec![0; size.len()], &size)
    }

    /// The region of tensor `fqn` starting at `offsets` with extent `sizes`,
    /// read from the stored chunks that intersect it (and only those).
    ///
    /// # Errors
    /// [`FormatError::MissingRecord`] for an unknown name; [`FormatError::BadObject`] when
    /// the region is outside the tensor, or the chunks overlap or leave part
    /// of it uncovered; a chunk's errors ([`Error::InFile`] naming its file,
    /// wrapping [`Error::AtPath`] naming the tensor).
    pub fn read_region(&self, fqn: &str, offsets: &[usize], sizes: &[usize]) -> Result<Tensor> {
        let out = self.unread_region(fqn, offsets, sizes)?;
        self.fill_region(fqn, offsets, sizes, &out)?;
        Ok(out)
    }

    /// The tensor [`read_region`](Self::read_region) returns, its storage
    /// made and not read yet.
    fn unread_region(&self, fqn: &str, offsets: &[usize], sizes: &[usize]) -> Result<Tensor> {
        let (meta, _) = self.region_plan(fqn, offsets, sizes)?;
        let device = self.options.map_location.unwrap_or_default();
        let nbytes = bytes_of(fqn, meta.dtype, sizes)?;
        let huge = self.options.huge_pages;
        let storage = crate::UntypedStorage::new_for_load(nbytes, device, huge, None)?;
        Tensor::from_parts(
            storage,
            meta.dtype,
            crate::layout::Layout::contiguous(sizes)?,
        )
    }

    /// Reads the region into `out`, made by [`unread_region`](Self::unread_region)
    /// (nothing to read on the meta device).
    fn fill_region(
        &self,
        fqn: &str,
        offsets: &[usize],
        sizes: &[usize],
        out: &Tensor,
    ) -> Result<()> {
        if out.device().is_meta() {
            return Ok(());
        }
        let mut bytes = out.untyped_storage().bytes_mut()?;
        self.read_region_into(fqn, offsets, sizes, &mut bytes)
    }

    /// Tensor `fqn` as the options' mode makes it ([`Records`]): read now,
    /// a lazy storage assembled on first use, or one of no bytes.
    fn tensor_in_mode(self: &Arc<Self>, fqn: &str, meta: &TensorMeta) -> Result<Tensor> {
        let device = self.options.map_location.unwrap_or_default();
        let nbytes = bytes_of(fqn, meta.dtype, &meta.size)?;
        let assemble = |name: &String| self.assembling(name, nbytes);
        let mut records = Records::with_fetch(Mode::of(&self.options), &assemble);
        if records.reads_now(device) {
            return self.read_tensor(fqn);
        }
        let record = Record {
            key: fqn.to_owned(),
            nbytes,
            device,
            raw: false,
        };
        let (storage, _) = records.make(record, || Ok(0))?;
        let layout = crate::layout::Layout::contiguous(&meta.size)?;
        Tensor::from_parts(storage, meta.dtype, layout)
    }

    /// The fetcher of a lazy storage of tensor `name` (`nbytes`): its first
    /// read assembles the tensor in the buffer the load reuses from tensor
    /// to tensor, kept until its last window is read.
    fn assembling(self: &Arc<Self>, name: &str, nbytes: usize) -> Fetch {
        let (this, name) = (Arc::clone(self), name.to_owned());
        Arc::new(move |offset: u64, dst: &mut [u8]| {
            let mut held = this.assembly.lock().unwrap_or_else(|p| p.into_inner());
            if held.fqn.as_deref() != Some(name.as_str()) {
                held.fqn = None;
                let mut bytes = std::mem::take(&mut held.bytes);
                if bytes.capacity() < nbytes {
                    bytes = crate::storage::zeroed_bytes(nbytes)?;
                }
                bytes.resize(nbytes, 0);
                this.assemble_into(&name, &mut bytes)?;
                *held = Assembly {
                    fqn: Some(name.clone()),
                    bytes,
                };
            }
            let window = usize::try_from(offset)
                .ok()
                .and_then(|o| held.bytes.get(o..o.checked_add(dst.len())?))
                .ok_or(Error::Storage(StorageError::StorageRange {
                    offset: offset as usize,
                    len: dst.len(),
                    nbytes,
                }))?;
            dst.copy_from_slice(window);
            if offset as usize + dst.len() >= nbytes {
                // The last window: the buffer stays for the next tensor.
                held.fqn = None;
            }
            Ok(())
        })
    }

    /// The whole tensor `fqn`, contiguous, into `dst` (exactly its bytes).
    /// Chunks that are blocks of whole rows (as `Shard(0)` and single chunks
    /// are) are read from their records straight into place; others go
    /// through [`read_region`](Self::read_region).
    fn assemble_into(&self, fqn: &str, dst: &mut [u8]) -> Result<()> {
        let meta = self.tensor_meta(fqn)?;
        let rows = meta
            .chunks()
            .all(|c| c.sizes.get(1..) == meta.size.get(1..));
        if !rows || meta.size.is_empty() {
            let whole = self.read_tensor(fqn)?;
            return whole.untyped_storage().read_at(0, dst);
        }
        let row_bytes = bytes_of(fqn, meta.dtype, &meta.size[1..])?;
        let regions: Vec<_> = meta
            .chunks()
            .filter_map(|c| intersect(&c, &vec![0; meta.size.len()], &meta.size))
            .collect();
        index::check_cover(fqn, &regions, meta.size.iter().product())?;
        let total = dst.len();
        for chunk in meta.chunks().filter(|c| c.sizes.iter().all(|&n| n > 0)) {
            let stored = self.read_chunk(fqn, meta.dtype, &chunk)?;
            let at = chunk.offsets[0] * row_bytes;
            let len = chunk.sizes[0] * row_bytes;
            let window =
                dst.get_mut(at..at + len)
                    .ok_or(Error::Storage(StorageError::StorageRange {
                        offset: at,
                        len,
                        nbytes: total,
                    }))?;
            let from = stored.storage_offset() * meta.dtype.size();
            if stored.is_contiguous() {
                stored.untyped_storage().read_at(from, window)?;
            } else {
                stored.contiguous()?.untyped_storage().read_at(0, window)?;
            }
        }
        Ok(())
    }

    /// One stored chunk as a tensor of its own.
    fn read_chunk(&self, fqn: &str, dtype: DType, chunk: &Chunk<'_>) -> Result<Tensor> {
        let info = chunk.storage;
        let here = self.dir.join(info.relative_path);
        let file = here.path();
        let in_file = |e: Error| e.at_path(fqn).in_file(&file);
        let nbytes = bytes_of(fqn, dtype, chunk.sizes).map_err(in_file)?;
        let (source, window) = self.window(&here, info).map_err(in_file)?;
        let tensor = item::read_tensor(
            source.source(),
            window,
            &file,
            info,
            fqn,
            nbytes as u64,
            &self.options,
        )
        .map_err(in_file)?;
        if tensor.dtype() != dtype || tensor.shape() != chunk.sizes {
            return Err(in_file(Error::Format(FormatError::BadObject {
                context: "DCP chunk",
                expected: "a tensor of the chunk's dtype and size",
                found: format!(
                    "{} {:?} for {dtype} {:?}",
                    tensor.dtype(),
                    tensor.shape(),
                    chunk.sizes
                ),
            })));
        }
        Ok(tensor)
    }

    /// A non-tensor item, as the checkpoint its `torch.save` archive holds.
    ///
    /// # Errors
    /// [`FormatError::MissingRecord`] for an unknown name; the item's load errors
    /// (a refused global among them) wrapped in [`Error::InFile`].
    pub(crate) fn read_value(&self, fqn: &str) -> Result<Checkpoint> {
        let ItemKind::Bytes(info) = &self.item(fqn)?.kind else {
            return Err(Error::Format(FormatError::BadObject {
                context: "DCP item",
                expected: "a value",
                found: format!("{fqn} is a tensor"),
            }));
        };
        let here = self.dir.join(&info.relative_path);
        let file = here.path();
        let in_file = |e: Error| e.at_path(fqn).in_file(&file);
        let (_, window) = self.window(&here, info.as_ref()).map_err(in_file)?;
        item::read_value(&*window, info.as_ref(), &self.options).map_err(in_file)
    }

    /// Everything, as one checkpoint nested as the saved state dict was.
    /// With the options' `lazy`, each tensor is assembled on first use (and a
    /// window read of a storage not used yet, as a streaming save does,
    /// assembles the tensor once and keeps it only until its last window is
    /// read); with `fake` or a meta `map_location`, no tensor data is read.
    /// Non-tensor values are read in every mode.
    ///
    /// # Errors
    /// As [`read_tensor`](Self::read_tensor) and [`read_value`](Self::read_value).
    /// `self` stays in the lazy storages' readers.
    /// Its files: `.metadata`, then each data file its items name, once, in
    /// the order first named.
    pub(crate) fn files(&self) -> Vec<Location> {
        let mut files = vec![self.dir.join(METADATA_FILE)];
        files.extend(self.metadata.files().into_iter().map(|f| self.dir.join(f)));
        files
    }

    /// The whole checkpoint, read in the options' mode, as a load of the
    /// folder gives it, without reading `.metadata` again (for a caller
    /// that opened it to look at its items first, as `stowage verify`).
    ///
    /// # Errors
    /// As [`read_tensor`](Self::read_tensor), for every item.
    pub fn into_checkpoint(self) -> Result<Checkpoint> {
        let files = self.files();
        let this = Arc::new(self);
        let mut ckpt = Checkpoint::new();
        ckpt.origin = Some(Origin {
            layout: Layout::Dcp,
            files,
        });
        ckpt.format = this.item_format()?;
        let root = ckpt.graph.dict(Vec::new());
        ckpt.root = Value::Node(root);
        let items = &this.metadata.items;
        let mut keys = Keys::default();
        let mut values = HashMap::new();
        let mut start = 0;
        while start < items.len() {
            let end = this.batch_end(items, start)?;
            let batch = &items[start..end];
            let mut ahead = this.read_ahead(batch);
            for (i, item) in batch.iter().enumerate() {
                let read = ahead.get_mut(i).and_then(Option::take);
                this.place_item(&mut ckpt, &mut keys, &mut values, root, item, read)?;
            }
            start = end;
        }
        Ok(ckpt)
    }

    /// Reads `item` as the options' mode makes it (a tensor `read` ahead
    /// is taken as it is) and places it in `ckpt` under the dict `root`, as
    /// the saved state dict nested it. A value item stored in the same
    /// bytes as one read before (one object at several paths, as stowage
    /// saves it) is that same value, its identity kept: `values` holds each
    /// read, by its file, offset and length.
    fn place_item<'m>(
        self: &Arc<Self>,
        ckpt: &mut Checkpoint,
        keys: &mut Keys,
        values: &mut HashMap<(&'m str, u64, u64), Value<Object>>,
        root: NodeId,
        item: &'m Item,
        read: Option<Result<Tensor>>,
    ) -> Result<()> {
        let value = match &item.kind {
            ItemKind::Tensor(meta) => {
                let tensor = match read {
                    Some(read) => read?,
                    None => self.tensor_in_mode(&item.fqn, meta)?,
                };
                ckpt.storages.push(StorageRecord {
                    key: item.fqn.as_str().into(),
                    storage: tensor.untyped_storage().clone(),
                    dtype: Some(meta.dtype),
                    location: tensor.device().to_string().into(),
                });
                let mut t = TensorObject::new(tensor);
                t.tensor.requires_grad_(meta.requires_grad).ok();
                Value::Ext(Object::Tensor(std::sync::Arc::new(t)))
            }
            ItemKind::Bytes(info) => {
                match values.entry((&info.relative_path, info.offset, info.length)) {
                    Entry::Occupied(read) => read.get().clone(),
                    Entry::Vacant(slot) => {
                        let value = self.read_value(&item.fqn)?;
                        let v = transplant(&value, &value.root, ckpt);
                        ckpt.storages
                            .extend(value.storages.iter().map(|s| StorageRecord {
                                key: format!("{}/{}", item.fqn, s.key).into(),
                                ..s.clone()
                            }));
                        slot.insert(v).clone()
                    }
                }
            }
        };
        place(&mut ckpt.graph, keys, root, &item.path, value)
    }
}

/// The bytes of `sizes` elements of `dtype` (a tensor, a chunk, a row).
fn bytes_of(fqn: &str, dtype: DType, sizes: &[usize]) -> Result<usize> {
    sizes
        .iter()
        .try_fold(dtype.size(), |a, &b| a.checked_mul(b))
        .ok_or(Error::Tensor(TensorError::SizeOverflow {
            what: "DCP tensor",
            detail: format!("{fqn}: {sizes:?}"),
        }))
}

/// The intersection of a chunk with a region, per dimension `(start, len)`;
/// `None` when it is empty (a chunk of no elements intersects nothing).
fn intersect(chunk: &Chunk<'_>, offsets: &[usize], sizes: &[usize]) -> Option<Vec<(usize, usize)>> {
    let mut out = Vec::with_capacity(sizes.len());
    for d in 0..sizes.len() {
        let lo = chunk.offsets[d].max(offsets[d]);
        let hi = (chunk.offsets[d] + chunk.sizes[d]).min(offsets[d] + sizes[d]);
        if hi <= lo {
            return None;
        }
        out.push((lo, hi - lo));
    }
    Some(out)
}

/// Copies `root`, a value of `value`'s graph, into `into`'s graph (nodes, with their
/// sharing and cycles; `OrderedDict` marks and `BUILD` state too).
fn transplant(value: &Checkpoint, root: &Value<Object>, into: &mut Checkpoint) -> Value<Object> {
    struct Copier<'a> {
        src: &'a Checkpoint,
        map: HashMap<NodeId, NodeId>,
        pending: Vec<(NodeId, NodeId)>,
    }
    impl Copier<'_> {
        fn value(&mut self, v: &Value<Object>, into: &mut Checkpoint) -> Value<Object> {
            match v {
                Value::Node(id) if self.src.graph.try_get(*id).is_some() => {
                    let dst = *self.map.entry(*id).or_insert_with(|| {
                        let d = into.graph.add(Node::Tuple(Vec::new()));
                        self.pending.push((*id, d));
                        d
                    });
                    Value::Node(dst)
                }
                other => other.clone(),
            }
        }
        fn all(&mut self, v: &[Value<Object>], into: &mut Checkpoint) -> Vec<Value<Object>> {
            v.iter().map(|x| self.value(x, into)).collect()
        }
    }
    let mut c = Copier {
        src: value,
        map: HashMap::new(),
        pending: Vec::new(),
    };
    let root = c.value(root, into);
    while let Some((src, dst)) = c.pending.pop() {
        let node = match value.graph.get(src) {
            Node::Tuple(v) => Node::Tuple(c.all(v, into)),
            Node::List(v) => Node::List(c.all(v, into)),
            Node::Set(v) => Node::Set(c.all(v, into)),
            Node::FrozenSet(v) => Node::FrozenSet(c.all(v, into)),
            Node::Dict(d) => Node::Dict(
                d.iter()
                    .map(|(k, x)| (c.value(k, into), c.value(x, into)))
                    .collect(),
            ),
            Node::ByteArray(b) => Node::ByteArray(b.clone()),
        };
        *into.graph.get_mut(dst) = node;
        if value.ordered.contains(&src) {
            into.ordered.insert(dst);
        }
        if let Some(class) = value.classes.get(&src) {
            into.classes.insert(dst, class);
        }
        if let Some(state) = value.state.get(&src) {
            let state = c.value(state, into);
            into.state.insert(dst, state);
        }
    }
    root
}

/// Where each key [`place`] put in a dict sits in it, so that placing N
/// items costs O(N × depth), not a scan of the dict for each key (a dict
/// of 20,000 layers made that quadratic).
#[derive(Default)]
struct Keys(HashMap<(NodeId, PathKey), usize>);

/// Puts `value` at `path` under the dict `root`, making the containers on the
/// way: dicts, or lists where the next key is an index (as DCP's
/// `unflatten_state_dict` does, padding with `None`). Every dict on the way
/// was made by `place` with `keys`.
fn place(
    graph: &mut Graph<Object>,
    keys: &mut Keys,
    root: NodeId,
    path: &[PathKey],
    value: Value<Object>,
) -> Result<()> {
    let Some((last, parents)) = path.split_last() else {
        return Err(Error::Format(FormatError::BadObject {
            context: "DCP planner_data",
            expected: "a non-empty path",
            found: "an empty one".into(),
        }));
    };
    let key_value = |k: &PathKey| match k {
        PathKey::Key(s) => Value::str(s),
        PathKey::Index(i) => Value::Int(*i),
    };
    let clash = |k: &PathKey| {
        Error::Format(FormatError::BadObject {
            context: "DCP planner_data",
            expected: "paths that nest",
            found: format!("a value and a container at {k}"),
        })
    };
    let mut node = root;
    for (i, k) in parents.iter().enumerate() {
        let next_is_index = matches!(path[i + 1], PathKey::Index(_));
        let existing = slot(graph, keys, node, k).map_err(|_| clash(k))?;
        node = match existing {
            Some(Value::Node(id)) => id,
            Some(_) => return Err(clash(k)),
            None => {
                let child = if next_is_index {
                    graph.list(Vec::new())
                } else {
                    graph.dict(Vec::new())
                };
                set(graph, keys, node, k, key_value(k), Value::Node(child))
                    .map_err(|_| clash(k))?;
                child
            }
        };
    }
    set(graph, keys, node, last, key_value(last), value).map_err(|_| clash(last))
}

/// The value at key `k` of container `node`, if any; `Err` when the key does
/// not fit the container.
fn slot(
    graph: &Graph<Object>,
    keys: &Keys,
    node: NodeId,
    k: &PathKey,
) -> std::result::Result<Option<Value<Object>>, ()> {
    match (graph.get(node), k) {
        (Node::Dict(d), _) => Ok(keys
            .0
            .get(&(node, k.clone()))
            .and_then(|&i| d.get(i))
            .map(|(_, v)| v.clone())),
        (Node::List(l), PathKey::Index(i)) => {
            let i = usize::try_from(*i).map_err(|_| ())?;
            Ok(l.get(i).filter(|v| !v.is_none()).cloned())
        }
        _ => Err(()),
    }
}

fn set(
    graph: &mut Graph<Object>,
    keys: &mut Keys,
    node: NodeId,
    k: &PathKey,
    key: Value<Object>,
    value: Value<Object>,
) -> std::result::Result<(), ()> {
    match (graph.get_mut(node), k) {
        (Node::Dict(d), _) => {
            match keys.0.entry((node, k.clone())) {
                Entry::Occupied(at) => d[*at.get()].1 = value,
                Entry::Vacant(at) => {
                    at.insert(d.len());
                    d.push((key, value));
                }
            }
            Ok(())
        }
        (Node::List(l), PathKey::Index(i)) => {
            // Bounded: a list index comes from the metadata, which the pickle
            // limits bound, but an index far past the list is still refused.
            let i = usize::try_from(*i).map_err(|_| ())?;
            if i > l.len() + 1_000_000 {
                return Err(());
            }
            if l.len() <= i {
                l.resize(i + 1, Value::None);
            }
            l[i] = value;
            Ok(())
        }
        _ => Err(()),
    }
}
