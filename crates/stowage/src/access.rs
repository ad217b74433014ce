//! Typed access to a tensor's elements: [`Tensor::to_vec`] at memory speed,
//! and borrowed typed slices of contiguous tensors ([`Tensor::read`],
//! [`Tensor::write`]).
//!
//! `to_vec::<T>()` never builds a [`Scalar`](crate::Scalar) per element. When
//! the dtype is `T`'s, the elements are copied into a `Vec<T>` by the strided
//! copy kernel (`copy.rs`): one `memcpy` for a contiguous tensor, the blocked
//! transpose for a transposed one. Otherwise each element is converted by a
//! typed cast, the same casts [`Element::from_scalar`] applies (PyTorch's):
//! `float16` and `bfloat16` to `f32` or `f64` through the `half` crate's slice
//! conversions, one-byte dtypes (`bool`, `int8`, `uint8`, the float8 formats)
//! through a table of their 256 values, the others element by element. A
//! non-contiguous tensor is first gathered into contiguous bytes by the same
//! copy kernel, then converted.
//!
//! [`ReadGuard`] and [`WriteGuard`] hold the storage's lock (NOTE [sound
//! sharing] in `storage/mod.rs`): the shared lock for a read, the exclusive
//! one for a write, so no other view can write the elements while a slice of
//! them lives. As with [`UntypedStorage::bytes`](crate::UntypedStorage::bytes),
//! drop a guard before writing to the same storage on the same thread: a
//! write (or a second guard) taken while one is held waits for it forever.

use crate::error::{StorageError, TensorError};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut, Range};

use bytemuck::Pod;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use num_complex::Complex64;

use crate::copy::copy_strided;
use crate::dtype::Repr;
use crate::element::Element;
use crate::layout::Layout;
use crate::storage::{advise_huge_pages, BytesMut, BytesRef};
use crate::{DType, Error, Result, Tensor};

/// Shared access to the elements of a contiguous tensor as `&[T]`
/// ([`Tensor::read`]). Holds the storage's shared lock while it lives.
pub struct ReadGuard<'a, T> {
    bytes: BytesRef<'a>,
    range: Range<usize>,
    _element: PhantomData<&'a [T]>,
}

impl<T: Pod> Deref for ReadGuard<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        if self.range.is_empty() {
            return &[];
        }
        // `Tensor::read` checked the range and its alignment, and the lock
        // keeps the bytes from moving or shrinking meanwhile.
        bytemuck::cast_slice(&self.bytes[self.range.clone()])
    }
}

/// Exclusive access to the elements of a contiguous tensor as `&mut [T]`
/// ([`Tensor::write`]). Holds the storage's exclusive lock while it lives;
/// every view of the storage sees the writes once it is dropped.
pub struct WriteGuard<'a, T> {
    bytes: BytesMut<'a>,
    range: Range<usize>,
    _element: PhantomData<&'a mut [T]>,
}

impl<T: Pod> Deref for WriteGuard<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        if self.range.is_empty() {
            return &[];
        }
        // As in `ReadGuard`: checked by `Tensor::write`, fixed by the lock.
        bytemuck::cast_slice(&self.bytes[self.range.clone()])
    }
}

impl<T: Pod> DerefMut for WriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        if self.range.is_empty() {
            return &mut [];
        }
        bytemuck::cast_slice_mut(&mut self.bytes[self.range.clone()])
    }
}

impl Tensor {
    /// Every element, in row-major order, converted to `T` as PyTorch casts.
    ///
    /// When the dtype is `T`'s this is a copy of the bytes (one `memcpy` for a
    /// contiguous tensor); otherwise each element is converted by a typed cast
    /// (see the [module documentation](crate::access)).
    ///
    /// # Errors
    /// [`StorageError::NoData`] on meta; [`TensorError::DTypeUnsupported`] for dtypes without
    /// values (bits, packed float4); [`StorageError::OutOfStorage`] when the storage
    /// shrank below the layout.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        let (dtype, es, n) = (self.dtype, self.element_size(), self.numel());
        if !dtype.has_scalar_values() {
            return Err(Error::Tensor(TensorError::DTypeUnsupported {
                op: "to_vec",
                dtype,
            }));
        }
        // PyTorch's name for the operation, as `scalars()` reports it.
        self.storage.with_bytes("tolist", |bytes| {
            self.layout.check_fits(es, bytes.len())?;
            if n == 0 {
                return Ok(Vec::new());
            }
            let dense = Layout::contiguous(self.shape())?;
            if dtype == T::DTYPE && T::POD {
                let mut out = output::<T>(n);
                if let Some(dst) = T::pod_bytes_mut(&mut out) {
                    copy_strided(dst, &dense, bytes, &self.layout, es)?;
                    return Ok(out);
                }
            }
            if self.is_contiguous() {
                let start = self.storage_offset() * es;
                return convert(dtype, &bytes[start..start + n * es]);
            }
            // Gathered into 16-byte-aligned bytes, so the conversion reads them typed.
            let mut gathered = bytemuck::zeroed_vec::<u128>((n * es).div_ceil(16));
            advise_huge_pages(bytemuck::cast_slice_mut(&mut gathered));
            let gathered = &mut bytemuck::cast_slice_mut::<u128, u8>(&mut gathered)[..n * es];
            copy_strided(gathered, &dense, bytes, &self.layout, es)?;
            convert(dtype, gathered)
        })?
    }

    /// The elements of this contiguous tensor as `&[T]`, borrowed from the
    /// storage without a copy: exactly the tensor's elements, in row-major
    /// order. The guard holds the storage's shared lock (see the [module
    /// documentation](crate::access)).
    ///
    /// `T` is plain old data, so `bool` tensors cannot be read this way (their
    /// bytes may be other than 0 and 1): use `to_vec::<bool>()`, or view them
    /// as `uint8` first.
    ///
    /// ```
    /// # fn main() -> stowage::Result<()> {
    /// let t = stowage::Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2])?;
    /// let sum: f32 = t.read::<f32>()?.iter().sum();
    /// assert_eq!(sum, 10.0);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`TensorError::DTypeMismatch`] unless the dtype is `T`'s;
    /// [`TensorError::NotContiguous`] for a non-contiguous tensor; [`StorageError::NoData`]
    /// on meta and for fake tensors; [`StorageError::OutOfStorage`] when the storage
    /// shrank below the layout; [`StorageError::Misaligned`] when the elements'
    /// address is not aligned for `T` (never for storages stowage allocates,
    /// possible for a storage over part of a mapped file).
    pub fn read<T: Element + Pod>(&self) -> Result<ReadGuard<'_, T>> {
        const OP: &str = "read";
        self.check_typed::<T>(OP, true)?;
        self.check_data(OP)?;
        let bytes = self.storage.bytes()?;
        let range = self.typed_range::<T>(OP, &bytes)?;
        Ok(ReadGuard {
            bytes,
            range,
            _element: PhantomData,
        })
    }

    /// The elements of this contiguous tensor as `&mut [T]`, borrowed from the
    /// storage without a copy. The guard holds the storage's exclusive lock;
    /// every view of the storage sees the writes.
    ///
    /// ```
    /// # fn main() -> stowage::Result<()> {
    /// let t = stowage::Tensor::zeros(&[2, 3], stowage::DType::Int32)?;
    /// let row = t.select(0, 1)?;
    /// t.write::<i32>()?[3..].copy_from_slice(&[7, 8, 9]);
    /// assert_eq!(row.to_vec::<i32>()?, [7, 8, 9]);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`read`](Self::read); [`TensorError::InPlaceRequiresGrad`] while recording
    /// gradients for this tensor (see [`crate::autograd`]).
    pub fn write<T: Element + Pod>(&self) -> Result<WriteGuard<'_, T>> {
        const OP: &str = "write";
        self.check_inplace(OP)?;
        self.check_typed::<T>(OP, true)?;
        self.check_data(OP)?;
        let bytes = self.storage.bytes_mut()?;
        let range = self.typed_range::<T>(OP, &bytes)?;
        // Write access counts as a write (the guard may change any element).
        self.storage.bump_version();
        Ok(WriteGuard {
            bytes,
            range,
            _element: PhantomData,
        })
    }

    /// Checks that the dtype is `T`'s and, when asked, that the tensor is contiguous.
    pub(crate) fn check_typed<T: Element>(&self, op: &'static str, contiguous: bool) -> Result<()> {
        if self.dtype != T::DTYPE {
            return Err(Error::Tensor(TensorError::DTypeMismatch {
                op,
                expected: T::DTYPE,
                found: self.dtype,
            }));
        }
        if contiguous && !self.is_contiguous() {
            return Err(Error::Tensor(TensorError::NotContiguous {
                op,
                shape: self.shape().to_vec(),
                stride: self.stride().to_vec(),
            }));
        }
        Ok(())
    }

    /// The bytes of the storage elements the layout reaches, from the first
    /// element to the last (all of them for a contiguous tensor), checked to
    /// lie in `bytes` and to be aligned for `T`. Empty without elements.
    pub(crate) fn typed_range<T>(&self, op: &'static str, bytes: &[u8]) -> Result<Range<usize>> {
        let es = self.element_size();
        self.layout.check_fits(es, bytes.len())?;
        if self.numel() == 0 {
            return Ok(0..0);
        }
        // `check_fits` bounds the reach, in bytes, by `bytes.len()`.
        let range = self.storage_offset() * es..self.layout.storage_elements()? * es;
        let address = (bytes.as_ptr() as usize).wrapping_add(range.start);
        let align = std::mem::align_of::<T>();
        if address % align != 0 {
            return Err(Error::Storage(StorageError::Misaligned {
                op,
                dtype: self.dtype,
                address,
                align,
            }));
        }
        Ok(range)
    }
}

/// `n` zero elements for a result, on huge pages where the kernel grants them
/// (as stowage's own large storages are): the page faults of a fresh 64 MiB
/// buffer on 4 KiB pages cost as much as copying into it.
fn output<T: Element>(n: usize) -> Vec<T> {
    let mut out = bytemuck::zeroed_vec::<T>(n);
    if let Some(bytes) = T::pod_bytes_mut(&mut out) {
        advise_huge_pages(bytes);
    }
    out
}

/// `src`, elements of `dtype` in native order, converted to `T` as PyTorch casts.
fn convert<T: Element>(dtype: DType, src: &[u8]) -> Result<Vec<T>> {
    let unsupported = Error::Tensor(TensorError::DTypeUnsupported {
        op: "to_vec",
        dtype,
    });
    Ok(match dtype.info().repr {
        Repr::F64 => map(src, T::from_f64),
        Repr::F32 => map(src, |x: f32| T::from_f64(x.into())),
        Repr::F16 => halves(src, f16::to_f64),
        Repr::BF16 => halves(src, bf16::to_f64),
        Repr::Mini(m) => table(src, |b| T::from_f64(m.to_f32(b).into())),
        Repr::Bool => table(src, |b| T::from_bool(b != 0)),
        Repr::Signed => match dtype.size() {
            1 => table(src, |b| T::from_i64((b as i8).into())),
            2 => map(src, |x: i16| T::from_i64(x.into())),
            4 => map(src, |x: i32| T::from_i64(x.into())),
            _ => map(src, T::from_i64),
        },
        Repr::Unsigned => match dtype.size() {
            1 => table(src, |b| T::from_i64(b.into())),
            2 => map(src, |x: u16| T::from_i64(x.into())),
            4 => map(src, |x: u32| T::from_i64(x.into())),
            _ => map(src, T::from_u64),
        },
        Repr::Complex(part) => match part.info().repr {
            Repr::F64 => map(src, |[re, im]: [f64; 2]| {
                T::from_complex(Complex64::new(re, im))
            }),
            Repr::F32 => map(src, |[re, im]: [f32; 2]| {
                T::from_complex(Complex64::new(re.into(), im.into()))
            }),
            Repr::F16 => map(src, |[re, im]: [f16; 2]| {
                T::from_complex(Complex64::new(re.to_f64(), im.to_f64()))
            }),
            _ => return Err(unsupported),
        },
        Repr::Opaque => return Err(unsupported),
    })
}

/// Each `S` of `src` through `f`; `src` may be unaligned for `S`.
#[inline]
fn map<S: Pod, T: Element>(src: &[u8], f: impl Fn(S) -> T) -> Vec<T> {
    let mut out = output::<T>(src.len() / std::mem::size_of::<S>());
    match bytemuck::try_cast_slice::<u8, S>(src) {
        Ok(s) => out.iter_mut().zip(s).for_each(|(o, &x)| *o = f(x)),
        Err(_) => {
            let s = src.chunks_exact(std::mem::size_of::<S>());
            out.iter_mut()
                .zip(s)
                .for_each(|(o, c)| *o = f(bytemuck::pod_read_unaligned(c)));
        }
    }
    out
}

/// Each byte of `src` through a table of `f`'s 256 values.
fn table<T: Element>(src: &[u8], f: impl Fn(u8) -> T) -> Vec<T> {
    let values: [T; 256] = std::array::from_fn(|b| f(b as u8));
    let mut out = output::<T>(src.len());
    out.iter_mut()
        .zip(src)
        .for_each(|(o, &b)| *o = values[usize::from(b)]);
    out
}

/// 16-bit floats to `T`: to `f32` and `f64` by the `half` crate's slice
/// conversions (vectorised where the CPU allows), else element by element.
fn halves<H: Pod, T: Element>(src: &[u8], to_f64: fn(H) -> f64) -> Vec<T>
where
    [H]: HalfFloatSliceExt,
{
    if let Ok(h) = bytemuck::try_cast_slice::<u8, H>(src) {
        if matches!(T::DTYPE, DType::Float32 | DType::Float64) {
            let mut out = output::<T>(h.len());
            if let Some(bytes) = T::pod_bytes_mut(&mut out) {
                // `out` is a `Vec<f32>` or `Vec<f64>`, aligned for either.
                if T::DTYPE == DType::Float32 {
                    h.convert_to_f32_slice(bytemuck::cast_slice_mut(bytes));
                } else {
                    h.convert_to_f64_slice(bytemuck::cast_slice_mut(bytes));
                }
                return out;
            }
        }
    }
    map(src, |x: H| T::from_f64(to_f64(x)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{StorageError, TensorError};
    use crate::{Device, Scalar};
    use half::{bf16, f16};
    use num_complex::Complex32;

    #[test]
    fn to_vec_copies_converts_and_gathers() {
        let t = Tensor::arange(0.0, 6.0, 1.0, DType::Float32)
            .unwrap()
            .view(&[2, 3])
            .unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), [0., 1., 2., 3., 4., 5.]);
        assert_eq!(
            t.t().unwrap().to_vec::<f32>().unwrap(),
            [0., 3., 1., 4., 2., 5.]
        );
        assert_eq!(t.t().unwrap().to_vec::<i8>().unwrap(), [0, 3, 1, 4, 2, 5]);
        let h = t.to_dtype(DType::Float16).unwrap();
        assert_eq!(h.to_vec::<f64>().unwrap(), [0., 1., 2., 3., 4., 5.]);
        assert_eq!(
            h.t().unwrap().to_vec::<f32>().unwrap(),
            [0., 3., 1., 4., 2., 5.]
        );
        let b = Tensor::from_slice(&[true, false, true]).unwrap();
        assert_eq!(b.to_vec::<bool>().unwrap(), [true, false, true]);
        assert_eq!(b.to_vec::<f32>().unwrap(), [1., 0., 1.]);
        let e = Tensor::zeros(&[0, 3], DType::Float64).unwrap();
        assert!(e.to_vec::<u8>().unwrap().is_empty());
        let bits = Tensor::zeros(&[2], DType::Bits8).unwrap();
        assert!(matches!(
            bits.to_vec::<u8>(),
            Err(Error::Tensor(TensorError::DTypeUnsupported { .. }))
        ));
    }

    #[test]
    fn to_vec_keeps_pytorchs_casts() {
        let f = Tensor::from_slice(&[-1.7f64, 200.5, 3e9, f64::NAN, 65520.0]).unwrap();
        // What PyTorch 2.15 gives for `f.to(torch.uint8)` and `f.to(torch.int32)`
        // (an out-of-range float to int32 is undefined in C++; not compared).
        assert_eq!(f.to_vec::<u8>().unwrap(), [255, 200, 0, 0, 240]);
        assert_eq!(f.to_vec::<i32>().unwrap()[..2], [-1, 200]);
        assert_eq!(f.to_vec::<bool>().unwrap(), [true; 5]);
        assert!(f.to_vec::<f16>().unwrap()[4].is_infinite());
        let c = Tensor::from_slice(&[Complex32::new(1.5, -2.0)]).unwrap();
        assert_eq!(c.to_vec::<f64>().unwrap(), [1.5]);
        assert_eq!(
            c.to_vec::<Complex64>().unwrap(),
            [Complex64::new(1.5, -2.0)]
        );
        let u = Tensor::from_slice(&[u64::MAX]).unwrap();
        assert_eq!(u.to_vec::<i64>().unwrap(), [-1]);
        assert_eq!(u.to_vec::<f32>().unwrap(), [u64::MAX as f64 as f32]);
        let e5 = Tensor::full(&[2], 1.75, DType::Float8E5M2).unwrap();
        assert_eq!(e5.to_vec::<f32>().unwrap(), [1.75; 2]);
        assert_eq!(e5.to_vec::<bf16>().unwrap(), [bf16::from_f32(1.75); 2]);
    }

    #[test]
    fn read_and_write_check_dtype_layout_and_data() {
        let t = Tensor::arange(0.0, 6.0, 1.0, DType::Float32)
            .unwrap()
            .view(&[2, 3])
            .unwrap();
        assert_eq!(&*t.read::<f32>().unwrap(), &[0., 1., 2., 3., 4., 5.]);
        let row = t.select(0, 1).unwrap();
        assert_eq!(&*row.read::<f32>().unwrap(), &[3., 4., 5.]);
        assert!(matches!(
            t.read::<f64>(),
            Err(Error::Tensor(TensorError::DTypeMismatch {
                expected: DType::Float64,
                found: DType::Float32,
                ..
            }))
        ));
        match t.t().unwrap().read::<f32>() {
            Err(Error::Tensor(TensorError::NotContiguous { shape, stride, .. })) => {
                assert_eq!((shape, stride), (vec![3, 2], vec![1, 3]));
            }
            other => panic!("{:?}", other.map(|g| g.to_vec())),
        }
        let m = Tensor::zeros_on(&[2], DType::Float32, Device::META).unwrap();
        assert!(matches!(
            m.read::<f32>(),
            Err(Error::Storage(StorageError::NoData {
                device: Device::META,
                ..
            }))
        ));
        assert!(matches!(
            m.write::<f32>(),
            Err(Error::Storage(StorageError::NoData { .. }))
        ));
        let empty = t.narrow(1, 3, 0).unwrap();
        assert!(empty.read::<f32>().unwrap().is_empty());
    }

    #[test]
    fn writes_are_seen_through_every_view() {
        let t = Tensor::zeros(&[2, 3], DType::Int64).unwrap();
        let col = t.select(1, 2).unwrap();
        {
            let row = t.select(0, 1).unwrap();
            let mut w = row.write::<i64>().unwrap();
            w.copy_from_slice(&[7, 8, 9]);
        }
        assert_eq!(col.to_vec::<i64>().unwrap(), [0, 9]);
        assert_eq!(t.get(&[1, 0]).unwrap(), Scalar::Int(7));
        let mut grad = Tensor::zeros(&[2], DType::Float32).unwrap();
        grad.requires_grad_(true).unwrap();
        assert!(matches!(
            grad.write::<f32>(),
            Err(Error::Tensor(TensorError::InPlaceRequiresGrad { .. }))
        ));
        assert_eq!(&*grad.read::<f32>().unwrap(), &[0.0, 0.0]);
    }

    #[test]
    fn from_vec_adopts_the_buffer() {
        let v: Vec<f16> = (0..100).map(|i| f16::from_f32(i as f32)).collect();
        let ptr = v.as_ptr() as usize;
        let t = Tensor::from_vec(v, &[10, 10]).unwrap();
        assert_eq!(t.data_ptr(), ptr);
        assert_eq!(t.read::<f16>().unwrap()[99], f16::from_f32(99.0));
        assert!(matches!(
            Tensor::from_vec(vec![1u8, 2], &[3]),
            Err(Error::Tensor(TensorError::ShapeMismatch { numel: 2, .. }))
        ));
    }
}
