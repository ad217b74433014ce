//! Layouts: shape, stride and storage offset (in elements), and every view
//! computation as a pure function from a layout to a new one.
//!
//! All arithmetic on untrusted numbers is checked here, once: a [`Layout`]
//! always has a representable element count, and [`Layout::check_fits`]
//! checks it against a storage in 128-bit arithmetic. Contiguity is computed
//! when asked, never cached.
//!
//! One concept a file: this one holds the [`Layout`] and its checks;
//! `shape` the free functions on shapes and dimensions; `view` the view
//! transforms (`view`, `narrow`, `expand`, `diagonal`, …); `pieces` the
//! splits (`split`, `chunk`, `unbind`); `dtype_view` `view(dtype)`; `dense`
//! density, self-overlap and `preserve_format` strides;
//! `strided_index` the strided index iterator ([`Offsets`]).

mod dense;
mod dtype_view;
mod pieces;
mod shape;
mod strided_index;
mod view;

pub use dense::MemOverlap;
pub use dtype_view::DTypeViewProblem;
pub(crate) use shape::{
    broadcast_shapes, contiguous_strides, fill_contiguous_strides, numel_of, wrap_dim, wrap_index,
};
pub use strided_index::Offsets;
pub(crate) use strided_index::StridedIndex;
pub(crate) use view::expand_problem;

use crate::error::{StorageError, TensorError};
use crate::{Error, Result};
use smallvec::SmallVec;

/// A layout's sizes and strides in one vector, the sizes first, inline up
/// to four dimensions: 72 bytes, where a vector of each took 80 (a loaded
/// tensor's object is then an allocation of 160 bytes, from 176).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Dims(SmallVec<[usize; 8]>);

impl Dims {
    /// `shape` and `stride`, of one length.
    fn new(shape: &[usize], stride: &[usize]) -> Dims {
        debug_assert_eq!(shape.len(), stride.len());
        let mut v = SmallVec::with_capacity(shape.len() * 2);
        v.extend_from_slice(shape);
        v.extend_from_slice(stride);
        Dims(v)
    }

    /// `n` dimensions of size 0 and stride 0, to be set ([`set`](Self::set)).
    fn zeros(n: usize) -> Dims {
        Dims(SmallVec::from_elem(0, n * 2))
    }

    /// The dimensions `(size, stride)` of `pairs`, in order.
    fn from_pairs(pairs: impl IntoIterator<Item = (usize, usize)>) -> Dims {
        let pairs: SmallVec<[(usize, usize); 4]> = pairs.into_iter().collect();
        let mut v = SmallVec::with_capacity(pairs.len() * 2);
        v.extend(pairs.iter().map(|&(size, _)| size));
        v.extend(pairs.iter().map(|&(_, stride)| stride));
        Dims(v)
    }

    fn ndim(&self) -> usize {
        self.0.len() / 2
    }
    fn shape(&self) -> &[usize] {
        &self.0[..self.ndim()]
    }
    fn stride(&self) -> &[usize] {
        &self.0[self.ndim()..]
    }
    fn shape_mut(&mut self) -> &mut [usize] {
        let n = self.ndim();
        &mut self.0[..n]
    }
    fn stride_mut(&mut self) -> &mut [usize] {
        let n = self.ndim();
        &mut self.0[n..]
    }
    /// Dimension `d`'s size and stride.
    fn set(&mut self, d: usize, size: usize, stride: usize) {
        let n = self.ndim();
        (self.0[d], self.0[n + d]) = (size, stride);
    }
    fn remove(&mut self, d: usize) {
        let n = self.ndim();
        self.0.remove(n + d);
        self.0.remove(d);
    }
    fn insert(&mut self, d: usize, size: usize, stride: usize) {
        let n = self.ndim();
        self.0.insert(n + d, stride);
        self.0.insert(d, size);
    }
    fn push(&mut self, size: usize, stride: usize) {
        let n = self.ndim();
        self.insert(n, size, stride);
    }
    fn swap(&mut self, a: usize, b: usize) {
        let n = self.ndim();
        self.0.swap(a, b);
        self.0.swap(n + a, n + b);
    }
}

/// Shape, stride and storage offset of a tensor. Strides and offset count elements.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Layout {
    dims: Dims,
    offset: usize,
}

// A tensor per checkpoint entry holds one: keep it to 80 bytes.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Layout>() <= 80);

impl std::fmt::Debug for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Layout")
            .field("shape", &self.shape())
            .field("stride", &self.stride())
            .field("offset", &self.offset)
            .finish()
    }
}

impl Layout {
    /// A row-major layout of `shape` at offset 0.
    ///
    /// # Errors
    /// [`TensorError::SizeOverflow`] when the element count does not fit in `usize`.
    pub fn contiguous(shape: &[usize]) -> Result<Layout> {
        numel_of(shape)?;
        let mut dims = Dims::new(shape, shape);
        dims.stride_mut().fill(1);
        fill_contiguous_strides(shape, dims.stride_mut());
        Ok(Layout { dims, offset: 0 })
    }

    /// A layout from its parts.
    ///
    /// # Errors
    /// [`TensorError::StrideLengthMismatch`] when shape and stride lengths differ,
    /// [`TensorError::SizeOverflow`] when the element count or reach overflows.
    pub fn new(shape: &[usize], stride: &[usize], offset: usize) -> Result<Layout> {
        if shape.len() != stride.len() {
            return Err(Error::Tensor(TensorError::StrideLengthMismatch {
                shape_len: shape.len(),
                stride_len: stride.len(),
            }));
        }
        numel_of(shape)?;
        let l = Layout {
            dims: Dims::new(shape, stride),
            offset,
        };
        l.reach()?;
        Ok(l)
    }

    /// Sizes of each dimension.
    pub fn shape(&self) -> &[usize] {
        self.dims.shape()
    }
    /// Strides in elements.
    pub fn stride(&self) -> &[usize] {
        self.dims.stride()
    }
    /// Storage offset in elements.
    pub fn offset(&self) -> usize {
        self.offset
    }
    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.dims.ndim()
    }
    /// Number of elements (fits in `usize`, checked at construction).
    pub fn numel(&self) -> usize {
        self.shape().iter().product()
    }

    /// PyTorch's contiguity: row-major strides, ignoring dimensions of size 1;
    /// a tensor without elements is contiguous.
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut expected = 1usize;
        for (&size, &stride) in self.shape().iter().zip(self.stride()).rev() {
            if size != 1 {
                if stride != expected {
                    return false;
                }
                expected *= size;
            }
        }
        true
    }

    /// Storage elements the layout reaches: 0 without elements, else
    /// `offset + Σ (size-1)·stride + 1` (PyTorch's `computeStorageNbytes` in elements).
    pub(crate) fn reach(&self) -> Result<u128> {
        if self.numel() == 0 {
            return Ok(0);
        }
        let overflow = || {
            Error::Tensor(TensorError::SizeOverflow {
                what: "layout reach",
                detail: format!("{self:?}"),
            })
        };
        let mut max = self.offset as u128 + 1;
        for (&size, &stride) in self.shape().iter().zip(self.stride()) {
            let span = (size as u128 - 1)
                .checked_mul(stride as u128)
                .ok_or_else(overflow)?;
            max = max.checked_add(span).ok_or_else(overflow)?;
        }
        Ok(max)
    }

    /// The index of the last storage element reached plus one, as `usize`.
    ///
    /// # Errors
    /// [`TensorError::SizeOverflow`] when it exceeds `usize`.
    pub fn storage_elements(&self) -> Result<usize> {
        let r = self.reach()?;
        usize::try_from(r).map_err(|_| {
            Error::Tensor(TensorError::SizeOverflow {
                what: "layout reach",
                detail: format!("{self:?}"),
            })
        })
    }

    /// Checks that every element lies within a storage of `nbytes` bytes holding `element_size`-byte elements.
    ///
    /// # Errors
    /// [`StorageError::OutOfStorage`] naming the bytes needed and held.
    pub fn check_fits(&self, element_size: usize, nbytes: usize) -> Result<()> {
        let needed = self
            .reach()?
            .checked_mul(element_size as u128)
            .ok_or_else(|| {
                Error::Tensor(TensorError::SizeOverflow {
                    what: "layout bytes",
                    detail: format!("{self:?} with {element_size}-byte elements"),
                })
            })?;
        if needed > nbytes as u128 {
            return Err(Error::Storage(StorageError::OutOfStorage {
                needed,
                nbytes,
                shape: self.shape().to_vec(),
                stride: self.stride().to_vec(),
                offset: self.offset,
                element_size,
            }));
        }
        Ok(())
    }

    /// Storage offsets of every element in row-major order.
    pub fn offsets(&self) -> Offsets<'_> {
        Offsets::new(self.shape(), self.stride(), self.offset)
    }

    /// `dim` wrapped into `0..ndim` (see [`wrap_dim`]).
    fn wrap_dim(&self, dim: isize) -> Result<usize> {
        wrap_dim(dim, self.ndim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::StorageError;

    fn l(shape: &[usize], stride: &[usize], offset: usize) -> Layout {
        Layout::new(shape, stride, offset).unwrap()
    }

    #[test]
    fn fits_and_overflow() {
        let t = l(&[2, 3], &[3, 1], 2);
        assert!(t.check_fits(4, 32).is_ok());
        assert!(matches!(
            t.check_fits(4, 31),
            Err(Error::Storage(StorageError::OutOfStorage {
                needed: 32,
                ..
            }))
        ));
        assert!(l(&[0, 5], &[5, 1], 100).check_fits(4, 0).is_ok());
        assert!(Layout::contiguous(&[usize::MAX, 2]).is_err());
        let huge = l(&[2], &[usize::MAX], usize::MAX);
        assert!(huge.check_fits(8, usize::MAX).is_err());
    }
}
