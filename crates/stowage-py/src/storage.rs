//! A storage's bytes as a Python buffer: what torch (`torch.frombuffer`)
//! and numpy (`numpy.frombuffer`) build their storages on, without a copy;
//! or as a DLPack capsule, which torch builds a tensor on in one call.

use std::ffi::c_int;

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDevice, DLManagedTensor};
use dlpark::metadata::Fixed;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use stowage::{DType, UntypedStorage};

/// The bytes of one storage of a loaded checkpoint. Every tensor of the
/// checkpoint that viewed this storage is built on this one buffer, so they
/// share memory in Python as they did in the file.
///
/// The storage's bytes are in memory (a lazy storage is read when the
/// buffer is made) and stay where they are while the object lives: it holds
/// a handle, and nothing in this crate resizes a storage or writes to it
/// from Rust, so Python's reads and writes through the buffer are the only
/// accesses after it is made.
#[pyclass(module = "stowage._stowage", name = "StorageBuffer", frozen)]
pub struct StorageBuffer {
    storage: UntypedStorage,
    /// The bytes' address and size, read once with the storage's lock.
    ptr: usize,
    len: usize,
}

impl StorageBuffer {
    /// Wraps `storage`, reading it first if it is lazy.
    ///
    /// # Errors
    /// `NoData` for a storage without bytes (meta), and what reading a lazy
    /// storage's bytes fails with.
    pub fn new(storage: UntypedStorage) -> stowage::Result<StorageBuffer> {
        // Every backing with bytes is writable (heap, files and checkpoints
        // mapped copy-on-write); taking the exclusive access once also
        // moves a lazy storage into memory, where it then stays.
        let (ptr, len) = {
            let mut bytes = storage.bytes_mut()?;
            (bytes.as_mut_ptr() as usize, bytes.len())
        };
        Ok(StorageBuffer { storage, ptr, len })
    }

    /// The bytes' address: an empty storage has none, and any non-null
    /// pointer serves for zero bytes.
    fn addr(&self) -> *mut u8 {
        match self.ptr {
            0 => std::ptr::NonNull::<u8>::dangling().as_ptr(),
            addr => addr as *mut u8,
        }
    }

    /// The storage's id ([`UntypedStorage::id`]).
    pub fn storage_id(&self) -> usize {
        self.storage.id()
    }

    /// The bytes as a DLPack capsule (the unversioned `"dltensor"`, which
    /// every torch imports) of a one-dimensional tensor of `element` over
    /// all of them: torch builds a tensor on it (`torch._C._from_dlpack`)
    /// with no argument parsing and no Python object held for the storage,
    /// and drops the storage's handle the capsule holds without the GIL.
    ///
    /// # Errors
    /// `BufferError` for bytes that are not whole elements; Python's,
    /// making the capsule.
    #[allow(unsafe_code)] // A DLPack tensor hands torch a raw pointer.
    pub fn into_dlpack(self, py: Python<'_>, element: DLDataType) -> PyResult<Bound<'_, PyAny>> {
        let size = usize::from(element.bits / 8) * usize::from(element.lanes);
        let nbytes = self.len;
        if size == 0 || !nbytes.is_multiple_of(size) {
            return Err(PyBufferError::new_err(format!(
                "a storage of {nbytes} bytes is not whole elements of {size} bytes"
            )));
        }
        let len = i64::try_from(nbytes / size)
            .map_err(|_| PyBufferError::new_err("the storage is larger than a tensor can be"))?;
        let ptr = self.addr();
        let mut tensor = Fixed::new([len], [1_i64])
            .initialize_as::<DLManagedTensor>(Box::new(self.storage))
            .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        tensor
            .set_data(ptr.cast())
            .set_device(DLDevice::CPU)
            .set_dtype(element);
        // SAFETY: `ptr` addresses the `len` elements the storage holds (or,
        // for none, is a non-null pointer that reads nothing); the storage
        // is the tensor's context, so it lives until the consumer calls the
        // deleter, and nothing resizes or frees its bytes meanwhile (see the
        // type's doc). The shape and strides are the builder's own.
        let managed = unsafe { tensor.finish() };
        managed.into_pyobject(py)
    }
}

/// The DLPack element type that torch imports as `dtype`, for the dtypes
/// every torch the adapter hands capsules to (2.4 on) imports: IEEE and
/// brain floats, signed integers, `uint8`, `bool` and complex of 64 and 128
/// bits. `None` for the others (the wider unsigned integers, 8-bit floats,
/// quantized and bits dtypes), which go through the buffer protocol.
pub fn dlpack_type(dtype: DType) -> Option<DLDataType> {
    let code = match dtype {
        DType::Float64 | DType::Float32 | DType::Float16 => DLDataTypeCode::FLOAT,
        DType::BFloat16 => DLDataTypeCode::BFLOAT,
        DType::Int64 | DType::Int32 | DType::Int16 | DType::Int8 => DLDataTypeCode::INT,
        DType::UInt8 => DLDataTypeCode::UINT,
        DType::Bool => DLDataTypeCode::BOOL,
        DType::Complex128 | DType::Complex64 => DLDataTypeCode::COMPLEX,
        _ => return None,
    };
    let bits = u8::try_from(dtype.size() * 8).ok()?;
    Some(DLDataType::scalar(code, bits))
}

/// A storage of a lazy load (`stowage.load(lazy=True)`), not read yet:
/// [`read`](PendingStorage::read) reads its bytes (once; the storage keeps
/// them) and gives the [`StorageBuffer`] the adapter builds on.
#[pyclass(module = "stowage._stowage", name = "PendingStorage", frozen)]
pub struct PendingStorage {
    storage: UntypedStorage,
    nbytes: usize,
    /// The first tensor path that reached it, for the error of a failed read.
    path: String,
}

impl PendingStorage {
    pub fn new(storage: UntypedStorage, nbytes: usize, path: String) -> PendingStorage {
        PendingStorage {
            storage,
            nbytes,
            path,
        }
    }
}

#[pymethods]
impl PendingStorage {
    /// Reads the storage's bytes, the GIL released.
    fn read(&self, py: Python<'_>) -> PyResult<StorageBuffer> {
        let storage = self.storage.clone();
        py.detach(|| StorageBuffer::new(storage))
            .map_err(|e| crate::errors::to_py(py, stowage::ErrorContext::at_path(e, &self.path)))
    }

    /// The size in bytes.
    fn __len__(&self) -> usize {
        self.nbytes
    }
}

#[pymethods]
#[allow(unsafe_code)] // The buffer protocol hands CPython a raw pointer.
impl StorageBuffer {
    /// The size in bytes.
    fn __len__(&self) -> usize {
        self.storage.nbytes()
    }

    /// Exposes the bytes as a one-dimensional buffer of unsigned bytes.
    ///
    /// # Safety
    /// Called by CPython with a valid `view` to fill.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let this = slf.get();
        let ptr = this.addr();
        let len = ffi::Py_ssize_t::try_from(this.len)
            .map_err(|_| PyBufferError::new_err("the storage is larger than a buffer can be"))?;
        // SAFETY: `view` is CPython's to fill. `ptr` addresses `len` bytes
        // owned by `this.storage`, which lives while the buffer's `obj` (a
        // new reference to `slf`, taken by PyBuffer_FillInfo) does; nothing
        // resizes or frees the storage meanwhile (see the type's doc).
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                ptr.cast(),
                len,
                0, // writable
                flags,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(PyErr::fetch(slf.py()))
        }
    }
}
