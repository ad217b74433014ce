//! `view(dtype)`: the layout of the same bytes read as elements of another
//! size, and the rules a layout must meet for it ([`DTypeViewProblem`]).

use super::Layout;
use crate::error::TensorError;
use crate::{Error, Result};

impl Layout {
    /// The layout under a dtype of `new_size`-byte elements, as PyTorch's `view(dtype)`.
    ///
    /// # Errors
    /// [`TensorError::ViewDType`] naming the rule that fails; [`TensorError::SizeOverflow`].
    pub fn view_dtype(&self, old_size: usize, new_size: usize) -> Result<Layout> {
        if old_size == new_size {
            return Ok(self.clone());
        }
        let bad = |problem| Error::Tensor(TensorError::ViewDType { problem });
        let n = self.ndim();
        if n == 0 {
            return Err(bad(DTypeViewProblem::ZeroDim));
        }
        if self.stride()[n - 1] != 1 {
            return Err(bad(DTypeViewProblem::LastStride {
                stride: self.stride()[n - 1],
            }));
        }
        let mut l = self.clone();
        if new_size < old_size {
            let r = old_size / new_size;
            let overflow = || {
                Error::Tensor(TensorError::SizeOverflow {
                    what: "view(dtype) layout",
                    detail: format!("{self:?} with elements split {r} ways"),
                })
            };
            for s in &mut l.dims.stride_mut()[..n - 1] {
                *s = s.checked_mul(r).ok_or_else(overflow)?;
            }
            l.dims.shape_mut()[n - 1] = l.shape()[n - 1].checked_mul(r).ok_or_else(overflow)?;
            l.offset = l.offset.checked_mul(r).ok_or_else(overflow)?;
        } else {
            let ratio = new_size / old_size;
            let size = l.shape()[n - 1];
            if !size.is_multiple_of(ratio) {
                return Err(bad(DTypeViewProblem::LastSize { size, ratio }));
            }
            if !l.offset.is_multiple_of(ratio) {
                return Err(bad(DTypeViewProblem::Offset {
                    offset: l.offset,
                    ratio,
                }));
            }
            for (dim, s) in l.dims.stride_mut()[..n - 1].iter_mut().enumerate() {
                if *s % ratio != 0 {
                    return Err(bad(DTypeViewProblem::Stride {
                        dim,
                        stride: *s,
                        ratio,
                    }));
                }
                *s /= ratio;
            }
            l.dims.shape_mut()[n - 1] /= ratio;
            l.offset /= ratio;
        }
        Ok(l)
    }
}

/// The rule a layout breaks for `view(dtype)` to a dtype of another element size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DTypeViewProblem {
    /// The layout has no dimensions.
    ZeroDim,
    /// The last dimension is not contiguous.
    LastStride {
        /// Its stride.
        stride: usize,
    },
    /// The last dimension's size is not a multiple of the size ratio.
    LastSize {
        /// Its size.
        size: usize,
        /// The new element size over the old.
        ratio: usize,
    },
    /// The storage offset is not a multiple of the size ratio.
    Offset {
        /// The offset, in old elements.
        offset: usize,
        /// The new element size over the old.
        ratio: usize,
    },
    /// A stride other than the last is not a multiple of the size ratio.
    Stride {
        /// The dimension.
        dim: usize,
        /// Its stride.
        stride: usize,
        /// The new element size over the old.
        ratio: usize,
    },
}

impl std::fmt::Display for DTypeViewProblem {
    /// PyTorch's message.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const TAIL: &str = "to view with a dtype of a different element size";
        match *self {
            DTypeViewProblem::ZeroDim => write!(f, "self.dim() cannot be 0 {TAIL}"),
            DTypeViewProblem::LastStride { stride } => {
                write!(f, "self.stride(-1) must be 1 {TAIL}, but got {stride}")
            }
            DTypeViewProblem::LastSize { size, ratio } => write!(
                f,
                "self.size(-1) must be divisible by {ratio} {TAIL}, but got {size}"
            ),
            DTypeViewProblem::Offset { offset, ratio } => write!(
                f,
                "self.storage_offset() must be divisible by {ratio} {TAIL}, but got {offset}"
            ),
            DTypeViewProblem::Stride { dim, stride, ratio } => write!(
                f,
                "self.stride({dim}) must be divisible by {ratio} {TAIL}, but got {stride}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::TensorError;

    #[test]
    fn view_dtype_rules() {
        let bytes = Layout::contiguous(&[2, 8]).unwrap();
        let f = bytes.view_dtype(1, 4).unwrap();
        assert_eq!((f.shape(), f.stride()), (&[2, 2][..], &[2, 1][..]));
        let back = f.view_dtype(4, 1).unwrap();
        assert_eq!(back, bytes);
        assert!(Layout::contiguous(&[3]).unwrap().view_dtype(1, 2).is_err());
        assert!(bytes.transpose(0, 1).unwrap().view_dtype(1, 2).is_err());
        assert!(Layout::contiguous(&[]).unwrap().view_dtype(4, 2).is_err());
        let e = bytes.transpose(0, 1).unwrap().view_dtype(1, 2).unwrap_err();
        assert!(matches!(
            e,
            Error::Tensor(TensorError::ViewDType {
                problem: DTypeViewProblem::LastStride { stride: 8 }
            })
        ));
        assert_eq!(
            e.to_string(),
            "self.stride(-1) must be 1 to view with a dtype of a different element size, but got 8"
        );
        let odd = Layout::contiguous(&[3])
            .unwrap()
            .view_dtype(1, 2)
            .unwrap_err();
        assert_eq!(
            odd.to_string(),
            "self.size(-1) must be divisible by 2 to view with a dtype of a different element size, but got 3"
        );
        let stepped = Layout::new(&[2, 2], &[3, 1], 0).unwrap();
        assert!(matches!(
            stepped.view_dtype(1, 2),
            Err(Error::Tensor(TensorError::ViewDType {
                problem: DTypeViewProblem::Stride {
                    dim: 0,
                    stride: 3,
                    ratio: 2
                }
            }))
        ));
    }
}
