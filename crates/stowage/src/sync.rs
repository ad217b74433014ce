//! The synchronisation primitives the storage layer uses: std's, or loom's
//! under `--cfg loom`, so that the locking protocol of shared storages can be
//! model-checked (`tests/loom.rs`; see `docs/sanitizers.md`). loom's
//! `RwLock` models readers that share the lock, as std's does.

#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(loom)]
pub(crate) use loom::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
