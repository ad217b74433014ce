//! `Tensor`: a storage, a dtype and a layout (shape, stride, storage offset).
//!
//! A tensor owns nothing but a handle to its storage. Views ([`crate::view`])
//! make new tensors over the same storage; writes through any of them are
//! seen by all. Cloning a `Tensor` (Rust's `Clone`) makes another handle to
//! the same tensor — same storage, layout and, when it requires grad, the same
//! gradient and history, like Python's `b = a` — while [`Tensor::detach`]
//! drops the history and [`Tensor::deep_clone`] copies the data (PyTorch's
//! `t.clone()`).
//!
//! NOTE [tensor identity]: a `Tensor` is one tensor *object* in PyTorch's
//! sense, the thing Python's `is` compares. Every constructor, view and
//! operation makes a new object; Rust's `Clone` makes another handle to the
//! same one. [`Tensor::is_same`] holds when two handles come from one object
//! *and* still agree on storage, dtype, layout and autograd state: a handle
//! changed since in place (`set_`, `requires_grad_`) is another object, since
//! the other handles do not see the change as Python's would. The autograd
//! state is the object's, shared by its handles: an in-place write that makes
//! a tensor start requiring grad (`acc.add_(x)`) is seen through every
//! handle, as through Python's one object. No two objects share a state
//! (each constructor, view and operation makes its own, or none until a
//! clone or an identity query makes it), so the state is the object's
//! identity, and a handle holds no other (a word less a tensor). Saving keys
//! on it: a tensor reached twice is pickled once and fetched from the memo the
//! second time, so PyTorch loads `{"a": t, "b": t}` with `a is b`; loading
//! keeps it, as the unpickler's memo hands out clones of one handle.

use crate::error::{StorageError, TensorError};

use crate::autograd::Autograd;
use crate::element::{self, Element, Scalar};
use crate::layout::{self, Layout};
use crate::overflow::{check_value, Path};
use crate::{DType, Device, Error, Result, UntypedStorage};

/// Why `arange(start, end, step)` gives no sequence, in PyTorch's words
/// (the message of [`TensorError::ArangeRange`]).
pub(crate) fn arange_problem(start: f64, end: f64, step: f64) -> String {
    if step == 0.0 {
        "arange: step must be nonzero".to_owned()
    } else if !(start.is_finite() && end.is_finite() && step.is_finite()) {
        format!("arange: unsupported range: {start} -> {end} (step {step})")
    } else if (step > 0.0 && end < start) || (step < 0.0 && end > start) {
        format!("arange: upper bound and larger bound inconsistent with step sign (start {start}, end {end}, step {step})")
    } else {
        format!("arange: invalid size, possible overflow? ({start} to {end} by {step})")
    }
}

/// Which tensor object a [`Tensor`] handle belongs to (NOTE [tensor identity]):
/// the address of the object's autograd state, which its handles share. It
/// names the object while any of its handles lives (the writer keeps one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TensorId(usize);

/// A strided view of typed elements over an [`UntypedStorage`].
#[derive(Clone)]
pub struct Tensor {
    pub(crate) storage: UntypedStorage,
    pub(crate) dtype: DType,
    pub(crate) layout: Layout,
    /// Its autograd state: whether it requires grad, its gradient and
    /// history, and, for a view, its base; shared by the object's handles,
    /// and so the object's identity (NOTE [tensor identity]).
    pub(crate) autograd: Autograd,
}

// A checkpoint holds one a tensor: 104 bytes, so that a loaded tensor's
// object (`TensorObject`, in an `Arc`) is an allocation of 144 bytes.
#[cfg(all(target_pointer_width = "64", not(loom)))]
const _: () = assert!(std::mem::size_of::<Tensor>() <= 104);

impl Tensor {
    /// A tensor over `storage` whose layout is checked by the caller before anyone
    /// reads it (loaders check every tensor once the object graph is complete, so
    /// that an error can name the tensor's path). Data access re-checks anyway.
    pub(crate) fn from_parts_unchecked(
        storage: UntypedStorage,
        dtype: DType,
        layout: Layout,
    ) -> Tensor {
        Tensor {
            storage,
            dtype,
            layout,
            autograd: Autograd::none(),
        }
    }

    /// A tensor over `storage` with the given dtype and layout, checked to fit.
    ///
    /// # Errors
    /// [`StorageError::OutOfStorage`] when the layout reaches past the storage's end.
    pub fn from_parts(storage: UntypedStorage, dtype: DType, layout: Layout) -> Result<Tensor> {
        layout.check_fits(dtype.size(), storage.nbytes())?;
        Ok(Tensor {
            storage,
            dtype,
            layout,
            autograd: Autograd::none(),
        })
    }

    /// The row-major layout of `shape` and its size in bytes, checked for overflow.
    pub(crate) fn contiguous_bytes(shape: &[usize], dtype: DType) -> Result<(Layout, usize)> {
        let layout = Layout::contiguous(shape)?;
        let nbytes = layout.numel().checked_mul(dtype.size()).ok_or_else(|| {
            Error::Tensor(TensorError::SizeOverflow {
                what: "tensor bytes",
                detail: format!("shape {shape:?} of {dtype}"),
            })
        })?;
        Ok((layout, nbytes))
    }

    /// A new contiguous tensor of zeros on `device` (no bytes on meta).
    ///
    /// # Errors
    /// [`TensorError::SizeOverflow`] or an allocation failure.
    pub fn zeros_on(shape: &[usize], dtype: DType, device: Device) -> Result<Tensor> {
        let (layout, nbytes) = Self::contiguous_bytes(shape, dtype)?;
        let storage = UntypedStorage::new_on(nbytes, device)?;
        Ok(Tensor {
            storage,
            dtype,
            layout,
            autograd: Autograd::none(),
        })
    }

    /// `torch.zeros(shape, dtype=dtype)`.
    ///
    /// # Errors
    /// As [`zeros_on`](Self::zeros_on).
    pub fn zeros(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Self::zeros_on(shape, dtype, Device::CPU)
    }

    /// `torch.empty(shape, dtype=dtype)`; stowage's memory is always initialised (to zero).
    ///
    /// # Errors
    /// As [`zeros_on`](Self::zeros_on).
    pub fn empty(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Self::zeros(shape, dtype)
    }

    /// `torch.full(shape, value, dtype=dtype)`.
    ///
    /// # Errors
    /// As [`zeros_on`](Self::zeros_on); [`TensorError::DTypeUnsupported`] for dtypes without
    /// values; [`TensorError::ValueOverflow`] for a value out of the dtype's range, as
    /// [`fill_`](Self::fill_).
    pub fn full(shape: &[usize], value: impl Into<Scalar>, dtype: DType) -> Result<Tensor> {
        let t = Self::zeros(shape, dtype)?;
        t.fill_(value)?;
        Ok(t)
    }

    /// `torch.ones(shape, dtype=dtype)`.
    ///
    /// # Errors
    /// As [`full`](Self::full).
    pub fn ones(shape: &[usize], dtype: DType) -> Result<Tensor> {
        Self::full(shape, Scalar::Int(1), dtype)
    }

    /// `torch.zeros_like(t)`: zeros of `other`'s shape, dtype and device, laid
    /// out as PyTorch's `preserve_format` lays them out: `other`'s own strides
    /// when it is non-overlapping and dense (`zeros_like(m.t())` is
    /// transposed too), else dense strides in the order of `other`'s
    /// ([`Layout::preserve_format_strides`]).
    ///
    /// # Errors
    /// As [`zeros_on`](Self::zeros_on).
    pub fn zeros_like(other: &Tensor) -> Result<Tensor> {
        let layout = Layout::new(other.shape(), &other.layout.preserve_format_strides(), 0)?;
        let nbytes = layout
            .storage_elements()?
            .checked_mul(other.dtype.size())
            .ok_or_else(|| {
                Error::Tensor(TensorError::SizeOverflow {
                    what: "tensor bytes",
                    detail: format!("shape {:?} of {}", other.shape(), other.dtype),
                })
            })?;
        let storage = UntypedStorage::new_on(nbytes, other.device())?;
        Ok(Tensor {
            storage,
            dtype: other.dtype,
            layout,
            autograd: Autograd::none(),
        })
    }

    /// `torch.empty_like(t)`: as [`zeros_like`](Self::zeros_like) (stowage's
    /// memory is always initialised).
    ///
    /// # Errors
    /// As [`zeros_on`](Self::zeros_on).
    pub fn empty_like(other: &Tensor) -> Result<Tensor> {
        Self::zeros_like(other)
    }

    /// `torch.ones_like(t)`: ones, laid out as [`zeros_like`](Self::zeros_like).
    ///
    /// # Errors
    /// As [`zeros_on`](Self::zeros_on); [`TensorError::DTypeUnsupported`] for dtypes
    /// without values; [`StorageError::NoData`] on meta.
    pub fn ones_like(other: &Tensor) -> Result<Tensor> {
        let t = Self::zeros_like(other)?;
        if t.has_data() {
            t.fill_(Scalar::Int(1))?;
        }
        Ok(t)
    }

    /// `torch.arange(start, end, step, dtype=dtype)`: `ceil((end - start) / step)` values.
    ///
    /// # Errors
    /// [`TensorError::ArangeRange`] for a zero step, bounds that are not finite, a range
    /// of the wrong sign or too many values.
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType) -> Result<Tensor> {
        let n = ((end - start) / step).ceil();
        let finite = start.is_finite() && end.is_finite() && step.is_finite();
        let inconsistent = (step > 0.0 && end < start) || (step < 0.0 && end > start);
        if step == 0.0 || !finite || inconsistent || n > usize::MAX as f64 {
            return Err(Error::Tensor(TensorError::ArangeRange { start, end, step }));
        }
        let t = Self::zeros(&[n as usize], dtype)?;
        let es = dtype.size();
        t.storage.with_bytes_mut("arange", |b| {
            for (i, chunk) in b.chunks_exact_mut(es).enumerate() {
                element::write(dtype, Scalar::Float(start + i as f64 * step), chunk)?;
            }
            Ok::<_, Error>(())
        })??;
        Ok(t)
    }

    /// A 1-D tensor holding a copy of `values`, with `T`'s dtype (one copy of
    /// the bytes, into a newly allocated storage).
    ///
    /// # Errors
    /// Allocation failure.
    pub fn from_slice<T: Element>(values: &[T]) -> Result<Tensor> {
        let storage = UntypedStorage::from_bytes(bytemuck::cast_slice(values))?;
        let layout = Layout::contiguous(&[values.len()])?;
        Self::from_parts(storage, T::DTYPE, layout)
    }

    /// A tensor of `shape` holding `values` in row-major order, with `T`'s
    /// dtype. Nothing is copied: the tensor's storage takes over the vector's
    /// allocation (its [`data_ptr`](Self::data_ptr) is the vector's pointer)
    /// and frees it when the last view of it is dropped. Such a storage is
    /// aligned for `T`, not to [`storage::ALIGN`](crate::storage::ALIGN).
    ///
    /// ```
    /// # fn main() -> stowage::Result<()> {
    /// let v = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    /// let ptr = v.as_ptr() as usize;
    /// let t = stowage::Tensor::from_vec(v, &[2, 3])?;
    /// assert_eq!(t.data_ptr(), ptr);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`TensorError::ShapeMismatch`] when `shape` does not hold `values.len()` elements.
    pub fn from_vec<T: Element>(values: Vec<T>, shape: &[usize]) -> Result<Tensor> {
        let numel = layout::numel_of(shape)?;
        if numel != values.len() {
            return Err(Error::Tensor(TensorError::ShapeMismatch {
                shape: shape.iter().map(|&s| s as isize).collect(),
                numel: values.len(),
            }));
        }
        let layout = Layout::contiguous(shape)?;
        Self::from_parts(UntypedStorage::from_vec(values), T::DTYPE, layout)
    }

    /// A 0-dim tensor holding `value`.
    ///
    /// # Errors
    /// Allocation failure.
    pub fn scalar<T: Element>(value: T) -> Result<Tensor> {
        Self::from_vec(vec![value], &[])
    }

    /// The storage this tensor views (never a copy; never warns).
    pub fn untyped_storage(&self) -> &UntypedStorage {
        &self.storage
    }
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The layout (shape, stride, offset).
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
    /// Sizes of each dimension.
    pub fn shape(&self) -> &[usize] {
        self.layout.shape()
    }
    /// Sizes of each dimension (PyTorch's `size()`).
    pub fn size(&self) -> &[usize] {
        self.layout.shape()
    }
    /// Strides in elements.
    pub fn stride(&self) -> &[usize] {
        self.layout.stride()
    }
    /// Offset of the first element in the storage, in elements.
    pub fn storage_offset(&self) -> usize {
        self.layout.offset()
    }
    /// Number of dimensions.
    pub fn dim(&self) -> usize {
        self.layout.ndim()
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }
    /// Bytes per element.
    pub fn element_size(&self) -> usize {
        self.dtype.size()
    }
    /// `numel() * element_size()`: the bytes of the elements, not of the storage.
    pub fn nbytes(&self) -> usize {
        self.numel().saturating_mul(self.element_size())
    }
    /// True when the elements are laid out row-major without gaps.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }
    /// The device of the storage.
    pub fn device(&self) -> Device {
        self.storage.device()
    }
    /// True on the meta device.
    pub fn is_meta(&self) -> bool {
        self.storage.is_meta()
    }
    /// The address of the first element: the storage's `data_ptr` plus
    /// `storage_offset * element_size` (0 when the storage has no bytes).
    pub fn data_ptr(&self) -> usize {
        match self.storage.data_ptr() {
            0 => 0,
            p => p.wrapping_add(self.storage_offset().wrapping_mul(self.element_size())),
        }
    }
    /// Python's `a is b`: whether `self` and `other` are handles to one tensor
    /// object (clones of one `Tensor`, or one pickled object loaded twice through
    /// the pickle's memo) that still agree on storage, dtype, layout and
    /// gradient state (NOTE [tensor identity]). Views and copies are other
    /// objects, even over the same bytes; see
    /// [`shares_storage_with`](Self::shares_storage_with).
    pub fn is_same(&self, other: &Tensor) -> bool {
        self.storage.is_same(&other.storage)
            && self.dtype == other.dtype
            && self.layout == other.layout
            && self.autograd.same(&other.autograd)
    }

    /// The identity saving keys on (NOTE [tensor identity]); see [`is_same`](Self::is_same).
    pub(crate) fn id(&self) -> TensorId {
        TensorId(self.autograd.identity())
    }

    /// True when the two tensors view the same storage.
    pub fn shares_storage_with(&self, other: &Tensor) -> bool {
        self.storage.is_same(&other.storage)
    }

    /// Puts this tensor onto `storage` with a new offset, shape and stride (PyTorch's `set_`).
    ///
    /// # Errors
    /// [`StorageError::OutOfStorage`] when the layout reaches past the storage's end;
    /// [`TensorError::StrideLengthMismatch`] for mismatched shape and stride lengths;
    /// [`TensorError::InPlaceRequiresGrad`] while recording gradients for this tensor.
    pub fn set_(
        &mut self,
        storage: &UntypedStorage,
        storage_offset: usize,
        size: &[usize],
        stride: &[usize],
    ) -> Result<&mut Self> {
        self.check_inplace("set_")?;
        let layout = Layout::new(size, stride, storage_offset)?;
        layout.check_fits(self.dtype.size(), storage.nbytes())?;
        self.storage = storage.clone();
        self.layout = layout;
        if !self.requires_grad() {
            // Another object now (NOTE [tensor identity]), and no view of
            // its old base: a write that starts history here is its own.
            self.autograd = Autograd::none();
        }
        Ok(self)
    }

    /// The element at `index` (one index per dimension, negatives count from the end).
    ///
    /// # Errors
    /// [`TensorError::DimCountMismatch`] for the wrong number of indices, [`TensorError::IndexOutOfRange`],
    /// [`StorageError::NoData`] on meta.
    pub fn get(&self, index: &[isize]) -> Result<Scalar> {
        let off = self.element_offset(index)? * self.element_size();
        let es = self.element_size();
        self.storage.with_bytes("get", |b| {
            self.layout.check_fits(es, b.len())?;
            element::read(self.dtype, &b[off..off + es])
        })?
    }

    /// Writes `value` (cast to the dtype) at `index`, as PyTorch's `t[i, j] = v`;
    /// every view of the storage sees it. As there, integers, `float32` and
    /// complex elements refuse a value out of their range, while `float16`,
    /// `bfloat16` and the 8-bit floats round it (to infinity).
    ///
    /// # Errors
    /// As [`get`](Self::get); [`TensorError::ValueOverflow`] for a value out of
    /// range (`300` into `uint8`); [`TensorError::InPlaceRequiresGrad`] while
    /// recording gradients for this tensor (see [`crate::autograd`]).
    pub fn set(&self, index: &[isize], value: impl Into<Scalar>) -> Result<()> {
        self.check_inplace("set")?;
        let off = self.element_offset(index)? * self.element_size();
        let es = self.element_size();
        let v = value.into();
        check_value(self.dtype, v, Path::Set)?;
        self.storage.with_bytes_mut("set", |b| {
            self.layout.check_fits(es, b.len())?;
            element::write(self.dtype, v, &mut b[off..off + es])
        })??;
        self.storage.bump_version();
        Ok(())
    }

    fn element_offset(&self, index: &[isize]) -> Result<usize> {
        if index.len() != self.dim() {
            return Err(Error::Tensor(TensorError::DimCountMismatch {
                op: "index",
                what: "indices",
                ndim: self.dim(),
                given: index.len(),
            }));
        }
        let mut off = self.storage_offset();
        for (d, (&i, (&size, &stride))) in index
            .iter()
            .zip(self.shape().iter().zip(self.stride()))
            .enumerate()
        {
            off += layout::wrap_index(i, d, size)? * stride;
        }
        Ok(off)
    }

    /// [`StorageError::NoData`] for `op` unless the storage holds bytes.
    pub(crate) fn check_data(&self, op: &'static str) -> Result<()> {
        if !self.has_data() {
            return Err(Error::Storage(StorageError::NoData {
                op,
                device: self.device(),
            }));
        }
        Ok(())
    }

    /// The value of a one-element tensor.
    ///
    /// # Errors
    /// [`TensorError::NotAScalar`] unless there is exactly one element; [`StorageError::NoData`] on meta.
    pub fn item(&self) -> Result<Scalar> {
        if self.numel() != 1 {
            return Err(Error::Tensor(TensorError::NotAScalar {
                numel: self.numel(),
            }));
        }
        let off = self.layout.offsets().next().unwrap_or(0) * self.element_size();
        let es = self.element_size();
        self.storage.with_bytes("item", |b| {
            self.layout.check_fits(es, b.len())?;
            element::read(self.dtype, &b[off..off + es])
        })?
    }

    /// Every element as a [`Scalar`], in row-major order (one element at a
    /// time: [`to_vec`](Self::to_vec) is the fast typed read).
    ///
    /// # Errors
    /// As [`to_vec`](Self::to_vec).
    pub fn scalars(&self) -> Result<Vec<Scalar>> {
        let es = self.element_size();
        self.storage.with_bytes("tolist", |b| {
            self.layout.check_fits(es, b.len())?;
            self.layout
                .offsets()
                .map(|o| element::read(self.dtype, &b[o * es..(o + 1) * es]))
                .collect()
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{StorageError, TensorError};

    #[test]
    fn identity_is_the_handle_while_the_handles_agree() {
        let t = Tensor::arange(0.0, 6.0, 1.0, DType::Float32).unwrap();
        let mut same = t.clone();
        assert!(t.is_same(&same) && same.is_same(&t));
        // Alike but other objects, as `t.view(6) is t` and `t.detach() is t` are false.
        assert!(!t.is_same(&t.reshape(&[6]).unwrap()));
        assert!(!t.is_same(&t.detach()));
        assert!(
            !t.is_same(&Tensor::from_parts(t.storage.clone(), t.dtype, t.layout.clone()).unwrap())
        );
        // A clone changed in place no longer matches the others.
        same.set_(&t.storage.clone(), 1, &[5], &[1]).unwrap();
        assert!(!t.is_same(&same));
        let mut grad = t.clone();
        grad.requires_grad_(true).unwrap();
        assert!(!t.is_same(&grad));
        assert!(grad.is_same(&grad.clone()));
    }

    #[test]
    fn ones_storage_is_twelve_bytes_of_float_one() {
        let t = Tensor::ones(&[3], DType::Float32).unwrap();
        assert_eq!(t.untyped_storage().nbytes(), 12);
        assert_eq!(
            t.untyped_storage().tolist().unwrap(),
            [0, 0, 128, 63].repeat(3)
        );
    }

    #[test]
    fn set_moves_onto_another_storage() {
        let mut t = Tensor::ones(&[3], DType::Float32).unwrap();
        let s2 = t.untyped_storage().deep_clone().unwrap();
        s2.fill_(0).unwrap();
        t.set_(&s2, 0, &[3], &[1]).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![0.0; 3]);
        assert!(t.untyped_storage().is_same(&s2));
        assert!(matches!(
            t.set_(&s2, 1, &[3], &[1]),
            Err(Error::Storage(StorageError::OutOfStorage {
                needed: 16,
                nbytes: 12,
                ..
            }))
        ));
    }

    #[test]
    fn constructors() {
        let a = Tensor::arange(0.0, 5.0, 2.0, DType::Int64).unwrap();
        assert_eq!(a.to_vec::<i64>().unwrap(), vec![0, 2, 4]);
        let f = Tensor::full(&[2, 2], 1.5, DType::Float16).unwrap();
        assert_eq!(f.to_vec::<f32>().unwrap(), vec![1.5; 4]);
        let v = Tensor::from_vec(vec![1u8, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
        assert_eq!(v.get(&[1, -1]).unwrap(), Scalar::Int(6));
        assert!(Tensor::from_vec(vec![1u8, 2], &[3]).is_err());
        let z = Tensor::zeros_like(&v).unwrap();
        assert_eq!((z.shape(), z.dtype()), (&[2, 3][..], DType::UInt8));
        assert_eq!(
            Tensor::scalar(7i32).unwrap().item().unwrap(),
            Scalar::Int(7)
        );
        assert!(matches!(
            v.item(),
            Err(Error::Tensor(TensorError::NotAScalar { numel: 6 }))
        ));
    }

    /// `t[i] = v` as PyTorch: integers and float32 refuse out-of-range values,
    /// float16 rounds them to infinity, negative integers wrap into uint8.
    #[test]
    fn set_checks_the_value_range() {
        let u = Tensor::zeros(&[2], DType::UInt8).unwrap();
        let e = u.set(&[0], 300i64).unwrap_err();
        assert_eq!(
            e.to_string(),
            "value cannot be converted to type uint8_t without overflow"
        );
        u.set(&[0], -1i64).unwrap();
        assert_eq!(u.to_vec::<u8>().unwrap(), vec![255, 0]);
        let f = Tensor::zeros(&[2], DType::Float32).unwrap();
        assert!(matches!(
            f.set(&[1], 1e300),
            Err(Error::Tensor(TensorError::ValueOverflow {
                type_name: "float"
            }))
        ));
        let h = Tensor::zeros(&[2], DType::Float16).unwrap();
        h.set(&[0], 1e6).unwrap();
        assert_eq!(h.to_vec::<f32>().unwrap(), vec![f32::INFINITY, 0.0]);
        let i = Tensor::zeros(&[2], DType::Int32).unwrap();
        i.set(&[0], 2.5).unwrap();
        assert_eq!(i.to_vec::<i32>().unwrap(), vec![2, 0]);
        let c = |re, im| Scalar::Complex(num_complex::Complex64::new(re, im));
        assert!(matches!(
            f.set(&[0], c(1.0, 1.0)),
            Err(Error::Tensor(TensorError::ValueOverflow {
                type_name: "float"
            }))
        ));
        f.set(&[0], c(1.0, 0.0)).unwrap();
        assert!(matches!(
            i.set(&[0], f64::NAN),
            Err(Error::Tensor(TensorError::ValueOverflow {
                type_name: "int"
            }))
        ));
        let bf = Tensor::zeros(&[1], DType::BFloat16).unwrap();
        bf.set(&[0], 1e300).unwrap();
        assert_eq!(bf.to_vec::<f32>().unwrap(), vec![f32::INFINITY]);
        let cf = Tensor::zeros(&[1], DType::Complex64).unwrap();
        assert_eq!(
            cf.set(&[0], 1e300).unwrap_err().to_string(),
            "value cannot be converted to type c10::complex<float> without overflow"
        );
        let e4 = Tensor::zeros(&[1], DType::Float8E4M3Fn).unwrap();
        e4.set(&[0], 1e6).unwrap();
        assert_eq!(e4.to_vec::<f32>().unwrap(), vec![448.0]);
        // An element of an expanded tensor is written once, seen everywhere.
        let wide = Tensor::zeros(&[1], DType::Float32)
            .unwrap()
            .expand(&[3, 2])
            .unwrap();
        wide.set(&[0, 1], 5.0).unwrap();
        assert_eq!(wide.to_vec::<f32>().unwrap(), vec![5.0; 6]);
    }

    /// `*_like` keep a dense tensor's strides, as PyTorch's `preserve_format`
    /// (`torch.zeros_like(torch.arange(12.).view(3, 4).t()).stride() == (1, 4)`).
    #[test]
    fn like_constructors_preserve_the_format() {
        let m = Tensor::arange(0.0, 12.0, 1.0, DType::Float32)
            .unwrap()
            .view(&[3, 4])
            .unwrap();
        let t = m.t().unwrap();
        for like in [
            Tensor::zeros_like(&t).unwrap(),
            Tensor::empty_like(&t).unwrap(),
            Tensor::ones_like(&t).unwrap(),
        ] {
            assert_eq!((like.shape(), like.stride()), (&[4, 3][..], &[1, 4][..]));
            assert_eq!(like.untyped_storage().nbytes(), 48);
            assert!(!like.shares_storage_with(&t));
        }
        assert_eq!(
            Tensor::ones_like(&t).unwrap().to_vec::<f32>().unwrap(),
            vec![1.0; 12]
        );
        // Not dense: dense strides in the input's order.
        let stepped = m.slice(1, None, None, 2).unwrap();
        assert_eq!(Tensor::zeros_like(&stepped).unwrap().stride(), &[2, 1]);
        let wide = m
            .select(0, 0)
            .unwrap()
            .unsqueeze(0)
            .unwrap()
            .expand(&[3, 4])
            .unwrap();
        assert_eq!(Tensor::ones_like(&wide).unwrap().stride(), &[4, 1]);
        assert_eq!(
            Tensor::ones_like(&wide.t().unwrap()).unwrap().stride(),
            &[3, 1]
        );
        let meta = Tensor::zeros_on(&[2, 3], DType::Float32, Device::META).unwrap();
        let ml = Tensor::ones_like(&meta.t().unwrap()).unwrap();
        assert!(ml.is_meta() && ml.stride() == [1, 3]);
    }

    #[test]
    fn meta_tensors_have_shape_but_no_data() {
        let m = Tensor::zeros_on(&[2, 3], DType::Float32, Device::META).unwrap();
        assert_eq!(m.untyped_storage().nbytes(), 24);
        assert!(matches!(
            m.get(&[0, 0]),
            Err(Error::Storage(StorageError::NoData { .. }))
        ));
        assert!(m.to_vec::<f32>().is_err());
        assert_eq!(m.data_ptr(), 0);
    }
}
