//! Small buffers of one load, carved from shared blocks.
//!
//! A checkpoint of many small tensors (biases, norms, scalars) would make an
//! allocation of 64-byte alignment ([`ALIGN`]) each. glibc serves one by
//! over-allocating and freeing the misaligned head and tail of the chunk
//! (`_int_memalign`): a load of 300,000 tensors of 32 bytes left about 45
//! bytes of fragments a storage, and spent a tenth of its time splitting and
//! merging them (`docs/performance.md`, "Fewer allocations a tensor, and
//! small storages in blocks"). An eager load carves its storages of at most
//! [`SMALL`] bytes from blocks of [`BLOCK`] bytes instead, each in a slot of
//! its own that starts on a 64-byte boundary, as its own allocation would,
//! so no two share a cache line.
//!
//! A block is freed when the last buffer carved from it goes: a small tensor
//! kept from a load keeps at most one block (16 KiB) allocated.

use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::Arc;

use super::heap::{HeapBuffer, ALIGN};
use crate::error::StorageError;
use crate::{Error, Result};

/// The largest buffer carved from a block.
pub(crate) const SMALL: usize = 256;

/// A block's size: 64 slots of [`SMALL`] bytes, or 256 of 64.
const BLOCK: usize = 16 << 10;

/// One block's memory, freed when the last buffer carved from it drops
/// (each holds the block).
pub(super) struct Block {
    ptr: NonNull<u8>,
}

// SAFETY: the block only owns its allocation and hands out no access of its
// own; the buffers carved from it reach disjoint slots through their own
// pointers (see `HeapBuffer::carved`), so moving or sharing the owner across
// threads is as safe as moving a `Box<[u8]>`.
unsafe impl Send for Block {}
// SAFETY: see `Send`; `&Block` gives no access to the bytes.
unsafe impl Sync for Block {}

impl Block {
    fn layout() -> Layout {
        // BLOCK and ALIGN are non-zero, ALIGN a power of two dividing BLOCK.
        Layout::from_size_align(BLOCK, ALIGN).expect("a valid block layout")
    }

    fn new() -> Result<Block> {
        // SAFETY: the layout has a non-zero size and a valid alignment.
        let raw = unsafe { alloc::alloc_zeroed(Self::layout()) };
        let ptr = NonNull::new(raw).ok_or(Error::Storage(StorageError::AllocationFailed {
            nbytes: BLOCK,
        }))?;
        Ok(Block { ptr })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed` with this layout and is freed
        // once, here, when no buffer carved from it is left (each held an `Arc`).
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout()) }
    }
}

/// Carves a load's small zeroed buffers from blocks, in order; larger ones
/// are allocations of their own ([`HeapBuffer::zeroed`]).
#[derive(Default)]
pub(crate) struct Blocks {
    current: Option<Arc<Block>>,
    /// Bytes of `current` handed out, a multiple of [`ALIGN`].
    used: usize,
}

impl Blocks {
    /// A buffer of `len` zero bytes, 64-byte aligned.
    ///
    /// # Errors
    /// [`StorageError::AllocationFailed`], as [`HeapBuffer::zeroed`].
    pub(crate) fn zeroed(&mut self, len: usize) -> Result<HeapBuffer> {
        if len == 0 || len > SMALL {
            return HeapBuffer::zeroed(len);
        }
        let slot = len.next_multiple_of(ALIGN);
        let block = match &self.current {
            Some(block) if self.used + slot <= BLOCK => Arc::clone(block),
            _ => {
                let block = Arc::new(Block::new()?);
                self.current = Some(Arc::clone(&block));
                self.used = 0;
                block
            }
        };
        // SAFETY: `used + slot <= BLOCK`, so the slot lies inside the block.
        let ptr = unsafe { block.ptr.add(self.used) };
        self.used += slot;
        // SAFETY: `ptr .. ptr + len` lies in the block (above), whose bytes
        // were zeroed and which no other buffer is given: `used` moved past it.
        Ok(unsafe { HeapBuffer::carved(ptr, len, block) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small buffers are aligned, zeroed and disjoint, share blocks, and
    /// outlive the carver and each other in any order; larger ones are
    /// allocations of their own.
    #[test]
    fn small_buffers_are_aligned_zeroed_and_disjoint() {
        let mut blocks = Blocks::default();
        let mut bufs: Vec<HeapBuffer> = (0..1000)
            .map(|i| blocks.zeroed(1 + i % SMALL).unwrap())
            .collect();
        let big = blocks.zeroed(SMALL + 1).unwrap();
        assert_eq!((big.len(), big.addr() % ALIGN), (SMALL + 1, 0));
        assert_eq!(blocks.zeroed(0).unwrap().len(), 0);
        drop(blocks);
        for (i, b) in bufs.iter_mut().enumerate() {
            assert_eq!((b.len(), b.addr() % ALIGN), (1 + i % SMALL, 0));
            assert!(b.as_slice().iter().all(|&x| x == 0));
            b.as_mut_slice().fill(i as u8);
        }
        let mut ranges: Vec<_> = bufs
            .iter()
            .map(|b| (b.addr(), b.addr() + b.len()))
            .collect();
        ranges.sort_unstable();
        assert!(ranges.windows(2).all(|w| w[0].1 <= w[1].0), "slots overlap");
        // Every other buffer goes first; the rest keep their bytes.
        let mut i = 0;
        bufs.retain(|_| {
            i += 1;
            i % 2 == 0
        });
        for (k, b) in bufs.iter().enumerate() {
            let i = 2 * k + 1;
            assert!(b.as_slice().iter().all(|&x| x == i as u8));
        }
    }
}
