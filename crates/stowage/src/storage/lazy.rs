//! Lazily loaded storages: a size, a device, and a way to fetch the bytes,
//! which are read on the first data access (and never, if nothing touches
//! them). Loading a checkpoint with
//! [`LoadOptions::lazy`](crate::serialize::LoadOptions::lazy) makes them.

use std::sync::Arc;

use super::heap::HeapBuffer;
use super::{Backing, UntypedStorage};
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

    /// Reads the bytes of a lazily loaded storage (once; later calls do nothing).
    /// Every data access calls this first.
    ///
    /// # Errors
    /// What reading the bytes gave (the file may have changed since loading).
    pub(crate) fn materialize(&self) -> Result<()> {
        if self.is_loaded() {
            return Ok(());
        }
        let mut guard = self.write_lock();
        // Another thread may have read them while this one waited for the lock.
        if let Backing::Lazy(lazy) = &*guard {
            let mut buf = HeapBuffer::zeroed(lazy.nbytes)?;
            (lazy.fetch)(buf.as_mut_slice())?;
            *guard = Backing::Heap(buf);
        }
        Ok(())
    }
}
