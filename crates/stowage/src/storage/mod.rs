//! `UntypedStorage`: a flat array of bytes on a device, shared by handle.
//!
//! NOTE [storage identity]: a storage is an `Arc` around its backing. Cloning
//! the handle (Rust's `Clone`) shares the bytes, like `b = a` in Python; every
//! tensor viewing a storage holds such a handle. Identity is the `Arc`
//! ([`UntypedStorage::is_same`]), which is what checkpoint sharing keys on,
//! and [`UntypedStorage::data_ptr`] reports the address of the bytes as PyTorch does.
//!
//! NOTE [sound sharing]: views alias, so the bytes sit behind a `RwLock`.
//! Reads take the shared lock, writes the exclusive one, and no `&mut [u8]`
//! exists while another handle can see the bytes. Operations on two storages
//! (`with_pair`) lock them in one order, lowest address first
//! (`StorageImpl::lock_order`), so that concurrent `a.copy_(b)` and
//! `b.copy_(a)` cannot deadlock. Under loom the order is the order the
//! storages were created (a sequence number, `StorageImpl::rank`): loom
//! replays schedules and needs the program to repeat itself, and with
//! address order the order flipped between its iterations as the allocator
//! reused memory (loom stopped on its internal assertion "expected to be
//! able to acquire lock"). A guard returned by [`UntypedStorage::bytes`]
//! must be dropped before writing to the same storage on the same thread.

mod blocks;
mod file;
mod heap;
mod lazy;
mod mapped;
#[cfg(feature = "pinned")]
mod pinned;
#[cfg(feature = "shm")]
mod shm;

use crate::error::StorageError;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::PoisonError;

use crate::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub(crate) use blocks::Blocks;
pub use heap::ALIGN;
pub(crate) use heap::{advise_huge_pages, zeroed_bytes, HeapBuffer};
pub(crate) use lazy::Fetch;
use lazy::LazyBytes;
pub(crate) use mapped::{MappedBytes, MappedFile, MappedRecords};
#[cfg(feature = "pinned")]
use pinned::PinnedBuffer;
#[cfg(feature = "shm")]
pub use shm::{SharedMemoryHandle, SharingStrategy};

use crate::{Device, Error, Result};

/// Where a storage's bytes live (one file per backing in this folder).
pub(crate) enum Backing {
    /// Ordinary host memory.
    Heap(HeapBuffer),
    /// Page-locked host memory (`pin_memory`).
    #[cfg(feature = "pinned")]
    Pinned(PinnedBuffer),
    /// A mapped file (`from_file`).
    File(MappedBytes),
    /// A POSIX shared-memory object (`share_memory_`).
    #[cfg(feature = "shm")]
    Shm(MappedBytes),
    /// One record of a checkpoint mapped whole (memory-mapped loading).
    Mapped(MappedBytes),
    /// Bytes read on first use (lazy loading).
    Lazy(LazyBytes),
    /// No bytes at all: the meta device, fake tensors.
    Meta { nbytes: usize },
}

impl Backing {
    fn nbytes(&self) -> usize {
        match self {
            Backing::Heap(h) => h.len(),
            #[cfg(feature = "pinned")]
            Backing::Pinned(p) => p.len(),
            #[cfg(feature = "shm")]
            Backing::Shm(m) => m.len(),
            Backing::File(m) | Backing::Mapped(m) => m.len(),
            Backing::Lazy(l) => l.nbytes,
            Backing::Meta { nbytes } => *nbytes,
        }
    }
    fn bytes(&self) -> Option<&[u8]> {
        match self {
            Backing::Heap(h) => Some(h.as_slice()),
            #[cfg(feature = "pinned")]
            Backing::Pinned(p) => Some(p.as_slice()),
            #[cfg(feature = "shm")]
            Backing::Shm(m) => Some(m.as_slice()),
            Backing::File(m) | Backing::Mapped(m) => Some(m.as_slice()),
            Backing::Lazy(_) | Backing::Meta { .. } => None,
        }
    }
    fn bytes_mut(&mut self) -> Option<&mut [u8]> {
        match self {
            Backing::Heap(h) => Some(h.as_mut_slice()),
            #[cfg(feature = "pinned")]
            Backing::Pinned(p) => Some(p.as_mut_slice()),
            #[cfg(feature = "shm")]
            Backing::Shm(m) => Some(m.as_mut_slice()),
            Backing::File(m) | Backing::Mapped(m) => Some(m.as_mut_slice()),
            Backing::Lazy(_) | Backing::Meta { .. } => None,
        }
    }
    fn addr(&self) -> usize {
        match self {
            Backing::Heap(h) => h.addr(),
            #[cfg(feature = "pinned")]
            Backing::Pinned(p) => p.addr(),
            #[cfg(feature = "shm")]
            Backing::Shm(m) => m.addr(),
            Backing::File(m) | Backing::Mapped(m) => m.addr(),
            Backing::Lazy(_) | Backing::Meta { .. } => 0,
        }
    }
}

struct StorageImpl {
    device: Device,
    data: RwLock<Backing>,
    /// Creation order, by which loom's models lock two storages (NOTE
    /// [sound sharing]).
    #[cfg(loom)]
    rank: u64,
    /// In-place writes through tensors so far (PyTorch's version counter,
    /// kept per storage): a recorded operation notes it for each tensor it
    /// saves, and backward refuses a saved tensor written since. 32 bits,
    /// as PyTorch's (`c10::VariableVersion`).
    version: std::sync::atomic::AtomicU32,
}

// A storage per tensor is what a checkpoint of many small tensors holds
// most of: 72 bytes, an allocation of 96 with the `Arc`'s counts (a backing
// of five words, and no sequence number: NOTE [sound sharing]).
#[cfg(all(target_pointer_width = "64", not(loom)))]
const _: () = assert!(std::mem::size_of::<StorageImpl>() <= 72);

/// The next storage's rank under loom. A std atomic: the order of creation
/// is the same in every iteration of a model, which is what matters.
#[cfg(loom)]
static NEXT_RANK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl StorageImpl {
    /// The order in which [`with_pair`] locks two storages (NOTE [sound sharing]).
    fn lock_order(&self) -> u64 {
        #[cfg(loom)]
        return self.rank;
        #[cfg(not(loom))]
        return std::ptr::from_ref(self) as usize as u64;
    }
}

/// A contiguous, one-dimensional array of bytes, shared by handle
/// (PyTorch's `torch.UntypedStorage`).
///
/// `Clone` gives another handle to the same bytes; [`deep_clone`](Self::deep_clone)
/// copies them (PyTorch's `storage.clone()`).
#[derive(Clone)]
pub struct UntypedStorage {
    inner: Arc<StorageImpl>,
}

/// Shared access to a storage's bytes; the storage cannot be written while it lives.
pub struct BytesRef<'a>(RwLockReadGuard<'a, Backing>);

impl Deref for BytesRef<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // Guards are only created for backings with bytes.
        self.0.bytes().unwrap_or(&[])
    }
}

/// Exclusive access to a storage's bytes.
pub struct BytesMut<'a>(RwLockWriteGuard<'a, Backing>);

impl Deref for BytesMut<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.0.bytes().unwrap_or(&[])
    }
}
impl DerefMut for BytesMut<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.0.bytes_mut().unwrap_or(&mut [])
    }
}

impl UntypedStorage {
    fn from_backing(device: Device, backing: Backing) -> Self {
        UntypedStorage {
            inner: Arc::new(StorageImpl {
                device,
                data: RwLock::new(backing),
                #[cfg(loom)]
                rank: NEXT_RANK.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                version: std::sync::atomic::AtomicU32::new(0),
            }),
        }
    }

    /// `nbytes` zero bytes on the cpu.
    ///
    /// # Errors
    /// [`StorageError::AllocationFailed`] or [`TensorError::SizeOverflow`](crate::TensorError::SizeOverflow) when the memory cannot be had.
    pub fn new(nbytes: usize) -> Result<Self> {
        Self::new_on(nbytes, Device::CPU)
    }

    /// `nbytes` zero bytes tagged with `device`. A meta storage holds no bytes;
    /// any other device keeps its bytes in host memory.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn new_on(nbytes: usize, device: Device) -> Result<Self> {
        let backing = if device.is_meta() {
            Backing::Meta { nbytes }
        } else {
            Backing::Heap(HeapBuffer::zeroed(nbytes)?)
        };
        Ok(Self::from_backing(device, backing))
    }

    /// [`new_on`](Self::new_on) for a load's storages, about to be written:
    /// in transparent huge pages where `huge` asks and the storage holds at
    /// least 2 MiB; carved from `blocks`, shared with the load's other small
    /// storages, where it holds at most 256 bytes and a load of many
    /// storages gives blocks (see `blocks.rs`).
    pub(crate) fn new_for_load(
        nbytes: usize,
        device: Device,
        huge: bool,
        blocks: Option<&mut Blocks>,
    ) -> Result<Self> {
        if device.is_meta() {
            return Self::new_on(nbytes, device);
        }
        let buffer = match blocks {
            _ if huge && nbytes > blocks::SMALL => HeapBuffer::zeroed_huge(nbytes)?,
            Some(blocks) => blocks.zeroed(nbytes)?,
            None => HeapBuffer::zeroed(nbytes)?,
        };
        Ok(Self::from_backing(device, Backing::Heap(buffer)))
    }

    /// A cpu storage holding a copy of `bytes`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Ok(Self::from_backing(
            Device::CPU,
            Backing::Heap(HeapBuffer::from_slice(bytes)?),
        ))
    }

    /// A cpu storage over `len` bytes at `ptr` that `owner` keeps alive,
    /// without copying them (a buffer lent by Python, say): the storage holds
    /// `owner` and drops it when the storage is dropped or resized, which
    /// releases the memory. Until then the storage reads and writes the
    /// bytes in place; changes made to them elsewhere meanwhile show through.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes for as long as
    /// `owner` lives, and nothing may write them while a borrow of the
    /// storage's bytes ([`bytes`](Self::bytes)) is alive.
    pub unsafe fn from_external(
        ptr: std::ptr::NonNull<u8>,
        len: usize,
        owner: Box<dyn Send + Sync>,
    ) -> Self {
        // SAFETY: the caller's promise is `external`'s.
        let buffer = unsafe { HeapBuffer::external(ptr, len, owner) };
        Self::from_backing(Device::CPU, Backing::Heap(buffer))
    }

    /// A cpu storage over the elements of `values`, without copying them: the
    /// storage owns the vector's allocation (and its alignment, `T`'s) from now
    /// on, and frees it as a `Vec<T>`.
    pub(crate) fn from_vec<T: bytemuck::NoUninit + Send + Sync>(values: Vec<T>) -> Self {
        Self::from_backing(Device::CPU, Backing::Heap(HeapBuffer::adopt(values)))
    }

    fn read_lock(&self) -> RwLockReadGuard<'_, Backing> {
        // A panic while holding the lock cannot leave the bytes in an invalid state
        // (any byte pattern is valid), so poisoning is ignored.
        self.inner
            .data
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write_lock(&self) -> RwLockWriteGuard<'_, Backing> {
        self.inner
            .data
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Size in bytes.
    pub fn nbytes(&self) -> usize {
        self.read_lock().nbytes()
    }

    /// Size in bytes (PyTorch: `size()` of an untyped storage is `nbytes()`).
    pub fn size(&self) -> usize {
        self.nbytes()
    }

    /// Always 1: an untyped storage counts bytes.
    pub fn element_size(&self) -> usize {
        1
    }

    /// The address of the first byte (0 for empty and meta storages), as PyTorch reports it.
    /// Equal for every tensor sharing this storage; changes when the storage is resized.
    pub fn data_ptr(&self) -> usize {
        self.read_lock().addr()
    }

    /// The device the storage is tagged with.
    pub fn device(&self) -> Device {
        self.inner.device
    }

    /// True when the device is CUDA.
    pub fn is_cuda(&self) -> bool {
        self.inner.device.is_cuda()
    }

    /// True for a meta storage (no bytes).
    pub fn is_meta(&self) -> bool {
        self.inner.device.is_meta()
    }

    /// True when `resize_` may change the size.
    pub fn resizable(&self) -> bool {
        matches!(&*self.read_lock(), Backing::Heap(_) | Backing::Meta { .. })
    }

    /// True for storages other processes can see: shared-memory objects, mapped files
    /// and records of memory-mapped checkpoints (PyTorch reports every mapping as shared).
    pub fn is_shared(&self) -> bool {
        match &*self.read_lock() {
            #[cfg(feature = "shm")]
            Backing::Shm(_) => true,
            Backing::File(_) | Backing::Mapped(_) => true,
            _ => false,
        }
    }

    /// The file of a storage made by [`from_file`](Self::from_file) with `shared = true`
    /// (PyTorch's `filename`); `None` for every other storage.
    pub fn filename(&self) -> Option<std::path::PathBuf> {
        match &*self.read_lock() {
            Backing::File(m) => m.extra::<file::FileInfo>().and_then(|i| i.path.clone()),
            _ => None,
        }
    }

    /// True when the storage holds bytes (false on meta and for fake storages).
    pub fn has_data(&self) -> bool {
        !matches!(&*self.read_lock(), Backing::Meta { .. })
    }

    /// A storage of `nbytes` that reports `device` but holds no bytes: a fake
    /// storage, for planning over tensors without their data. Data access is
    /// [`StorageError::NoData`].
    pub fn new_fake(nbytes: usize, device: Device) -> UntypedStorage {
        Self::from_backing(device, Backing::Meta { nbytes })
    }

    /// True when `self` and `other` are handles to the same storage.
    pub fn is_same(&self, other: &UntypedStorage) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// How many in-place writes tensors on this storage have made
    /// (PyTorch's `tensor._version`, here counted per storage: every view
    /// and detached handle of a tensor shares it, as in PyTorch), modulo
    /// 2^32 as PyTorch's counter.
    pub fn version(&self) -> u64 {
        u64::from(
            self.inner
                .version
                .load(std::sync::atomic::Ordering::Acquire),
        )
    }

    /// Counts one in-place write.
    pub(crate) fn bump_version(&self) {
        self.inner
            .version
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel); // wraps, as PyTorch's
    }

    /// A number identifying this storage among live storages (stable while any handle lives).
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.inner) as usize
    }

    /// Shared access to the bytes.
    ///
    /// # Errors
    /// [`StorageError::NoData`] for a storage without bytes (meta).
    pub fn bytes(&self) -> Result<BytesRef<'_>> {
        let guard = self.data_read()?;
        match guard.bytes() {
            Some(_) => Ok(BytesRef(guard)),
            None => Err(self.no_data("reading storage bytes")),
        }
    }

    /// Exclusive access to the bytes. Every view of this storage sees the writes.
    ///
    /// # Errors
    /// [`StorageError::NoData`] for a storage without bytes (meta).
    pub fn bytes_mut(&self) -> Result<BytesMut<'_>> {
        let mut guard = self.data_write()?;
        match guard.bytes_mut() {
            Some(_) => Ok(BytesMut(guard)),
            None => Err(self.no_data("writing storage bytes")),
        }
    }

    pub(crate) fn no_data(&self, op: &'static str) -> Error {
        Error::Storage(StorageError::NoData {
            op,
            device: self.device(),
        })
    }

    /// Runs `f` on the bytes under the shared lock.
    pub(crate) fn with_bytes<R>(&self, op: &'static str, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let guard = self.data_read()?;
        guard.bytes().map(f).ok_or_else(|| self.no_data(op))
    }

    /// Runs `f` on the bytes under the exclusive lock.
    pub(crate) fn with_bytes_mut<R>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R> {
        let mut guard = self.data_write()?;
        match guard.bytes_mut() {
            Some(b) => Ok(f(b)),
            None => Err(self.no_data(op)),
        }
    }

    /// Sets every byte to `value`.
    ///
    /// # Errors
    /// [`StorageError::NoData`] on meta.
    pub fn fill_(&self, value: u8) -> Result<&Self> {
        self.with_bytes_mut("fill_", |b| b.fill(value))?;
        Ok(self)
    }

    /// Copies `src`'s bytes into this storage; the sizes must be equal.
    ///
    /// # Errors
    /// [`StorageError::StorageSizeMismatch`] when the sizes differ, [`StorageError::NoData`] on meta.
    pub fn copy_(&self, src: &UntypedStorage) -> Result<&Self> {
        let (dst_n, src_n) = (self.nbytes(), src.nbytes());
        if dst_n != src_n {
            return Err(Error::Storage(StorageError::StorageSizeMismatch {
                op: "copy_",
                dst: dst_n,
                src: src_n,
            }));
        }
        if self.is_same(src) {
            return Ok(self);
        }
        with_pair(src, self, "copy_", |s, d| {
            // Sizes were checked above, but a concurrent resize_ could intervene.
            if s.len() == d.len() {
                d.copy_from_slice(s);
                Ok(())
            } else {
                Err(Error::Storage(StorageError::StorageSizeMismatch {
                    op: "copy_",
                    dst: d.len(),
                    src: s.len(),
                }))
            }
        })??;
        Ok(self)
    }

    /// A new storage on the same device with a copy of the bytes (PyTorch's `storage.clone()`).
    ///
    /// # Errors
    /// Allocation failure.
    pub fn deep_clone(&self) -> Result<UntypedStorage> {
        let guard = self.data_read()?;
        let backing = match guard.bytes() {
            Some(b) => Backing::Heap(HeapBuffer::from_slice(b)?),
            None => Backing::Meta {
                nbytes: guard.nbytes(),
            },
        };
        Ok(Self::from_backing(self.device(), backing))
    }

    /// The bytes as a list (PyTorch's `tolist()`).
    ///
    /// # Errors
    /// [`StorageError::NoData`] on meta.
    pub fn tolist(&self) -> Result<Vec<u8>> {
        self.with_bytes("tolist", |b| b.to_vec())
    }

    /// The byte at `index` (negative counts from the end).
    ///
    /// # Errors
    /// [`TensorError::IndexOutOfRange`](crate::TensorError::IndexOutOfRange), [`StorageError::NoData`].
    pub fn get(&self, index: isize) -> Result<u8> {
        self.with_bytes("__getitem__", |b| {
            let i = crate::layout::wrap_index(index, 0, b.len())?;
            Ok(b[i])
        })?
    }

    /// Sets the byte at `index`.
    ///
    /// # Errors
    /// [`TensorError::IndexOutOfRange`](crate::TensorError::IndexOutOfRange), [`StorageError::NoData`].
    pub fn set(&self, index: isize, value: u8) -> Result<()> {
        self.with_bytes_mut("__setitem__", |b| {
            let i = crate::layout::wrap_index(index, 0, b.len())?;
            b[i] = value;
            Ok(())
        })?
    }

    /// Changes the size to `nbytes`, keeping the common prefix and zero-filling growth.
    /// The bytes move (`data_ptr` changes); every tensor on this storage sees the new bytes.
    /// Meta storages change their recorded size.
    ///
    /// # Errors
    /// [`StorageError::NotResizable`] for backings that cannot change size; allocation failure.
    pub fn resize_(&self, nbytes: usize) -> Result<&Self> {
        match &mut *self.data_write()? {
            Backing::Heap(h) => h.resize(nbytes)?,
            Backing::Meta { nbytes: n } => *n = nbytes,
            // Mapped, shared and pinned bytes cannot move (PyTorch: not resizable).
            #[cfg(feature = "pinned")]
            Backing::Pinned(_) => return Err(Error::Storage(StorageError::NotResizable)),
            #[cfg(feature = "shm")]
            Backing::Shm(_) => return Err(Error::Storage(StorageError::NotResizable)),
            Backing::File(_) | Backing::Mapped(_) => {
                return Err(Error::Storage(StorageError::NotResizable))
            }
            // `data_write` has read the bytes already.
            Backing::Lazy(_) => return Err(self.no_data("resize_")),
        }
        Ok(self)
    }

    /// This storage on the cpu (itself when it already is).
    ///
    /// # Errors
    /// As [`to`](Self::to).
    pub fn cpu(&self) -> Result<UntypedStorage> {
        self.to(Device::CPU)
    }

    /// This storage on `device`: itself when already there, else a copy.
    /// Moving to meta drops the bytes; moving off meta is an error (there is nothing to copy).
    ///
    /// # Errors
    /// [`StorageError::NoData`] when leaving meta; allocation failure.
    pub fn to(&self, device: Device) -> Result<UntypedStorage> {
        if device == self.device() {
            return Ok(self.clone());
        }
        if device.is_meta() {
            return Ok(Self::from_backing(
                device,
                Backing::Meta {
                    nbytes: self.nbytes(),
                },
            ));
        }
        let bytes = self.with_bytes("to", HeapBuffer::from_slice)??;
        Ok(Self::from_backing(device, Backing::Heap(bytes)))
    }
}

/// Runs `f` with `src`'s bytes shared and `dst`'s bytes exclusive, locking the two
/// storages in one order (NOTE [sound sharing]). `src` and `dst` must differ.
pub(crate) fn with_pair<R>(
    src: &UntypedStorage,
    dst: &UntypedStorage,
    op: &'static str,
    f: impl FnOnce(&[u8], &mut [u8]) -> R,
) -> Result<R> {
    debug_assert!(!src.is_same(dst));
    let (src_guard, mut dst_guard) = if src.inner.lock_order() < dst.inner.lock_order() {
        let s = src.data_read()?;
        (s, dst.data_write()?)
    } else {
        let d = dst.data_write()?;
        (src.data_read()?, d)
    };
    let s = src_guard.bytes().ok_or_else(|| src.no_data(op))?;
    let d = dst_guard.bytes_mut().ok_or_else(|| dst.no_data(op))?;
    Ok(f(s, d))
}

impl fmt::Display for UntypedStorage {
    /// PyTorch's layout: one byte per line, then `[stowage.UntypedStorage(device=cpu) of size 12]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let guard = match self.data_read() {
            Ok(g) => g,
            Err(e) => return write!(f, "<storage: {e}>"),
        };
        let info = format!(
            "[stowage.UntypedStorage(device={}) of size {}]",
            self.device(),
            guard.nbytes()
        );
        match guard.bytes() {
            None => write!(f, "...\n{info}"),
            Some(b) => {
                for byte in b {
                    writeln!(f, " {byte}")?;
                }
                if b.is_empty() {
                    // Python's `" " + "\n ".join([])`.
                    writeln!(f, " ")?;
                }
                f.write_str(&info)
            }
        }
    }
}

impl fmt::Debug for UntypedStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UntypedStorage")
            .field("device", &self.device())
            .field("nbytes", &self.nbytes())
            .field("data_ptr", &format_args!("{:#x}", self.data_ptr()))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{StorageError, TensorError};

    #[test]
    fn basic_api() {
        let s = UntypedStorage::new(4).unwrap();
        assert_eq!((s.nbytes(), s.size(), s.element_size()), (4, 4, 1));
        s.fill_(7).unwrap();
        assert_eq!(s.tolist().unwrap(), vec![7; 4]);
        let c = s.deep_clone().unwrap();
        assert_ne!(c.data_ptr(), s.data_ptr());
        assert!(!c.is_same(&s));
        let h = s.clone();
        assert!(h.is_same(&s));
        h.set(-1, 9).unwrap();
        assert_eq!(s.get(3).unwrap(), 9);
        assert_eq!(c.get(3).unwrap(), 7);
        assert!(matches!(
            s.get(4),
            Err(Error::Tensor(TensorError::IndexOutOfRange { .. }))
        ));
        c.copy_(&s).unwrap();
        assert_eq!(c.tolist().unwrap(), vec![7, 7, 7, 9]);
        let wrong = UntypedStorage::new(3).unwrap();
        assert!(matches!(
            wrong.copy_(&s),
            Err(Error::Storage(StorageError::StorageSizeMismatch {
                dst: 3,
                src: 4,
                ..
            }))
        ));
    }

    #[test]
    fn resize_keeps_prefix_and_moves() {
        let s = UntypedStorage::from_bytes(&[1, 2, 3]).unwrap();
        let before = s.data_ptr();
        s.resize_(5).unwrap();
        assert_eq!(s.tolist().unwrap(), vec![1, 2, 3, 0, 0]);
        assert_ne!(s.data_ptr(), before);
        s.resize_(1).unwrap();
        assert_eq!(s.tolist().unwrap(), vec![1]);
    }

    #[test]
    fn display_matches_pytorch() {
        let s = UntypedStorage::from_bytes(&[0, 0, 128, 63]).unwrap();
        assert_eq!(
            s.to_string(),
            " 0\n 0\n 128\n 63\n[stowage.UntypedStorage(device=cpu) of size 4]"
        );
        let m = s.to(Device::META).unwrap();
        assert_eq!(
            m.to_string(),
            "...\n[stowage.UntypedStorage(device=meta) of size 4]"
        );
    }

    #[test]
    fn meta_has_no_data() {
        let m = UntypedStorage::new_on(8, Device::META).unwrap();
        assert_eq!(m.nbytes(), 8);
        assert_eq!(m.data_ptr(), 0);
        assert!(matches!(
            m.tolist(),
            Err(Error::Storage(StorageError::NoData { .. }))
        ));
        assert!(m.fill_(1).is_err());
        assert!(m.bytes().is_err());
        assert!(m.cpu().is_err());
        let c = UntypedStorage::new(8).unwrap();
        assert!(c.copy_(&m).is_err());
    }

    #[test]
    fn devices_keep_host_bytes() {
        let s = UntypedStorage::from_bytes(&[1, 2]).unwrap();
        let g = s.to("cuda:0".parse().unwrap()).unwrap();
        assert!(g.is_cuda());
        assert_eq!(g.tolist().unwrap(), vec![1, 2]);
        assert!(g.cpu().unwrap().device().is_cpu());
        assert!(s.cpu().unwrap().is_same(&s));
    }

    #[test]
    fn crossed_copies_do_not_deadlock() {
        let a = UntypedStorage::from_bytes(&[1; 1024]).unwrap();
        let b = UntypedStorage::from_bytes(&[2; 1024]).unwrap();
        std::thread::scope(|scope| {
            for i in 0..4 {
                let (a, b) = (a.clone(), b.clone());
                scope.spawn(move || {
                    for _ in 0..2000 {
                        if i % 2 == 0 {
                            a.copy_(&b).unwrap();
                        } else {
                            b.copy_(&a).unwrap();
                        }
                    }
                });
            }
        });
        let (x, y) = (a.tolist().unwrap(), b.tolist().unwrap());
        assert!(x.iter().all(|&v| v == x[0]) && y.iter().all(|&v| v == y[0]));
    }
}
