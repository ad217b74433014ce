//! [`TypedStorage`]: an untyped storage handle and a dtype; and `tensor.storage()`.

use super::*;
use crate::error::{StorageError, TensorError};

/// PyTorch's `torch.TypedStorage` (deprecated): an [`UntypedStorage`] handle
/// and a [`DType`]. Sizes and indices count elements.
///
/// `Clone` makes another handle to the same storage (Python's `b = a`);
/// [`deep_clone`](Self::deep_clone) copies the bytes (PyTorch's `clone()`).
/// Every method but [`dtype`](Self::dtype) issues the deprecation warning
/// ([`crate::warn`]).
#[derive(Clone)]
pub struct TypedStorage {
    pub(super) storage: UntypedStorage,
    pub(super) dtype: DType,
}

/// What [`TypedStorage::copy_`] copies from: a typed or an untyped storage.
pub trait CopySource: sealed::Sealed {
    /// The bytes to copy.
    #[doc(hidden)]
    fn source_storage(&self) -> &UntypedStorage;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::TypedStorage {}
    impl Sealed for crate::UntypedStorage {}
}

impl CopySource for TypedStorage {
    fn source_storage(&self) -> &UntypedStorage {
        &self.storage
    }
}

impl CopySource for UntypedStorage {
    fn source_storage(&self) -> &UntypedStorage {
        self
    }
}

impl TypedStorage {
    /// Internal constructor (PyTorch's `_internal=True`): never warns.
    pub(crate) fn internal(storage: UntypedStorage, dtype: DType) -> TypedStorage {
        TypedStorage { storage, dtype }
    }

    /// `torch.TypedStorage(size, dtype=dtype, device=device)`: `size` zeroed elements. Warns.
    ///
    /// # Errors
    /// [`StorageError::QuantizedStorageDevice`] for a quantized dtype on CUDA,
    /// [`TensorError::SizeOverflow`] when `size * element_size` overflows, allocation failure.
    #[track_caller]
    pub fn new(size: usize, dtype: DType, device: Device) -> Result<TypedStorage> {
        deprecated();
        check_device(dtype, device)?;
        Self::alloc(size, dtype, device)
    }

    /// `torch.TypedStorage(data, dtype=dtype, device=device)`: the values,
    /// converted as `torch.tensor(data, dtype=dtype)` converts them. Warns.
    ///
    /// # Errors
    /// [`TensorError::ValueOverflow`] for a value outside an integer dtype's range,
    /// [`TensorError::ComplexNotReal`] for a complex value into a real dtype,
    /// [`TensorError::DTypeUnsupported`] for dtypes without values (bits),
    /// [`StorageError::QuantizedStorageDevice`], allocation failure.
    #[track_caller]
    pub fn from_data(data: &[Scalar], dtype: DType, device: Device) -> Result<TypedStorage> {
        deprecated();
        check_device(dtype, device)?;
        Self::from_values(data, dtype, device)
    }

    /// `torch.TypedStorage(wrap_storage=storage, dtype=dtype)`: a typed view
    /// of `storage`'s bytes, shared. Warns.
    #[track_caller]
    pub fn wrap(storage: UntypedStorage, dtype: DType) -> TypedStorage {
        deprecated();
        Self::internal(storage, dtype)
    }

    /// `torch.TypedStorage(*args, wrap_storage=…, dtype=…, device=…)`, any
    /// call, checked as PyTorch's `TypedStorage.__init__`. Without `dtype`
    /// the [`default_dtype`](crate::dtype::default_dtype) is used, without `device` the cpu. Warns.
    ///
    /// # Errors
    /// [`StorageError::StorageArguments`] (header `TypedStorage.__init__ received an
    /// invalid combination of arguments`) for: positional arguments with
    /// `wrap_storage`, `wrap_storage` without `dtype`, `wrap_storage` with
    /// `device`, a `wrap_storage` that is not an `UntypedStorage`, an argument
    /// of another type than int or sequence, more than one positional
    /// argument; plus the errors of [`new`](Self::new) and [`from_data`](Self::from_data).
    #[track_caller]
    pub fn construct(call: StorageCall) -> Result<TypedStorage> {
        deprecated();
        Self::init(call)
    }

    /// `TypedStorage.__init__` without the warning.
    pub(super) fn init(call: StorageCall) -> Result<TypedStorage> {
        let refuse = |problem| {
            Error::Storage(StorageError::StorageArguments {
                constructor: StorageConstructor::TypedStorage,
                problem,
            })
        };
        if let Some(wrap) = call.wrap_storage {
            if !call.args.is_empty() {
                return Err(refuse(StorageArgProblem::PositionalWithWrapStorage));
            }
            let Some(dtype) = call.dtype else {
                return Err(refuse(StorageArgProblem::DTypeMissing));
            };
            if call.device.is_some() {
                return Err(refuse(StorageArgProblem::DeviceWithWrapStorage));
            }
            let PyArg::UntypedStorage(storage) = wrap else {
                return Err(refuse(StorageArgProblem::WrapStorageType {
                    type_name: wrap.python_type(),
                }));
            };
            return Ok(Self::internal(storage, dtype));
        }
        let dtype = call.dtype.unwrap_or_else(default_dtype);
        let device = call.device.unwrap_or(Device::CPU);
        check_device(dtype, device)?;
        match call.args.as_slice() {
            [] => Self::alloc(0, dtype, device),
            [PyArg::Int(n)] => {
                let n = usize::try_from(*n)
                    .map_err(|_| Error::Tensor(TensorError::NegativeSize { size: *n }))?;
                Self::alloc(n, dtype, device)
            }
            [PyArg::Sequence(values)] => Self::from_values(values, dtype, device),
            [other] => Err(refuse(StorageArgProblem::ArgumentType {
                type_name: other.python_type(),
            })),
            _ => Err(refuse(StorageArgProblem::TooManyPositional)),
        }
    }

    pub(super) fn bytes_for(size: usize, dtype: DType) -> Result<usize> {
        size.checked_mul(dtype.size()).ok_or_else(|| {
            Error::Tensor(TensorError::SizeOverflow {
                what: "typed storage bytes",
                detail: format!("{size} elements of {dtype}"),
            })
        })
    }

    pub(super) fn alloc(size: usize, dtype: DType, device: Device) -> Result<TypedStorage> {
        let nbytes = Self::bytes_for(size, dtype)?;
        Ok(Self::internal(
            UntypedStorage::new_on(nbytes, device)?,
            dtype,
        ))
    }

    pub(super) fn from_values(
        values: &[Scalar],
        dtype: DType,
        device: Device,
    ) -> Result<TypedStorage> {
        for &v in values {
            check_value(dtype, v, Path::Store)?;
        }
        let s = Self::alloc(values.len(), dtype, device)?;
        if s.storage.has_data() {
            let es = dtype.size();
            s.storage.with_bytes_mut("TypedStorage", |b| {
                for (&v, out) in values.iter().zip(b.chunks_exact_mut(es)) {
                    element::write(dtype, v, out)?;
                }
                Ok::<_, Error>(())
            })??;
        }
        Ok(s)
    }

    /// A typed view of a checkpoint's storage record, as `torch.load` makes it
    /// for a legacy class (`None` for an `UntypedStorage` record). Loading is
    /// an internal path: this never warns.
    pub fn from_record(record: &StorageRecord) -> Option<TypedStorage> {
        record
            .dtype
            .map(|dtype| Self::internal(record.storage.clone(), dtype))
    }

    /// A typed view of a storage object found in a checkpoint's value graph
    /// (`None` for an `UntypedStorage`). Never warns.
    pub fn from_storage_ref(storage: &StorageRef) -> Option<TypedStorage> {
        storage
            .dtype
            .map(|dtype| Self::internal(storage.storage.clone(), dtype))
    }

    /// The element type (PyTorch's `storage.dtype` attribute, which does not warn).
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub(super) fn size_(&self) -> usize {
        self.storage.nbytes() / self.dtype.size()
    }

    /// The number of elements: `nbytes() / element_size()`, rounded down (also `len(s)`). Warns.
    #[doc(alias = "len")]
    #[track_caller]
    pub fn size(&self) -> usize {
        deprecated();
        self.size_()
    }

    /// Size in bytes. Warns.
    #[track_caller]
    pub fn nbytes(&self) -> usize {
        deprecated();
        self.storage.nbytes()
    }

    /// Bytes per element. Warns.
    #[track_caller]
    pub fn element_size(&self) -> usize {
        deprecated();
        self.dtype.size()
    }

    /// The device. Warns.
    #[track_caller]
    pub fn device(&self) -> Device {
        deprecated();
        self.storage.device()
    }

    /// True on a CUDA device. Warns.
    #[track_caller]
    pub fn is_cuda(&self) -> bool {
        deprecated();
        self.storage.is_cuda()
    }

    /// The address of the first byte (0 without bytes). Warns.
    #[track_caller]
    pub fn data_ptr(&self) -> usize {
        deprecated();
        self.storage.data_ptr()
    }

    /// Whether [`resize_`](Self::resize_) may change the size. Warns.
    #[track_caller]
    pub fn resizable(&self) -> bool {
        deprecated();
        self.storage.resizable()
    }

    /// The untyped storage underneath: the same bytes, not a copy
    /// (PyTorch's `storage.untyped()`). Warns.
    #[track_caller]
    pub fn untyped(&self) -> UntypedStorage {
        deprecated();
        self.storage.clone()
    }

    /// The element at `index` (negative counts from the end). Quantized
    /// elements read as their integer representation. Warns.
    ///
    /// # Errors
    /// [`StorageError::StorageIndexOutOfRange`] (PyTorch: "index 3 out of range for
    /// storage of size 3"), [`StorageError::NoData`] without bytes (meta),
    /// [`TensorError::DTypeUnsupported`] for dtypes without values.
    #[track_caller]
    pub fn get(&self, index: isize) -> Result<Scalar> {
        deprecated();
        let es = self.dtype.size();
        self.storage.with_bytes("__getitem__", |b| {
            let size = b.len() / es;
            let i = wrap_storage_index(index, size)?;
            element::read(self.dtype, &b[i * es..(i + 1) * es])
        })?
    }

    /// Writes `value`, converted to the dtype, at `index`. Warns.
    ///
    /// # Errors
    /// [`TensorError::IndexOutOfRange`] (PyTorch indexes a tensor here: "index 5 is
    /// out of bounds for dimension 0 with size 2"), [`TensorError::ValueOverflow`]
    /// for a value the element type cannot hold, [`StorageError::NoData`],
    /// [`TensorError::DTypeUnsupported`].
    #[track_caller]
    pub fn set(&self, index: isize, value: impl Into<Scalar>) -> Result<()> {
        deprecated();
        let value = value.into();
        let es = self.dtype.size();
        self.storage.with_bytes_mut("__setitem__", |b| {
            let i = crate::layout::wrap_index(index, 0, b.len() / es)?;
            check_value(self.dtype, value, Path::Set)?;
            element::write(self.dtype, value, &mut b[i * es..(i + 1) * es])
        })?
    }

    /// Every element, in order. Warns.
    ///
    /// # Errors
    /// [`StorageError::NoData`] without bytes, [`TensorError::DTypeUnsupported`] for dtypes without values.
    #[track_caller]
    pub fn tolist(&self) -> Result<Vec<Scalar>> {
        deprecated();
        let es = self.dtype.size();
        self.storage.with_bytes("tolist", |b| {
            b.chunks_exact(es)
                .map(|e| element::read(self.dtype, e))
                .collect()
        })?
    }

    /// Sets every element to `value`. Warns.
    ///
    /// # Errors
    /// [`TensorError::ValueOverflow`] for a value the element type cannot hold,
    /// [`StorageError::NoData`], [`TensorError::DTypeUnsupported`].
    #[track_caller]
    pub fn fill_(&self, value: impl Into<Scalar>) -> Result<&Self> {
        deprecated();
        let value = value.into();
        check_value(self.dtype, value, Path::Fill)?;
        let es = self.dtype.size();
        let mut one = vec![0u8; es];
        element::write(self.dtype, value, &mut one)?;
        self.storage.with_bytes_mut("fill_", |b| {
            for e in b.chunks_exact_mut(es) {
                e.copy_from_slice(&one);
            }
        })?;
        Ok(self)
    }

    /// Copies the bytes of `source` (a typed or untyped storage of the same
    /// byte size) into this storage; no dtype conversion, as in PyTorch. Warns.
    ///
    /// # Errors
    /// [`StorageError::StorageSizeMismatch`] when the byte sizes differ, [`StorageError::NoData`].
    #[track_caller]
    pub fn copy_(&self, source: &impl CopySource) -> Result<&Self> {
        deprecated();
        self.storage.copy_(source.source_storage())?;
        Ok(self)
    }

    /// A new storage with a copy of the bytes (PyTorch's `clone()`). Warns.
    ///
    /// # Errors
    /// Allocation failure.
    #[track_caller]
    pub fn deep_clone(&self) -> Result<TypedStorage> {
        deprecated();
        Ok(Self::internal(self.storage.deep_clone()?, self.dtype))
    }

    /// Changes the size to `size` elements (`size * element_size` bytes),
    /// keeping the common prefix and zero-filling growth. Warns.
    ///
    /// # Errors
    /// [`TensorError::SizeOverflow`], [`StorageError::NotResizable`], allocation failure.
    #[track_caller]
    pub fn resize_(&self, size: usize) -> Result<&Self> {
        deprecated();
        self.storage.resize_(Self::bytes_for(size, self.dtype)?)?;
        Ok(self)
    }

    /// True when other processes can see the bytes. Warns.
    #[track_caller]
    pub fn is_shared(&self) -> bool {
        deprecated();
        self.storage.is_shared()
    }

    /// Moves the bytes into shared memory ([`UntypedStorage::share_memory_`]). Warns.
    /// Needs the `shm` feature.
    ///
    /// # Errors
    /// As [`UntypedStorage::share_memory_`].
    #[cfg(feature = "shm")]
    #[track_caller]
    pub fn share_memory_(&self) -> Result<&Self> {
        deprecated();
        self.storage.share_memory_()?;
        Ok(self)
    }

    /// True when the bytes are page-locked. Warns. Needs the `pinned` feature.
    #[cfg(feature = "pinned")]
    #[track_caller]
    pub fn is_pinned(&self) -> bool {
        deprecated();
        self.storage.is_pinned()
    }

    /// A copy in page-locked memory ([`UntypedStorage::pin_memory`]). Warns.
    /// Needs the `pinned` feature.
    ///
    /// # Errors
    /// As [`UntypedStorage::pin_memory`].
    #[cfg(feature = "pinned")]
    #[track_caller]
    pub fn pin_memory(&self) -> Result<TypedStorage> {
        deprecated();
        Ok(Self::internal(self.storage.pin_memory()?, self.dtype))
    }

    /// This storage on the cpu (itself when it already is). Warns.
    ///
    /// # Errors
    /// As [`UntypedStorage::cpu`].
    #[track_caller]
    pub fn cpu(&self) -> Result<TypedStorage> {
        deprecated();
        Ok(Self::internal(self.storage.cpu()?, self.dtype))
    }

    /// This storage on `device` (itself when already there, else a copy). Warns.
    ///
    /// # Errors
    /// [`StorageError::QuantizedStorageDevice`] for quantized dtypes, whatever the
    /// device (PyTorch: "Cannot create CUDA storage with quantized dtype");
    /// as [`UntypedStorage::to`].
    #[track_caller]
    pub fn to(&self, device: Device) -> Result<TypedStorage> {
        deprecated();
        if self.dtype.kind() == Kind::Quantized {
            return Err(Error::Storage(StorageError::QuantizedStorageDevice {
                device: device.kind,
            }));
        }
        Ok(Self::internal(self.storage.to(device)?, self.dtype))
    }

    /// This storage on `cuda:0`. Warns.
    ///
    /// # Errors
    /// As [`to`](Self::to).
    #[track_caller]
    pub fn cuda(&self) -> Result<TypedStorage> {
        deprecated();
        if self.dtype.kind() == Kind::Quantized {
            return Err(Error::Storage(StorageError::QuantizedStorageDevice {
                device: DeviceType::Cuda,
            }));
        }
        Ok(Self::internal(
            self.storage.to(Device::cuda(0))?,
            self.dtype,
        ))
    }

    /// A new storage holding the elements converted to `dtype` (PyTorch's
    /// `storage.double()`, `storage.half()`, …; always a copy). Warns.
    ///
    /// # Errors
    /// [`TensorError::DTypeUnsupported`] from or to a quantized dtype or a dtype
    /// without values; [`StorageError::NoData`]; allocation failure.
    #[track_caller]
    pub fn to_dtype(&self, dtype: DType) -> Result<TypedStorage> {
        deprecated();
        for d in [self.dtype, dtype] {
            if d.kind() == Kind::Quantized || !d.has_scalar_values() {
                return Err(Error::Tensor(TensorError::DTypeUnsupported {
                    op: "storage dtype conversion",
                    dtype: d,
                }));
            }
        }
        let values = self.storage.with_bytes("to", |b| {
            b.chunks_exact(self.dtype.size())
                .map(|e| element::read(self.dtype, e))
                .collect::<Result<Vec<_>>>()
        })??;
        let out = Self::alloc(values.len(), dtype, self.storage.device())?;
        let es = dtype.size();
        out.storage.with_bytes_mut("to", |b| {
            for (&v, e) in values.iter().zip(b.chunks_exact_mut(es)) {
                element::write(dtype, v, e)?;
            }
            Ok::<_, Error>(())
        })??;
        Ok(out)
    }

    /// The legacy class name PyTorch pickles this storage as (`"FloatStorage"`). Warns.
    ///
    /// # Errors
    /// [`StorageError::NoLegacyStorageClass`] for dtypes without a class (PyTorch's
    /// `KeyError: dtype torch.uint16 is not recognized`).
    #[track_caller]
    pub fn pickle_storage_type(&self) -> Result<&'static str> {
        deprecated();
        LegacyStorageClass::for_dtype(self.dtype)
            .map(LegacyStorageClass::name)
            .ok_or(Error::Storage(StorageError::NoLegacyStorageClass {
                dtype: self.dtype,
            }))
    }

    /// The legacy class of this storage's dtype and device, if PyTorch has one
    /// (`torch.cuda.FloatStorage` for a float32 CUDA storage; none for meta
    /// storages, newer dtypes and quantized CUDA storages). Warns.
    #[track_caller]
    pub fn legacy_class(&self) -> Option<LegacyClass> {
        deprecated();
        legacy_class_of(self.dtype, self.storage.device())
    }

    /// PyTorch's `storage.type()`: the legacy class's path (`"torch.FloatStorage"`),
    /// or `"torch.storage.TypedStorage"` when there is none. Warns.
    #[track_caller]
    pub fn type_name(&self) -> String {
        deprecated();
        legacy_class_of(self.dtype, self.storage.device()).map_or_else(
            || "torch.storage.TypedStorage".to_owned(),
            LegacyClass::path,
        )
    }
}

/// Checks that a new storage of `dtype` may live on `device`.
pub(super) fn check_device(dtype: DType, device: Device) -> Result<()> {
    if dtype.kind() == Kind::Quantized && device.is_cuda() {
        return Err(Error::Storage(StorageError::QuantizedStorageDevice {
            device: DeviceType::Cuda,
        }));
    }
    Ok(())
}

/// PyTorch's `TypedStorage._maybe_wrap_index` for reads.
pub(super) fn wrap_storage_index(index: isize, size: usize) -> Result<usize> {
    let i = if index < 0 {
        index.checked_add_unsigned(size).unwrap_or(-1)
    } else {
        index
    };
    match usize::try_from(i) {
        Ok(i) if i < size => Ok(i),
        _ => Err(Error::Storage(StorageError::StorageIndexOutOfRange {
            index,
            size,
        })),
    }
}

// ---------------------------------------------------------------------------
// Tensor.storage()
// ---------------------------------------------------------------------------

impl Tensor {
    /// The whole storage this tensor views, typed with the tensor's dtype
    /// (PyTorch's deprecated `tensor.storage()`). Warns; use
    /// [`untyped_storage`](Tensor::untyped_storage) instead, which never does.
    #[track_caller]
    pub fn storage(&self) -> TypedStorage {
        deprecated();
        TypedStorage::internal(self.untyped_storage().clone(), self.dtype())
    }

    /// The legacy class of the tensor's storage, if PyTorch has one
    /// (PyTorch's `tensor.storage_type()`). Warns.
    #[track_caller]
    pub fn storage_type(&self) -> Option<LegacyClass> {
        deprecated();
        legacy_class_of(self.dtype(), self.device())
    }
}
