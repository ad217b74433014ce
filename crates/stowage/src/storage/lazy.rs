//! Lazily loaded storages: a size, a device, and a way to fetch the bytes,
//! which are read on the first data access (and never, if nothing touches
//! them). Loading a checkpoint with
//! [`LoadMode::Lazy`](crate::checkpoint::LoadMode::Lazy) makes them.

use crate::error::StorageError;
use std::sync::Arc;

use super::heap::HeapBuffer;
use super::{Backing, UntypedStorage};
use crate::sync::{RwLockReadGuard, RwLockWriteGuard};
use crate::{Device, Result};

/// Fills a buffer with the storage's bytes from a byte offset on (the whole
/// storage when the offset is 0 and the buffer has the storage's size).
pub(crate) type Fetch = Arc<dyn Fn(u64, &mut [u8]) -> Result<()> + Send + Sync>;

/// Checks a lazily loaded storage's whole bytes when they are first read
/// (a content manifest's digests, `Expected::check_lazily`); an error
/// leaves the storage unread.
pub(crate) type Check = Arc<dyn Fn(&[u8]) -> Result<()> + Send + Sync>;

/// Bytes not read yet.
pub(crate) struct LazyBytes {
    pub(crate) nbytes: usize,
    fetch: Fetch,
    /// Run on the whole bytes once read, before anything is handed out
    /// (boxed: rare, and a storage is held to 72 bytes).
    check: Option<Box<Check>>,
}

impl UntypedStorage {
    /// A storage of `nbytes` on `device` whose bytes `fetch` provides on first use.
    pub(crate) fn lazy(nbytes: usize, device: Device, fetch: Fetch) -> UntypedStorage {
        Self::from_backing(
            device,
            Backing::Lazy(LazyBytes {
                nbytes,
                fetch,
                check: None,
            }),
        )
    }

    /// Has `check` run on this storage's whole bytes when they are first
    /// read, before any is handed out: a window read ([`read_at`](Self::read_at))
    /// then reads the whole storage first. False (and nothing done) when
    /// the bytes are already read: the caller checks them now.
    pub(crate) fn check_on_first_read(&self, check: Check) -> bool {
        let mut guard = self.write_lock();
        match &mut *guard {
            Backing::Lazy(lazy) => {
                lazy.check = Some(Box::new(check));
                true
            }
            _ => false,
        }
    }

    /// False while the bytes of a lazily loaded storage have not been read yet
    /// (true for every other storage).
    pub fn is_loaded(&self) -> bool {
        !matches!(&*self.read_lock(), Backing::Lazy(_))
    }

    /// Copies the bytes `offset..offset + dst.len()` into `dst`. A lazily loaded
    /// storage whose bytes have not been read yet reads just that range from
    /// its file and keeps nothing, so a caller can go through a large
    /// checkpoint window by window without holding it in memory. Other
    /// storages copy from their bytes.
    ///
    /// # Errors
    /// [`StorageError::StorageRange`] when the range is
    /// not inside the storage, [`StorageError::NoData`] on
    /// meta, what reading the file gave.
    pub fn read_at(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        let guard = self.read_lock();
        let nbytes = guard.nbytes();
        if !matches!(offset.checked_add(dst.len()), Some(end) if end <= nbytes) {
            return Err(crate::Error::Storage(StorageError::StorageRange {
                offset,
                len: dst.len(),
                nbytes,
            }));
        }
        let checked = matches!(&*guard, Backing::Lazy(lazy) if lazy.check.is_some());
        if let (Backing::Lazy(lazy), false) = (&*guard, checked) {
            return (lazy.fetch)(offset as u64, dst);
        }
        // Checked bytes are read whole, checked, and kept.
        let guard = if checked {
            drop(guard);
            self.data_read()?
        } else {
            guard
        };
        let bytes = guard
            .bytes()
            .ok_or_else(|| self.no_data("reading storage bytes"))?;
        dst.copy_from_slice(&bytes[offset..offset + dst.len()]);
        Ok(())
    }

    /// The shared lock on the bytes, a lazily loaded storage's read first. A
    /// storage that is not lazy takes the lock once, as before lazy loading existed.
    ///
    /// # Errors
    /// What reading the bytes gave (the file may have changed since loading).
    pub(crate) fn data_read(&self) -> Result<RwLockReadGuard<'_, Backing>> {
        let guard = self.read_lock();
        if !matches!(&*guard, Backing::Lazy(_)) {
            return Ok(guard);
        }
        drop(guard);
        // Reading happens under the exclusive lock; lazy → loaded is one-way.
        drop(self.data_write()?);
        Ok(self.read_lock())
    }

    /// The exclusive lock on the bytes, a lazily loaded storage's read first (under it).
    ///
    /// # Errors
    /// As [`data_read`](Self::data_read).
    pub(crate) fn data_write(&self) -> Result<RwLockWriteGuard<'_, Backing>> {
        let mut guard = self.write_lock();
        if let Backing::Lazy(lazy) = &*guard {
            let mut buf = HeapBuffer::zeroed(lazy.nbytes)?;
            (lazy.fetch)(0, buf.as_mut_slice())?;
            if let Some(check) = &lazy.check {
                check(buf.as_slice())?;
            }
            *guard = Backing::Heap(buf);
        }
        Ok(guard)
    }
}
