//! PyTorch's memory-overlap rule for writes (ATen's `MemoryOverlap.cpp`), as
//! its `TensorIterator` applies it to `copy_` and in-place arithmetic:
//!
//! - an output may not reach one storage element from two of its indices
//!   ([`assert_no_internal_overlap`], decided only for expanded layouts);
//! - an output and an input may share all their memory in the same layout
//!   (`a.add_(a)`) or none of it, but not part of it
//!   ([`assert_no_partial_overlap`], decided only when both are
//!   non-overlapping and dense; other cases go ahead, as in ATen).
//!
//! `fill_` and single-element writes are not checked, as in PyTorch.

use crate::error::TensorError;
use crate::layout::MemOverlap;
use crate::{Error, Result, Tensor};

/// How the memory of two tensors overlaps (ATen's `MemOverlapStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    /// The same elements in the same layout.
    Full,
    /// Some storage bytes in common, not in the same layout.
    Partial,
    /// No storage bytes in common.
    No,
    /// Not decided.
    TooHard,
}

/// ATen's `get_overlap_status`, over the byte ranges of dense tensors.
fn status(a: &Tensor, b: &Tensor) -> Status {
    let same_storage = a.storage.is_same(&b.storage);
    // ATen's `a == b` (one TensorImpl): the same view of the same storage.
    if same_storage && a.layout == b.layout && a.dtype == b.dtype {
        return Status::Full;
    }
    if a.numel() == 0 || b.numel() == 0 {
        return Status::No;
    }
    if !a.layout.is_non_overlapping_and_dense() || !b.layout.is_non_overlapping_and_dense() {
        return Status::TooHard;
    }
    if same_storage {
        // Dense tensors cover `numel` elements from their offset, strides being
        // non-negative. Saturating: a layout past `usize` fails its bounds check anyway.
        let range = |t: &Tensor| {
            let begin = t.storage_offset().saturating_mul(t.element_size());
            (begin, begin.saturating_add(t.nbytes()))
        };
        let ((a0, a1), (b0, b1)) = (range(a), range(b));
        if (a0, a1) == (b0, b1) {
            return if a.stride() == b.stride() {
                Status::Full
            } else {
                Status::Partial
            };
        }
        if a0 < b1 && b0 < a1 {
            return Status::Partial;
        }
    }
    Status::No
}

/// ATen's `assert_no_internal_overlap` for the output `out` of `op`.
///
/// # Errors
/// [`TensorError::InternalOverlap`] when `out` is expanded (a dimension of size
/// above 1 with stride 0).
pub(crate) fn assert_no_internal_overlap(op: &'static str, out: &Tensor) -> Result<()> {
    if out.layout.internal_overlap() == MemOverlap::Yes {
        return Err(Error::Tensor(TensorError::InternalOverlap { op }));
    }
    Ok(())
}

/// ATen's `assert_no_partial_overlap` for the output `out` of `op` and one of its inputs.
///
/// # Errors
/// [`TensorError::PartialOverlap`] when the two share part of their memory.
pub(crate) fn assert_no_partial_overlap(
    op: &'static str,
    out: &Tensor,
    input: &Tensor,
) -> Result<()> {
    if status(out, input) == Status::Partial {
        return Err(Error::Tensor(TensorError::PartialOverlap { op }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    #[test]
    fn overlap_status_follows_aten() {
        let a = Tensor::arange(0.0, 6.0, 1.0, DType::Float32).unwrap();
        let s = |x: &Tensor, y: &Tensor| status(x, y);
        assert_eq!(s(&a, &a), Status::Full);
        assert_eq!(s(&a, &a.narrow(0, 0, 6).unwrap()), Status::Full);
        let (head, tail) = (a.narrow(0, 0, 5).unwrap(), a.narrow(0, 1, 5).unwrap());
        assert_eq!(s(&tail, &head), Status::Partial);
        assert_eq!(
            s(&a.narrow(0, 0, 2).unwrap(), &a.narrow(0, 3, 2).unwrap()),
            Status::No
        );
        let m = a.view(&[2, 3]).unwrap();
        let square = a.narrow(0, 0, 4).unwrap().view(&[2, 2]).unwrap();
        assert_eq!(s(&square, &square.t().unwrap()), Status::Partial);
        assert_eq!(s(&m, &m.select(0, 0).unwrap()), Status::Partial);
        // Strided views: too hard, so allowed.
        let even = a.slice(0, Some(0), None, 2).unwrap();
        let odd = a.slice(0, Some(1), None, 2).unwrap();
        assert_eq!(s(&even, &odd), Status::TooHard);
        let other = Tensor::arange(0.0, 6.0, 1.0, DType::Float32).unwrap();
        assert_eq!(s(&a, &other), Status::No);
        let empty = a.narrow(0, 1, 0).unwrap();
        assert_eq!(s(&empty, &head), Status::No);
        // Same bytes read as another dtype of the same size, same strides: full.
        assert_eq!(s(&a, &a.view_dtype(DType::Int32).unwrap()), Status::Full);
    }
}
