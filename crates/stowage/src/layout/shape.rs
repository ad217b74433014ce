//! Free functions on shapes and dimensions: wrapping negative dimensions and
//! indices, element counts, row-major strides, `-1` inference, broadcasting.

use crate::error::TensorError;
use crate::{Error, Result};

/// Wraps a possibly negative dimension into `0..ndim` (0-dim tensors accept -1 and 0, as PyTorch).
///
/// # Errors
/// [`TensorError::DimOutOfRange`].
pub fn wrap_dim(dim: isize, ndim: usize) -> Result<usize> {
    let n = ndim.max(1) as isize;
    let d = if dim < 0 { dim + n } else { dim };
    if d < 0 || d >= n {
        return Err(Error::Tensor(TensorError::DimOutOfRange { dim, ndim }));
    }
    Ok(d as usize)
}

/// Wraps a possibly negative index into `0..size`.
///
/// # Errors
/// [`TensorError::IndexOutOfRange`].
pub fn wrap_index(index: isize, dim: usize, size: usize) -> Result<usize> {
    let i = if index < 0 {
        index.checked_add_unsigned(size).unwrap_or(-1)
    } else {
        index
    };
    if i < 0 || i as usize >= size {
        return Err(Error::Tensor(TensorError::IndexOutOfRange {
            index,
            dim,
            size,
        }));
    }
    Ok(i as usize)
}

/// The element count of `shape`, checked.
///
/// # Errors
/// [`TensorError::SizeOverflow`].
pub fn numel_of(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &s| acc.checked_mul(s))
        .ok_or_else(|| {
            Error::Tensor(TensorError::SizeOverflow {
                what: "element count",
                detail: format!("shape {shape:?}"),
            })
        })
}

/// Row-major strides for `shape` (PyTorch gives size-0 and size-1 dims the same rule:
/// `stride[i] = stride[i+1] * max(shape[i+1], 1)`).
pub fn contiguous_strides(shape: &[usize]) -> Vec<usize> {
    let mut stride = vec![1usize; shape.len()];
    fill_contiguous_strides(shape, &mut stride);
    stride
}

/// [`contiguous_strides`] into `stride` (as long as `shape`, all ones).
pub(crate) fn fill_contiguous_strides(shape: &[usize], stride: &mut [usize]) {
    for i in (0..shape.len().saturating_sub(1)).rev() {
        stride[i] = stride[i + 1].saturating_mul(shape[i + 1].max(1));
    }
}

/// Resolves one `-1` in `shape` against `numel` elements.
///
/// # Errors
/// [`TensorError::ShapeMismatch`] when the sizes cannot hold exactly `numel` elements,
/// [`TensorError::NegativeSize`] for sizes below -1, [`TensorError::MultipleInferredDims`]
/// for a second -1.
pub fn infer_shape(shape: &[isize], numel: usize) -> Result<Vec<usize>> {
    let mismatch = || {
        Error::Tensor(TensorError::ShapeMismatch {
            shape: shape.to_vec(),
            numel,
        })
    };
    let mut infer = None;
    let mut known: usize = 1;
    for (i, &s) in shape.iter().enumerate() {
        match s {
            -1 if infer.is_none() => infer = Some(i),
            -1 => {
                return Err(Error::Tensor(TensorError::MultipleInferredDims {
                    shape: shape.to_vec(),
                }))
            }
            s if s < 0 => return Err(Error::Tensor(TensorError::NegativeSize { size: s as i64 })),
            s => known = known.checked_mul(s as usize).ok_or_else(mismatch)?,
        }
    }
    let mut out: Vec<usize> = shape.iter().map(|&s| s.max(0) as usize).collect();
    match infer {
        Some(i) => {
            if known == 0 || !numel.is_multiple_of(known) {
                return Err(mismatch());
            }
            out[i] = numel / known;
        }
        None if known != numel => return Err(mismatch()),
        None => {}
    }
    Ok(out)
}

/// The shape two shapes broadcast to (NumPy rules, PyTorch's `infer_size`).
///
/// # Errors
/// [`TensorError::SizeMismatch`] at the first dimension from the right where the
/// sizes differ and neither is 1, numbered in the broadcast shape.
pub(crate) fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in (0..n).rev() {
        let offset = n - 1 - i;
        let x = a.len().checked_sub(offset + 1).map_or(1, |d| a[d]);
        let y = b.len().checked_sub(offset + 1).map_or(1, |d| b[d]);
        out[i] = match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            (a, b) => return Err(Error::Tensor(TensorError::SizeMismatch { a, b, dim: i })),
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TensorError;

    #[test]
    fn dims_wrap_like_pytorch() {
        assert_eq!(wrap_dim(-1, 3).unwrap(), 2);
        assert_eq!(wrap_dim(-1, 0).unwrap(), 0);
        assert!(matches!(
            wrap_dim(3, 3),
            Err(Error::Tensor(TensorError::DimOutOfRange {
                dim: 3,
                ndim: 3
            }))
        ));
        assert_eq!(
            Error::Tensor(TensorError::DimOutOfRange { dim: 2, ndim: 2 }).to_string(),
            "dimension out of range (expected to be in range of [-2, 1], but got 2)"
        );
        assert!(wrap_index(isize::MIN, 0, 4).is_err());
    }
}
