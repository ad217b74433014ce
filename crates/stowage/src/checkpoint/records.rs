//! How a load makes the storages of a file's records: one strategy per load
//! mode, chosen once where the load starts ([`Mode`]) and handed to the
//! format's reader, which asks its [`Records`] for each record's storage
//! and tests no mode itself.
//!
//! - eager: a storage of the load's own memory, its bytes read at once, or
//!   with the file's other raw records in one batch after the pickle or
//!   header (as the source reads a batch best: a file on two threads, an
//!   object store in coalesced requests);
//! - lazy: a storage that reads its record on first use, through the
//!   fetcher the format makes for it;
//! - mapped: a view of the mapped file, for a record stored as it loads;
//! - fake, and every load onto the meta device: a storage of no bytes.

use crate::checkpoint::options::{LoadMode, LoadOptions};
use crate::storage::{Blocks, Fetch, MappedRecords};
use crate::{Device, Result, UntypedStorage};

/// The strategy of a load, chosen where it starts.
pub(crate) enum Mode {
    /// Storages read now, into memory in huge pages where `huge_pages`
    /// asks ([`LoadOptions::with_huge_pages`]).
    Eager {
        huge_pages: bool,
    },
    Lazy,
    Mapped(MappedRecords),
    Fake,
}

impl Mode {
    /// The mode `options` ask for, reading the file (not mapping it: a
    /// mapped load of what cannot be mapped reads it eagerly).
    pub(crate) fn of(options: &LoadOptions) -> Mode {
        match options.mode() {
            LoadMode::Eager | LoadMode::Mapped => Mode::Eager {
                huge_pages: options.huge_pages,
            },
            LoadMode::Lazy => Mode::Lazy,
            LoadMode::Fake => Mode::Fake,
        }
    }

    /// The mode of a mapped load with `options`: views of `map`, unless the
    /// options ask for no bytes at all.
    pub(crate) fn mapped(map: MappedRecords, options: &LoadOptions) -> Mode {
        match options.mode() {
            LoadMode::Fake => Mode::Fake,
            LoadMode::Eager | LoadMode::Lazy | LoadMode::Mapped => Mode::Mapped(map),
        }
    }
}

/// Makes the fetcher of a record read on first use, from the format's key
/// of the record.
pub(crate) type MakeFetch<'a, K> = &'a dyn Fn(&K) -> Fetch;

/// A record as the format describes it to [`Records::make`].
pub(crate) struct Record<K> {
    /// The format's key of the record: what its fetcher and its batch read
    /// are made from.
    pub key: K,
    pub nbytes: usize,
    pub device: Device,
    /// Whether its bytes lie in the file as they load (neither compressed
    /// nor byte-swapped): what a mapping can view and a batch can read.
    pub raw: bool,
}

/// What the format still does for a storage [`Records::make`] gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fill {
    /// Nothing: its bytes are in, or come later by themselves.
    Done,
    /// It is a view of the mapped file (a format that checks checksums
    /// checks the record now).
    Mapped,
    /// Read its record into it now.
    Now,
}

enum How<'a, K> {
    /// Raw records go into `batch` (when batching), read after the pickle
    /// (or as it goes: [`read_when_full`](Records::read_when_full));
    /// storages in huge pages where `huge_pages` asks.
    Eager {
        batch: Option<Vec<(UntypedStorage, K)>>,
        huge_pages: bool,
        /// Where its small storages are carved from.
        blocks: Blocks,
    },
    Lazy(MakeFetch<'a, K>),
    Mapped(MappedRecords),
    Fake,
}

/// The storages of one file's records, made as the load's [`Mode`] says.
pub(crate) struct Records<'a, K> {
    how: How<'a, K>,
}

impl<'a, K> Records<'a, K> {
    /// The records of a load in `mode`, for a format that reads no record
    /// on first use (a lazy load reads them eagerly). An eager load reads
    /// raw records in one batch after the pickle, unless
    /// [`read_as_made`](Self::read_as_made).
    pub(crate) fn new(mode: Mode) -> Self {
        let how = match mode {
            Mode::Eager { huge_pages } => How::Eager {
                batch: Some(Vec::new()),
                huge_pages,
                blocks: Blocks::default(),
            },
            Mode::Lazy => How::Eager {
                batch: Some(Vec::new()),
                huge_pages: false,
                blocks: Blocks::default(),
            },
            Mode::Mapped(map) => How::Mapped(map),
            Mode::Fake => How::Fake,
        };
        Records { how }
    }

    /// The records of a load in `mode`, a lazy one reading each record on
    /// first use through the fetcher `fetch` makes for it.
    pub(crate) fn with_fetch(mode: Mode, fetch: MakeFetch<'a, K>) -> Self {
        match mode {
            Mode::Lazy => Records {
                how: How::Lazy(fetch),
            },
            mode => Records::new(mode),
        }
    }

    /// Room for `n` records in an eager load's batch.
    pub(crate) fn reserve(&mut self, n: usize) {
        if let How::Eager {
            batch: Some(batch), ..
        } = &mut self.how
        {
            batch.reserve(n);
        }
    }

    /// These records, an eager load's read each as it is made rather than
    /// in a batch (for a format that byte-swaps or checks each record as it
    /// is read).
    pub(crate) fn read_as_made(mut self) -> Self {
        if let How::Eager { batch, .. } = &mut self.how {
            *batch = None;
        }
        self
    }

    /// Whether these are a fake load's records: [`make`](Self::make) gives
    /// a fake storage on any device but meta.
    pub(crate) fn is_fake(&self) -> bool {
        matches!(self.how, How::Fake)
    }

    /// Whether this load reads no record's bytes onto `device`: a fake
    /// load, or any onto the meta device.
    pub(crate) fn reads_nothing(&self, device: Device) -> bool {
        device.is_meta() || matches!(self.how, How::Fake)
    }

    /// Whether the format reads a record onto `device` now, into storage of
    /// its own making (an eager load's), rather than asking [`make`](Self::make)
    /// (for a format whose records are not one range of a file each).
    pub(crate) fn reads_now(&self, device: Device) -> bool {
        !self.reads_nothing(device) && matches!(self.how, How::Eager { .. })
    }

    /// The storage of `record`, and what the format still does for it.
    /// `at` gives where a raw record's bytes start in the file: asked only
    /// by a mapped load.
    ///
    /// # Errors
    /// No memory for its bytes; `at`'s error.
    pub(crate) fn make(
        &mut self,
        record: Record<K>,
        at: impl FnOnce() -> Result<u64>,
    ) -> Result<(UntypedStorage, Fill)> {
        let Record {
            key,
            nbytes,
            device,
            raw,
        } = record;
        if device.is_meta() {
            return Ok((UntypedStorage::new_on(nbytes, device)?, Fill::Done));
        }
        match &mut self.how {
            How::Fake => Ok((UntypedStorage::new_fake(nbytes, device), Fill::Done)),
            How::Lazy(make) => Ok((UntypedStorage::lazy(nbytes, device, make(&key)), Fill::Done)),
            How::Mapped(map) => {
                if raw {
                    if let Some(storage) = map.storage(at()?, nbytes, device) {
                        return Ok((storage, Fill::Mapped));
                    }
                }
                Ok((UntypedStorage::new_on(nbytes, device)?, Fill::Now))
            }
            How::Eager {
                batch,
                huge_pages,
                blocks,
            } => {
                let storage =
                    UntypedStorage::new_for_load(nbytes, device, *huge_pages, Some(blocks))?;
                match batch {
                    Some(batch) if raw => {
                        batch.push((storage.clone(), key));
                        Ok((storage, Fill::Done))
                    }
                    _ => Ok((storage, Fill::Now)),
                }
            }
        }
    }

    /// Points `storage`, made before its record was found (a legacy file's),
    /// at its bytes `at..` in the mapped file; `false`, changing nothing,
    /// where this load maps nothing or the range cannot be viewed.
    pub(crate) fn redirect(&mut self, storage: &UntypedStorage, at: u64) -> bool {
        match &mut self.how {
            How::Mapped(map) => map.redirect(storage, at),
            _ => false,
        }
    }

    /// Reads an eager load's waiting raw records through `read` once there
    /// are `n` of them, and empties the batch (keeping its room): a format
    /// calling this after each [`make`](Self::make) holds `n` records'
    /// entries at most, not one for each storage of the file.
    ///
    /// # Errors
    /// `read`'s.
    pub(crate) fn read_when_full(
        &mut self,
        n: usize,
        read: impl FnOnce(&[(UntypedStorage, K)]) -> Result<()>,
    ) -> Result<()> {
        if let How::Eager {
            batch: Some(batch), ..
        } = &mut self.how
        {
            if batch.len() >= n {
                read(batch)?;
                batch.clear();
            }
        }
        Ok(())
    }

    /// The raw records an eager load left for one batch read, each with
    /// its key: the format reads them all now.
    pub(crate) fn take_batch(&mut self) -> Vec<(UntypedStorage, K)> {
        match &mut self.how {
            How::Eager {
                batch: Some(batch), ..
            } => std::mem::take(batch),
            _ => Vec::new(),
        }
    }
}
