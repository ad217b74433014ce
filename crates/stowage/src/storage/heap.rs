//! Heap backing: a zero-initialised, 64-byte-aligned byte buffer.
//!
//! 64-byte alignment matches PyTorch's CPU allocator and the alignment of
//! records in a checkpoint, so every element of every dtype is aligned and
//! the copy kernels can use typed loads. This is the one place that owns raw
//! heap memory.
//!
//! Buffers of [`LARGE`] bytes or more are anonymous memory mappings
//! (`memmap2::MmapMut::map_anon`): the kernel hands out zero pages lazily,
//! so nothing is written twice (the global allocator's `alloc_zeroed` with
//! an alignment above 16 is `posix_memalign` followed by a `memset` of every
//! page), and transparent huge pages are requested (`MADV_HUGEPAGE`), which
//! cuts page-fault cost by a factor of about 500 per byte where the kernel
//! grants them. Smaller buffers come from the global allocator.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use memmap2::MmapMut;

use crate::{Error, Result};

/// Alignment of every heap storage, in bytes.
pub const ALIGN: usize = 64;

/// Size from which buffers are anonymous mappings rather than allocations.
pub const LARGE: usize = 1 << 20;

/// An owned, aligned, zero-initialised byte buffer.
pub(crate) struct HeapBuffer {
    ptr: NonNull<u8>,
    len: usize,
    /// The mapping that owns the bytes of a large buffer (`ptr` points into it);
    /// `None` when the bytes come from the global allocator.
    map: Option<MmapMut>,
}

// SAFETY: the buffer exclusively owns its allocation or mapping (no aliasing
// pointers escape except through borrows of `self`; moving the `MmapMut` does not
// move the mapped pages `ptr` points to), so moving it between threads or
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
                map: None,
            });
        }
        if len >= LARGE {
            let mut map =
                MmapMut::map_anon(len).map_err(|_| Error::AllocationFailed { nbytes: len })?;
            #[cfg(target_os = "linux")]
            {
                // Only a hint: without transparent huge pages the mapping still works.
                let _ = map.advise(memmap2::Advice::HugePage);
            }
            let ptr =
                NonNull::new(map.as_mut_ptr()).ok_or(Error::AllocationFailed { nbytes: len })?;
            // Mappings are page-aligned, so ALIGN holds.
            return Ok(HeapBuffer {
                ptr,
                len,
                map: Some(map),
            });
        }
        let layout = Self::layout(len)?;
        // SAFETY: `layout` has a non-zero size (checked above) and a valid alignment.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(Error::AllocationFailed { nbytes: len })?;
        Ok(HeapBuffer {
            ptr,
            len,
            map: None,
        })
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
        // SAFETY: `ptr` is valid for `len` initialised bytes (zeroed at allocation or by
        // the kernel for a mapping that `self.map` keeps alive,
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
        // A mapping unmaps itself when `self.map` drops.
        if self.len != 0 && self.map.is_none() {
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

    #[test]
    fn large_buffers_are_mapped_zeroed_and_aligned() {
        let mut b = HeapBuffer::zeroed(LARGE + 3).unwrap();
        assert!(b.map.is_some());
        assert_eq!(b.addr() % ALIGN, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[LARGE] = 7;
        b.resize(10).unwrap();
        assert!(b.map.is_none());
        b.resize(2 * LARGE).unwrap();
        assert!(b.map.is_some());
        assert_eq!(b.as_slice()[LARGE], 0);
        b.as_mut_slice()[2 * LARGE - 1] = 9;
        let copy = HeapBuffer::from_slice(b.as_slice()).unwrap();
        assert_eq!(copy.as_slice()[2 * LARGE - 1], 9);
    }
}
