//! The zip container of `torch.save` files, read and written without libtorch.
//!
//! Since PyTorch 1.6 a checkpoint is a zip archive whose records all live under
//! one root folder (`<root>/data.pkl`, `<root>/data/0`, …). This crate knows
//! nothing about pickles or tensors: it lists, finds, reads and writes records.
//!
//! # API
//!
//! - Reading: [`ZipReader::new`] opens an archive from any [`ReadAt`] source
//!   (a [`File`](std::fs::File), a byte slice or `Vec<u8>`, a memory map, a
//!   remote object behind `Arc`), within [`ZipLimits`]. It lists the
//!   [`Entry`]s (name, [`Method`], sizes, CRC-32, header offset), finds a
//!   record by its name under the root, reads one into a caller's buffer or a
//!   `Vec`, gives the offset of a stored record's bytes in the file (to map
//!   it), and checks CRCs when asked.
//! - Writing: [`ZipWriter`] writes an archive as PyTorch does, byte for byte,
//!   to any [`std::io::Write`], whole records or streamed in chunks;
//!   [`ZipWriter::archive_len`] gives the archive's exact length beforehand.
//! - Positional reads: [`ReadAt`] (with its [`ReadCost`] hint) is the source
//!   the reader reads from, through `&self`, so one reader serves several
//!   threads; sources where each read is a request batch their reads
//!   ([`ReadAt::read_batch_at`]).
//! - Every failure is a [`ZipError`].
//!
//! # Example
//!
//! ```
//! use stowage_zip::{ZipError, ZipLimits, ZipReader, ZipWriter};
//!
//! // An archive as `torch.save` lays it out: records under one root folder,
//! // payloads aligned to 64 bytes.
//! let mut w = ZipWriter::new(Vec::new(), "archive", 64);
//! w.write_record("data.pkl", b"\x80\x02}q\x00.")?;
//! w.start_record("data/0", 8)?;
//! w.write_chunk(&[1, 2, 3, 4])?;
//! w.write_chunk(&[5, 6, 7, 8])?;
//! w.end_record()?;
//! let bytes = w.finish()?;
//!
//! let zip = ZipReader::new(&bytes[..], &ZipLimits::default())?;
//! assert_eq!(zip.root(), "archive");
//! let storage = zip.find("data/0").expect("the record is there");
//! assert_eq!(zip.data_offset(storage)? % 64, 0);
//! let mut buf = [0; 8];
//! zip.read_into(storage, &mut buf)?;
//! assert_eq!(buf, [1, 2, 3, 4, 5, 6, 7, 8]);
//! zip.check_crc(storage)?;
//! # Ok::<(), ZipError>(())
//! ```
//!
//! # Why hand-rolled
//!
//! * **Alignment.** PyTorch makes every payload start at a multiple of 64 (the
//!   `storage_alignment`) with a private `FB` extra field in the local header,
//!   padded with `'Z'` bytes and sized by `getPadding`, which also counts the
//!   zip64 extra field that miniz puts first. General zip writers have no such
//!   field.
//! * **miniz's exact layout.** Stored entries, CRC and sizes only in the data
//!   descriptor and the central directory, a zip64 end-of-central-directory
//!   record in every archive, per-entry zip64 extras with only the saturated
//!   fields, time and date 0. [`ZipWriter`] reproduces it byte for byte.
//! * **Payload offsets.** A record's bytes can be read straight into a caller's
//!   buffer or mapped into memory; [`ZipReader::data_offset`] takes the offset
//!   from the local header, as `getRecordOffset` does.
//! * **Hostile input.** Every offset, size and count is checked against the
//!   file length before anything is allocated, deflate output is bounded by
//!   the declared size, and no input makes the code panic. The crate has no
//!   `unsafe` code.
//!
//! The `zip` crate does not expose these together.
//!
//! # Differences from PyTorch
//!
//! * Records are always stored, never deflated. The reader accepts deflate too.
//! * PyTorch writes time and date 0 because its miniz is built without time
//!   support; the writer does the same, so its output is reproducible.
//! * PyTorch never checks CRCs when reading; [`ZipReader::check_crc`] can.
//! * A file starting with `PYTORCH1` (the 1.0 preview format) is not a zip
//!   archive; recognising it is left to the caller.

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod format;
mod read;
mod read_at;
mod write;

pub use read::{Entry, Method, StoredReader, ZipReader};
pub use read_at::{ReadAt, ReadCost, Window};
pub use write::ZipWriter;

/// Bounds applied when opening and reading an archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZipLimits {
    /// Most central-directory entries accepted (at most `u32::MAX`, whatever
    /// this says: the reader knows entries by 32-bit positions).
    pub max_entries: usize,
    /// Largest record [`ZipReader::read_to_vec`] allocates for, in bytes.
    pub max_record_to_vec: u64,
}

impl Default for ZipLimits {
    fn default() -> Self {
        ZipLimits {
            // 2^20: stowage's loader, verifier and scanner share this bound
            // (a state dict of a million tensors has a million records).
            max_entries: 1 << 20,
            max_record_to_vec: 1 << 30,
        }
    }
}

/// Errors of the zip layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ZipError {
    /// Reading or writing the underlying file failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// No end-of-central-directory record in the last bytes of the file.
    #[error("not a zip archive: no end of central directory record in the {len}-byte file")]
    NotZip {
        /// File length.
        len: u64,
    },
    /// A structure runs past the end of the file or of the central directory.
    #[error("truncated {what} at offset {offset}: needs {needed} bytes, {available} available")]
    Truncated {
        /// The structure.
        what: &'static str,
        /// Where it starts in the file.
        offset: u64,
        /// Bytes it needs.
        needed: u64,
        /// Bytes there are from `offset` on.
        available: u64,
    },
    /// A structure does not start with its signature.
    #[error(
        "bad {what} signature at offset {offset}: expected {expected:#010x}, found {found:#010x}"
    )]
    BadSignature {
        /// The structure.
        what: &'static str,
        /// Where it starts in the file.
        offset: u64,
        /// Its signature.
        expected: u32,
        /// What the file holds there.
        found: u32,
    },
    /// The archive claims more entries than [`ZipLimits::max_entries`].
    #[error("archive claims {count} entries, more than the limit of {max}")]
    TooManyEntries {
        /// Claimed entry count.
        count: u64,
        /// The limit.
        max: usize,
    },
    /// The claimed entry count cannot fit in the central directory.
    #[error("archive claims {count} entries, which cannot fit in a {size}-byte central directory")]
    EntryCountBeyondDirectory {
        /// Claimed entry count.
        count: u64,
        /// Central-directory size.
        size: u64,
    },
    /// The central directory does not lie between the file start and its end record.
    #[error("central directory at offset {offset} with {size} bytes runs past offset {end}")]
    DirectoryOutOfBounds {
        /// Claimed central-directory offset.
        offset: u64,
        /// Claimed central-directory size.
        size: u64,
        /// Where the end records start.
        end: u64,
    },
    /// An entry name is not UTF-8.
    #[error("entry name {lossy:?} at offset {offset} is not utf-8")]
    NameNotUtf8 {
        /// Offset of the central-directory entry.
        offset: u64,
        /// The name with invalid bytes replaced.
        lossy: String,
    },
    /// A saturated field has no value in the entry's zip64 extra field.
    #[error("entry {name:?} has a saturated {field} but no zip64 value for it")]
    MissingZip64Field {
        /// Entry name.
        name: String,
        /// `"size"`, `"compressed size"` or `"local header offset"`.
        field: &'static str,
    },
    /// An entry uses a compression method other than stored or deflate.
    #[error("entry {name:?} uses unsupported compression method {method} ({method_name})")]
    UnsupportedMethod {
        /// Entry name.
        name: String,
        /// Method number.
        method: u16,
        /// Method name.
        method_name: &'static str,
    },
    /// An entry is encrypted.
    #[error("entry {name:?} is encrypted")]
    Encrypted {
        /// Entry name.
        name: String,
    },
    /// A stored entry whose compressed size and size differ.
    #[error("stored entry {name:?} has compressed size {compressed} but size {size}")]
    StoredSizeMismatch {
        /// Entry name.
        name: String,
        /// Compressed size.
        compressed: u64,
        /// Size.
        size: u64,
    },
    /// Two entries have the same name.
    #[error("duplicate entry {name:?}")]
    DuplicateEntry {
        /// Entry name.
        name: String,
    },
    /// The archive has no entries, so no root folder.
    #[error("archive has no entries")]
    Empty,
    /// The first entry is not inside a folder (PyTorch's root rule).
    #[error("file in archive is not in a subdirectory: {name:?}")]
    NoRootFolder {
        /// Name of the first entry.
        name: String,
    },
    /// A local header disagrees with its central-directory entry.
    #[error("local header at offset {offset} does not belong to entry {name:?}")]
    LocalHeaderMismatch {
        /// Entry name.
        name: String,
        /// Local header offset.
        offset: u64,
    },
    /// An entry's data runs past the end of the file.
    #[error("data of {name:?} at offset {offset} with {size} bytes runs past the end of the {len}-byte file")]
    DataOutOfBounds {
        /// Entry name.
        name: String,
        /// Data offset.
        offset: u64,
        /// Compressed size.
        size: u64,
        /// File length.
        len: u64,
    },
    /// The destination buffer is not exactly the entry's size.
    #[error("buffer for {name:?} has {found} bytes, the entry has {expected}")]
    BufferSizeMismatch {
        /// Entry name.
        name: String,
        /// Entry size.
        expected: u64,
        /// Buffer length.
        found: u64,
    },
    /// An entry is bigger than [`ZipLimits::max_record_to_vec`].
    #[error(
        "entry {name:?} has {size} bytes, more than the limit of {max} for reading into memory"
    )]
    RecordTooLarge {
        /// Entry name.
        name: String,
        /// Entry size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// Deflate data is corrupt or ends early.
    #[error("corrupt deflate data in {name:?}: {reason}")]
    Inflate {
        /// Entry name.
        name: String,
        /// What went wrong.
        reason: String,
    },
    /// Deflate data inflates to more than the declared size.
    #[error("deflate data of {name:?} inflates past its declared size of {expected} bytes")]
    InflatesTooLarge {
        /// Entry name.
        name: String,
        /// Declared size.
        expected: u64,
    },
    /// Deflate data inflates to less than the declared size.
    #[error("deflate data of {name:?} inflates to {found} bytes, its declared size is {expected}")]
    InflatesTooShort {
        /// Entry name.
        name: String,
        /// Declared size.
        expected: u64,
        /// Bytes it inflated to.
        found: u64,
    },
    /// The data's CRC-32 differs from the recorded one.
    #[error("crc-32 mismatch in {name:?}: recorded {expected:#010x}, computed {found:#010x}")]
    CrcMismatch {
        /// Entry name.
        name: String,
        /// Recorded CRC-32.
        expected: u32,
        /// CRC-32 of the data.
        found: u32,
    },
    /// The recorded CRC-32 is 0 but the data's is not: the writer skipped it
    /// (`torch.serialization.set_crc32_options(False)`), which PyTorch accepts.
    #[error("entry {name:?} has no recorded crc-32 (0), the data's is {found:#010x}")]
    CrcNotRecorded {
        /// Entry name.
        name: String,
        /// CRC-32 of the data.
        found: u32,
    },
    /// The writer's root folder name is unusable.
    #[error("invalid archive root {root:?}: {reason}")]
    InvalidRoot {
        /// The root given.
        root: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// The writer's alignment is out of range.
    #[error("invalid alignment {alignment}: must be between 1 and {max}")]
    InvalidAlignment {
        /// The alignment given.
        alignment: u64,
        /// Largest alignment the `FB` field can pad to.
        max: u64,
    },
    /// A record name is unusable.
    #[error("invalid record name {name:?}: {reason}")]
    InvalidRecordName {
        /// The record name given.
        name: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// A record name was written twice.
    #[error("tried to serialize file twice: {name:?}")]
    DuplicateRecord {
        /// The full record name.
        name: String,
    },
    /// A record is still being streamed.
    #[error("record {name:?} is still open")]
    RecordOpen {
        /// The open record.
        name: String,
    },
    /// `write_chunk` or `end_record` without `start_record`.
    #[error("no record is open")]
    NoRecordOpen,
    /// A chunk would take a record past its declared size.
    #[error("record {name:?} declared {declared} bytes, writing would take it to {attempted}")]
    RecordOverflow {
        /// The open record.
        name: String,
        /// Declared size.
        declared: u64,
        /// Size after the refused chunk.
        attempted: u64,
    },
    /// `end_record` before the declared size was written.
    #[error("record {name:?} declared {declared} bytes, only {written} were written")]
    RecordIncomplete {
        /// The open record.
        name: String,
        /// Declared size.
        declared: u64,
        /// Bytes written.
        written: u64,
    },
    /// An archive offset would not fit in 64 bits.
    #[error("archive offset overflows 64 bits")]
    OffsetOverflow,
    /// An earlier write failed, so the archive is incomplete.
    #[error("writer is unusable after an earlier i/o error")]
    Poisoned,
}
