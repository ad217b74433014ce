//! Heap backing: a zero-initialised, 64-byte-aligned byte buffer.
//!
//! 64-byte alignment matches PyTorch's CPU allocator and the alignment of
//! records in a checkpoint, so every element of every dtype is aligned and
//! the copy kernels can use typed loads. This is the one place that owns raw
//! heap memory.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use crate::{Error, Result};

/// Alignment of every heap storage, in bytes.
pub const ALIGN: usize = 64;

/// An owned, aligned, zero-initialised byte buffer.
pub(crate) struct HeapBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer exclusively owns its allocation (no aliasing pointers
// escape except through borrows of `self`), so moving it between threads or
// sharing `&HeapBuffer` (which only hands out `&[u8]`) is as safe as for `Vec<u8>`.
unsafe impl Send for HeapBuffer {}
// SAFETY: see `Send`; `&HeapBuffer` only gives shared read access.
unsafe impl Sync for HeapBuffer {}

impl HeapBuffer {
    fn layout(len: usize) -> Result<Layout> {
        Layout::from_size_align(len, ALIGN).map_err(|_| Error::SizeOverflow {
            what: "storage allocation",
            detail: format!("{len} bytes"),
        })
    }

    /// A buffer of `len` zero bytes.
    pub(crate) fn zeroed(len: usize) -> Result<Self> {
        if len == 0 {
            return Ok(HeapBuffer {
                ptr: Self::dangling(),
                len: 0,
            });
        }
        let layout = Self::layout(len)?;
        // SAFETY: `layout` has a non-zero size (checked above) and a valid alignment.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(Error::AllocationFailed { nbytes: len })?;
        Ok(HeapBuffer { ptr, len })
    }

    /// A buffer holding a copy of `bytes`.
    pub(crate) fn from_slice(bytes: &[u8]) -> Result<Self> {
        let mut buf = Self::zeroed(bytes.len())?;
        buf.as_mut_slice().copy_from_slice(bytes);
        Ok(buf)
    }

    fn dangling() -> NonNull<u8> {
        // An aligned, non-null address that is never dereferenced for a zero-length buffer.
        NonNull::new(ALIGN as *mut u8).expect("ALIGN is non-zero")
    }

    /// Number of bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The address of the first byte, or 0 for an empty buffer (as PyTorch reports).
    pub(crate) fn addr(&self) -> usize {
        if self.len == 0 {
            0
        } else {
            self.ptr.as_ptr() as usize
        }
    }

    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialised bytes (zeroed at allocation,
        // or dangling with len 0), and the borrow of `self` keeps it alive and unaliased by writers.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, mutably.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Resizes to `new_len`, keeping the common prefix and zero-filling growth.
    /// The address changes, as it does in PyTorch.
    pub(crate) fn resize(&mut self, new_len: usize) -> Result<()> {
        let mut next = Self::zeroed(new_len)?;
        let keep = self.len.min(new_len);
        next.as_mut_slice()[..keep].copy_from_slice(&self.as_slice()[..keep]);
        *self = next;
        Ok(())
    }
}

impl Drop for HeapBuffer {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: `ptr` was returned by `alloc_zeroed` with exactly this layout
            // (the layout was valid then, so it is valid now) and is freed once, here.
            unsafe {
                alloc::dealloc(
                    self.ptr.as_ptr(),
                    Layout::from_size_align_unchecked(self.len, ALIGN),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_aligned_and_resizable() {
        let mut b = HeapBuffer::zeroed(100).unwrap();
        assert_eq!(b.addr() % ALIGN, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[..3].copy_from_slice(&[1, 2, 3]);
        b.resize(200).unwrap();
        assert_eq!(&b.as_slice()[..4], &[1, 2, 3, 0]);
        assert!(b.as_slice()[100..].iter().all(|&x| x == 0));
        b.resize(2).unwrap();
        assert_eq!(b.as_slice(), &[1, 2]);
        b.resize(0).unwrap();
        assert_eq!(b.addr(), 0);
        assert!(HeapBuffer::zeroed(usize::MAX).is_err());
    }
}
