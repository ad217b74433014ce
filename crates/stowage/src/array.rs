//! [`ndarray`] interop (cargo feature `ndarray`): zero-copy views of any
//! strided tensor, owned arrays, and tensors that keep an array's buffer.
//!
//! | from | to | copies |
//! | --- | --- | --- |
//! | `&Tensor` | [`ArrayViewD`] through [`Tensor::as_array_view`] | nothing |
//! | `&Tensor` | [`ArrayViewMutD`] through [`Tensor::as_array_view_mut`] | nothing |
//! | `&Tensor` | [`ArrayD`] by [`Tensor::to_ndarray`] | one (converting the dtype if asked) |
//! | [`Array`] | [`Tensor`] by `Tensor::try_from` | nothing when every stride is non-negative, else one |
//!
//! A view borrows a guard that holds the storage's lock (the shared one for
//! [`ArrayRead`], the exclusive one for [`ArrayWrite`]), as
//! [`Tensor::read`] does, so it needs no `unsafe` and no other view can
//! write the elements while it lives:
//!
//! ```
//! # fn main() -> stowage::Result<()> {
//! use stowage::{DType, Tensor};
//! let t = Tensor::arange(0.0, 6.0, 1.0, DType::Float32)?.view(&[2, 3])?;
//! let tt = t.t()?;
//! let guard = tt.as_array_view::<f32>()?; // holds the lock, borrows `tt`
//! let view = guard.view(); // ndarray::ArrayViewD<'_, f32>, borrowing `guard`
//! assert_eq!(view.shape(), &[3, 2]);
//! assert_eq!(view.strides(), &[1, 3]);
//! assert_eq!(view[[2, 1]], 5.0);
//! # Ok(()) }
//! ```
//!
//! Every strided layout has an immutable view: PyTorch's strides are never
//! negative, and ndarray (0.17) accepts read-only views whose elements
//! overlap, so an expanded tensor's zero strides stay zero strides. A mutable
//! view of a tensor whose elements overlap (an expanded dimension, an
//! overlapping `as_strided`) would alias itself, which ndarray refuses;
//! [`Tensor::as_array_view_mut`] then returns [`StorageError::OverlappingElements`].
//!
//! Element types: those of [`Element`] that are plain old data: `f64`,
//! `f32`, [`half::f16`], [`half::bf16`], the integers and
//! [`num_complex::Complex32`]/[`num_complex::Complex64`]. `bool` has no view
//! (a byte of a bool storage may hold other values than 0 and 1); `to_ndarray`
//! and `try_from` accept it.
//!
//! Other array libraries take a contiguous slice and a shape. For candle or
//! burn, read the elements with [`Tensor::read`] (contiguous first if needed)
//! and build their tensor from the slice:
//!
//! ```text
//! let t = t.contiguous()?;
//! let data = t.read::<f32>()?;
//! // candle: candle_core::Tensor::from_slice(&data, t.shape(), &candle_core::Device::Cpu)?
//! // burn:   burn::tensor::TensorData::new(data.to_vec(), t.shape().to_vec())
//! //         then Tensor::<B, D>::from_data(tensor_data, &device)
//! ```

use crate::error::{StorageError, TensorError};
use std::marker::PhantomData;
use std::ops::Range;

use bytemuck::Pod;
use ndarray::{Array, ArrayD, ArrayView, ArrayViewD, ArrayViewMut, ArrayViewMutD, Dimension};
use ndarray::{ErrorKind, IxDyn, ShapeBuilder, ShapeError, StrideShape};

use crate::element::Element;
use crate::layout::{contiguous_strides, Layout};
use crate::storage::{BytesMut, BytesRef};
use crate::{Error, Result, Tensor, UntypedStorage};

/// Shared access to a tensor's elements as an [`ArrayViewD`]
/// ([`Tensor::as_array_view`]); holds the storage's shared lock while it lives.
pub struct ArrayRead<'a, T> {
    bytes: BytesRef<'a>,
    range: Range<usize>,
    shape: StrideShape<IxDyn>,
    _element: PhantomData<&'a [T]>,
}

impl<T: Element + Pod> ArrayRead<'_, T> {
    /// The view: the tensor's shape and strides (in elements) over its
    /// storage's bytes, borrowing this guard.
    ///
    /// # Panics
    /// Never: [`Tensor::as_array_view`] built this view once already, from
    /// the same bytes, which the lock keeps unchanged.
    pub fn view(&self) -> ArrayViewD<'_, T> {
        ArrayView::from_shape(self.shape.clone(), elements(&self.bytes, &self.range))
            .expect("checked by as_array_view")
    }
}

/// Exclusive access to a tensor's elements as an [`ArrayViewMutD`]
/// ([`Tensor::as_array_view_mut`]); holds the storage's exclusive lock while
/// it lives. Every view of the storage sees the writes.
pub struct ArrayWrite<'a, T> {
    bytes: BytesMut<'a>,
    range: Range<usize>,
    shape: StrideShape<IxDyn>,
    _element: PhantomData<&'a mut [T]>,
}

impl<T: Element + Pod> ArrayWrite<'_, T> {
    /// A read-only view, borrowing this guard.
    ///
    /// # Panics
    /// Never, as for [`ArrayRead::view`].
    pub fn view(&self) -> ArrayViewD<'_, T> {
        ArrayView::from_shape(self.shape.clone(), elements(&self.bytes, &self.range))
            .expect("checked by as_array_view_mut")
    }

    /// The mutable view, borrowing this guard mutably.
    ///
    /// # Panics
    /// Never: [`Tensor::as_array_view_mut`] built this view once already.
    pub fn view_mut(&mut self) -> ArrayViewMutD<'_, T> {
        let shape = self.shape.clone();
        ArrayViewMut::from_shape(shape, elements_mut(&mut self.bytes, &self.range))
            .expect("checked by as_array_view_mut")
    }
}

/// The elements in `range` of `bytes` (checked to be aligned for `T`).
fn elements<'b, T: Pod>(bytes: &'b [u8], range: &Range<usize>) -> &'b [T] {
    if range.is_empty() {
        return &[];
    }
    bytemuck::cast_slice(&bytes[range.clone()])
}

fn elements_mut<'b, T: Pod>(bytes: &'b mut [u8], range: &Range<usize>) -> &'b mut [T] {
    if range.is_empty() {
        return &mut [];
    }
    bytemuck::cast_slice_mut(&mut bytes[range.clone()])
}

impl Tensor {
    /// A zero-copy [`ArrayViewD`] of this tensor, whatever its strides, through
    /// a guard that holds the storage's shared lock: call
    /// [`view`](ArrayRead::view) on it. The view's strides are the tensor's,
    /// except that dimensions of size 1 (never stepped) get stride 0, as do
    /// all dimensions of a tensor without elements. See the [module
    /// documentation](crate::array).
    ///
    /// # Errors
    /// [`TensorError::DTypeMismatch`] unless the dtype is `T`'s; [`StorageError::NoData`]
    /// on meta and for fake tensors; [`StorageError::OutOfStorage`] when the storage
    /// shrank below the layout; [`StorageError::Misaligned`] when the elements are
    /// not aligned for `T` (never for storages stowage allocates).
    pub fn as_array_view<T: Element + Pod>(&self) -> Result<ArrayRead<'_, T>> {
        const OP: &str = "as_array_view";
        self.check_typed::<T>(OP, false)?;
        self.check_data(OP)?;
        let bytes = self.storage.bytes()?;
        let range = self.typed_range::<T>(OP, &bytes)?;
        let shape = self.stride_shape()?;
        ArrayView::from_shape(shape.clone(), elements::<T>(&bytes, &range))
            .map_err(|e| self.view_error(OP, &e))?;
        Ok(ArrayRead {
            bytes,
            range,
            shape,
            _element: PhantomData,
        })
    }

    /// A zero-copy [`ArrayViewMutD`] of this tensor, through a guard that holds
    /// the storage's exclusive lock: call [`view_mut`](ArrayWrite::view_mut)
    /// on it. Every view of the storage sees the writes.
    ///
    /// ```
    /// # fn main() -> stowage::Result<()> {
    /// let t = stowage::Tensor::zeros(&[2, 3], stowage::DType::Float64)?;
    /// let tt = t.t()?;
    /// let mut guard = tt.as_array_view_mut::<f64>()?;
    /// guard.view_mut()[[2, 0]] = 1.5;
    /// drop(guard);
    /// assert_eq!(t.to_vec::<f64>()?, [0.0, 0.0, 1.5, 0.0, 0.0, 0.0]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`as_array_view`](Self::as_array_view);
    /// [`StorageError::OverlappingElements`] when elements share memory (an expanded
    /// dimension); [`TensorError::InPlaceRequiresGrad`] while recording gradients
    /// for this tensor.
    pub fn as_array_view_mut<T: Element + Pod>(&self) -> Result<ArrayWrite<'_, T>> {
        const OP: &str = "as_array_view_mut";
        self.check_inplace(OP)?;
        self.check_typed::<T>(OP, false)?;
        self.check_data(OP)?;
        let mut bytes = self.storage.bytes_mut()?;
        let range = self.typed_range::<T>(OP, &bytes)?;
        let shape = self.stride_shape()?;
        ArrayViewMut::from_shape(shape.clone(), elements_mut::<T>(&mut bytes, &range))
            .map_err(|e| self.view_error(OP, &e))?;
        // Write access counts as a write (the view may change any element).
        self.storage.bump_version();
        Ok(ArrayWrite {
            bytes,
            range,
            shape,
            _element: PhantomData,
        })
    }

    /// An owned [`ArrayD`] of the elements converted to `T` (as
    /// [`to_vec`](Self::to_vec) converts), in standard (row-major) layout.
    ///
    /// # Errors
    /// As [`to_vec`](Self::to_vec).
    pub fn to_ndarray<T: Element>(&self) -> Result<ArrayD<T>> {
        let values = self.to_vec::<T>()?;
        let numel = values.len();
        ArrayD::from_shape_vec(IxDyn(self.shape()), values).map_err(|_| {
            Error::Tensor(TensorError::ShapeMismatch {
                shape: self.shape().iter().map(|&s| s as isize).collect(),
                numel,
            })
        })
    }

    /// The shape and strides, in elements, as ndarray takes them. The
    /// strides of dimensions of size 1 are 0 (they are never stepped, and
    /// PyTorch allows any value there), as are all of them without elements.
    fn stride_shape(&self) -> Result<StrideShape<IxDyn>> {
        let empty = self.numel() == 0;
        let strides: Vec<usize> = (self.shape().iter().zip(self.stride()))
            .map(|(&n, &s)| if n <= 1 || empty { 0 } else { s })
            .collect();
        // Strides of dimensions that are stepped lie within the storage, so
        // they fit in `isize`, which ndarray reads them as.
        if strides.iter().any(|&s| isize::try_from(s).is_err()) {
            return Err(Error::Tensor(TensorError::SizeOverflow {
                what: "ndarray strides",
                detail: format!("{:?}", self.stride()),
            }));
        }
        Ok(IxDyn(self.shape()).strides(IxDyn(&strides)))
    }

    /// ndarray's refusal of this tensor's layout, as a stowage error.
    fn view_error(&self, op: &'static str, e: &ShapeError) -> Error {
        if e.kind() == ErrorKind::Unsupported {
            Error::Storage(StorageError::OverlappingElements {
                op,
                shape: self.shape().to_vec(),
                stride: self.stride().to_vec(),
            })
        } else {
            Error::Tensor(TensorError::SizeOverflow {
                what: "ndarray view",
                detail: format!("{e} (shape {:?}, stride {:?})", self.shape(), self.stride()),
            })
        }
    }
}

impl<T: Element, D: Dimension> TryFrom<Array<T, D>> for Tensor {
    type Error = Error;

    /// A tensor over the array's buffer, without a copy, keeping its strides
    /// and offset (as `torch.from_numpy` does): a standard-layout array gives
    /// a contiguous tensor, a Fortran-order one a transposed-looking one. An
    /// array with a negative stride, which PyTorch has no layout for, is
    /// copied once into a contiguous tensor.
    ///
    /// # Errors
    /// [`TensorError::SizeOverflow`] only for layouts no array can have.
    fn try_from(array: Array<T, D>) -> Result<Tensor> {
        let shape = array.shape().to_vec();
        let dense = contiguous_strides(&shape);
        let empty = array.is_empty();
        let strides: Option<Vec<usize>> = (array.strides().iter().zip(&shape).zip(&dense))
            .map(|((&s, &n), &c)| {
                // Size-1 dimensions are never stepped: keep the row-major stride.
                if n <= 1 || empty {
                    Some(c)
                } else {
                    usize::try_from(s).ok()
                }
            })
            .collect();
        let Some(strides) = strides else {
            let values: Vec<T> = array.iter().copied().collect();
            return Tensor::from_vec(values, &shape);
        };
        let (values, offset) = array.into_raw_vec_and_offset();
        let layout = Layout::new(&shape, &strides, offset.unwrap_or(0))?;
        Tensor::from_parts(UntypedStorage::from_vec(values), T::DTYPE, layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{StorageError, TensorError};
    use crate::{DType, Device};
    use half::f16;
    use ndarray::{s, Array2, Array3};
    use num_complex::Complex32;

    fn grid(r: usize, c: usize) -> Tensor {
        Tensor::arange(0.0, (r * c) as f64, 1.0, DType::Float32)
            .unwrap()
            .view(&[r as isize, c as isize])
            .unwrap()
    }

    /// The view's elements, in row-major order, are the tensor's.
    fn same_values(t: &Tensor) {
        let guard = t.as_array_view::<f32>().unwrap();
        let v = guard.view();
        assert_eq!(v.shape(), t.shape());
        let got: Vec<f32> = v.iter().copied().collect();
        let want: Vec<f32> = t
            .scalars()
            .unwrap()
            .iter()
            .map(|s| s.to_f64() as f32)
            .collect();
        assert_eq!(got, want, "{:?} {:?}", t.shape(), t.stride());
    }

    #[test]
    fn views_of_strided_tensors_hold_the_elements() {
        let x = grid(4, 6);
        same_values(&x);
        same_values(&x.t().unwrap());
        same_values(&x.slice(1, Some(1), None, 2).unwrap());
        same_values(&x.narrow(0, 1, 2).unwrap().t().unwrap());
        let expanded = x.select(0, 2).unwrap().expand(&[3, 6]).unwrap();
        assert_eq!(expanded.stride(), &[0, 1]);
        same_values(&expanded);
        assert_eq!(
            expanded.as_array_view::<f32>().unwrap().view().strides(),
            &[0, 1]
        );
        same_values(&x.select(1, 5).unwrap().unsqueeze(1).unwrap());
        same_values(&Tensor::scalar(2.5f32).unwrap());
        same_values(&x.narrow(1, 6, 0).unwrap());
    }

    #[test]
    fn views_check_dtype_and_data() {
        let x = grid(2, 2);
        assert!(matches!(
            x.as_array_view::<f64>(),
            Err(Error::Tensor(TensorError::DTypeMismatch { .. }))
        ));
        let m = x.to_device(Device::META).unwrap();
        assert!(matches!(
            m.as_array_view::<f32>(),
            Err(Error::Storage(StorageError::NoData { .. }))
        ));
    }

    #[test]
    fn mutable_views_write_through_and_refuse_overlap() {
        let x = grid(3, 4);
        {
            let cols = x.slice(1, None, None, 2).unwrap();
            let mut g = cols.as_array_view_mut::<f32>().unwrap();
            g.view_mut().fill(-1.0);
            assert_eq!(g.view().sum(), -6.0);
        }
        assert_eq!(
            x.select(0, 0).unwrap().to_vec::<f32>().unwrap(),
            [-1.0, 1.0, -1.0, 3.0]
        );
        let expanded = x.select(0, 1).unwrap().expand(&[2, 4]).unwrap();
        let refused = expanded.as_array_view_mut::<f32>().err();
        assert!(
            matches!(
                &refused,
                Some(Error::Storage(StorageError::OverlappingElements { shape, stride, .. }))
                    if shape == &[2, 4] && stride == &[0, 1]
            ),
            "{refused:?}"
        );
    }

    #[test]
    fn owned_arrays_round_trip() {
        let a = Array3::from_shape_fn((2, 3, 4), |(i, j, k)| (i * 100 + j * 10 + k) as i32);
        let owned = a.clone().into_dyn();
        let ptr = owned.as_ptr() as usize;
        let t = Tensor::try_from(owned).unwrap();
        assert_eq!((t.data_ptr(), t.dtype()), (ptr, DType::Int32));
        assert!(t.is_contiguous());
        assert_eq!(t.to_ndarray::<i32>().unwrap(), a.clone().into_dyn());
        // Fortran order keeps its buffer and strides.
        let f = Array2::from_shape_vec((2, 3).f(), vec![1.0f64, 2., 3., 4., 5., 6.]).unwrap();
        let tf = Tensor::try_from(f.clone()).unwrap();
        assert_eq!(tf.stride(), &[1, 2]);
        assert_eq!(tf.to_ndarray::<f64>().unwrap(), f.clone().into_dyn());
        // A sliced owned array keeps its buffer and offset.
        let sliced = a.slice_move(s![1.., 1.., ..]);
        let ts = Tensor::try_from(sliced.clone()).unwrap();
        assert_eq!(ts.storage_offset(), 16);
        assert_eq!(ts.to_ndarray::<i32>().unwrap(), sliced.into_dyn());
        // A negative stride is copied.
        let mut rev = Array2::from_shape_vec((2, 2), vec![1u8, 2, 3, 4]).unwrap();
        rev.invert_axis(ndarray::Axis(0));
        let tr = Tensor::try_from(rev).unwrap();
        assert_eq!(tr.to_vec::<u8>().unwrap(), [3, 4, 1, 2]);
        let b = Tensor::try_from(ndarray::arr1(&[true, false])).unwrap();
        assert_eq!(
            b.to_ndarray::<bool>().unwrap(),
            ndarray::arr1(&[true, false]).into_dyn()
        );
        // Conversions follow to_vec.
        let h = grid(2, 2).to_dtype(DType::Float16).unwrap();
        assert_eq!(h.to_ndarray::<f32>().unwrap()[[1, 1]], 3.0);
        let hv = h.as_array_view::<f16>().unwrap();
        assert_eq!(hv.view()[[1, 0]], f16::from_f32(2.0));
        let c = Tensor::from_slice(&[Complex32::new(1.0, 2.0)]).unwrap();
        assert_eq!(c.as_array_view::<Complex32>().unwrap().view()[[0]].im, 2.0);
    }
}
