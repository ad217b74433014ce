//! Rebuilding the tensor kinds beside plain strided ones, as `torch/_utils.py`
//! does: `_rebuild_sparse_tensor` (COO and the compressed layouts, in
//! `sparse.rs`), `_rebuild_nested_tensor`, `_rebuild_meta_tensor_no_storage`, and the
//! per-channel parameters of `_rebuild_qtensor`.
//!
//! Components are checked as PyTorch's `weights_only` loader checks them
//! (`_validate_loaded_sparse_tensors`, which always runs there; the bounds of
//! `_nested_view_from_buffer`; the lengths `_rebuild_qtensor` checks), so a
//! hostile file gives [`FormatError::BadTensorKind`], never a view outside its data.
//! Shapes are checked when each tensor is rebuilt; the values of indices and
//! nested metadata by [`finish`] once the load has every storage's bytes (a
//! legacy file's follow its pickle), as PyTorch validates sparse tensors at
//! the end of a load. Components whose bytes are not loaded (fake and meta
//! loads) are checked for shape only.

use super::{as_bool, as_dims, as_tensor, bad, V};
use crate::checkpoint::pickle::{Graph, NodeId};
use crate::checkpoint::value::graph::{Checkpoint, Object, TensorObject};
use crate::checkpoint::value::kind::{Quantization, TensorKind};
use crate::checkpoint::value::object::SharedEdits;
use crate::error::{FormatError, TensorError};
use crate::layout::Layout;
use crate::{DType, Device, Error, Result, Tensor, UntypedStorage};

pub(super) fn broken(
    layout: &'static str,
    invariant: &'static str,
    found: i64,
    bound: i64,
) -> Error {
    Error::Format(FormatError::BadTensorKind {
        layout,
        invariant,
        found,
        bound,
    })
}

pub(super) fn int(x: usize) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// A sparse or nested tensor object on a placeholder of the logical `shape`
/// ([`TensorObject::with_kind`]).
pub(super) fn object(kind: TensorKind, shape: &[usize]) -> Result<V> {
    Ok(V::Ext(Object::Tensor(std::sync::Arc::new(
        TensorObject::with_kind(kind, shape)?,
    ))))
}

/// `_rebuild_nested_tensor(buffer, sizes, strides, storage_offsets)`.
pub(super) fn nested(graph: &Graph<Object>, args: &[V]) -> Result<V> {
    const L: &str = "nested";
    let [buffer, sizes, strides, offsets] = args else {
        return Err(Error::Format(FormatError::BadObject {
            context: "_rebuild_nested_tensor",
            expected: "(buffer, sizes, strides, storage_offsets)",
            found: format!("{} arguments", args.len()),
        }));
    };
    let buffer = as_tensor(graph, buffer, "nested buffer")?.tensor;
    let sizes = as_tensor(graph, sizes, "nested sizes")?.tensor;
    let strides = as_tensor(graph, strides, "nested strides")?.tensor;
    let offsets = as_tensor(graph, offsets, "nested offsets")?.tensor;
    for t in [&sizes, &strides, &offsets] {
        if t.dtype() != DType::Int64 {
            return Err(Error::Format(FormatError::BadObject {
                context: "nested tensor metadata",
                expected: "int64 tensors",
                found: t.dtype().name().to_owned(),
            }));
        }
    }
    if buffer.dim() != 1 {
        return Err(broken(L, "the buffer is 1-D", int(buffer.dim()), 1));
    }
    let (n, ndim) = match *sizes.shape() {
        [n, d] => (n, d),
        _ => return Err(broken(L, "sizes is [n, ndim]", int(sizes.dim()), 2)),
    };
    if strides.shape() != sizes.shape() || offsets.shape() != [n] {
        return Err(broken(
            L,
            "strides is sizes' shape and offsets is [n]",
            int(strides.numel()),
            int(sizes.numel()),
        ));
    }
    // The padded shape needs the sizes' values: set by `finish` once every
    // storage's bytes are in (a legacy file's come after its pickle).
    let padded = vec![0usize; ndim];
    let mut shape = vec![n];
    shape.extend(padded);
    object(
        TensorKind::Nested {
            buffer: Box::new(buffer),
            sizes: Box::new(sizes),
            strides: Box::new(strides),
            offsets: Box::new(offsets),
        },
        &shape,
    )
}

/// The padded shape of a nested tensor (`[n, max size of each dim]`) after
/// checking that each of its tensors lies inside the buffer, as
/// `_nested_view_from_buffer` does; `None` when the metadata's bytes are not loaded.
fn nested_shape(
    buffer: &Tensor,
    sizes: &Tensor,
    strides: &Tensor,
    offsets: &Tensor,
) -> Result<Option<Vec<usize>>> {
    const L: &str = "nested";
    if !(sizes.has_data() && strides.has_data() && offsets.has_data()) {
        return Ok(None);
    }
    let [n, ndim] = *sizes.shape() else {
        return Err(broken(L, "sizes is [n, ndim]", int(sizes.dim()), 2));
    };
    let (sz, st, off) = (
        sizes.to_vec::<i64>()?,
        strides.to_vec::<i64>()?,
        offsets.to_vec::<i64>()?,
    );
    let len = int(buffer.numel());
    let mut padded = vec![0usize; ndim];
    for i in 0..n {
        let (sz, st) = (&sz[i * ndim..(i + 1) * ndim], &st[i * ndim..(i + 1) * ndim]);
        if let Some(&bad) = sz.iter().chain(st).chain([&off[i]]).find(|&&x| x < 0) {
            return Err(broken(
                L,
                "sizes, strides and offsets are non-negative",
                bad,
                0,
            ));
        }
        for (p, &s) in padded.iter_mut().zip(sz) {
            *p = (*p).max(s as usize);
        }
        if sz.contains(&0) {
            continue;
        }
        let reach = sz
            .iter()
            .zip(st)
            .try_fold(off[i].checked_add(1), |acc, (&s, &t)| {
                Some(acc?.checked_add((s - 1).checked_mul(t)?))
            })
            .flatten()
            .unwrap_or(i64::MAX);
        if reach > len {
            return Err(broken(L, "each tensor lies inside the buffer", reach, len));
        }
    }
    let mut shape = vec![n];
    shape.extend(padded);
    Ok(Some(shape))
}

/// Completes the sparse and nested tensors of a loaded checkpoint once every
/// storage's bytes are in: checks the values of their indices and metadata
/// (PyTorch validates sparse tensors at the end of a load too) and sets each
/// nested tensor's padded shape.
///
/// # Errors
/// [`FormatError::BadTensorKind`] for a component that breaks an invariant.
pub(crate) fn finish(ckpt: &mut Checkpoint) -> Result<()> {
    let mut edits = SharedEdits::default();
    let mut fix = |v: &mut V| -> Result<()> {
        let V::Ext(Object::Tensor(t)) = v else {
            return Ok(());
        };
        match t.kind() {
            TensorKind::Strided => Ok(()),
            TensorKind::Nested {
                buffer,
                sizes,
                strides,
                offsets,
            } => {
                let Some(shape) = nested_shape(buffer, sizes, strides, offsets)? else {
                    return Ok(());
                };
                edits.apply(t, |t| {
                    let requires_grad = t.tensor.requires_grad();
                    t.tensor = TensorObject::with_kind(t.kind().clone(), &shape)?.tensor;
                    t.tensor.requires_grad_(requires_grad).map(drop)
                })
            }
            kind => super::sparse::check_indices(kind, t.tensor.shape()),
        }
    };
    fix(&mut ckpt.root)?;
    for i in 0..ckpt.graph.len() {
        for v in ckpt.graph.get_mut(NodeId(i as u32)).values_mut() {
            fix(v)?;
        }
    }
    Ok(())
}

/// `_rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad)`: a
/// meta tensor (its storage holds no bytes), as `torch.empty_strided` makes it.
pub(super) fn meta_no_storage(graph: &Graph<Object>, args: &[V]) -> Result<V> {
    let [dtype, size, stride, requires_grad] = args else {
        return Err(Error::Format(FormatError::BadObject {
            context: "_rebuild_meta_tensor_no_storage",
            expected: "(dtype, size, stride, requires_grad)",
            found: format!("{} arguments", args.len()),
        }));
    };
    let dtype = match dtype {
        V::Ext(Object::DType(d)) => *d,
        other => return Err(bad("meta tensor dtype", "a dtype", other, graph)),
    };
    let layout = Layout::new(
        &as_dims(graph, size, "meta tensor size")?,
        &as_dims(graph, stride, "meta tensor stride")?,
        0,
    )?;
    let nbytes = usize::try_from(layout.reach()?)
        .ok()
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(|| {
            Error::Tensor(TensorError::SizeOverflow {
                what: "meta tensor bytes",
                detail: format!("{layout:?}"),
            })
        })?;
    let mut t = Tensor::from_parts(
        UntypedStorage::new_fake(nbytes, Device::META),
        dtype,
        layout,
    )?;
    t.requires_grad_(as_bool(graph, requires_grad, "meta tensor requires_grad")?)?;
    Ok(V::Ext(Object::Tensor(std::sync::Arc::new(
        TensorObject::new(t),
    ))))
}

/// A per-channel quantizer's `(scheme, scales, zero_points, axis)` for a
/// tensor of `size`; `float_qparams` when the scheme is
/// `per_channel_affine_float_qparams` (scales and zero points given as lists
/// are then float32, else float64 and int64, as `_rebuild_qtensor` makes them).
pub(super) fn per_channel(
    graph: &Graph<Object>,
    params: &[V],
    size: &[usize],
    float_qparams: bool,
) -> Result<Quantization> {
    let [_, scales, zero_points, axis] = params else {
        return Err(Error::Format(FormatError::BadObject {
            context: "per-channel quantizer params",
            expected: "(qscheme, scales, zero_points, axis)",
            found: format!("{} items", params.len()),
        }));
    };
    let axis_v = axis
        .as_i64()
        .ok_or_else(|| bad("per-channel axis", "an int", axis, graph))?;
    let axis = usize::try_from(axis_v)
        .ok()
        .filter(|&a| a < size.len())
        .ok_or_else(|| {
            broken(
                "per_channel_affine",
                "0 <= axis < len(size)",
                axis_v,
                int(size.len()),
            )
        })?;
    let tensor = |v: &V, list_dtype: DType, context: &'static str| -> Result<Tensor> {
        match v {
            V::Ext(Object::Tensor(t)) => Ok(t.tensor.clone()),
            _ => {
                let items = crate::checkpoint::pickle::Node::values;
                let node = match v {
                    V::Node(id) => graph.try_get(*id),
                    _ => None,
                };
                let node = node.ok_or_else(|| bad(context, "a tensor or a list", v, graph))?;
                let xs: Vec<f64> = items(node)
                    .map(|x| x.as_f64().ok_or_else(|| bad(context, "numbers", x, graph)))
                    .collect::<Result<_>>()?;
                match list_dtype {
                    DType::Int64 => {
                        Tensor::from_slice(&xs.iter().map(|&x| x as i64).collect::<Vec<_>>())
                    }
                    DType::Float32 => {
                        Tensor::from_slice(&xs.iter().map(|&x| x as f32).collect::<Vec<_>>())
                    }
                    _ => Tensor::from_slice(&xs),
                }
            }
        }
    };
    let (sd, zd) = if float_qparams {
        (DType::Float32, DType::Float32)
    } else {
        (DType::Float64, DType::Int64)
    };
    let scales = tensor(scales, sd, "per-channel scales")?;
    let zero_points = tensor(zero_points, zd, "per-channel zero points")?;
    for t in [&scales, &zero_points] {
        if t.numel() != size[axis] {
            return Err(broken(
                "per_channel_affine",
                "len(scales) == len(zero_points) == size[axis]",
                int(t.numel()),
                int(size[axis]),
            ));
        }
    }
    Ok(Quantization::PerChannel {
        scales: Box::new(scales),
        zero_points: Box::new(zero_points),
        axis,
    })
}

/// `_rebuild_wrapper_subclass(cls, dtype, size, stride, storage_offset,
/// layout, device, requires_grad)`: a tensor subclass without storage of its
/// own. PyTorch calls `cls`'s `_make_wrapper_subclass`, which `torch.Tensor`
/// and `Parameter` refuse (they define no `__torch_dispatch__`), so only a
/// class the options let in gets here; stowage gives a tensor without data.
pub(super) fn wrapper_subclass(graph: &Graph<Object>, args: &[V]) -> Result<V> {
    let [cls, dtype, size, stride, offset, _layout, device, requires_grad] = args else {
        return Err(Error::Format(FormatError::BadObject {
            context: "_rebuild_wrapper_subclass",
            expected: "(cls, dtype, size, stride, storage_offset, layout, device, requires_grad)",
            found: format!("{} arguments", args.len()),
        }));
    };
    if let V::Ext(Object::Global(_)) = cls {
        return Err(bad(
            "_rebuild_wrapper_subclass class",
            "a tensor subclass defining __torch_dispatch__",
            cls,
            graph,
        ));
    }
    let dtype = match dtype {
        V::Ext(Object::DType(d)) => *d,
        other => return Err(bad("wrapper subclass dtype", "a dtype", other, graph)),
    };
    let device = match device {
        V::Ext(Object::Device(d)) => *d,
        V::Str(s) => s.parse()?,
        other => return Err(bad("wrapper subclass device", "a device", other, graph)),
    };
    let offset = offset
        .as_i64()
        .and_then(|o| usize::try_from(o).ok())
        .ok_or_else(|| {
            bad(
                "wrapper subclass offset",
                "a non-negative int",
                offset,
                graph,
            )
        })?;
    let layout = Layout::new(
        &as_dims(graph, size, "wrapper subclass size")?,
        &as_dims(graph, stride, "wrapper subclass stride")?,
        offset,
    )?;
    let nbytes = usize::try_from(layout.reach()?)
        .ok()
        .and_then(|n| n.checked_mul(dtype.size()))
        .ok_or_else(|| {
            Error::Tensor(TensorError::SizeOverflow {
                what: "wrapper subclass bytes",
                detail: format!("{layout:?}"),
            })
        })?;
    let mut t = Tensor::from_parts(UntypedStorage::new_fake(nbytes, device), dtype, layout)?;
    t.requires_grad_(as_bool(
        graph,
        requires_grad,
        "wrapper subclass requires_grad",
    )?)?;
    let mut obj = TensorObject::new(t);
    obj.set_subclass(Some(cls.clone()));
    Ok(V::Ext(Object::Tensor(std::sync::Arc::new(obj))))
}
