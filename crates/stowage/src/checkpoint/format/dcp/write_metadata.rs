//! The `.metadata` of a DCP written, pickled as PyTorch pickles it
//! (`NEWOBJ` and `BUILD` of the dataclasses).

use std::io::Write;

use super::flatten::Leaf;
use super::metadata::StorageInfo;
use super::write::Entry;
use crate::checkpoint::globals::allowlist::Global;
use crate::checkpoint::pickle::{Pickler, WriteError};
use crate::checkpoint::value::graph::PathKey;
use crate::DType;

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
