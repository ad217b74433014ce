//! Items fetched ahead. An eager load reads the items of the next tensors
//! as one batch of spans ([`io::windows`](crate::io::windows)): from object
//! storage they come in concurrent ranged requests across the data files (at
//! most `concurrency` in flight, whichever files they go to) rather than one
//! item after another, a round trip each; a local file's are read in place,
//! when read, a batch's small tensors two at a time ([`read_ahead`]). A
//! batch holds at most the remote options' `concurrency × max_request` bytes
//! (or one item, if larger), or 4,096 local items, so the bytes held ahead
//! stay bounded whatever the checkpoint's size.
//!
//! [`read_ahead`]: DcpCheckpoint::read_ahead

use crate::error::ErrorContext;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::item::Source;
use super::metadata::{Item, ItemKind, StorageRef, TensorMeta};
use super::DcpCheckpoint;
use crate::checkpoint::records::Mode;
use crate::io::{Location, Span};
use crate::{Result, Tensor};

/// The most items an eager load of local data files reads ahead before it
/// places them ([`DcpCheckpoint::read_ahead`]).
const AHEAD: usize = 4096;

/// The smallest storage [`DcpCheckpoint::read_ahead`] makes before it reads:
/// where an allocation is a mapping of its own.
const MAKE_FIRST: usize = 1 << 20;

/// The windows of items fetched ahead, by data file and offset; each is
/// taken by the read that needs it.
#[derive(Default)]
pub(super) struct Prefetched(Mutex<HashMap<(PathBuf, u64), Source>>);

impl std::fmt::Debug for Prefetched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Prefetched({} items)", self.lock().len())
    }
}

impl Prefetched {
    fn lock(&self) -> MutexGuard<'_, HashMap<(PathBuf, u64), Source>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The window of the item at `offset` of `file`, if it was fetched ahead.
    pub(super) fn take(&self, file: &Path, offset: u64) -> Option<Source> {
        self.lock().remove(&(file.to_owned(), offset))
    }
}

/// An item's place in [`DcpCheckpoint::read_ahead`]: its tensor's storage
/// made and not read yet, its tensor read (or the read's error), or neither.
enum Slot {
    Unread(Tensor),
    Read(Result<Tensor>),
    Empty,
}

/// A batch's stored items by data file: each with its item's name.
type ByFile<'i> = Vec<(Location, Vec<(&'i str, StorageRef<'i>)>)>;

/// The stored items `item` is read from: a tensor's chunks that hold
/// elements (those [`DcpCheckpoint::read_tensor`] reads), or a value's item.
fn stored_items(item: &Item) -> Vec<StorageRef<'_>> {
    match &item.kind {
        ItemKind::Tensor(meta) => meta
            .chunks()
            .filter(|c| super::intersect(c, &vec![0; meta.size.len()], &meta.size).is_some())
            .map(|c| c.storage)
            .collect(),
        ItemKind::Bytes(info) => vec![info.as_ref()],
    }
}

impl DcpCheckpoint {
    /// An eager load of local data files: the tensors of `batch` under 4
    /// MiB read ahead on two threads, each taking the next item none has
    /// taken (a tensor's chunks are read by the thread that takes it), as a
    /// torch zip or safetensors load reads its batch on two; a slot for each
    /// item, in order (`None` for a value, a larger tensor, whose reads are
    /// split in two as it is placed, or an item after one that failed).
    /// Other loads read nothing here (an empty list). Read one after
    /// another, such tensors were one thread's `pread`s: a 1 GiB folder of
    /// 2 MiB tensors loaded in twice the time of the same tensors in a `.pt`
    /// file.
    pub(super) fn read_ahead(self: &Arc<Self>, batch: &[Item]) -> Vec<Option<Result<Tensor>>> {
        if !self.reads_ahead() {
            return Vec::new();
        }
        let small = |item: &Item, meta: &TensorMeta| {
            super::bytes_of(&item.fqn, meta.dtype, &meta.size)
                .is_ok_and(|n| n < super::region::PARALLEL_MIN)
        };
        // The storages of MAKE_FIRST or more are made here first, before
        // either thread reads, each in its item's slot: mapping a storage's
        // memory takes the process's memory map for writing, which waits for
        // the other thread's page faults and stalls them (`perf` of a folder
        // of 2 MiB tensors: `rwsem_down_write_slowpath` under `mmap`).
        // Smaller ones come from the allocator's arenas, on the thread that
        // reads them: made here, one after another, 20,000 of 1 KiB loaded
        // 12% slower. Stops at the first that cannot be made (made again as
        // it is read, it fails in its turn).
        let mut making = !self.options.map_location.unwrap_or_default().is_meta();
        let mut slots: Vec<Mutex<Slot>> = Vec::with_capacity(batch.len());
        for item in batch {
            let mut slot = Slot::Empty;
            if let ItemKind::Tensor(meta) = &item.kind {
                let made_first = MAKE_FIRST..super::region::PARALLEL_MIN;
                let large = super::bytes_of(&item.fqn, meta.dtype, &meta.size)
                    .is_ok_and(|n| made_first.contains(&n));
                if making && large {
                    let zeros = vec![0; meta.size.len()];
                    match self.unread_region(&item.fqn, &zeros, &meta.size) {
                        Ok(t) => slot = Slot::Unread(t),
                        Err(_) => making = false,
                    }
                }
            }
            slots.push(Mutex::new(slot));
        }
        let (next, failed) = (AtomicUsize::new(0), AtomicBool::new(false));
        let work = || {
            while !failed.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = batch.get(i) else { break };
                if let ItemKind::Tensor(meta) = &item.kind {
                    if !small(item, meta) {
                        continue;
                    }
                    let mut slot = slots[i].lock().unwrap_or_else(|p| p.into_inner());
                    let read = match std::mem::replace(&mut *slot, Slot::Empty) {
                        Slot::Unread(t) => {
                            let zeros = vec![0; meta.size.len()];
                            self.fill_region(&item.fqn, &zeros, &meta.size, &t)
                                .map(|()| t)
                        }
                        _ => self.tensor_in_mode(&item.fqn, meta),
                    };
                    failed.fetch_or(read.is_err(), Ordering::Relaxed);
                    *slot = Slot::Read(read);
                }
            }
        };
        std::thread::scope(|s| {
            s.spawn(work);
            work();
        });
        slots
            .into_iter()
            .map(
                |slot| match slot.into_inner().unwrap_or_else(|p| p.into_inner()) {
                    Slot::Read(read) => Some(read),
                    // Not read: after an item that failed.
                    Slot::Unread(_) | Slot::Empty => None,
                },
            )
            .collect()
    }

    /// Where the batch of items starting at `items[start]` ends: with items
    /// fetched ahead (an eager load from object storage), after as many
    /// items as the byte budget allows, their bytes fetched; else at the end.
    /// Bytes of the previous batch that no read took are dropped.
    ///
    /// # Errors
    /// [`Error::InFile`](crate::Error::InFile) naming the data file, around
    /// [`Error::AtPath`](crate::Error::AtPath) naming an item of the batch:
    /// an item outside its file, a failed request.
    pub(super) fn batch_end(&self, items: &[Item], start: usize) -> Result<usize> {
        // A local file's item is read in place when its tensor is: nothing
        // to fetch ahead (a window kept per chunk held ~60 bytes each until
        // the load ended, and finding each item's file scanned the batch's),
        // but an eager load reads a batch's small tensors on two threads,
        // holding a batch of them before they are placed.
        if self.reads_ahead() {
            return Ok(items.len().min(start.saturating_add(AHEAD)));
        }
        if !matches!(Mode::of(&self.options), Mode::Eager { .. }) || !self.dir.is_remote() {
            return Ok(items.len());
        }
        self.prefetch(items, start)
    }

    /// Whether this load reads its tensors ahead ([`read_ahead`](Self::read_ahead)):
    /// an eager one of local data files.
    fn reads_ahead(&self) -> bool {
        matches!(Mode::of(&self.options), Mode::Eager { .. }) && !self.dir.is_remote()
    }

    /// The bytes an eager load fetches ahead at most: what the remote
    /// options keep in flight.
    fn budget(&self) -> u64 {
        #[cfg(feature = "remote")]
        {
            let remote = &self.options.remote;
            (remote.concurrency.max(1) as u64).saturating_mul(remote.max_request.max(1))
        }
        #[cfg(not(feature = "remote"))]
        u64::MAX
    }

    /// The batch starting at `items[start]`: where it ends (as many items as
    /// `budget` bytes hold, one at least), and its stored items by data
    /// file, in order, each with the name of the item it belongs to.
    fn plan_batch<'i>(&self, items: &'i [Item], start: usize, budget: u64) -> (usize, ByFile<'i>) {
        let (mut end, mut held) = (start, 0u64);
        while end < items.len() {
            let n: u64 = stored_items(&items[end]).iter().map(|i| i.length).sum();
            if end > start && held.saturating_add(n) > budget {
                break;
            }
            held = held.saturating_add(n);
            end += 1;
        }
        let mut by_file: ByFile<'i> = Vec::new();
        for item in &items[start..end] {
            for info in stored_items(item) {
                let file = self.dir.join(info.relative_path);
                match by_file.iter_mut().find(|(f, _)| *f == file) {
                    Some((_, list)) => list.push((&item.fqn, info)),
                    None => by_file.push((file, vec![(&item.fqn, info)])),
                }
            }
        }
        (end, by_file)
    }

    /// Fetches the batch starting at `items[start]` ([`plan_batch`](Self::plan_batch))
    /// and keeps its windows for the reads that follow; returns where it ends.
    fn prefetch(&self, items: &[Item], start: usize) -> Result<usize> {
        use crate::Error;
        let (end, by_file) = self.plan_batch(items, start, self.budget());
        let in_file = |file: &Location, fqn: &str, e: Error| e.at_path(fqn).in_file(file.path());
        let mut opened = Vec::with_capacity(by_file.len());
        for (file, list) in &by_file {
            let data = self
                .data_file(file)
                .map_err(|e| in_file(file, list[0].0, e))?;
            for &(fqn, info) in list {
                super::item::check_inside(&**data.source(), info)
                    .map_err(|e| in_file(file, fqn, e))?;
            }
            opened.push(data);
        }
        let mut spans = Vec::new();
        let mut owners = Vec::new();
        for ((file, list), data) in by_file.iter().zip(&opened) {
            for &(fqn, info) in list {
                spans.push(Span {
                    file: data,
                    offset: info.offset,
                    len: info.length,
                });
                owners.push((file, fqn, info.offset));
            }
        }
        let windows = crate::io::windows(&spans).map_err(|(i, e)| {
            let (file, fqn, _) = owners[i];
            in_file(file, fqn, *e)
        })?;
        let fetched = owners
            .iter()
            .zip(windows)
            .map(|(&(file, _, offset), window)| ((file.path(), offset), window))
            .collect();
        *self.prefetched.lock() = fetched;
        Ok(end)
    }
}
