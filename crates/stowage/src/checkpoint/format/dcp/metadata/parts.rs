//! What a reader of `.metadata` gathers ([`Parts`]: the dataclasses as flat
//! records), and the one place it is checked and joined into a
//! [`DcpMetadata`] ([`assemble`]).

use std::collections::HashMap;

use foldhash::fast::RandomState;
use std::rc::Rc;
use std::sync::Arc;

use super::table::{self, Builder};
use super::{DcpMetadata, Item, ItemKind, StorageInfo, TensorMeta};
use crate::checkpoint::value::graph::PathKey;
use crate::error::FormatError;
use crate::{DType, Error, Result};

/// A list of dimensions (a `torch.Size`): a range of [`Parts::dims`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Dims {
    at: u32,
    len: u32,
}

impl Dims {
    pub(super) fn len(self) -> usize {
        self.len as usize
    }
}

/// Dimensions a reader may copy into chunks, sizes and paths per byte of
/// the stream, beyond [`DIMS_FLOOR`]. A chunk's dimensions each cost at
/// least one opcode byte even where its sizes are a `torch.Size` shared
/// with its tensor, so a valid file stays far below; a hostile one that
/// names one huge shared size from a million chunks is refused in time
/// linear in its length.
pub(super) const DIMS_PER_BYTE: usize = 4;

/// The dimensions any stream may copy.
pub(super) const DIMS_FLOOR: usize = 1 << 20;

/// `ChunkStorageMetadata`.
#[derive(Clone, Copy, Debug)]
pub(super) struct ChunkRec {
    pub(super) offsets: Dims,
    pub(super) sizes: Dims,
}

/// `MetadataIndex`: a key of `storage_data`.
#[derive(Clone, Copy, Debug)]
pub(super) struct IndexRec {
    pub(super) fqn: u32,
    pub(super) offset: Option<Dims>,
    /// Where the chunk is among its tensor's chunks, as a hint
    /// ([`NO_HINT`] for none).
    pub(super) hint: u32,
}

/// [`IndexRec::hint`] when there is none.
pub(super) const NO_HINT: u32 = u32::MAX;

/// `_StorageInfo`, its strings by number.
#[derive(Clone, Copy, Debug)]
pub(super) struct InfoRec {
    pub(super) file: u32,
    /// 0 for none, else 1 + a number in [`Parts::transforms`].
    pub(super) transforms: u32,
    pub(super) offset: i64,
    pub(super) length: i64,
}

/// `TensorStorageMetadata`.
#[derive(Clone, Debug)]
pub(super) struct TensorRec {
    pub(super) dtype: DType,
    pub(super) requires_grad: bool,
    pub(super) size: Dims,
    /// Numbers in [`Parts::chunks`].
    pub(super) chunks: Vec<u32>,
}

/// An entry of `state_dict_metadata`.
#[derive(Clone, Copy, Debug)]
pub(super) enum ItemRec {
    /// A number in [`Parts::tensors`].
    Tensor(u32),
    Bytes,
}

/// A `.metadata`'s dataclasses as records, each string stored once.
#[derive(Debug, Default)]
pub(super) struct Parts {
    dims: Vec<usize>,
    /// Dimensions still allowed to be copied ([`DIMS_PER_BYTE`]).
    budget: usize,
    /// Lists of transforms (string numbers), for [`InfoRec::transforms`].
    transforms: Vec<Box<[u32]>>,
    strings: Vec<Rc<str>>,
    string_ids: HashMap<Rc<str>, u32, RandomState>,
    pub(super) chunks: Vec<ChunkRec>,
    pub(super) indices: Vec<IndexRec>,
    pub(super) infos: Vec<InfoRec>,
    pub(super) tensors: Vec<TensorRec>,
    /// `state_dict_metadata`, in order: each name (unique) and its entry.
    pub(super) items: Vec<(u32, ItemRec)>,
    /// `storage_data`, in order: numbers in `indices` and `infos`.
    pub(super) storage: Vec<(u32, u32)>,
    /// `planner_data`, in order: names and their paths.
    pub(super) planner: Vec<(u32, Vec<PathKey>)>,
    pub(super) version: Option<String>,
}

impl Parts {
    /// Empty, for a stream of `len` bytes.
    pub(super) fn for_stream(len: usize) -> Parts {
        Parts {
            budget: len.saturating_mul(DIMS_PER_BYTE).saturating_add(DIMS_FLOOR),
            ..Parts::default()
        }
    }

    /// Counts `n` dimensions (or bytes of a path) copied against the
    /// stream's budget.
    ///
    /// # Errors
    /// [`FormatError::BadObject`] once the budget is spent.
    pub(super) fn charge(&mut self, n: usize) -> Result<()> {
        self.budget = self.budget.checked_sub(n).ok_or_else(|| {
            bad(
                "DCP .metadata",
                "at most 4 dimensions copied into chunks per byte of the file",
                "more: sizes shared by too many chunks",
            )
        })?;
        Ok(())
    }

    /// Stores `dims`, charged to the budget.
    ///
    /// # Errors
    /// As [`charge`](Self::charge).
    pub(super) fn dims(&mut self, dims: impl IntoIterator<Item = usize>) -> Result<Dims> {
        let at = self.dims.len();
        self.dims.extend(dims);
        let len = self.dims.len() - at;
        self.charge(len)?;
        // The budget keeps a stream under 1 GiB far below 2^32; past that,
        // numbers would not fit.
        match (u32::try_from(at), u32::try_from(len)) {
            (Ok(at), Ok(len)) if at.checked_add(len).is_some() => Ok(Dims { at, len }),
            _ => Err(bad(
                "DCP .metadata",
                "fewer than 2^32 dimensions in all",
                "more",
            )),
        }
    }

    pub(super) fn get_dims(&self, d: Dims) -> &[usize] {
        &self.dims[d.at as usize..(d.at + d.len) as usize]
    }

    /// The number for [`InfoRec::transforms`] of the list `names`.
    pub(super) fn transforms(&mut self, names: Box<[u32]>) -> u32 {
        self.transforms.push(names);
        self.transforms.len() as u32
    }

    fn transform_names(&self, id: u32) -> &[u32] {
        match id {
            0 => &[],
            n => &self.transforms[n as usize - 1],
        }
    }

    /// The number of string `s`, stored once.
    pub(super) fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        let s: Rc<str> = Rc::from(s);
        self.strings.push(s.clone());
        self.string_ids.insert(s, id);
        id
    }

    pub(super) fn string(&self, id: u32) -> &str {
        &self.strings[id as usize]
    }
}

fn bad(context: &'static str, expected: &'static str, found: impl Into<String>) -> Error {
    Error::Format(FormatError::BadObject {
        context,
        expected,
        found: found.into(),
    })
}

/// The error for an item `fqn` (or a chunk of it) without storage.
fn missing_storage(fqn: &str) -> Error {
    bad("DCP storage_data", "an entry for every item", fqn)
}

/// Checks an `_StorageInfo`: a plain file name, and a non-negative offset
/// and length.
fn check_info(parts: &Parts, info: &InfoRec) -> Result<()> {
    let path = parts.string(info.file);
    let plain =
        !path.is_empty() && path != "." && path != ".." && !path.contains(['/', '\\', '\0']);
    if !plain {
        return Err(bad(
            "_StorageInfo",
            "a file name in the checkpoint's folder",
            format!("{path:?}"),
        ));
    }
    for (n, name) in [(info.offset, "offset"), (info.length, "length")] {
        if n < 0 {
            return Err(bad(
                "_StorageInfo",
                "a non-negative offset and length",
                name,
            ));
        }
    }
    Ok(())
}

/// Which `storage_data` entry each chunk (and each value) is stored by: as
/// in PyTorch, an entry is found by name and offsets, and its `index` is
/// only a hint. The last entry for a chunk wins.
struct Placement {
    /// Per chunk of every tensor, tensor after tensor: a number in
    /// `Parts::infos`, or [`UNPLACED`].
    chunks: Vec<u32>,
    /// Where each tensor's chunks start in `chunks`.
    first: Vec<usize>,
    /// Per item that is a value.
    values: HashMap<u32, u32, RandomState>,
}

const UNPLACED: u32 = u32::MAX;

fn place(parts: &Parts) -> Result<Placement> {
    let by_name: HashMap<u32, ItemRec, RandomState> = parts.items.iter().copied().collect();
    let mut first = Vec::with_capacity(parts.tensors.len());
    let mut total = 0;
    for t in &parts.tensors {
        first.push(total);
        total += t.chunks.len();
    }
    let mut placed = Placement {
        chunks: vec![UNPLACED; total],
        first,
        values: HashMap::default(),
    };
    // Per tensor whose hints miss (or that has none, as `FileSystemWriter`
    // writes it): its chunks' positions ordered by offsets, to search.
    let mut sorted: HashMap<u32, Vec<u32>, RandomState> = HashMap::default();
    for &(index, info) in &parts.storage {
        check_info(parts, &parts.infos[info as usize])?;
        let index = &parts.indices[index as usize];
        match (by_name.get(&index.fqn), index.offset) {
            (Some(ItemRec::Bytes), None) => {
                placed.values.insert(index.fqn, info);
            }
            (Some(&ItemRec::Tensor(t)), Some(offset)) => {
                let chunks = &parts.tensors[t as usize].chunks;
                let offset = parts.get_dims(offset);
                let offsets_of =
                    |j: usize| parts.get_dims(parts.chunks[chunks[j] as usize].offsets);
                let slots = &mut placed.chunks[placed.first[t as usize]..][..chunks.len()];
                match index.hint as usize {
                    j if j < chunks.len() && offsets_of(j) == offset => slots[j] = info,
                    _ => {
                        let order = sorted.entry(t).or_insert_with(|| {
                            let mut order: Vec<u32> = (0..chunks.len() as u32).collect();
                            order.sort_by(|&a, &b| {
                                offsets_of(a as usize).cmp(offsets_of(b as usize))
                            });
                            order
                        });
                        // Every chunk at these offsets (more than one only
                        // in a file whose chunks overlap).
                        let from = order.partition_point(|&j| offsets_of(j as usize) < offset);
                        for &j in &order[from..] {
                            if offsets_of(j as usize) != offset {
                                break;
                            }
                            slots[j as usize] = info;
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(placed)
}

/// Checks `parts` and joins each chunk and value with its storage.
///
/// # Errors
/// [`FormatError::BadObject`] for a storage file outside the folder, a
/// negative offset or length, a chunk outside its tensor or an item
/// without storage.
pub(super) fn assemble(mut parts: Parts) -> Result<DcpMetadata> {
    let placed = place(&parts)?;
    // The keys of `storage_data` are joined: their memory goes now.
    parts.indices = Vec::new();
    parts.storage = Vec::new();
    let mut planner: HashMap<u32, Vec<PathKey>, RandomState> =
        parts.planner.iter().cloned().collect();
    let chunk_count: usize = parts.tensors.iter().map(|t| t.chunks.len()).sum();
    let dim_count: usize = parts
        .tensors
        .iter()
        .map(|t| t.chunks.len() * 2 * parts.get_dims(t.size).len())
        .sum();
    let mut builder = Builder::default();
    builder.reserve(chunk_count, dim_count);
    // File numbers of the parts, in the table.
    let mut files: HashMap<u32, u32, RandomState> = HashMap::default();
    let mut transforms: HashMap<&[u32], u32> = HashMap::new();
    // Tensors with the first chunk each starts at; spans made once the table
    // is whole.
    enum Pending<'p> {
        Tensor(usize, &'p TensorRec),
        Value(StorageInfo),
    }
    let mut pending: Vec<(String, Vec<PathKey>, Pending<'_>)> =
        Vec::with_capacity(parts.items.len());
    for &(fqn_id, item) in &parts.items {
        let fqn = parts.string(fqn_id);
        let kind = match item {
            ItemRec::Bytes => {
                let info = placed
                    .values
                    .get(&fqn_id)
                    .ok_or_else(|| missing_storage(fqn))?;
                Pending::Value(owned_info(&parts, &parts.infos[*info as usize]))
            }
            ItemRec::Tensor(t) => {
                let rec = &parts.tensors[t as usize];
                let size = parts.get_dims(rec.size);
                let first = builder.len();
                for (j, &c) in rec.chunks.iter().enumerate() {
                    let c = parts.chunks[c as usize];
                    let (offsets, sizes) = (parts.get_dims(c.offsets), parts.get_dims(c.sizes));
                    check_inside(fqn, offsets, sizes, size)?;
                    let info = placed.chunks[placed.first[t as usize] + j];
                    let info = parts
                        .infos
                        .get(info as usize)
                        .ok_or_else(|| missing_storage(fqn))?;
                    let file = *files
                        .entry(info.file)
                        .or_insert_with(|| builder.file_id(parts.string(info.file)));
                    let tr = match parts.transform_names(info.transforms) {
                        [] => 0,
                        list => *transforms.entry(list).or_insert_with(|| {
                            let names: Vec<String> =
                                list.iter().map(|&s| parts.string(s).to_owned()).collect();
                            builder.transforms_id(&names)
                        }),
                    };
                    builder.push_ids(
                        offsets,
                        sizes,
                        file,
                        tr,
                        info.offset as u64,
                        info.length as u64,
                    );
                }
                Pending::Tensor(first, rec)
            }
        };
        let path = planner
            .remove(&fqn_id)
            .unwrap_or_else(|| fqn.split('.').map(|s| PathKey::Key(s.to_owned())).collect());
        pending.push((fqn.to_owned(), path, kind));
    }
    let table = Arc::new(builder.finish());
    let items = pending
        .into_iter()
        .map(|(fqn, path, kind)| {
            let kind = match kind {
                Pending::Value(info) => ItemKind::Bytes(info),
                Pending::Tensor(first, rec) => {
                    let size = parts.get_dims(rec.size).to_vec();
                    let chunks =
                        table::Span::new(table.clone(), first, rec.chunks.len(), size.len());
                    ItemKind::Tensor(TensorMeta {
                        dtype: rec.dtype,
                        size,
                        requires_grad: rec.requires_grad,
                        chunks,
                    })
                }
            };
            Item { fqn, path, kind }
        })
        .collect();
    Ok(DcpMetadata {
        items,
        version: parts.version.clone(),
    })
}

fn owned_info(parts: &Parts, info: &InfoRec) -> StorageInfo {
    StorageInfo {
        relative_path: parts.string(info.file).to_owned(),
        offset: info.offset as u64,
        length: info.length as u64,
        transforms: parts
            .transform_names(info.transforms)
            .iter()
            .map(|&s| parts.string(s).to_owned())
            .collect(),
    }
}

/// A chunk at `offsets` of extent `sizes` lies inside its tensor `fqn` of
/// size `size`.
fn check_inside(fqn: &str, offsets: &[usize], sizes: &[usize], size: &[usize]) -> Result<()> {
    let inside = offsets.len() == size.len()
        && sizes.len() == size.len()
        && offsets
            .iter()
            .zip(sizes)
            .zip(size)
            .all(|((o, s), n)| o.checked_add(*s).is_some_and(|end| end <= *n));
    if inside {
        return Ok(());
    }
    Err(bad(
        "DCP chunk",
        "a region inside its tensor",
        format!("{fqn}: offsets {offsets:?} sizes {sizes:?} of a tensor of size {size:?}"),
    ))
}
