//! safetensors files, through the `safetensors` crate.
//!
//! Reading: each tensor gets its own storage (safetensors has no sharing).
//! Writing: every tensor of a checkpoint under its dotted path, as a
//! contiguous copy, with the `__metadata__` map kept; dtypes safetensors
//! cannot hold are refused naming the dtype and the path.
//!
//! Saving streams one tensor at a time into the file (through the crate's
//! `serialize_to_file`); only non-contiguous or lazily conjugated tensors are
//! copied up front. Loading is less frugal: the crate parses from one buffer
//! holding the whole file, so a load reads the file into memory and then
//! copies each tensor into its storage (twice the tensor bytes at peak, unlike
//! the torch loaders).

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, View};

use crate::layout::Layout;
use crate::serialize::object::{
    ByteOrder, Checkpoint, Format, Object, StorageRecord, TensorObject,
};
use crate::serialize::pickle::Value;
use crate::serialize::zip::ReadAt;
use crate::serialize::{dotted, LoadOptions};
use crate::{DType, Error, Result, Tensor, UntypedStorage};

fn to_dtype(d: Dtype) -> Result<DType> {
    let tag = format!("{d:?}");
    DType::from_safetensors_tag(&tag).ok_or(Error::Unsupported {
        what: format!("safetensors dtype {tag}"),
    })
}

fn from_dtype(d: DType) -> Option<Dtype> {
    use Dtype::*;
    let all = [
        BOOL,
        U8,
        I8,
        F8_E5M2,
        F8_E4M3,
        F8_E8M0,
        F8_E4M3FNUZ,
        F8_E5M2FNUZ,
        I16,
        U16,
        F16,
        BF16,
        I32,
        U32,
        F32,
        C64,
        F64,
        I64,
        U64,
    ];
    let tag = d.safetensors_tag()?;
    all.into_iter().find(|x| format!("{x:?}") == tag)
}

pub(crate) fn load<R: ReadAt>(source: &R, options: &LoadOptions) -> Result<Checkpoint> {
    let len = usize::try_from(source.len()).map_err(|_| Error::SizeOverflow {
        what: "file",
        detail: source.len().to_string(),
    })?;
    let mut buf = vec![0u8; len];
    source.read_exact_at(&mut buf, 0).map_err(|e| Error::Io {
        path: Default::default(),
        source: e,
    })?;
    let st = SafeTensors::deserialize(&buf)?;
    let (_, meta) = SafeTensors::read_metadata(&buf)?;
    let mut ckpt = Checkpoint::new();
    ckpt.format = Format::Safetensors;
    ckpt.byteorder = ByteOrder::Little;
    ckpt.safetensors_metadata = meta
        .metadata()
        .as_ref()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
    let device = options.map_location.unwrap_or_default();
    let mut items = Vec::new();
    // The file's order: by data offset.
    for (i, name) in meta.offset_keys().into_iter().enumerate() {
        let view = st.tensor(&name)?;
        let dtype = to_dtype(view.dtype()).map_err(|e| Error::AtPath {
            path: name.clone(),
            source: Box::new(e),
        })?;
        let storage = if device.is_meta() {
            UntypedStorage::new_on(view.data().len(), device)?
        } else {
            let s = UntypedStorage::new_on(view.data().len(), device)?;
            s.bytes_mut()?.copy_from_slice(view.data());
            s
        };
        let layout = Layout::contiguous(view.shape())?;
        let tensor =
            Tensor::from_parts(storage.clone(), dtype, layout).map_err(|e| Error::AtPath {
                path: name.clone(),
                source: Box::new(e),
            })?;
        ckpt.storages.push(StorageRecord {
            key: i.to_string(),
            storage,
            dtype: Some(dtype),
            location: device.to_string(),
        });
        items.push((
            Value::str(&name),
            Value::Ext(Object::Tensor(Box::new(TensorObject::new(tensor)))),
        ));
    }
    let root = ckpt.graph.dict(items);
    ckpt.root = Value::Node(root);
    Ok(ckpt)
}

/// Writes every tensor of `ckpt` to a safetensors file at `path`, named by dotted path
/// (a root tensor is named `tensor`), as contiguous copies, keeping `__metadata__`.
/// Written to a temporary file and renamed into place.
///
/// # Errors
/// [`Error::AtPath`] wrapping [`Error::DTypeUnsupported`] for a dtype safetensors cannot
/// hold (complex128, quantized …) or [`Error::NoData`] for meta tensors; I/O errors.
pub fn save(path: impl AsRef<Path>, ckpt: &Checkpoint) -> Result<()> {
    let mut views: Vec<(String, Contiguous)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (p, t) in ckpt.tensors()? {
        let name = dotted(&p);
        let at = |e: Error| Error::AtPath {
            path: name.clone(),
            source: Box::new(e),
        };
        let x = &t.tensor;
        let dtype = match from_dtype(x.dtype()) {
            Some(d) if t.quantization.is_none() => d,
            _ => {
                return Err(at(Error::DTypeUnsupported {
                    op: "saving to safetensors",
                    dtype: x.dtype(),
                }))
            }
        };
        if !seen.insert(name.clone()) {
            return Err(at(Error::InvalidArgument {
                op: "saving to safetensors",
                what: "name",
                value: "two tensors have this name".into(),
            }));
        }
        // Contiguous tensors are used as they are; others (and lazily conjugated or
        // negated ones) are copied once here.
        let tensor = t.resolved().and_then(|r| r.contiguous()).map_err(at)?;
        if !tensor.has_data() {
            return Err(at(Error::NoData {
                op: "saving to safetensors",
                device: tensor.device(),
            }));
        }
        views.push((
            name,
            Contiguous {
                dtype,
                tensor,
                failed: Cell::new(false),
            },
        ));
    }
    let meta: Option<HashMap<String, String>> = ckpt
        .safetensors_metadata
        .as_ref()
        .map(|m: &BTreeMap<_, _>| m.clone().into_iter().collect());
    // The crate streams the tensors into the file one at a time.
    crate::serialize::write_atomically(path.as_ref(), |tmp| {
        safetensors::tensor::serialize_to_file(
            views.iter().map(|(n, v)| (n.as_str(), v)),
            meta,
            tmp,
        )?;
        match views.iter().find(|(_, v)| v.failed.get()) {
            None => Ok(()),
            Some((name, _)) => Err(Error::AtPath {
                path: name.clone(),
                source: Box::new(Error::InvalidArgument {
                    op: "saving to safetensors",
                    what: "tensor",
                    value: "its storage changed size while the file was written".into(),
                }),
            }),
        }
    })
}

/// A contiguous tensor as the `safetensors` crate's `View`.
struct Contiguous {
    dtype: Dtype,
    tensor: Tensor,
    /// Set when the bytes could not be read while writing (the save then fails).
    failed: Cell<bool>,
}

impl View for &Contiguous {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        self.tensor.shape()
    }
    fn data(&self) -> Cow<'_, [u8]> {
        // The bytes sit behind the storage's lock, so they are handed over as a copy,
        // one tensor at a time while the file is written. The crate does not check the
        // length it gets, so a storage shrunk meanwhile gives zeros of the right length
        // (keeping later tensors in place) and fails the save afterwards.
        let start = self.tensor.storage_offset() * self.tensor.element_size();
        let end = start + self.tensor.nbytes();
        match self.tensor.untyped_storage().bytes() {
            Ok(b) if end <= b.len() => Cow::Owned(b[start..end].to_vec()),
            _ => {
                self.failed.set(true);
                Cow::Owned(vec![0; self.tensor.nbytes()])
            }
        }
    }
    fn data_len(&self) -> usize {
        self.tensor.nbytes()
    }
}
