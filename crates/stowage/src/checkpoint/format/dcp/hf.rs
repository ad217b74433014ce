//! The Hugging Face layout of a distributed checkpoint
//! (`torch.distributed.checkpoint.HuggingFaceStorageWriter` with
//! `save_distributed=True`): each rank writes
//! `shard-0000R-model-0000X-of-0000Y.safetensors`, whose `__metadata__`
//! records in `DCP_SHARDING_INFO` where each of its tensors starts in the
//! whole tensor (`{"w": {"saved_offsets": [3, 0]}}`). There is no index and
//! no `.metadata`: a tensor's shape is the extent of its chunks, which must
//! tile it.

use crate::error::{ErrorContext, FormatError, TensorError};
use crate::io::Location;
use std::collections::HashMap;

use super::index::check_cover;
use crate::checkpoint::pickle::Value;
use crate::checkpoint::value::graph::{dotted, Checkpoint, Object, StorageRecord, TensorObject};
use crate::{DType, Error, Result, Tensor};

/// The metadata key holding each tensor's offsets.
pub const SHARDING_INFO_KEY: &str = "DCP_SHARDING_INFO";

/// Whether `name` is a rank's file: `shard-00001-model-00001-of-00001.safetensors`.
pub fn is_rank_file(name: &str) -> bool {
    let Some(rest) = name
        .strip_prefix("shard-")
        .and_then(|r| r.strip_suffix(".safetensors"))
    else {
        return false;
    };
    let b = rest.as_bytes();
    b.len() == 26
        && &b[5..12] == b"-model-"
        && &b[17..21] == b"-of-"
        && b[..5]
            .iter()
            .chain(&b[12..17])
            .chain(&b[21..])
            .all(u8::is_ascii_digit)
}

/// One stored piece of a tensor.
struct Piece {
    offsets: Vec<usize>,
    tensor: Tensor,
}

/// Loads the ranks' `files` (as [`Folder::Ranks`](crate::checkpoint::Folder::Ranks) lists them; URLs where the
/// folder is in object storage), each through `load_file`, which picks the
/// mode, and assembles each tensor from its pieces.
///
/// # Errors
/// A file's load errors; [`FormatError::BadObject`] when `DCP_SHARDING_INFO` is not
/// the expected JSON, when a tensor's pieces disagree in dtype or rank, or do
/// not tile its extent.
pub(crate) fn load(
    files: &[Location],
    load_file: impl Fn(&Location) -> Result<Checkpoint>,
) -> Result<Checkpoint> {
    let mut order: Vec<String> = Vec::new();
    let mut pieces: HashMap<String, Vec<Piece>> = HashMap::new();
    for file in files {
        let in_file = |e: Error| e.in_file(file.path());
        let shard = load_file(file)?;
        let info = sharding_info(&shard).map_err(in_file)?;
        for (path, t) in shard.tensors().map_err(in_file)? {
            let name = dotted(&path);
            let tensor = t.tensor.clone();
            let offsets = match info.get(&name) {
                Some(o) if o.len() == tensor.dim() => o.clone(),
                Some(o) => {
                    return Err(in_file(Error::Format(FormatError::BadObject {
                        context: "DCP_SHARDING_INFO",
                        expected: "one offset per dimension",
                        found: format!("{name}: {o:?} for shape {:?}", tensor.shape()),
                    })))
                }
                None => vec![0; tensor.dim()],
            };
            if !pieces.contains_key(&name) {
                order.push(name.clone());
            }
            pieces
                .entry(name)
                .or_default()
                .push(Piece { offsets, tensor });
        }
    }
    let mut ckpt = Checkpoint::new();
    let mut items = Vec::with_capacity(order.len());
    for name in order {
        let parts = &pieces[&name];
        let whole = assemble(&name, parts)?;
        ckpt.storages.push(StorageRecord {
            key: name.as_str().into(),
            storage: whole.untyped_storage().clone(),
            dtype: Some(whole.dtype()),
            location: whole.device().to_string().into(),
        });
        items.push((
            Value::str(&name),
            Value::Ext(Object::Tensor(std::sync::Arc::new(TensorObject::new(
                whole,
            )))),
        ));
    }
    let root = ckpt.graph.dict(items);
    ckpt.ordered.insert(root);
    ckpt.root = Value::Node(root);
    ckpt.format = crate::checkpoint::value::graph::Format::Safetensors;
    Ok(ckpt)
}

/// `DCP_SHARDING_INFO` of a loaded file: each tensor's `saved_offsets`.
fn sharding_info(shard: &Checkpoint) -> Result<HashMap<String, Vec<usize>>> {
    let Some(text) = shard
        .safetensors_metadata
        .as_ref()
        .and_then(|m| m.get(SHARDING_INFO_KEY))
    else {
        return Ok(HashMap::new());
    };
    let bad = |found: String| {
        Error::Format(FormatError::BadObject {
            context: "DCP_SHARDING_INFO",
            expected: "a JSON map of {\"saved_offsets\": [ints]}",
            found,
        })
    };
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
    let serde_json::Value::Object(map) = json else {
        return Err(bad("not an object".into()));
    };
    map.into_iter()
        .map(|(name, v)| {
            let offsets = v
                .get("saved_offsets")
                .and_then(|o| o.as_array())
                .and_then(|o| {
                    o.iter()
                        .map(|x| x.as_u64().and_then(|x| usize::try_from(x).ok()))
                        .collect::<Option<Vec<usize>>>()
                })
                .ok_or_else(|| bad(format!("{name}: {v}")))?;
            Ok((name, offsets))
        })
        .collect()
}
/// The whole tensor the pieces tile.
fn assemble(name: &str, parts: &[Piece]) -> Result<Tensor> {
    let first = &parts[0].tensor;
    if parts.len() == 1 && parts[0].offsets.iter().all(|&o| o == 0) {
        return Ok(first.clone());
    }
    let (dtype, dim): (DType, usize) = (first.dtype(), first.dim());
    let mut size = vec![0usize; dim];
    let mut regions = Vec::with_capacity(parts.len());
    for p in parts {
        if p.tensor.dtype() != dtype || p.tensor.dim() != dim {
            return Err(Error::Format(FormatError::BadObject {
                context: "DCP_SHARDING_INFO",
                expected: "pieces of one dtype and rank",
                found: format!(
                    "{name}: {} {:?} and {dtype} {:?}",
                    p.tensor.dtype(),
                    p.tensor.shape(),
                    first.shape()
                ),
            }));
        }
        let mut region = Vec::with_capacity(dim);
        for ((extent, &o), &n) in size.iter_mut().zip(&p.offsets).zip(p.tensor.shape()) {
            let end = o
                .checked_add(n)
                .ok_or(Error::Tensor(TensorError::SizeOverflow {
                    what: "DCP piece",
                    detail: format!("{name}: offsets {:?}", p.offsets),
                }))?;
            *extent = (*extent).max(end);
            region.push((o, n));
        }
        if region.iter().all(|r| r.1 > 0) {
            regions.push(region);
        }
    }
    let wanted = size
        .iter()
        .try_fold(1usize, |a, &b| a.checked_mul(b))
        .ok_or(Error::Tensor(TensorError::SizeOverflow {
            what: "DCP tensor",
            detail: format!("{name}: {size:?}"),
        }))?;
    check_cover(name, &regions, wanted)?;
    if parts.iter().any(|p| !p.tensor.untyped_storage().has_data()) {
        // A fake load: the whole tensor's storage is fake too.
        let nbytes =
            wanted
                .checked_mul(dtype.size())
                .ok_or(Error::Tensor(TensorError::SizeOverflow {
                    what: "DCP tensor",
                    detail: format!("{name}: {size:?}"),
                }))?;
        let storage = crate::UntypedStorage::new_fake(nbytes, first.device());
        return Tensor::from_parts(storage, dtype, crate::layout::Layout::contiguous(&size)?);
    }
    let out = Tensor::zeros_on(&size, dtype, first.device())?;
    for p in parts {
        let mut dst = out.clone();
        for (d, (&o, &n)) in p.offsets.iter().zip(p.tensor.shape()).enumerate() {
            dst = dst.narrow(d as isize, o as isize, n)?;
        }
        dst.copy_(&p.tensor)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_file_names() {
        assert!(is_rank_file("shard-00001-model-00001-of-00001.safetensors"));
        assert!(is_rank_file("shard-00004-model-00002-of-00003.safetensors"));
        for bad in [
            "model-00001-of-00001.safetensors",
            "shard-1-model-1-of-1.safetensors",
            "shard-00001-model-00001-of-00001.bin",
            "shard-0000x-model-00001-of-00001.safetensors",
        ] {
            assert!(!is_rank_file(bad), "{bad}");
        }
    }
}
