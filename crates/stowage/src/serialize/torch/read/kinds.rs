//! Rebuilding the tensor kinds beside plain strided ones, as `torch/_utils.py`
//! does: `_rebuild_sparse_tensor` (COO and the compressed layouts),
//! `_rebuild_nested_tensor`, `_rebuild_meta_tensor_no_storage`, and the
//! per-channel parameters of `_rebuild_qtensor`.
//!
//! Components are checked as PyTorch's `weights_only` loader checks them
//! (`_validate_loaded_sparse_tensors`, which always runs there; the bounds of
//! `_nested_view_from_buffer`; the lengths `_rebuild_qtensor` checks), so a
//! hostile file gives [`Error::BadTensorKind`], never a view outside its data.
//! Components whose bytes are not loaded (fake and meta loads) are checked for
//! shape only.

use super::{as_bool, as_dims, as_tensor, bad, tuple_items, V};
use crate::layout::{numel_of, Layout};
use crate::serialize::kind::{CompressedLayout, Quantization, TensorKind};
use crate::serialize::object::{Object, TensorObject};
use crate::serialize::pickle::Graph;
use crate::{DType, Device, Error, Result, Tensor, UntypedStorage};

fn broken(layout: &'static str, invariant: &'static str, found: i64, bound: i64) -> Error {
    Error::BadTensorKind {
        layout,
        invariant,
        found,
        bound,
    }
}

fn int(x: usize) -> i64 {
    i64::try_from(x).unwrap_or(i64::MAX)
}

/// The integer values of an index tensor, or `None` when its bytes are not
/// loaded (fake or meta loads check shapes only).
fn index_values(t: &Tensor) -> Result<Option<Vec<i64>>> {
    if !matches!(t.dtype(), DType::Int64 | DType::Int32) {
        return Err(Error::BadObject {
            context: "sparse index tensor",
            expected: "an int64 or int32 tensor",
            found: t.dtype().name().to_owned(),
        });
    }
    if !t.has_data() {
        return Ok(None);
    }
    Ok(Some(t.to_vec::<i64>()?))
}

/// A placeholder without data carrying `dtype` and the logical `shape` on
/// `device` (NOTE [tensor kinds] in `serialize/kind.rs`).
fn placeholder(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
    let nbytes = numel_of(shape)?
        .checked_mul(dtype.size())
        .ok_or_else(|| Error::SizeOverflow {
            what: "sparse tensor's dense bytes",
            detail: format!("{shape:?} of {}", dtype.name()),
        })?;
    Tensor::from_parts(
        UntypedStorage::new_fake(nbytes, device),
        dtype,
        Layout::contiguous(shape)?,
    )
}

fn object(tensor: Tensor, kind: TensorKind) -> V {
    let mut obj = TensorObject::new(tensor);
    obj.kind = kind;
    V::Ext(Object::Tensor(Box::new(obj)))
}

/// `_rebuild_sparse_tensor(layout, data)`.
pub(super) fn sparse(graph: &Graph<Object>, args: &[V]) -> Result<V> {
    let [layout, data] = args else {
        return Err(Error::BadObject {
            context: "_rebuild_sparse_tensor",
            expected: "(layout, data)",
            found: format!("{} arguments", args.len()),
        });
    };
    let name = match layout {
        V::Ext(Object::Layout(name)) => name.as_str(),
        other => {
            return Err(bad(
                "_rebuild_sparse_tensor layout",
                "a layout",
                other,
                graph,
            ))
        }
    };
    let data = tuple_items(graph, data, "_rebuild_sparse_tensor data")?;
    if name == "torch.sparse_coo" || name == "sparse_coo" {
        return coo(graph, data);
    }
    let layout = CompressedLayout::from_name(name).ok_or_else(|| Error::Unsupported {
        what: format!("sparse layout {name}"),
    })?;
    compressed(graph, layout, data)
}

fn coo(graph: &Graph<Object>, data: &[V]) -> Result<V> {
    const L: &str = "sparse_coo";
    let (indices, values, size, coalesced) = match data {
        [i, v, s] => (i, v, s, None),
        [i, v, s, c] => (i, v, s, Some(c)),
        _ => {
            return Err(Error::BadObject {
                context: "sparse COO data",
                expected: "(indices, values, size[, is_coalesced])",
                found: format!("{} items", data.len()),
            })
        }
    };
    let indices = as_tensor(graph, indices, "sparse COO indices")?.tensor;
    let values = as_tensor(graph, values, "sparse COO values")?.tensor;
    let size = as_dims(graph, size, "sparse COO size")?;
    let coalesced = match coalesced {
        None | Some(V::None) => None,
        Some(c) => Some(as_bool(graph, c, "sparse COO is_coalesced")?),
    };
    if indices.dtype() != DType::Int64 {
        return Err(Error::BadObject {
            context: "sparse COO indices",
            expected: "an int64 tensor",
            found: indices.dtype().name().to_owned(),
        });
    }
    let (&[sparse_dim, nnz], Some((&nnz_v, dense))) =
        (indices.shape(), values.shape().split_first())
    else {
        return Err(broken(
            L,
            "indices are 2-D and values at least 1-D",
            int(indices.dim()),
            2,
        ));
    };
    if nnz_v != nnz {
        return Err(broken(
            L,
            "values.size(0) == indices.size(1)",
            int(nnz_v),
            int(nnz),
        ));
    }
    if sparse_dim + dense.len() != size.len() {
        return Err(broken(
            L,
            "sparse_dim + dense_dim == len(size)",
            int(sparse_dim + dense.len()),
            int(size.len()),
        ));
    }
    if dense != &size[sparse_dim..] {
        return Err(broken(
            L,
            "values.shape[1:] == size[sparse_dim:]",
            int(dense.iter().product()),
            int(size[sparse_dim..].iter().product()),
        ));
    }
    if let Some(ix) = index_values(&indices)? {
        for (d, row) in ix.chunks(nnz.max(1)).enumerate().take(sparse_dim) {
            if let Some(&i) = row.iter().find(|&&i| i < 0 || i >= int(size[d])) {
                return Err(broken(L, "0 <= indices[d] < size[d]", i, int(size[d])));
            }
        }
    }
    let t = placeholder(&size, values.dtype(), values.device())?;
    Ok(object(
        t,
        TensorKind::SparseCoo {
            indices,
            values,
            coalesced,
        },
    ))
}

fn compressed(graph: &Graph<Object>, layout: CompressedLayout, data: &[V]) -> Result<V> {
    let l = layout.name();
    let [ci, pi, values, size] = data else {
        return Err(Error::BadObject {
            context: "sparse compressed data",
            expected: "(compressed_indices, plain_indices, values, size)",
            found: format!("{} items", data.len()),
        });
    };
    let ci = as_tensor(graph, ci, "sparse compressed indices")?.tensor;
    let pi = as_tensor(graph, pi, "sparse plain indices")?.tensor;
    let values = as_tensor(graph, values, "sparse compressed values")?.tensor;
    let size = as_dims(graph, size, "sparse compressed size")?;
    if ci.dtype() != pi.dtype() {
        return Err(Error::BadObject {
            context: "sparse compressed indices",
            expected: "compressed and plain indices of one dtype",
            found: format!("{} and {}", ci.dtype().name(), pi.dtype().name()),
        });
    }
    let batch = ci
        .dim()
        .checked_sub(1)
        .ok_or_else(|| broken(l, "compressed_indices.dim() >= 1", 0, 1))?;
    let block_dims = if layout.is_blocked() { 2 } else { 0 };
    if pi.dim() != ci.dim() || ci.shape()[..batch] != pi.shape()[..batch] {
        return Err(broken(
            l,
            "plain_indices has the batch shape of compressed_indices",
            int(pi.dim()),
            int(ci.dim()),
        ));
    }
    let dense = values
        .dim()
        .checked_sub(batch + 1 + block_dims)
        .ok_or_else(|| {
            broken(
                l,
                "values.dim() >= batch_dim + 1 (+2 for blocks)",
                int(values.dim()),
                int(batch + 1 + block_dims),
            )
        })?;
    if size.len() != batch + 2 + dense {
        return Err(broken(
            l,
            "len(size) == batch_dim + 2 + dense_dim",
            int(size.len()),
            int(batch + 2 + dense),
        ));
    }
    let (br, bc) = if layout.is_blocked() {
        (values.shape()[batch + 1], values.shape()[batch + 2])
    } else {
        (1, 1)
    };
    let (rows, cols) = (size[batch], size[batch + 1]);
    if br == 0 || bc == 0 || rows % br != 0 || cols % bc != 0 {
        return Err(broken(
            l,
            "the block size divides the matrix size",
            int(br.max(bc)),
            int(rows.min(cols)),
        ));
    }
    let (ncomp, nplain) = if layout.compresses_rows() {
        (rows / br, cols / bc)
    } else {
        (cols / bc, rows / br)
    };
    let nnz = values.shape()[batch];
    if ci.shape()[batch] != ncomp + 1 {
        return Err(broken(
            l,
            "compressed_indices.shape[-1] == ncompressed + 1",
            int(ci.shape()[batch]),
            int(ncomp + 1),
        ));
    }
    if pi.shape()[batch] != nnz {
        return Err(broken(
            l,
            "plain_indices.shape[-1] == nnz",
            int(pi.shape()[batch]),
            int(nnz),
        ));
    }
    if values.shape()[..batch] != size[..batch]
        || values.shape()[batch + 1 + block_dims..] != size[batch + 2..]
    {
        return Err(broken(
            l,
            "values' batch and dense shape match size",
            int(values.dim()),
            int(size.len()),
        ));
    }
    if let (Some(c), Some(p)) = (index_values(&ci)?, index_values(&pi)?) {
        let batches = numel_of(&ci.shape()[..batch])?;
        for b in 0..batches {
            let crow = &c[b * (ncomp + 1)..(b + 1) * (ncomp + 1)];
            let cols = &p[b * nnz..(b + 1) * nnz];
            check_compressed(l, crow, cols, nnz, nplain)?;
        }
    }
    let t = placeholder(&size, values.dtype(), values.device())?;
    Ok(object(
        t,
        TensorKind::SparseCompressed {
            layout,
            compressed_indices: ci,
            plain_indices: pi,
            values,
        },
    ))
}

/// PyTorch's checks of one batch of compressed indices (`crow`, `ncompressed + 1`
/// offsets) and plain indices (`cols`, `nnz` of them).
fn check_compressed(
    l: &'static str,
    crow: &[i64],
    cols: &[i64],
    nnz: usize,
    nplain: usize,
) -> Result<()> {
    let last = crow.len() - 1;
    if crow[0] != 0 {
        return Err(broken(l, "compressed_indices[..., 0] == 0", crow[0], 0));
    }
    if crow[last] != int(nnz) {
        return Err(broken(
            l,
            "compressed_indices[..., -1] == nnz",
            crow[last],
            int(nnz),
        ));
    }
    for w in crow.windows(2) {
        let d = w[1].wrapping_sub(w[0]);
        if !(0..=int(nplain)).contains(&d) {
            return Err(broken(
                l,
                "0 <= compressed_indices[i] - compressed_indices[i-1] <= nplain",
                d,
                int(nplain),
            ));
        }
    }
    // Now 0 = crow[0] <= crow[i] <= crow[last] = nnz: every slice is in bounds.
    if let Some(&j) = cols.iter().find(|&&j| j < 0 || j >= int(nplain)) {
        return Err(broken(l, "0 <= plain_indices < nplain", j, int(nplain)));
    }
    for w in crow.windows(2) {
        let slice = &cols[w[0] as usize..w[1] as usize];
        if let Some(p) = slice.windows(2).find(|p| p[0] >= p[1]) {
            return Err(broken(
                l,
                "plain_indices sorted and distinct in each compressed slice",
                p[1],
                p[0],
            ));
        }
    }
    Ok(())
}

/// `_rebuild_nested_tensor(buffer, sizes, strides, storage_offsets)`.
pub(super) fn nested(graph: &Graph<Object>, args: &[V]) -> Result<V> {
    const L: &str = "nested";
    let [buffer, sizes, strides, offsets] = args else {
        return Err(Error::BadObject {
            context: "_rebuild_nested_tensor",
            expected: "(buffer, sizes, strides, storage_offsets)",
            found: format!("{} arguments", args.len()),
        });
    };
    let buffer = as_tensor(graph, buffer, "nested buffer")?.tensor;
    let sizes = as_tensor(graph, sizes, "nested sizes")?.tensor;
    let strides = as_tensor(graph, strides, "nested strides")?.tensor;
    let offsets = as_tensor(graph, offsets, "nested offsets")?.tensor;
    for t in [&sizes, &strides, &offsets] {
        if t.dtype() != DType::Int64 {
            return Err(Error::BadObject {
                context: "nested tensor metadata",
                expected: "int64 tensors",
                found: t.dtype().name().to_owned(),
            });
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
    let mut padded = vec![0usize; ndim];
    if let (true, true, true) = (sizes.has_data(), strides.has_data(), offsets.has_data()) {
        let (sz, st, off) = (
            sizes.to_vec::<i64>()?,
            strides.to_vec::<i64>()?,
            offsets.to_vec::<i64>()?,
        );
        let len = int(buffer.numel());
        for i in 0..n {
            let row = |v: &[i64]| v[i * ndim..(i + 1) * ndim].to_vec();
            let (sz, st) = (row(&sz), row(&st));
            if let Some(&bad) = sz.iter().chain(&st).chain([&off[i]]).find(|&&x| x < 0) {
                return Err(broken(
                    L,
                    "sizes, strides and offsets are non-negative",
                    bad,
                    0,
                ));
            }
            for (p, &s) in padded.iter_mut().zip(&sz) {
                *p = (*p).max(s as usize);
            }
            if sz.contains(&0) {
                continue;
            }
            let reach = sz
                .iter()
                .zip(&st)
                .try_fold(off[i].checked_add(1), |acc, (&s, &t)| {
                    Some(acc?.checked_add((s - 1).checked_mul(t)?))
                })
                .flatten()
                .unwrap_or(i64::MAX);
            if reach > len {
                return Err(broken(L, "each tensor lies inside the buffer", reach, len));
            }
        }
    }
    let mut shape = vec![n];
    shape.extend(padded);
    let t = placeholder(&shape, buffer.dtype(), buffer.device())?;
    Ok(object(
        t,
        TensorKind::Nested {
            buffer,
            sizes,
            strides,
            offsets,
        },
    ))
}

/// `_rebuild_meta_tensor_no_storage(dtype, size, stride, requires_grad)`: a
/// meta tensor (its storage holds no bytes), as `torch.empty_strided` makes it.
pub(super) fn meta_no_storage(graph: &Graph<Object>, args: &[V]) -> Result<V> {
    let [dtype, size, stride, requires_grad] = args else {
        return Err(Error::BadObject {
            context: "_rebuild_meta_tensor_no_storage",
            expected: "(dtype, size, stride, requires_grad)",
            found: format!("{} arguments", args.len()),
        });
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
        .ok_or_else(|| Error::SizeOverflow {
            what: "meta tensor bytes",
            detail: format!("{layout:?}"),
        })?;
    let mut t = Tensor::from_parts(
        UntypedStorage::new_fake(nbytes, Device::META),
        dtype,
        layout,
    )?;
    t.requires_grad_(as_bool(graph, requires_grad, "meta tensor requires_grad")?)?;
    Ok(V::Ext(Object::Tensor(Box::new(TensorObject::new(t)))))
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
        return Err(Error::BadObject {
            context: "per-channel quantizer params",
            expected: "(qscheme, scales, zero_points, axis)",
            found: format!("{} items", params.len()),
        });
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
                let items = crate::serialize::pickle::Node::values;
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
        scales,
        zero_points,
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
        return Err(Error::BadObject {
            context: "_rebuild_wrapper_subclass",
            expected: "(cls, dtype, size, stride, storage_offset, layout, device, requires_grad)",
            found: format!("{} arguments", args.len()),
        });
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
        .ok_or_else(|| Error::SizeOverflow {
            what: "wrapper subclass bytes",
            detail: format!("{layout:?}"),
        })?;
    let mut t = Tensor::from_parts(UntypedStorage::new_fake(nbytes, device), dtype, layout)?;
    t.requires_grad_(as_bool(
        graph,
        requires_grad,
        "wrapper subclass requires_grad",
    )?)?;
    let mut obj = TensorObject::new(t);
    obj.subclass = Some(cls.clone());
    Ok(V::Ext(Object::Tensor(Box::new(obj))))
}
