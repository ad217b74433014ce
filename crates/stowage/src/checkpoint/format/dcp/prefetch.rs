//! Items fetched ahead. An eager load of a distributed checkpoint in object
//! storage fetches the items of the next tensors together, in concurrent
//! ranged requests across its data files (`io::remote::read_batches`: at
//! most `concurrency` in flight, whichever files they go to), rather than
//! one item after another, a round trip each. A batch holds at
//! most the remote options' `concurrency × max_request` bytes (or one item,
//! if larger), so the bytes held ahead stay bounded whatever the
//! checkpoint's size.

#[cfg(feature = "remote")]
use crate::error::ErrorContext;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use super::metadata::Item;
#[cfg(feature = "remote")]
use super::metadata::{ItemKind, StorageInfo};
use super::DcpCheckpoint;
#[cfg(feature = "remote")]
use crate::checkpoint::options::LoadMode;
#[cfg(feature = "remote")]
use crate::io::Location;
use crate::Result;

/// Stored item bytes fetched ahead, by data file and offset; each is taken
/// by the read that needs it.
#[derive(Default)]
pub(super) struct Prefetched(Mutex<HashMap<(PathBuf, u64), Vec<u8>>>);

impl std::fmt::Debug for Prefetched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Prefetched({} items)", self.lock().len())
    }
}

impl Prefetched {
    fn lock(&self) -> MutexGuard<'_, HashMap<(PathBuf, u64), Vec<u8>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The bytes of the item at `offset` of `file`, if they were fetched ahead.
    pub(super) fn take(&self, file: &Path, offset: u64) -> Option<Vec<u8>> {
        self.lock().remove(&(file.to_owned(), offset))
    }
}

/// A batch's stored items by data file: each with its item's name.
#[cfg(feature = "remote")]
type ByFile<'i> = Vec<(Location, Vec<(&'i str, &'i StorageInfo)>)>;

/// The stored items `item` is read from: a tensor's chunks that hold
/// elements (those [`DcpCheckpoint::read_tensor`] reads), or a value's item.
#[cfg(feature = "remote")]
fn stored_items(item: &Item) -> Vec<&StorageInfo> {
    match &item.kind {
        ItemKind::Tensor(meta) => meta
            .chunks
            .iter()
            .filter(|c| super::intersect(c, &vec![0; meta.size.len()], &meta.size).is_some())
            .map(|c| &c.storage)
            .collect(),
        ItemKind::Bytes(info) => vec![info],
    }
}

impl DcpCheckpoint {
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
        #[cfg(feature = "remote")]
        {
            let eager = self.options.mode() == LoadMode::Eager;
            // Items of a store whose every read is a request come in batches.
            let cost = self.dir.read_cost();
            if eager && cost == crate::io::ReadCost::Request {
                return self.prefetch(items, start);
            }
        }
        let _ = start;
        Ok(items.len())
    }

    /// The batch starting at `items[start]`: where it ends (as many items as
    /// `budget` bytes hold, one at least), and its stored items by data
    /// file, in order, each with the name of the item it belongs to.
    #[cfg(feature = "remote")]
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
                let file = self.dir.join(&info.relative_path);
                match by_file.iter_mut().find(|(f, _)| *f == file) {
                    Some((_, list)) => list.push((&item.fqn, info)),
                    None => by_file.push((file, vec![(&item.fqn, info)])),
                }
            }
        }
        (end, by_file)
    }

    /// Fetches the batch starting at `items[start]` ([`plan_batch`](Self::plan_batch))
    /// and keeps its bytes for the reads that follow; returns where it ends.
    #[cfg(feature = "remote")]
    fn prefetch(&self, items: &[Item], start: usize) -> Result<usize> {
        use crate::io::remote::{read_batches, ObjectReads};
        use crate::Error;
        let remote = &self.options.remote;
        let piece = remote.max_request.max(1);
        let budget = (remote.concurrency.max(1) as u64).saturating_mul(piece);
        let (end, by_file) = self.plan_batch(items, start, budget);
        // Every file's items, fetched together: at most `concurrency`
        // requests in flight across the files.
        let in_file = |file: &Location, fqn: &str, e: Error| e.at_path(fqn).in_file(file.path());
        let mut objects = Vec::with_capacity(by_file.len());
        let mut bufs: Vec<Vec<Vec<u8>>> = Vec::with_capacity(by_file.len());
        for (file, list) in &by_file {
            let opened = self
                .data_file(file)
                .map_err(|e| in_file(file, list[0].0, e))?;
            let Some(object) = opened.remote else {
                // Not in a store (cannot happen for a folder URL): read
                // item by item.
                continue;
            };
            let mut held = Vec::with_capacity(list.len());
            for &(fqn, info) in list {
                super::item::check_inside(&*opened.source, info)
                    .map_err(|e| in_file(file, fqn, e))?;
                // Bounded by the file's size, checked above.
                let bytes = crate::storage::zeroed_bytes(info.length as usize)
                    .map_err(|e| in_file(file, fqn, e))?;
                held.push(bytes);
            }
            objects.push((file, list, object));
            bufs.push(held);
        }
        // Each item in pieces of at most `max_request` bytes, so that a
        // large one is fetched by concurrent requests too.
        let piece = usize::try_from(piece).unwrap_or(usize::MAX);
        let mut owners: Vec<Vec<usize>> = Vec::with_capacity(objects.len());
        let mut reads: Vec<Vec<(u64, &mut [u8])>> = Vec::with_capacity(objects.len());
        for ((_, list, _), held) in objects.iter().zip(bufs.iter_mut()) {
            let (mut own, mut these) = (Vec::new(), Vec::new());
            for (k, (&(_, info), buf)) in list.iter().zip(held.iter_mut()).enumerate() {
                for (p, part) in buf.chunks_mut(piece).enumerate() {
                    these.push((info.offset + (p * piece) as u64, part));
                    own.push(k);
                }
            }
            owners.push(own);
            reads.push(these);
        }
        let mut batch: Vec<ObjectReads<'_, '_, '_>> = objects
            .iter()
            .zip(reads.iter_mut())
            .map(|((_, _, object), these)| (&**object, &mut these[..]))
            .collect();
        if let Err((o, i, e)) = read_batches(&mut batch, remote.concurrency) {
            let (file, list, _) = &objects[o];
            let fqn = list[owners[o].get(i).copied().unwrap_or(0)].0;
            return Err(in_file(file, fqn, Error::Io(e)));
        }
        drop(batch);
        drop(reads);
        let mut fetched = HashMap::new();
        for ((file, list, _), held) in objects.iter().zip(bufs) {
            for (&(_, info), buf) in list.iter().zip(held) {
                fetched.insert((file.path(), info.offset), buf);
            }
        }
        *self.prefetched.lock() = fetched;
        Ok(end)
    }
}
