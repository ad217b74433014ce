//! Lazily loaded storages: a size, a device, and a way to fetch the bytes,
//! which are read on the first data access (and never, if nothing touches
//! them). Loading a checkpoint with
//! [`LoadOptions::lazy`](crate::serialize::LoadOptions::lazy) makes them.

use std::sync::Arc;

use super::heap::HeapBuffer;
use super::{Backing, UntypedStorage};
use crate::sync::{RwLockReadGuard, RwLockWriteGuard};
use crate::{Device, Result};

/// Fills a buffer of the storage's size with its bytes.
pub(crate) type Fetch = Arc<dyn Fn(&mut [u8]) -> Result<()> + Send + Sync>;

/// Bytes not read yet.
pub(crate) struct LazyBytes {
    pub(crate) nbytes: usize,
    fetch: Fetch,
}

impl UntypedStorage {
    /// A storage of `nbytes` on `device` whose bytes `fetch` provides on first use.
    pub(crate) fn lazy(nbytes: usize, device: Device, fetch: Fetch) -> UntypedStorage {
        Self::from_backing(device, Backing::Lazy(LazyBytes { nbytes, fetch }))
    }

    /// False while the bytes of a lazily loaded storage have not been read yet
    /// (true for every other storage).
    pub fn is_loaded(&self) -> bool {
        !matches!(&*self.read_lock(), Backing::Lazy(_))
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
            (lazy.fetch)(buf.as_mut_slice())?;
            *guard = Backing::Heap(buf);
        }
        Ok(guard)
    }
}
