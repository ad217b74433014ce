//! Where a torch zip archive's storages come from: each record `data/<key>`
//! becomes a storage, read after the pickle in one batch (stored records of
//! an eager load), now (deflated or CRC-checked ones), on first use (lazy
//! loads), or as a slice of the mapped file (memory-mapped loads).

use super::MakeFetch;
use crate::checkpoint::torch::StorageSource;
use crate::checkpoint::zip::{self, Method, ZipReader};
use crate::error::FormatError;
use crate::io::ReadAt;
use crate::storage::MappedRecords;
use crate::{Device, Error, Result, UntypedStorage};

pub(super) struct ZipSource<'z, R: ReadAt> {
    pub(super) zip: &'z ZipReader<R>,
    pub(super) verify_crc: bool,
    /// For memory-mapped loading: the mapped file and the ranges handed out so far.
    pub(super) mapped: Option<MappedRecords>,
    /// For lazy loading: makes each record's fetcher.
    pub(super) lazy: Option<MakeFetch<'z>>,
    /// Large stored records, read after the pickle on two threads into the storages
    /// made for them (eager loads of little-endian files; `None` otherwise).
    pub(super) deferred: Option<Vec<(UntypedStorage, zip::Entry)>>,
    /// The folder of the records: `data` (`data.pkl`'s storages), or
    /// `constants` (a TorchScript archive's `constants.pkl`).
    pub(super) dir: &'static str,
}

impl<R: ReadAt> StorageSource for ZipSource<'_, R> {
    fn load(&mut self, key: &str, nbytes: usize, device: Device) -> Result<UntypedStorage> {
        let name = format!("{}/{key}", self.dir);
        let entry = self
            .zip
            .find(&name)
            .ok_or_else(|| Error::Format(FormatError::MissingRecord { name: name.clone() }))?;
        if entry.size != nbytes as u64 {
            return Err(Error::Format(FormatError::RecordSize {
                name,
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
                name,
                declared: entry.size,
                compressed: entry.compressed_size,
            }));
        }
        // Meta and fake loads read nothing but the pickle and the archive's
        // directory, wherever the archive is; they refuse what no load could
        // read: the record's local header and data must fit in the file, as
        // the directory places them. A local header is read (and checked)
        // only by a load that reads the record's data.
        if device.is_meta() {
            self.zip.check_fits(entry)?;
            return UntypedStorage::new_on(nbytes, device);
        }
        if let Some(make) = self.lazy {
            return Ok(UntypedStorage::lazy(nbytes, device, make(entry)));
        }
        if let (Some(m), Method::Stored) = (&mut self.mapped, entry.method) {
            let start = self.zip.data_offset(entry)?;
            if let Some(storage) = m.storage(start, nbytes, device) {
                if self.verify_crc {
                    self.zip.check_crc(entry)?;
                }
                return Ok(storage);
            }
        }
        let storage = UntypedStorage::new_on(nbytes, device)?;
        if let (Some(d), Method::Stored, false) =
            (&mut self.deferred, entry.method, self.verify_crc)
        {
            // Every stored record goes in the batch, read after the pickle
            // as the source reads a batch best (a file on two threads, an
            // object store in coalesced requests).
            d.push((storage.clone(), entry.clone()));
            return Ok(storage);
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
