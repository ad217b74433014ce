//! Storage bytes that live inside a memory mapping: a file mapped by
//! [`UntypedStorage::from_file`](super::UntypedStorage::from_file), a POSIX
//! shared-memory object, or one record of a checkpoint mapped whole.
//!
//! A [`MappedBytes`] is a pointer and a length into a mapping that an owner
//! object keeps alive (the owner may also clean up: unlink a shared-memory
//! name). Several `MappedBytes` may share one owner (the records of one
//! mapped checkpoint); they never overlap, so each storage's lock guards
//! exactly its own bytes.

use std::any::Any;
use std::collections::BTreeMap;
use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use memmap2::MmapMut;

/// Anything that keeps a mapping alive.
pub(crate) type Owner = Arc<dyn Any + Send + Sync>;

/// A byte range inside a mapping kept alive by `owner`.
pub(crate) struct MappedBytes {
    ptr: NonNull<u8>,
    len: usize,
    owner: Owner,
}

// SAFETY: the bytes are reached only through `&self`/`&mut self` (shared or
// exclusive borrows, which the storage's lock hands out), the range is not
// shared with any other `MappedBytes` (constructors' contract), and the owner
// that keeps the mapping alive is itself `Send + Sync`.
unsafe impl Send for MappedBytes {}
// SAFETY: as for `Send`; `&MappedBytes` only gives shared reads.
unsafe impl Sync for MappedBytes {}

/// A mapping owned by one storage, with what the storage needs to know about it.
struct Mapping<E> {
    _map: Option<MmapMut>,
    extra: E,
}

impl MappedBytes {
    /// The whole of `map` (none: no bytes, as for an empty file), owned together
    /// with `extra` (a path, a shared-memory name …) that [`extra`](Self::extra) returns.
    pub(crate) fn own<E: Any + Send + Sync>(map: Option<MmapMut>, extra: E) -> MappedBytes {
        let mut map = map;
        let (ptr, len) = match map.as_mut() {
            Some(m) => (
                NonNull::new(m.as_mut_ptr()).unwrap_or(NonNull::dangling()),
                m.len(),
            ),
            None => (NonNull::dangling(), 0),
        };
        // Moving the `MmapMut` into the owner does not move the mapped pages.
        let owner: Owner = Arc::new(Mapping { _map: map, extra });
        MappedBytes { ptr, len, owner }
    }

    /// What was passed to [`own`](Self::own) as `extra`, if it was an `E`.
    pub(crate) fn extra<E: Any>(&self) -> Option<&E> {
        self.owner.downcast_ref::<Mapping<E>>().map(|m| &m.extra)
    }

    /// Bytes `offset..offset + len` of a shared mapping.
    ///
    /// # Safety
    /// `base` must be the start of a mapping of at least `offset + len` bytes
    /// that `owner` keeps alive and that nothing else writes, and the range must
    /// not overlap the range of any other live `MappedBytes`.
    pub(crate) unsafe fn slice(
        base: NonNull<u8>,
        offset: usize,
        len: usize,
        owner: Owner,
    ) -> MappedBytes {
        // SAFETY: in bounds of the mapping by the caller's contract.
        let ptr = unsafe { NonNull::new_unchecked(base.as_ptr().add(offset)) };
        MappedBytes { ptr, len, owner }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn addr(&self) -> usize {
        if self.len == 0 {
            0
        } else {
            self.ptr.as_ptr() as usize
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` lies in a live mapping (kept by `owner`), is readable,
        // and no `&mut` to it exists while `&self` is borrowed (the range is ours alone).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; the mappings made here are writable (shared or
        // copy-on-write), and `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

/// A whole file mapped once, read by position while a loader cuts it into
/// storages. Held as memmap2's `MmapRaw`, whose pointer and length come
/// without a reference to the whole mapping (an `MmapMut` would make one, a
/// `&[u8]` over the bytes storages hold `&mut` to), and reads copy out through
/// the raw pointer.
pub(crate) struct MappedFile {
    map: memmap2::MmapRaw,
}

impl MappedFile {
    /// Maps `file` copy-on-write (`MAP_PRIVATE`), as `torch.load(mmap=True)` does by default.
    ///
    /// # Safety
    /// The file must not be modified or truncated while the mapping lives.
    pub(crate) unsafe fn private(file: &std::fs::File) -> io::Result<Arc<MappedFile>> {
        // SAFETY: the caller promises the file stays as it is.
        let map = unsafe { memmap2::MmapOptions::new().map_copy(file)? };
        Ok(Arc::new(MappedFile { map: map.into() }))
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The first byte of the mapping: the raw pointer `mmap` gave (`MmapRaw`
    /// derives it from no reference), so writing through it, as the storages
    /// made from this mapping do, is allowed.
    pub(crate) fn base(&self) -> NonNull<u8> {
        NonNull::new(self.map.as_mut_ptr()).unwrap_or(NonNull::dangling())
    }

    /// Copies `buf.len()` bytes at `offset` into `buf`.
    pub(crate) fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.map.len() as u64);
        if end.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the mapped file",
            ));
        }
        // SAFETY: the range is inside the mapping (checked above), `buf` is a distinct
        // allocation, and during a load no storage writes to the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base().as_ptr().add(offset as usize),
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        Ok(())
    }
}

/// The records of a mapped checkpoint handed out as storages, so that no two
/// storages share bytes: two storages over overlapping records of a hostile
/// archive would alias under different locks, so such a record is refused here
/// (and the loader copies it instead). This is the only way a loader makes a
/// storage over part of a mapped file, so the loaders need no `unsafe`.
pub(crate) struct MappedRecords {
    map: Arc<MappedFile>,
    /// Start → end of each range handed out.
    taken: BTreeMap<u64, u64>,
}

impl MappedRecords {
    pub(crate) fn new(map: Arc<MappedFile>) -> MappedRecords {
        MappedRecords {
            map,
            taken: BTreeMap::new(),
        }
    }

    /// A storage over bytes `start..start + len` of the mapping, tagged `device`, or
    /// `None` when the range runs past the mapping or overlaps a range handed out before.
    pub(crate) fn storage(
        &mut self,
        start: u64,
        len: usize,
        device: crate::Device,
    ) -> Option<super::UntypedStorage> {
        let start = self.claim(start, len)?;
        let owner: Owner = self.map.clone();
        // SAFETY: `claim` checked that `start..start + len` lies inside the mapping,
        // which `owner` keeps alive, and overlaps no other range handed out from it.
        let bytes = unsafe { MappedBytes::slice(self.map.base(), start, len, owner) };
        Some(super::UntypedStorage::from_backing(
            device,
            super::Backing::Mapped(bytes),
        ))
    }

    /// Points `storage` at bytes `start..start + storage.nbytes()` of the mapping
    /// instead of its own (for loaders that create storages before they know where
    /// their bytes are). Returns `false`, changing nothing, when the range runs past
    /// the mapping or overlaps a range handed out before.
    pub(crate) fn redirect(&mut self, storage: &super::UntypedStorage, start: u64) -> bool {
        let mut backing = storage.write_lock();
        let len = backing.nbytes();
        let Some(start) = self.claim(start, len) else {
            return false;
        };
        let owner: Owner = self.map.clone();
        // SAFETY: as in `storage`.
        let bytes = unsafe { MappedBytes::slice(self.map.base(), start, len, owner) };
        *backing = super::Backing::Mapped(bytes);
        true
    }

    /// Claims `start..start + len` if it lies inside the mapping and overlaps no
    /// range handed out before; returns `start` as an index into the mapping.
    fn claim(&mut self, start: u64, len: usize) -> Option<usize> {
        let end = start.checked_add(len as u64)?;
        if end > self.map.len() as u64 {
            return None;
        }
        if start != end {
            let before = self
                .taken
                .range(..=start)
                .next_back()
                .is_some_and(|(_, &e)| e > start);
            let after = self
                .taken
                .range(start..)
                .next()
                .is_some_and(|(&s, _)| s < end);
            if before || after {
                return None;
            }
            self.taken.insert(start, end);
        }
        usize::try_from(start).ok()
    }

    /// A positional reader of the whole mapped file.
    pub(crate) fn reader(&self) -> MappedReader {
        MappedReader(self.map.clone())
    }
}

/// A mapped file read by position (for the archive reader while a loader cuts
/// the mapping into storages).
pub(crate) struct MappedReader(pub(crate) Arc<MappedFile>);

impl crate::io::ReadAt for MappedReader {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_at(buf, offset)
    }
}
