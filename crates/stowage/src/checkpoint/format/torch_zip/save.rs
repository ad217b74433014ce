//! Saving a torch zip checkpoint: the records around the pickle, in the order
//! PyTorch 2.x writes them (`data.pkl`, `.format_version`,
//! `.storage_alignment`, `byteorder`, `data/0..N`, `version`,
//! `.data/serialization_id`), written crash-safely.

use crate::error::ErrorContext;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::checkpoint::content::written::{self, StorageRanges};
use crate::checkpoint::content::WrittenDigests;
use crate::checkpoint::options::{Progress, SaveOptions};
use crate::checkpoint::torch::pickle_checkpoint;
use crate::checkpoint::value::graph::Checkpoint;
use crate::checkpoint::zip::ZipWriter;
use crate::{Error, Result, UntypedStorage};

/// How much of a lazily loaded storage not read yet is written at a time.
const WINDOW: usize = 8 << 20;

/// A checkpoint ready to be written: the records before the storages (`data.pkl`
/// … `byteorder`), the storages in key order, and the records after them.
struct Plan {
    head: [(&'static str, Vec<u8>); 4],
    /// Each storage with the size the pickle gives it.
    storages: Vec<(UntypedStorage, u64)>,
    tail: [(&'static str, Vec<u8>); 2],
    /// Where the storages' bytes are fed as they are written, and which of
    /// them are whose tensor ([`SaveOptions::with_digests`]).
    digests: Option<(WrittenDigests, StorageRanges)>,
    /// Whether the CRC-32 of a large storage goes to a thread of its own.
    parallel_crc: bool,
}

impl Plan {
    fn new(ckpt: &Checkpoint, options: &SaveOptions) -> Result<Plan> {
        let (pkl, storages) = pickle_checkpoint(ckpt)?;
        // A hashing thread (this save's digests, or the DCP's whose item
        // this is) takes a core, which may leave none for the CRC.
        let hashed = options.digests.is_some() || options.hashed_beside;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let parallel_crc = !hashed || written::crc_thread_beside_hashing(cores);
        let digests = options
            .digests
            .as_ref()
            .and_then(|d| Some((d.clone(), d.storage_ranges(ckpt)?)));
        let storages: Vec<(UntypedStorage, u64)> = storages
            .into_iter()
            .map(|(s, _)| {
                let n = s.nbytes() as u64;
                (s, n)
            })
            .collect();
        // PyTorch's id is a hash of record names and CRCs; readers only log it. stowage's is
        // deterministic: record count and a CRC of the pickle and storage sizes.
        let mut crc = crc32fast::Hasher::new();
        crc.update(&pkl);
        for (_, nbytes) in &storages {
            crc.update(&nbytes.to_le_bytes());
        }
        let id = format!("{:020}{:020}", storages.len() + 7, crc.finalize());
        let byteorder: &[u8] = if cfg!(target_endian = "little") {
            b"little"
        } else {
            b"big"
        };
        Ok(Plan {
            head: [
                ("data.pkl", pkl),
                (".format_version", b"1".to_vec()),
                (
                    ".storage_alignment",
                    options.alignment.to_string().into_bytes(),
                ),
                ("byteorder", byteorder.to_vec()),
            ],
            tail: [
                ("version", b"3\n".to_vec()),
                (".data/serialization_id", id.into_bytes()),
            ],
            storages,
            digests,
            parallel_crc,
        })
    }

    /// The exact length of the archive, from the sizes the pickle gives the storages.
    fn archive_len(&self, root: &str, alignment: u64) -> Result<u64> {
        let names: Vec<String> = (0..self.storages.len())
            .map(|i| format!("data/{i}"))
            .collect();
        let small = |(name, bytes): &(&'static str, Vec<u8>)| (*name, bytes.len() as u64);
        let records = self
            .head
            .iter()
            .map(small)
            .chain(
                names
                    .iter()
                    .zip(&self.storages)
                    .map(|(n, (_, nbytes))| (n.as_str(), *nbytes)),
            )
            .chain(self.tail.iter().map(small));
        Ok(ZipWriter::archive_len(root, alignment, records)?)
    }

    fn write<W: Write>(
        &self,
        w: W,
        root: &str,
        alignment: u64,
        progress: Option<&Progress>,
    ) -> Result<W> {
        use std::fmt::Write as _;
        let mut zip = ZipWriter::new(w, root, alignment).with_parallel_crc(self.parallel_crc);
        for (name, bytes) in &self.head {
            zip.write_record(name, bytes)?;
        }
        // The window a storage not read yet is written through, kept from
        // one storage to the next (the digests hand out their own).
        let mut window = Vec::new();
        let mut name = String::new();
        for (i, (storage, nbytes)) in self.storages.iter().enumerate() {
            name.clear();
            // Writing to a `String` cannot fail.
            let _ = write!(name, "data/{i}");
            // The record has the size the pickle gives the storage: one resized since
            // fails the record's size check instead of writing an inconsistent archive.
            zip.start_record(&name, *nbytes)?;
            if let Some((d, ranges)) = &self.digests {
                d.begin_storage(ranges, storage.id());
            }
            if storage.is_loaded() {
                // One read lock at a time, held while the bytes are written and hashed,
                // so the CRC is that of the bytes in the file.
                let bytes = storage.bytes()?;
                zip.write_chunk(&bytes)?;
                if let Some((d, ranges)) = &self.digests {
                    d.storage_bytes(ranges, storage.id(), 0, &bytes);
                }
                if let Some(p) = progress {
                    p.add(bytes.len() as u64);
                }
            } else {
                let digests = self.digests.as_ref().map(|(d, r)| (d, r));
                write_windows(&mut zip, storage, progress, digests, &mut window)?;
            }
            zip.end_record()?;
        }
        for (name, bytes) in &self.tail {
            zip.write_record(name, bytes)?;
        }
        Ok(zip.finish()?)
    }
}

/// Writes a lazily loaded storage that has not been read yet from its file to
/// the open record window by window, leaving it unread: a large checkpoint is
/// converted without being held in memory. Each window goes whole to the
/// digests, if any, once written (no copy); otherwise `window` is the
/// buffer, kept for the next storage.
fn write_windows<W: Write>(
    zip: &mut ZipWriter<W>,
    storage: &UntypedStorage,
    progress: Option<&Progress>,
    digests: Option<(&WrittenDigests, &StorageRanges)>,
    window: &mut Vec<u8>,
) -> Result<()> {
    let len = storage.nbytes();
    let mut at = 0;
    while at < len {
        let n = (len - at).min(WINDOW);
        let mut buf = written::window_buffer(digests.map(|(d, _)| d), window, n)?;
        storage.read_at(at, &mut buf)?;
        zip.write_chunk(&buf)?;
        match digests {
            Some((d, ranges)) => d.storage_window(ranges, storage.id(), at, buf),
            None => *window = buf,
        }
        if let Some(p) = progress {
            p.add(n as u64);
        }
        at += n;
    }
    Ok(())
}

/// Writes `ckpt` as a torch zip archive with root folder `archive_name` to `w`.
///
/// Storage bytes go from the storages' memory straight to `w`, in one call per
/// storage, and their CRC-32 is computed as they are written (on a second thread
/// for large storages when there is one); the output depends only on `ckpt`,
/// `archive_name` and `options.alignment`. Wrap a file in a
/// [`BufWriter`](std::io::BufWriter).
///
/// # Errors
/// [`CheckpointError::SaveConflict`](crate::CheckpointError::SaveConflict) when one storage is viewed as two dtypes, [`StorageError::NoData`](crate::StorageError::NoData)
/// for meta tensors, I/O errors.
pub fn save_to_writer<W: Write>(
    w: W,
    archive_name: &str,
    ckpt: &Checkpoint,
    options: &SaveOptions,
) -> Result<W> {
    Plan::new(ckpt, options)?.write(
        w,
        archive_name,
        options.alignment,
        options.progress.as_ref(),
    )
}

/// Saves `ckpt` to `path` as PyTorch does, crash-safely: the archive is written to a
/// temporary file in the same directory, synced to the disk, and renamed over `path`
/// (then the directory is synced), so an interrupted save, a crash or a power loss
/// leaves either the earlier file or the whole new one. The root folder is `path`'s stem.
///
/// With the `remote` feature, `path` may be an object-store URL (`s3://…`):
/// the archive is streamed up in a multipart upload that is committed only
/// once written whole, so a failed or interrupted save leaves no object under
/// the key (and an earlier one untouched).
///
/// # Errors
/// As [`save_to_writer`], wrapped in [`Error::InFile`].
pub fn save(path: impl AsRef<Path>, ckpt: &Checkpoint) -> Result<()> {
    save_with(path.as_ref(), ckpt, &SaveOptions::default())
}

/// [`save`] with options.
///
/// The temporary file is first sized to the archive's exact length (`fallocate`
/// on Linux, so the file system allocates its blocks once, up front), then
/// written in large sequential writes straight from the storages' memory. With
/// [`SaveOptions::with_sync`], the kernel is asked to start writing each 8 MiB to the
/// disk as soon as they are written (`sync_file_range` on Linux), so the final
/// sync overlaps the writing instead of following it. A large file that the save
/// replaces is released on a thread of its own (see `docs/performance.md`).
///
/// # Errors
/// As [`save`].
pub fn save_with(path: &Path, ckpt: &Checkpoint, options: &SaveOptions) -> Result<()> {
    let stem = archive_name(path);
    let in_file = |e: Error| e.in_file(path.to_owned());
    let plan = Plan::new(ckpt, options).map_err(in_file)?;
    let len = plan
        .archive_len(&stem, options.alignment)
        .map_err(in_file)?;
    options
        .location(path)
        .create(options.sync, Some(len), |out| {
            plan.write(
                BufWriter::with_capacity(crate::io::WRITE_BUFFER, out),
                &stem,
                options.alignment,
                options.progress.as_ref(),
            )?
            .into_inner()
            .map_err(|e| Error::Io(e.into_error()))?;
            Ok(())
        })
}

/// The root folder PyTorch names an archive written to `path`: the file name up to its last `.`.
pub(crate) fn archive_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = match name.rfind('.') {
        Some(i) => &name[..i],
        None => &name,
    };
    if stem.is_empty() || !stem.is_ascii() {
        "archive".to_owned()
    } else {
        stem.to_owned()
    }
}
