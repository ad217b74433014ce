//! numpy values read without numpy: an array from `_reconstruct`'s `BUILD`
//! state, a dtype, and a scalar from its dtype and bytes.

use super::{items, raw_bytes, unsupported};
use crate::checkpoint::pickle::{Graph, Value};
use crate::checkpoint::torch::read::{bad, tuple_items, StorageSource, TorchHooks, V};
use crate::checkpoint::value::data::{NdArray, NumpyDType};
use crate::checkpoint::value::graph::Object;
use crate::error::{FormatError, TensorError};
use crate::layout::Layout;
use crate::{Error, Result, Scalar, Tensor, UntypedStorage};

/// A numpy dtype value (or a placeholder for one, already resolved).
pub(super) fn numpy_dtype(
    graph: &Graph<Object>,
    v: &V,
    context: &'static str,
) -> Result<NumpyDType> {
    match v {
        Value::Ext(Object::NumpyDType(d)) => Ok((**d).clone()),
        _ => Err(bad(context, "a numpy dtype", v, graph)),
    }
}

/// One element of `dtype` from its bytes.
pub(super) fn scalar(dtype: &NumpyDType, bytes: &[u8]) -> Option<Scalar> {
    let d = dtype.torch?;
    if bytes.len() != d.size() {
        return None;
    }
    let mut b = bytes.to_vec();
    if dtype.big_endian() {
        crate::checkpoint::torch::read::byteswap(&mut b, d);
    }
    crate::element::read(d, &b).ok()
}

impl<S: StorageSource> TorchHooks<'_, S> {
    /// An array from `_reconstruct`'s `BUILD` state `(version, shape, dtype,
    /// is_fortran, rawdata)` (without `version` before numpy 1.0's format 1).
    pub(super) fn ndarray(&mut self, graph: &Graph<Object>, state: &V) -> Result<V> {
        let n = tuple_items(graph, state, "ndarray state")?.len();
        self.charge(n)?;
        let s: Vec<V> = tuple_items(graph, state, "ndarray state")?
            .iter()
            .map(|v| self.resolved(v))
            .collect();
        let s = match s.len() {
            5 => &s[1..],
            4 => &s[..],
            _ => {
                return Err(bad(
                    "ndarray state",
                    "(version, shape, dtype, is_fortran, rawdata)",
                    state,
                    graph,
                ))
            }
        };
        // numpy's NPY_MAXDIMS: a longer shape is no array numpy wrote.
        if tuple_items(graph, &s[0], "ndarray shape")?.len() > 64 {
            return Err(bad("ndarray shape", "at most 64 dimensions", &s[0], graph));
        }
        let shape: Vec<usize> = items(graph, &s[0], "ndarray shape")?
            .iter()
            .map(|v| {
                v.as_i64()
                    .and_then(|i| usize::try_from(i).ok())
                    .ok_or_else(|| bad("ndarray shape", "a non-negative int", v, graph))
            })
            .collect::<Result<_>>()?;
        let dtype = numpy_dtype(graph, &s[1], "ndarray dtype")?;
        let fortran = s[2]
            .as_bool()
            .or(s[2].as_i64().map(|i| i != 0))
            .unwrap_or(false);
        let Some(torch) = dtype.torch else {
            return Err(unsupported(format!(
                "numpy arrays of dtype {}",
                dtype.name()
            )));
        };
        let raw = raw_bytes(graph, &s[3], "ndarray data")?;
        let numel = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| {
                Error::Tensor(TensorError::SizeOverflow {
                    what: "ndarray elements",
                    detail: format!("{shape:?}"),
                })
            })?;
        if numel.checked_mul(torch.size()) != Some(raw.len()) {
            return Err(Error::Format(FormatError::BadObject {
                context: "ndarray data",
                expected: "shape × element size bytes",
                found: format!("{} bytes for shape {shape:?}", raw.len()),
            }));
        }
        let mut bytes = raw.to_vec();
        if dtype.big_endian() {
            crate::checkpoint::torch::read::byteswap(&mut bytes, torch);
        }
        let mut stride = vec![1usize; shape.len()];
        let mut acc = 1usize;
        let order: Vec<usize> = if fortran {
            (0..shape.len()).collect()
        } else {
            (0..shape.len()).rev().collect()
        };
        for i in order {
            stride[i] = acc;
            acc = acc.saturating_mul(shape[i].max(1));
        }
        let layout = Layout::new(&shape, &stride, 0)?;
        let tensor = Tensor::from_parts(UntypedStorage::from_bytes(&bytes)?, torch, layout)?;
        Ok(Value::Ext(Object::NdArray(Box::new(NdArray {
            tensor,
            dtype,
        }))))
    }
}
