//! The synchronisation primitives the storage layer uses: std's, or loom's
//! under `--cfg loom`, so that the locking protocol of shared storages can be
//! model-checked (`tests/loom.rs`; see `docs/sanitizers.md`).

#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(loom)]
pub(crate) use self::model::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Under loom each storage lock is a loom `Mutex` taken for reads and writes
/// alike. loom 0.7's own `RwLock` model panics ("expected to be able to
/// acquire read lock") when a reader woken by an unlock is scheduled after
/// another thread has taken the lock again, so it cannot check this code. A
/// mutex blocks in every case a reader-writer lock blocks (and more), so
/// freedom from deadlock and the atomicity of each operation, shown with the
/// mutex, hold for the `RwLock` too; concurrency between readers is not
/// modelled.
#[cfg(loom)]
mod model {
    use std::sync::LockResult;

    pub(crate) use loom::sync::Arc;
    use loom::sync::{Mutex, MutexGuard};

    pub(crate) type RwLockReadGuard<'a, T> = MutexGuard<'a, T>;
    pub(crate) type RwLockWriteGuard<'a, T> = MutexGuard<'a, T>;

    pub(crate) struct RwLock<T>(Mutex<T>);

    impl<T> RwLock<T> {
        pub(crate) fn new(value: T) -> Self {
            RwLock(Mutex::new(value))
        }
        pub(crate) fn read(&self) -> LockResult<MutexGuard<'_, T>> {
            self.0.lock()
        }
        pub(crate) fn write(&self) -> LockResult<MutexGuard<'_, T>> {
            self.0.lock()
        }
    }
}
