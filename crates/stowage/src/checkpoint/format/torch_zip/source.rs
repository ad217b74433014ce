//! Where a torch zip archive's storages come from: each record `data/<key>`
//! becomes a storage, read in batches (stored records of an eager load: each
//! time 16,384 wait, as the pickle names them, and the last after it), now
//! (deflated or CRC-checked ones), on first use (lazy loads), or as a slice
//! of the mapped file (memory-mapped loads, their local headers read a
//! batch at a time).

use super::parallel;
use crate::checkpoint::records::{Fill, Record, Records};
use crate::checkpoint::torch::StorageSource;
use crate::checkpoint::zip::{self, Method, ZipReader};
use crate::error::FormatError;
use crate::io::ReadAt;
use crate::{Device, Error, Result, UntypedStorage};

pub(super) struct ZipSource<'z, R: ReadAt> {
    pub(super) zip: &'z ZipReader<R>,
    pub(super) verify_crc: bool,
    /// How the load makes each record's storage (its mode's strategy),
    /// keyed by the record's entry in the archive's directory.
    pub(super) records: Records<'z, &'z zip::Entry>,
    /// The folder of the records: `data` (`data.pkl`'s storages), or
    /// `constants` (a TorchScript archive's `constants.pkl`).
    pub(super) dir: &'static str,
    /// The name of the record last looked up, kept to be written over by
    /// the next (a record's name is not made anew for each storage).
    name: String,
    /// The slot after the last found: where the next record most likely is.
    next_slot: usize,
    /// The error of a batch read while the pickle went on: kept, and no
    /// batch read after it, to be the load's error once the pickle is read
    /// (a pickle's own error first, as when every record was read after
    /// it), not one of the storage the pickle was making then.
    pub(super) failed: Option<Error>,
    /// A mapped load's data offsets of the entries ahead, their local
    /// headers read together.
    ahead: HeadersAhead,
}

/// How many entries' local headers a mapped load reads at once, from the
/// first it needs: a file of small records has them a few dozen bytes
/// apart, read in a few system calls ([`ReadAt::read_batch_at`]) where a
/// `pread` each was most of a mapped load of 20,000 small tensors.
const HEADERS_AHEAD: usize = 4096;

/// The data offsets of entries `first..first + offsets.len()`, read
/// together the first time a mapped load needs one of them.
#[derive(Default)]
struct HeadersAhead {
    first: usize,
    offsets: Vec<u64>,
    /// A batch failed (a header it read is bad or out of the file): every
    /// header is read on its own from then, so that the error is the
    /// entry's own and no batch is read twice.
    alone: bool,
}

impl HeadersAhead {
    /// Where the data of `entry`, the directory's entry `slot` when known,
    /// starts. Entries at or past the end of the batch read last start a
    /// new one; each entry is read in at most one batch.
    fn data_offset<R: ReadAt>(
        &mut self,
        zip: &ZipReader<R>,
        slot: Option<usize>,
        entry: &zip::Entry,
    ) -> Result<u64> {
        let end = self.first + self.offsets.len();
        match slot {
            Some(slot) if (self.first..end).contains(&slot) => {
                return Ok(self.offsets[slot - self.first]);
            }
            Some(slot) if slot >= end && !self.alone => {
                let entries = zip.entries();
                let batch: Vec<&zip::Entry> = entries
                    .get(slot..entries.len().min(slot + HEADERS_AHEAD))
                    .unwrap_or_default()
                    .iter()
                    .collect();
                match zip.data_offsets(&batch) {
                    Ok(offsets) if !offsets.is_empty() => {
                        self.first = slot;
                        self.offsets = offsets;
                        return Ok(self.offsets[0]);
                    }
                    _ => self.alone = true,
                }
            }
            _ => {}
        }
        Ok(zip.data_offset(entry)?)
    }
}

impl<'z, R: ReadAt> ZipSource<'z, R> {
    pub(super) fn new(
        zip: &'z ZipReader<R>,
        records: Records<'z, &'z zip::Entry>,
        verify_crc: bool,
    ) -> Self {
        ZipSource {
            zip,
            verify_crc,
            records,
            dir: "data",
            name: String::new(),
            next_slot: 0,
            failed: None,
            ahead: HeadersAhead::default(),
        }
    }

    /// `<dir>/<key>`, the name of record `key` below the archive's root.
    fn name(&mut self, key: &str) -> &str {
        self.name.clear();
        self.name.extend([self.dir, "/", key]);
        &self.name
    }
}

impl<R: ReadAt> StorageSource for ZipSource<'_, R> {
    /// Records are numbered by their entry in the archive's directory.
    fn slots(&self) -> usize {
        self.zip.entries().len()
    }

    fn makes_fakes(&self) -> bool {
        self.records.is_fake()
    }

    fn slot(&mut self, key: &str) -> Option<usize> {
        let (zip, hint) = (self.zip, self.next_slot);
        let slot = zip.position_near(self.name(key), hint)?;
        self.next_slot = slot + 1;
        Some(slot)
    }

    fn load(
        &mut self,
        key: &str,
        slot: Option<usize>,
        nbytes: usize,
        device: Device,
    ) -> Result<UntypedStorage> {
        let zip = self.zip;
        // `slot` stays only where it is the entry's.
        let (slot, entry) = match slot.and_then(|s| Some((s, zip.entries().get(s)?))) {
            Some((slot, entry)) => (Some(slot), entry),
            None => (
                None,
                zip.find(self.name(key)).ok_or_else(|| {
                    Error::Format(FormatError::MissingRecord {
                        name: self.name.clone(),
                    })
                })?,
            ),
        };
        if entry.size != nbytes as u64 {
            return Err(Error::Format(FormatError::RecordSize {
                name: self.name(key).to_owned(),
                expected: nbytes as u64,
                found: entry.size,
            }));
        }
        // A deflated record cannot expand more than deflate's maximum ratio; refuse
        // impossible claims before allocating what they declare.
        if entry.method == Method::Deflated
            && entry.size
                > entry
                    .compressed_size
                    .saturating_mul(1032)
                    .saturating_add(1024)
        {
            return Err(Error::Format(FormatError::ImplausibleRecord {
                name: self.name(key).to_owned(),
                declared: entry.size,
                compressed: entry.compressed_size,
            }));
        }
        // Meta and fake loads read nothing but the pickle and the archive's
        // directory, wherever the archive is; they refuse what no load could
        // read: the record's local header and data must fit in the file, as
        // the directory places them. A local header is read (and checked)
        // only by a load that reads the record's data.
        if self.records.reads_nothing(device) {
            self.zip.check_fits(entry)?;
        }
        let record = Record {
            key: entry,
            nbytes,
            device,
            raw: entry.method == Method::Stored,
        };
        let ahead = &mut self.ahead;
        let (storage, fill) = self
            .records
            .make(record, || ahead.data_offset(zip, slot, entry))?;
        match fill {
            Fill::Done => {
                // A file of many small tensors holds a batch's entries, not
                // one for each of its storages, at the load's peak.
                if self.failed.is_none() {
                    let read = self
                        .records
                        .read_when_full(parallel::BATCH_RECORDS, |batch| {
                            parallel::fill_parallel(zip, batch)
                        });
                    self.failed = read.err();
                }
                return Ok(storage);
            }
            Fill::Mapped if self.verify_crc => {
                self.zip.check_crc(entry)?;
                return Ok(storage);
            }
            Fill::Mapped => return Ok(storage),
            Fill::Now => {}
        }
        {
            let mut bytes = storage.bytes_mut()?;
            self.zip.read_into(entry, &mut bytes)?;
        }
        if self.verify_crc {
            self.zip.check_crc(entry)?;
        }
        Ok(storage)
    }
}
