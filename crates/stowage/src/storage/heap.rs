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
//! page). Smaller buffers come from the global allocator, but for a load's
//! smallest (up to 256 bytes), carved from shared blocks (`blocks.rs`).
//!
//! A storage's mapping asks nothing of transparent huge pages: the kernel's
//! own policy applies, as it does to PyTorch's allocator. Asking
//! (`MADV_HUGEPAGE`) made the first load of a process 5-10 times slower on
//! the virtual machines this is measured on, whose free 2 MiB blocks have
//! been handed back to the host and fault in there again page by page
//! (`docs/performance.md`, "Huge pages and the first load").
//!
//! A buffer can also adopt a `Vec<T>` ([`HeapBuffer::adopt`], behind
//! `Tensor::from_vec`): it keeps the vector's allocation, so nothing is
//! copied, and frees it as a `Vec<T>` (with `T`'s layout) when dropped. Such
//! a buffer is aligned for `T`, not to [`ALIGN`]: element-typed reads of it
//! as `T` never fail, and the copy kernels fall back to byte copies where a
//! wider element type would be misaligned.

use crate::error::{StorageError, TensorError};
use std::alloc::{self, Layout};
use std::any::Any;
use std::ptr::NonNull;

use memmap2::MmapMut;

use super::blocks::Block;
use crate::{Error, Result};
use std::sync::Arc;

/// Alignment, in bytes, of every heap storage stowage allocates (a storage
/// that adopted a `Vec<T>` keeps that vector's alignment, `T`'s).
pub const ALIGN: usize = 64;

/// Size from which buffers are anonymous mappings rather than allocations.
pub const LARGE: usize = 1 << 20;

/// A transparent huge page's size (x86-64 and aarch64 with 4 KiB pages).
const HUGE: usize = 2 << 20;

/// Asks the kernel to back the whole 2 MiB pages inside `bytes` with
/// transparent huge pages, as [`HeapBuffer::zeroed`] does for its mappings:
/// for a large buffer from the global allocator (a `Vec` result) that is
/// about to be written for the first time, this cuts the cost of its page
/// faults. Only a hint: it does nothing under [`LARGE`] bytes or off Linux,
/// and never changes the bytes.
pub(crate) fn advise_huge_pages(bytes: &mut [u8]) {
    #[cfg(target_os = "linux")]
    {
        if bytes.len() < LARGE {
            return;
        }
        let first = bytes.as_mut_ptr() as usize;
        let start = first.next_multiple_of(HUGE);
        let end = (first + bytes.len()) / HUGE * HUGE;
        if end > start {
            // SAFETY: `start..end` lies inside `bytes`, which is borrowed exclusively,
            // and starts on a page boundary; `MADV_HUGEPAGE` changes how the kernel
            // backs those pages, never what they hold. The result is ignored: a
            // refusal leaves ordinary pages, which work as before.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = bytes;
}

/// `len` zero bytes in a `Vec`, or [`StorageError::AllocationFailed`] when
/// the allocator refuses them: `vec![0; len]` would abort the process, and
/// with it any save in progress, leaving its temporary behind. Large ones
/// are [advised](advise_huge_pages) to use huge pages, as they are about to
/// be written.
pub(crate) fn zeroed_bytes(len: usize) -> Result<Vec<u8>> {
    let failed = || Error::Storage(StorageError::AllocationFailed { nbytes: len });
    if len == 0 {
        return Ok(Vec::new());
    }
    let layout = alloc::Layout::array::<u8>(len).map_err(|_| failed())?;
    // SAFETY: `layout` has a non-zero size (checked above).
    let raw = unsafe { alloc::alloc_zeroed(layout) };
    if raw.is_null() {
        return Err(failed());
    }
    // SAFETY: `raw` comes from the global allocator with the layout of
    // `[u8; len]` (alignment 1), as a `Vec<u8>` of capacity `len` allocates,
    // and all `len` bytes are initialised (zeroed). The `Vec` owns it now.
    let mut bytes = unsafe { Vec::from_raw_parts(raw, len, len) };
    advise_huge_pages(&mut bytes);
    Ok(bytes)
}

/// An owned, aligned, initialised byte buffer.
pub(crate) struct HeapBuffer {
    ptr: NonNull<u8>,
    len: usize,
    /// What owns the bytes, and so how they are freed.
    owner: Owner,
}

/// Who owns a [`HeapBuffer`]'s bytes, and so how they are freed: the
/// global allocator, with the layout `(len, ALIGN)` (nothing when `len` is
/// 0), or an owner that frees them when its last handle drops: a mapping of
/// a large buffer (`ptr` points into it), an adopted vector
/// ([`AdoptedVec`]), memory another owner allocated (a Python buffer, say),
/// or a block shared with other small buffers of one load
/// ([`Blocks`](super::blocks::Blocks)). One word of tag and two of handle:
/// a storage is held to 72 bytes (`mod.rs`), and most of a checkpoint's
/// storages are the allocator's or a block's.
enum Owner {
    Global,
    Keep { _owner: Arc<dyn Any + Send + Sync> },
}

/// The allocation of a `Vec<T>` with `capacity` elements, taken apart by
/// [`HeapBuffer::adopt`]; dropping it rebuilds the vector and drops that.
struct AdoptedVec<T> {
    ptr: NonNull<T>,
    capacity: usize,
}

// SAFETY: the struct only frees the allocation of a vector whose elements
// are `Send + Sync` (`adopt`'s bound); it hands out no access to them.
unsafe impl<T: Send + Sync> Send for AdoptedVec<T> {}
// SAFETY: see `Send`; `&AdoptedVec` gives no access to the elements.
unsafe impl<T: Send + Sync> Sync for AdoptedVec<T> {}

impl<T> Drop for AdoptedVec<T> {
    fn drop(&mut self) {
        // SAFETY: `adopt` took `ptr` and `capacity` from a `Vec<T>` it did not
        // drop, and this runs once; length 0 drops no elements (`T` is
        // `NoUninit`, so plain data, anyway).
        drop(unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), 0, self.capacity) });
    }
}

// SAFETY: the buffer exclusively owns its allocation, mapping, adopted vector
// buffer or block slot (a block's other slots are other buffers', disjoint;
// no aliasing pointers escape except through borrows of `self`; moving
// the `MmapMut` does not move the mapped pages `ptr` points to, and an adopted
// vector's elements are `Send + Sync`), so moving it between threads or
// sharing `&HeapBuffer` (which only hands out `&[u8]`) is as safe as for `Vec<u8>`.
unsafe impl Send for HeapBuffer {}
// SAFETY: see `Send`; `&HeapBuffer` only gives shared read access.
unsafe impl Sync for HeapBuffer {}

impl HeapBuffer {
    fn layout(len: usize) -> Result<Layout> {
        Layout::from_size_align(len, ALIGN).map_err(|_| {
            Error::Tensor(TensorError::SizeOverflow {
                what: "storage allocation",
                detail: format!("{len} bytes"),
            })
        })
    }

    /// A buffer of `len` zero bytes in transparent huge pages where the
    /// kernel grants them: from 2 MiB, an anonymous mapping aligned to
    /// 2 MiB (mapped 2 MiB larger, the head before the boundary never
    /// touched) whose whole 2 MiB pages are advised `MADV_HUGEPAGE` before
    /// the first write; the tail past the last whole page stays in 4 KiB
    /// pages, so it costs no resident memory beyond `len`. Where the kernel
    /// refuses the hint (transparent huge pages `never`) or has no huge page
    /// free, the pages are ordinary ones: the bytes are the same.
    pub(crate) fn zeroed_huge(len: usize) -> Result<Self> {
        #[cfg(target_os = "linux")]
        if len >= HUGE {
            let failed = || Error::Storage(StorageError::AllocationFailed { nbytes: len });
            let mut map = MmapMut::map_anon(len.checked_add(HUGE).ok_or_else(failed)?)
                .map_err(|_| failed())?;
            let base = map.as_mut_ptr();
            let skip = (base as usize).next_multiple_of(HUGE) - base as usize;
            // SAFETY: `skip < HUGE`, so `base + skip .. base + skip + len`
            // lies inside the mapping of `len + HUGE` bytes.
            let start = unsafe { base.add(skip) };
            let whole = len / HUGE * HUGE;
            // SAFETY: `start .. start + whole` lies inside the mapping (above),
            // which nothing else refers to yet, and starts on a 2 MiB
            // boundary; `MADV_HUGEPAGE` changes how the kernel backs those
            // pages, never what they hold. A refusal leaves ordinary pages.
            unsafe { libc::madvise(start.cast(), whole, libc::MADV_HUGEPAGE) };
            let ptr = NonNull::new(start).ok_or_else(failed)?;
            return Ok(HeapBuffer {
                ptr,
                len,
                owner: Owner::Keep {
                    _owner: Arc::new(map),
                },
            });
        }
        Self::zeroed(len)
    }

    /// A buffer of `len` zero bytes.
    pub(crate) fn zeroed(len: usize) -> Result<Self> {
        if len == 0 {
            return Ok(HeapBuffer {
                ptr: Self::dangling(),
                len: 0,
                owner: Owner::Global,
            });
        }
        if len >= LARGE {
            let mut map = MmapMut::map_anon(len)
                .map_err(|_| Error::Storage(StorageError::AllocationFailed { nbytes: len }))?;
            let ptr = NonNull::new(map.as_mut_ptr()).ok_or(Error::Storage(
                StorageError::AllocationFailed { nbytes: len },
            ))?;
            // Mappings are page-aligned, so ALIGN holds.
            return Ok(HeapBuffer {
                ptr,
                len,
                owner: Owner::Keep {
                    _owner: Arc::new(map),
                },
            });
        }
        let layout = Self::layout(len)?;
        // SAFETY: `layout` has a non-zero size (checked above) and a valid alignment.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(Error::Storage(StorageError::AllocationFailed {
            nbytes: len,
        }))?;
        Ok(HeapBuffer {
            ptr,
            len,
            owner: Owner::Global,
        })
    }

    /// A buffer over the elements of `values`, without copying them: the buffer
    /// owns the vector's allocation from now on and frees it as a `Vec<T>`.
    /// `T` has no uninitialised (padding) bytes, so every byte of the elements
    /// is initialised and may be read. Writes may then leave any byte pattern
    /// there, which is sound: the vector is gone, the bytes are never read as
    /// `T` again, and freeing them drops no element. An empty vector gives an
    /// empty buffer.
    pub(crate) fn adopt<T: bytemuck::NoUninit + Send + Sync>(values: Vec<T>) -> HeapBuffer {
        let len = std::mem::size_of_val(values.as_slice());
        if len == 0 {
            return HeapBuffer {
                ptr: Self::dangling(),
                len: 0,
                owner: Owner::Global,
            };
        }
        let mut values = std::mem::ManuallyDrop::new(values);
        let capacity = values.capacity();
        // The elements of a vector of `len > 0` bytes: its real allocation.
        let elements = NonNull::from(values.as_mut_slice()).cast::<T>();
        let owner = AdoptedVec {
            ptr: elements,
            capacity,
        };
        HeapBuffer {
            ptr: elements.cast::<u8>(),
            len,
            owner: Owner::Keep {
                _owner: Arc::new(owner),
            },
        }
    }

    /// A buffer over `len` bytes at `ptr` that `keep` owns.
    ///
    /// # Safety
    /// `ptr` is valid for reads and writes of `len` bytes for as long as
    /// `keep` lives.
    pub(crate) unsafe fn external(
        ptr: NonNull<u8>,
        len: usize,
        keep: Box<dyn Send + Sync>,
    ) -> Self {
        HeapBuffer {
            ptr: if len == 0 { Self::dangling() } else { ptr },
            len,
            owner: Owner::Keep {
                _owner: Arc::new(keep),
            },
        }
    }

    /// A buffer over `len` bytes at `ptr`, a slot of `block`.
    ///
    /// # Safety
    /// `ptr .. ptr + len` lies inside `block`, is zeroed, and is given to no
    /// other buffer.
    pub(super) unsafe fn carved(ptr: NonNull<u8>, len: usize, block: Arc<Block>) -> Self {
        HeapBuffer {
            ptr,
            len,
            owner: Owner::Keep { _owner: block },
        }
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
        // SAFETY: `ptr` is valid for `len` initialised bytes (zeroed at allocation, by
        // the kernel for a mapping that `self.owner` keeps alive, the elements of an
        // adopted vector whose allocation `self.owner` frees only on drop, external
        // memory `self.owner` keeps alive (the promise of `external`), a zeroed slot
        // of a block `self.owner` keeps alive and no other buffer is given (the
        // promise of `carved`), or dangling with len 0), and the borrow of `self`
        // keeps it alive and unaliased by writers.
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
        // Any other owner frees the bytes when its last handle, `self.owner`
        // here or another buffer's, drops.
        if let (Owner::Global, true) = (&self.owner, self.len != 0) {
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
    fn huge_buffers_are_aligned_to_huge_pages_zeroed_and_writable() {
        for len in [0, 100, HUGE - 1, HUGE, 3 * HUGE + 12345] {
            let mut buf = HeapBuffer::zeroed_huge(len).unwrap();
            assert_eq!(buf.len(), len);
            if cfg!(target_os = "linux") && len >= HUGE {
                assert_eq!(buf.as_slice().as_ptr() as usize % HUGE, 0, "{len}");
            }
            assert!(buf.as_slice().iter().all(|&b| b == 0));
            buf.as_mut_slice().fill(7);
            assert!(buf.as_slice().iter().all(|&b| b == 7));
        }
    }

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
        let is_map =
            |b: &HeapBuffer| matches!(&b.owner, Owner::Keep { _owner } if _owner.is::<MmapMut>());
        let mut b = HeapBuffer::zeroed(LARGE + 3).unwrap();
        assert!(is_map(&b));
        assert_eq!(b.addr() % ALIGN, 0);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.as_mut_slice()[LARGE] = 7;
        b.resize(10).unwrap();
        assert!(!is_map(&b));
        b.resize(2 * LARGE).unwrap();
        assert!(is_map(&b));
        assert_eq!(b.as_slice()[LARGE], 0);
        b.as_mut_slice()[2 * LARGE - 1] = 9;
        let copy = HeapBuffer::from_slice(b.as_slice()).unwrap();
        assert_eq!(copy.as_slice()[2 * LARGE - 1], 9);
    }

    #[test]
    fn external_memory_is_used_in_place_and_released_by_its_owner() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        struct Owner(Vec<u8>, Arc<AtomicBool>);
        impl Drop for Owner {
            fn drop(&mut self) {
                self.1.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let mut owner = Box::new(Owner(vec![1, 2, 3, 4], dropped.clone()));
        let ptr = NonNull::new(owner.0.as_mut_ptr()).unwrap();
        // SAFETY: the vector's 4 bytes live as long as the owner, which the buffer holds.
        let mut b = unsafe { HeapBuffer::external(ptr, 4, owner) };
        assert_eq!(b.addr(), ptr.as_ptr() as usize);
        b.as_mut_slice()[0] = 9;
        assert_eq!(b.as_slice(), &[9, 2, 3, 4]);
        b.resize(6).unwrap();
        assert!(
            dropped.load(Ordering::SeqCst),
            "a resize releases the old memory"
        );
        assert_eq!(b.as_slice(), &[9, 2, 3, 4, 0, 0]);
    }

    #[test]
    fn adopted_vectors_keep_their_allocation() {
        let mut v: Vec<f64> = Vec::with_capacity(10);
        v.extend([1.5, -2.0, 3.25]);
        let ptr = v.as_ptr() as usize;
        let mut b = HeapBuffer::adopt(v);
        assert_eq!((b.addr(), b.len()), (ptr, 24));
        assert_eq!(
            b.as_slice(),
            bytemuck::cast_slice::<f64, u8>(&[1.5, -2.0, 3.25])
        );
        b.as_mut_slice()[..8].copy_from_slice(&7.0f64.to_ne_bytes());
        assert_eq!(b.as_slice()[..8], 7.0f64.to_ne_bytes());
        b.resize(4).unwrap();
        assert_eq!(b.as_slice(), &7.0f64.to_ne_bytes()[..4]);
        let empty = HeapBuffer::adopt(Vec::<u32>::with_capacity(8));
        assert_eq!((empty.len(), empty.addr()), (0, 0));
        let odd = HeapBuffer::adopt(vec![true, false, true]);
        assert_eq!(odd.as_slice(), &[1, 0, 1]);
    }
}
