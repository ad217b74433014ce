//! Splitting a layout into pieces along a dimension: `split`,
//! `split_with_sizes`, `chunk` and `unbind`, each piece a view.

use super::Layout;
use crate::error::TensorError;
use crate::{Error, Result};

impl Layout {
    /// Pieces of `split_size` along `dim` (the last may be smaller).
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::ZeroSplitSize`] for a split size of 0 on a non-empty dimension.
    pub fn split(&self, split_size: usize, dim: isize) -> Result<Vec<Layout>> {
        let d = self.wrap_dim(dim)?;
        let size = self.shape().get(d).copied().unwrap_or(1);
        if split_size == 0 && size != 0 {
            return Err(Error::Tensor(TensorError::ZeroSplitSize { size }));
        }
        let pieces = if split_size == 0 {
            1
        } else {
            size.div_ceil(split_size).max(1)
        };
        (0..pieces)
            .map(|i| {
                let start = i * split_size;
                self.narrow(d as isize, start as isize, split_size.min(size - start))
            })
            .collect()
    }

    /// Pieces of the given sizes along `dim`; they must add up to the dimension's size.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::SplitSizesMismatch`].
    pub fn split_with_sizes(&self, sizes: &[usize], dim: isize) -> Result<Vec<Layout>> {
        let d = self.wrap_dim(dim)?;
        let total: usize = sizes
            .iter()
            .try_fold(0usize, |a, &s| a.checked_add(s))
            .unwrap_or(usize::MAX);
        if total != self.shape()[d] {
            return Err(Error::Tensor(TensorError::SplitSizesMismatch {
                sizes: sizes.to_vec(),
                dim: d,
                size: self.shape()[d],
            }));
        }
        let mut start = 0;
        sizes
            .iter()
            .map(|&len| {
                let l = self.narrow(d as isize, start as isize, len);
                start += len;
                l
            })
            .collect()
    }

    /// `chunks` nearly equal pieces along `dim`, as PyTorch's `chunk`.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::ZeroArgument`] for 0 chunks.
    pub fn chunk(&self, chunks: usize, dim: isize) -> Result<Vec<Layout>> {
        if chunks == 0 {
            return Err(Error::Tensor(TensorError::ZeroArgument {
                op: "chunk",
                what: "chunks",
            }));
        }
        let d = self.wrap_dim(dim)?;
        let size = self.shape()[d];
        if size == 0 {
            return self.split_with_sizes(&vec![0; chunks], dim);
        }
        self.split(size.div_ceil(chunks), dim)
    }

    /// Every index of `dim`, each with that dimension removed.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`].
    pub fn unbind(&self, dim: isize) -> Result<Vec<Layout>> {
        let d = self.wrap_dim(dim)?;
        (0..self.shape().get(d).copied().unwrap_or(0))
            .map(|i| self.select(d as isize, i as isize))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_chunk_unbind() {
        let base = Layout::contiguous(&[3, 4]).unwrap();
        let parts = base.split(3, 1).unwrap();
        assert_eq!(
            parts.iter().map(|p| p.shape()[1]).collect::<Vec<_>>(),
            vec![3, 1]
        );
        let c = Layout::contiguous(&[5]).unwrap().chunk(3, 0).unwrap();
        assert_eq!(
            c.iter().map(|p| p.shape()[0]).collect::<Vec<_>>(),
            vec![2, 2, 1]
        );
        assert_eq!(
            Layout::contiguous(&[0]).unwrap().chunk(3, 0).unwrap().len(),
            3
        );
        assert_eq!(base.unbind(1).unwrap().len(), 4);
    }
}
