//! Page-locked (pinned) host memory: PyTorch's `pin_memory()` / `is_pinned()`.
//!
//! A pinned storage is a copy whose pages are locked in RAM with `mlock`, so
//! they are never swapped out (the property DMA transfers to accelerators rely
//! on). The lock is released when the storage is dropped. The kernel limits how
//! much a process may lock (`RLIMIT_MEMLOCK`); a refusal is a typed error.
//!
//! Compiled with the `pinned` feature (on by default).

use super::heap::HeapBuffer;
use super::{Backing, UntypedStorage};
use crate::error::StorageError;
use crate::{Error, Result};

/// A heap buffer whose pages are locked in RAM while it lives.
pub(crate) struct PinnedBuffer(HeapBuffer);

impl PinnedBuffer {
    fn lock(buf: HeapBuffer) -> Result<PinnedBuffer> {
        if buf.len() > 0 {
            // SAFETY: the range is the buffer's own live allocation; `mlock` only
            // changes whether its pages may be swapped.
            let rc = unsafe { libc::mlock(buf.as_slice().as_ptr().cast(), buf.len()) };
            if rc != 0 {
                let source = std::io::Error::last_os_error();
                return Err(Error::Storage(StorageError::PinFailed {
                    nbytes: buf.len(),
                    limit: memlock_limit(),
                    source,
                }));
            }
        }
        Ok(PinnedBuffer(buf))
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        self.0.as_slice()
    }
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        self.0.as_mut_slice()
    }
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
    pub(crate) fn addr(&self) -> usize {
        self.0.addr()
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if self.0.len() > 0 {
            // SAFETY: unlocks the range locked in `lock`, which is still allocated
            // (the `HeapBuffer` is dropped after this).
            unsafe { libc::munlock(self.0.as_slice().as_ptr().cast(), self.0.len()) };
        }
    }
}

/// The soft `RLIMIT_MEMLOCK`, in bytes (`None`: unlimited or unknown).
fn memlock_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable `rlimit`.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    (rc == 0 && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
}

impl UntypedStorage {
    /// A copy of this storage in page-locked memory (PyTorch's `pin_memory()`).
    ///
    /// # Errors
    /// [`StorageError::NotPinnable`] for a storage that is not on the cpu (PyTorch: "cannot pin …
    /// only CPU memory can be pinned"), [`StorageError::NoData`] without bytes, and
    /// [`StorageError::PinFailed`] with the lock limit when the kernel refuses.
    pub fn pin_memory(&self) -> Result<UntypedStorage> {
        if !self.device().is_cpu() {
            return Err(Error::Storage(StorageError::NotPinnable {
                device: self.device(),
            }));
        }
        let copy = self.with_bytes("pin_memory", HeapBuffer::from_slice)??;
        Ok(Self::from_backing(
            self.device(),
            Backing::Pinned(PinnedBuffer::lock(copy)?),
        ))
    }

    /// True for a storage in page-locked memory.
    pub fn is_pinned(&self) -> bool {
        matches!(&*self.read_lock(), Backing::Pinned(_))
    }
}
