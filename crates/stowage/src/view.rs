//! Views: new tensors over the same storage, copying nothing.
//!
//! Each method computes a new [`Layout`] (checked in `layout/`) and pairs
//! it with a handle to the same storage, so a write through any view is seen
//! through all of them. `reshape` and `flatten` fall back to a copy only when
//! the strides cannot express the new shape, as in PyTorch.

use crate::error::TensorError;
use std::sync::Arc;

use crate::autograd::{record, record_view, Backward, ViewFn};
use crate::layout::Layout;
use crate::{DType, Error, Result, Tensor};

impl Tensor {
    /// The view `f(layout)` of this tensor, recorded as `name` for autograd.
    fn view_with(
        &self,
        name: &'static str,
        f: impl Fn(&Layout) -> Result<Layout> + Send + Sync + 'static,
    ) -> Result<Tensor> {
        let layout = f(&self.layout)?;
        Ok(self.viewed(name, layout, Arc::new(f), false))
    }

    /// This tensor under `layout`, which `f` computes from its layout: the
    /// gradient of the view is scattered back through `f` applied to zeros
    /// of this tensor's shape. `multi_output`: one of several views one call
    /// returns.
    fn viewed(&self, name: &'static str, layout: Layout, f: ViewFn, multi_output: bool) -> Tensor {
        let view = Arc::clone(&f);
        record_view(self, layout, name, Some(f), multi_output, || {
            Backward::View {
                input: self.layout.clone(),
                view,
            }
        })
    }

    /// A fresh result under the layout `f` makes of its own, recorded as
    /// the view `name` but, as in ATen, no view of anything: a write to it
    /// is a write to a computed tensor (what `matmul` returns after its
    /// `squeeze_` and `_unsafe_view`).
    pub(crate) fn named_view(
        &self,
        name: &'static str,
        f: impl Fn(&Layout) -> Result<Layout> + Send + Sync + 'static,
    ) -> Result<Tensor> {
        let out = Tensor {
            layout: f(&self.layout)?,
            ..self.detach()
        };
        Ok(record(out, name, &[self], || Backward::View {
            input: self.layout.clone(),
            view: Arc::new(f),
        }))
    }

    /// The pieces `f` cuts this tensor into (split, chunk, unbind), each a
    /// view recorded as `name`.
    fn pieces(
        &self,
        name: &'static str,
        f: impl Fn(&Layout) -> Result<Vec<Layout>> + Send + Sync + Clone + 'static,
    ) -> Result<Vec<Tensor>> {
        let layouts = f(&self.layout)?;
        Ok(layouts
            .into_iter()
            .enumerate()
            .map(|(i, l)| {
                let f = f.clone();
                let piece: ViewFn = Arc::new(move |base: &Layout| {
                    let mut all = f(base)?;
                    let size = all.len();
                    // The base has this tensor's shape, so it has as many pieces.
                    (i < size).then(|| all.swap_remove(i)).ok_or(Error::Tensor(
                        TensorError::IndexOutOfRange {
                            index: i as isize,
                            dim: 0,
                            size,
                        },
                    ))
                });
                self.viewed(name, l, piece, true)
            })
            .collect())
    }

    /// ATen's `_unsafe_view`: a view of a fresh result, recorded as
    /// `UnsafeViewBackward0` (what `reshape` and `matmul` return after a copy).
    pub(crate) fn unsafe_view(&self, shape: &[isize]) -> Result<Tensor> {
        let shape = shape.to_vec();
        self.named_view("UnsafeViewBackward0", move |l| l.view(&shape))
    }

    /// The same elements under `shape` (one size may be -1), sharing the storage.
    ///
    /// # Errors
    /// [`TensorError::ShapeMismatch`], or [`TensorError::ViewIncompatible`] when the strides
    /// cannot express it (use [`reshape`](Self::reshape)).
    pub fn view(&self, shape: &[isize]) -> Result<Tensor> {
        let shape = shape.to_vec();
        self.view_with("ViewBackward0", move |l| l.view(&shape))
    }

    /// Like [`view`](Self::view), but copies when a view is impossible.
    ///
    /// # Errors
    /// [`TensorError::ShapeMismatch`]; allocation failure.
    pub fn reshape(&self, shape: &[isize]) -> Result<Tensor> {
        match self.layout.view(shape) {
            Ok(_) => self.view(shape),
            // A copy, then PyTorch's `_unsafe_view` of it (`UnsafeViewBackward0`).
            Err(Error::Tensor(TensorError::ViewIncompatible { .. })) => {
                self.contiguous()?.unsafe_view(shape)
            }
            Err(e) => Err(e),
        }
    }

    /// `length` elements of `dim` from `start`.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::NarrowOutOfRange`].
    pub fn narrow(&self, dim: isize, start: isize, length: usize) -> Result<Tensor> {
        self.view_with("SliceBackward0", move |l| l.narrow(dim, start, length))
    }

    /// The sub-tensor at `index` of `dim`, with that dimension removed.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::IndexOutOfRange`].
    pub fn select(&self, dim: isize, index: isize) -> Result<Tensor> {
        self.view_with("SelectBackward0", move |l| l.select(dim, index))
    }

    /// Integer indexing `t[index]`: [`select`](Self::select) on dimension 0.
    ///
    /// # Errors
    /// As [`select`](Self::select).
    pub fn index(&self, index: isize) -> Result<Tensor> {
        self.select(0, index)
    }

    /// Python slicing `t[:, start:stop:step]` on `dim`; `None` bounds are open.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::ZeroArgument`] for step 0.
    pub fn slice(
        &self,
        dim: isize,
        start: Option<isize>,
        stop: Option<isize>,
        step: usize,
    ) -> Result<Tensor> {
        self.view_with("SliceBackward0", move |l| l.slice(dim, start, stop, step))
    }

    /// Swaps two dimensions.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`].
    pub fn transpose(&self, dim0: isize, dim1: isize) -> Result<Tensor> {
        self.view_with("TransposeBackward0", move |l| l.transpose(dim0, dim1))
    }

    /// Transpose of a tensor of at most 2 dimensions.
    ///
    /// # Errors
    /// [`TensorError::TooManyDims`] for more than 2 dimensions.
    pub fn t(&self) -> Result<Tensor> {
        match self.dim() {
            // Recorded as PyTorch's `TBackward0`, also when nothing moves.
            0 | 1 => self.view_with("TBackward0", |l| Ok(l.clone())),
            2 => self.view_with("TBackward0", |l| l.transpose(0, 1)),
            ndim => Err(Error::Tensor(TensorError::TooManyDims {
                op: "t",
                max: 2,
                ndim,
            })),
        }
    }

    /// Reorders dimensions.
    ///
    /// # Errors
    /// [`TensorError::DimCountMismatch`], [`TensorError::DimOutOfRange`] or [`TensorError::RepeatedDim`]
    /// unless `dims` is a permutation.
    pub fn permute(&self, dims: &[isize]) -> Result<Tensor> {
        let dims = dims.to_vec();
        self.view_with("PermuteBackward0", move |l| l.permute(&dims))
    }

    /// Broadcasts to `sizes` with stride-0 dimensions (-1 keeps a size).
    ///
    /// # Errors
    /// [`TensorError::ExpandIncompatible`], [`TensorError::SizeOverflow`].
    pub fn expand(&self, sizes: &[isize]) -> Result<Tensor> {
        let sizes = sizes.to_vec();
        self.view_with("ExpandBackward0", move |l| l.expand(&sizes))
    }

    /// Removes every size-1 dimension.
    pub fn squeeze(&self) -> Tensor {
        let f: ViewFn = Arc::new(|l: &Layout| Ok(l.squeeze()));
        self.viewed("SqueezeBackward0", self.layout.squeeze(), f, false)
    }

    /// Removes `dim` if its size is 1.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`].
    pub fn squeeze_dim(&self, dim: isize) -> Result<Tensor> {
        self.view_with("SqueezeBackward1", move |l| l.squeeze_dim(dim))
    }

    /// Inserts a size-1 dimension at `dim`.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`].
    pub fn unsqueeze(&self, dim: isize) -> Result<Tensor> {
        self.view_with("UnsqueezeBackward0", move |l| l.unsqueeze(dim))
    }

    /// Merges dimensions `start_dim..=end_dim` (a view when possible, else a copy).
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::DimOrder`].
    pub fn flatten(&self, start_dim: isize, end_dim: isize) -> Result<Tensor> {
        if self.dim() > 0 && self.layout.flatten_shape(start_dim, end_dim)?.len() == self.dim() {
            return Ok(self.clone());
        }
        self.reshape(&self.layout.flatten_shape(start_dim, end_dim)?)
    }

    /// Splits dimension `dim` into `sizes` (one may be -1), as a view.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::ZeroDimTensor`], [`TensorError::ZeroArgument`]
    /// for no sizes, [`TensorError::ShapeMismatch`].
    pub fn unflatten(&self, dim: isize, sizes: &[isize]) -> Result<Tensor> {
        self.view(&self.layout.unflatten_shape(dim, sizes)?)
    }

    /// A view with explicit size, stride and storage offset, checked against the storage.
    ///
    /// # Errors
    /// [`TensorError::StrideLengthMismatch`]; [`StorageError::OutOfStorage`](crate::StorageError::OutOfStorage) when it reaches
    /// past the storage's end.
    pub fn as_strided(
        &self,
        size: &[usize],
        stride: &[usize],
        storage_offset: usize,
    ) -> Result<Tensor> {
        let layout = Layout::new(size, stride, storage_offset)?;
        layout.check_fits(self.element_size(), self.storage.nbytes())?;
        let output = layout.clone();
        Ok(record_view(
            self,
            layout,
            "AsStridedBackward0",
            None,
            false,
            || Backward::AsStrided {
                input: self.layout.clone(),
                output,
            },
        ))
    }

    /// The same bytes read as `dtype` (PyTorch's `view(dtype)`): the last dimension scales
    /// by the ratio of element sizes and must be contiguous when the sizes differ.
    ///
    /// # Errors
    /// [`TensorError::ViewDType`] naming the rule that fails.
    pub fn view_dtype(&self, dtype: DType) -> Result<Tensor> {
        // Not differentiable in PyTorch, even to the same dtype: the view
        // does not require grad.
        if dtype == self.dtype {
            return Ok(self.detach());
        }
        let layout = self.layout.view_dtype(self.element_size(), dtype.size())?;
        Ok(Tensor {
            dtype,
            layout,
            ..self.detach()
        })
    }

    /// The diagonal of `dim1` × `dim2` shifted by `offset`, as the last dimension.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::RepeatedDim`] for identical dims.
    pub fn diagonal(&self, offset: isize, dim1: isize, dim2: isize) -> Result<Tensor> {
        self.view_with("DiagonalBackward0", move |l| l.diagonal(offset, dim1, dim2))
    }

    /// Sliding windows of `size` every `step` along `dim`, as a new last dimension.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::WindowTooLarge`], [`TensorError::ZeroArgument`] for step 0.
    pub fn unfold(&self, dim: isize, size: usize, step: usize) -> Result<Tensor> {
        self.view_with("UnfoldBackward0", move |l| l.unfold(dim, size, step))
    }

    /// Pieces of `split_size` along `dim`.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::ZeroSplitSize`].
    pub fn split(&self, split_size: usize, dim: isize) -> Result<Vec<Tensor>> {
        self.pieces("SplitBackward0", move |l| l.split(split_size, dim))
    }

    /// `chunks` nearly equal pieces along `dim`.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`], [`TensorError::ZeroArgument`] for 0 chunks.
    pub fn chunk(&self, chunks: usize, dim: isize) -> Result<Vec<Tensor>> {
        self.pieces("SplitBackward0", move |l| l.chunk(chunks, dim))
    }

    /// Every slice along `dim`, with the dimension removed.
    ///
    /// # Errors
    /// [`TensorError::DimOutOfRange`].
    pub fn unbind(&self, dim: isize) -> Result<Vec<Tensor>> {
        self.pieces("UnbindBackward0", move |l| l.unbind(dim))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::element::Scalar;
    use crate::error::StorageError;

    fn base() -> Tensor {
        Tensor::arange(0.0, 24.0, 1.0, DType::Float32)
            .unwrap()
            .view(&[4, 6])
            .unwrap()
    }

    #[test]
    fn views_share_storage_and_writes() {
        let b = base();
        let views = [
            b.view(&[-1]).unwrap(),
            b.select(0, 1).unwrap(),
            b.slice(1, Some(1), None, 2).unwrap(),
            b.index(2).unwrap(),
            b.t().unwrap(),
            b.diagonal(0, 0, 1).unwrap(),
        ];
        for v in &views {
            assert_eq!(
                v.untyped_storage().data_ptr(),
                b.untyped_storage().data_ptr()
            );
        }
        views[1].set(&[0], 100.0).unwrap();
        assert_eq!(b.get(&[1, 0]).unwrap(), Scalar::Float(100.0));
        assert_eq!(views[4].get(&[0, 1]).unwrap(), Scalar::Float(100.0));
        assert_ne!(views[1].data_ptr(), b.data_ptr());
        assert_eq!(views[1].data_ptr(), b.data_ptr() + 6 * 4);
    }

    #[test]
    fn reshape_copies_only_when_needed() {
        let b = base();
        assert!(b.reshape(&[24]).unwrap().shares_storage_with(&b));
        let t = b.t().unwrap();
        let r = t.reshape(&[24]).unwrap();
        assert!(!r.shares_storage_with(&b));
        assert_eq!(r.to_vec::<f32>().unwrap()[..4], [0.0, 6.0, 12.0, 18.0]);
        assert!(t.view(&[24]).is_err());
        assert!(t.flatten(0, -1).unwrap().is_contiguous());
        assert!(b.flatten(0, 1).unwrap().shares_storage_with(&b));
        assert_eq!(b.unflatten(1, &[2, -1]).unwrap().shape(), &[4, 2, 3]);
    }

    #[test]
    fn different_dtypes_on_one_storage() {
        let f = Tensor::ones(&[2], DType::Float32).unwrap();
        let bytes = f.view_dtype(DType::UInt8).unwrap();
        assert_eq!(
            bytes.to_vec::<u8>().unwrap(),
            vec![0, 0, 128, 63, 0, 0, 128, 63]
        );
        let halves = f.view_dtype(DType::Int16).unwrap();
        assert_eq!(halves.shape(), &[4]);
        halves.set(&[1], 0x4000i64).unwrap();
        assert_eq!(f.get(&[0]).unwrap(), Scalar::Float(2.0));
    }

    #[test]
    fn as_strided_is_bounds_checked() {
        let b = base();
        let d = b.as_strided(&[4], &[7], 0).unwrap();
        assert_eq!(d.to_vec::<f32>().unwrap(), vec![0.0, 7.0, 14.0, 21.0]);
        assert!(matches!(
            b.as_strided(&[4], &[7], 3),
            Err(Error::Storage(StorageError::OutOfStorage { .. }))
        ));
        assert!(b.as_strided(&[2], &[usize::MAX], 0).is_err());
    }

    #[test]
    fn split_chunk_unbind_expand() {
        let b = base();
        assert_eq!(b.split(4, 1).unwrap()[1].shape(), &[4, 2]);
        assert_eq!(b.chunk(3, 0).unwrap().len(), 2);
        let rows = b.unbind(0).unwrap();
        assert_eq!(rows[3].to_vec::<f32>().unwrap()[0], 18.0);
        let e = b.select(0, 0).unwrap().expand(&[3, 6]).unwrap();
        assert_eq!(e.stride(), &[0, 1]);
        assert_eq!(e.get(&[2, 5]).unwrap(), Scalar::Float(5.0));
        let u = b.select(0, 0).unwrap().unfold(0, 3, 3).unwrap();
        assert_eq!(
            u.to_vec::<f32>().unwrap(),
            vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        );
        assert_eq!(b.unsqueeze(0).unwrap().squeeze().shape(), &[4, 6]);
    }
}
