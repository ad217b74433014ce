//! A storage's bytes as a Python buffer: what torch (`torch.frombuffer`)
//! and numpy (`numpy.frombuffer`) build their storages on, without a copy.

use std::ffi::c_int;

use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use stowage::UntypedStorage;

/// The bytes of one storage of a loaded checkpoint. Every tensor of the
/// checkpoint that viewed this storage is built on this one buffer, so they
/// share memory in Python as they did in the file.
///
/// The object is the only owner of its storage: the checkpoint it came from
/// is dropped once converted, and nothing here resizes, so the bytes stay
/// where they are for as long as Python holds the object.
#[pyclass(module = "stowage._stowage", name = "StorageBuffer", frozen)]
pub struct StorageBuffer {
    storage: UntypedStorage,
    /// Whether Python may write: false only for a backing without writable
    /// bytes (none of a load's backings today, checked at creation).
    writable: bool,
}

impl StorageBuffer {
    /// Wraps `storage`, which must hold bytes (not meta).
    pub fn new(storage: UntypedStorage) -> StorageBuffer {
        let writable = storage.bytes_mut().is_ok();
        StorageBuffer { storage, writable }
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
        if !this.writable && (flags & ffi::PyBUF_WRITABLE) != 0 {
            return Err(PyBufferError::new_err("the storage is read-only"));
        }
        let len = this.storage.nbytes();
        // An empty storage has no address; any non-null pointer serves for
        // zero bytes.
        let ptr = match this.storage.data_ptr() {
            0 => std::ptr::NonNull::<u8>::dangling().as_ptr(),
            addr => addr as *mut u8,
        };
        let len = ffi::Py_ssize_t::try_from(len)
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
                c_int::from(!this.writable),
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
