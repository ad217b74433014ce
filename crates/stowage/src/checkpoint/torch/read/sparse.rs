//! Rebuilding sparse tensors (`_rebuild_sparse_tensor`: COO and the
//! compressed layouts), with the checks of PyTorch's
//! `_validate_loaded_sparse_tensors`: shapes when each tensor is rebuilt, the
//! values of its indices once the load has every storage's bytes
//! ([`check_indices`], called by [`finish`](super::kinds::finish)).

use super::kinds::{broken, int, object};
use super::{as_bool, as_dims, as_tensor, bad, tuple_items, V};
use crate::checkpoint::pickle::Graph;
use crate::checkpoint::value::graph::Object;
use crate::checkpoint::value::kind::{CompressedLayout, TensorKind};
use crate::error::{CheckpointError, FormatError};
use crate::layout::numel_of;
use crate::{DType, Error, Result, Tensor};

/// The integer values of an index tensor, or `None` when its bytes are not
/// loaded (fake or meta loads check shapes only).
fn index_values(t: &Tensor) -> Result<Option<Vec<i64>>> {
    if !matches!(t.dtype(), DType::Int64 | DType::Int32) {
        return Err(Error::Format(FormatError::BadObject {
            context: "sparse index tensor",
            expected: "an int64 or int32 tensor",
            found: t.dtype().name().to_owned(),
        }));
    }
    if !t.has_data() {
        return Ok(None);
    }
    Ok(Some(t.to_vec::<i64>()?))
}

/// `_rebuild_sparse_tensor(layout, data)`.
pub(super) fn sparse(graph: &Graph<Object>, args: &[V]) -> Result<V> {
    let [layout, data] = args else {
        return Err(Error::Format(FormatError::BadObject {
            context: "_rebuild_sparse_tensor",
            expected: "(layout, data)",
            found: format!("{} arguments", args.len()),
        }));
    };
    let name = match layout {
        V::Ext(Object::Layout(name)) => &**name,
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
    let layout = CompressedLayout::from_name(name).ok_or_else(|| {
        Error::Checkpoint(CheckpointError::UnsupportedLayout {
            layout: name.to_owned(),
        })
    })?;
    compressed(graph, layout, data)
}

fn coo(graph: &Graph<Object>, data: &[V]) -> Result<V> {
    const L: &str = "sparse_coo";
    let (indices, values, size, coalesced) = match data {
        [i, v, s] => (i, v, s, None),
        [i, v, s, c] => (i, v, s, Some(c)),
        _ => {
            return Err(Error::Format(FormatError::BadObject {
                context: "sparse COO data",
                expected: "(indices, values, size[, is_coalesced])",
                found: format!("{} items", data.len()),
            }))
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
        return Err(Error::Format(FormatError::BadObject {
            context: "sparse COO indices",
            expected: "an int64 tensor",
            found: indices.dtype().name().to_owned(),
        }));
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
    object(
        TensorKind::SparseCoo {
            indices: Box::new(indices),
            values: Box::new(values),
            coalesced,
        },
        &size,
    )
}

fn compressed(graph: &Graph<Object>, layout: CompressedLayout, data: &[V]) -> Result<V> {
    let l = layout.name();
    let [ci, pi, values, size] = data else {
        return Err(Error::Format(FormatError::BadObject {
            context: "sparse compressed data",
            expected: "(compressed_indices, plain_indices, values, size)",
            found: format!("{} items", data.len()),
        }));
    };
    let ci = as_tensor(graph, ci, "sparse compressed indices")?.tensor;
    let pi = as_tensor(graph, pi, "sparse plain indices")?.tensor;
    let values = as_tensor(graph, values, "sparse compressed values")?.tensor;
    let size = as_dims(graph, size, "sparse compressed size")?;
    if ci.dtype() != pi.dtype() {
        return Err(Error::Format(FormatError::BadObject {
            context: "sparse compressed indices",
            expected: "compressed and plain indices of one dtype",
            found: format!("{} and {}", ci.dtype().name(), pi.dtype().name()),
        }));
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
    let ncomp = if layout.compresses_rows() {
        rows / br
    } else {
        cols / bc
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
    object(
        TensorKind::SparseCompressed {
            layout,
            compressed_indices: Box::new(ci),
            plain_indices: Box::new(pi),
            values: Box::new(values),
        },
        &size,
    )
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

/// Checks the values of a sparse tensor's indices, as PyTorch's
/// `_validate_loaded_sparse_tensors` does at the end of a `weights_only`
/// load: COO indices inside the size; compressed indices starting at 0,
/// ending at nnz, non-decreasing by at most the plain dimension, plain indices
/// inside it, sorted and distinct in each compressed slice. Components whose
/// bytes are not loaded are left (fake and meta loads).
pub(super) fn check_indices(kind: &TensorKind, size: &[usize]) -> Result<()> {
    match kind {
        TensorKind::SparseCoo { indices, .. } => {
            let Some(ix) = index_values(indices)? else {
                return Ok(());
            };
            let nnz = indices.shape().get(1).copied().unwrap_or(0);
            for (d, row) in ix.chunks(nnz.max(1)).enumerate() {
                let bound = int(size.get(d).copied().unwrap_or(0));
                if let Some(&i) = row.iter().find(|&&i| i < 0 || i >= bound) {
                    return Err(broken("sparse_coo", "0 <= indices[d] < size[d]", i, bound));
                }
            }
        }
        TensorKind::SparseCompressed {
            layout,
            compressed_indices: ci,
            plain_indices: pi,
            values,
        } => {
            let (Some(c), Some(p)) = (index_values(ci)?, index_values(pi)?) else {
                return Ok(());
            };
            // Shapes were checked when the tensor was rebuilt.
            let batch = ci.dim() - 1;
            let (br, bc) = if layout.is_blocked() {
                (values.shape()[batch + 1], values.shape()[batch + 2])
            } else {
                (1, 1)
            };
            let (rows, cols) = (size[batch] / br, size[batch + 1] / bc);
            let (ncomp, nplain) = if layout.compresses_rows() {
                (rows, cols)
            } else {
                (cols, rows)
            };
            let nnz = values.shape()[batch];
            for b in 0..numel_of(&ci.shape()[..batch])? {
                let crow = &c[b * (ncomp + 1)..(b + 1) * (ncomp + 1)];
                let plain = &p[b * nnz..(b + 1) * nnz];
                check_compressed(layout.name(), crow, plain, nnz, nplain)?;
            }
        }
        _ => {}
    }
    Ok(())
}
