//! Writing an archive exactly as PyTorch 2.x (through miniz) does.
//!
//! Per record, in file order:
//!
//! 1. a local header: version needed 0, flags `0x0808` (UTF-8 name, data
//!    descriptor) or `0x0800` for an empty record, method 0 (stored), time and
//!    date 0, CRC and sizes 0;
//! 2. the name `<root>/<record>`;
//! 3. when the size or the header offset is `>= 0xFFFFFFFF`, miniz's zip64 extra
//!    field: `[size, 0]` if the size is saturated, then `[offset]` if the
//!    offset is;
//! 4. PyTorch's `FB` extra field: id `0x4246`, LE16 pad, pad × `'Z'`, sized so
//!    the payload starts at a multiple of the alignment;
//! 5. the payload;
//! 6. unless empty, a data descriptor: `PK\x07\x08`, CRC-32, compressed and
//!    uncompressed size, as u32 each, or u64 each when step 3 wrote a zip64 field.
//!
//! Then the central directory (made-by 0, real CRC, saturated sizes and
//! offsets, a zip64 extra with only the saturated fields, no `FB` field), a
//! zip64 end record and locator (always, as `MZ_ZIP_FLAG_WRITE_ZIP64` makes
//! miniz do), and the classic end record.
//!
//! Record data is never buffered: chunks go straight to the output, so wrap a
//! [`std::fs::File`] in a [`std::io::BufWriter`]. The writer counts the bytes
//! it has written itself and does not need [`std::io::Seek`].
//!
//! The CRC-32 of a record is computed while it is written (`crc32fast`, about
//! 30 GB/s on one core): a chunk of [`PARALLEL_CRC_MIN`] bytes or more is hashed on
//! a second thread while the calling thread writes it, when the machine has a
//! second core. The CRC is a function of the bytes alone, so the output does not
//! depend on which thread computed it. [`ZipWriter::archive_len`] gives the
//! length of an archive before it is written, to pre-size the output.

use std::io::{self, Write};

use foldhash::HashSet;

use super::format::{
    fb_padding, put16, put32, put64, saturate16, saturate32, CENTRAL_HEADER_SIG,
    DATA_DESCRIPTOR_SIG, DOS_DATE, DOS_TIME, EOCD64_LEN, EOCD64_LOCATOR_SIG, EOCD64_SIG,
    EOCD64_VERSION_MADE_BY, EOCD64_VERSION_NEEDED, EOCD_SIG, FB_EXTRA_ID, FB_PAD_BYTE,
    FLAG_DATA_DESCRIPTOR, FLAG_UTF8, LOCAL_HEADER_SIG, METHOD_STORED, SATURATED_U32,
    ZIP64_EXTRA_ID,
};
use super::ZipError;

/// Largest alignment: its padding, the `FB` header and a zip64 field must fit
/// the local header's 16-bit extra length.
const MAX_ALIGNMENT: u64 = 32 * 1024;

/// Chunks of at least this many bytes are hashed on a second thread while they
/// are written. Below it, starting a thread (tens of microseconds) costs more
/// than hashing (about 30 µs per MiB) saves.
const PARALLEL_CRC_MIN: usize = 1 << 20;

/// Whether the machine has a second core to hash on (asked once: the answer
/// reads cgroup files on Linux).
fn several_cores() -> bool {
    static SEVERAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SEVERAL.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// Writes a PyTorch-style zip archive record by record.
pub struct ZipWriter<W: Write> {
    out: W,
    root: String,
    alignment: u64,
    /// Bytes written so far: the offset of whatever comes next.
    offset: u64,
    /// Central-directory entries of the finished records.
    central: Vec<u8>,
    count: u64,
    /// The names of the finished records (the open one's is its own).
    names: HashSet<String>,
    open: Option<OpenRecord>,
    /// A local header or data descriptor being laid out, kept from one
    /// record to the next (an archive may have hundreds of thousands).
    scratch: Vec<u8>,
    /// Set when a write failed: the archive is then incomplete for good.
    poisoned: bool,
    /// Whether large chunks are hashed on a second thread.
    parallel_crc: bool,
}

/// The record being streamed.
struct OpenRecord {
    name: String,
    /// `name.len()`, checked to fit its 16-bit field.
    name_len: u16,
    header_offset: u64,
    size: u64,
    written: u64,
    hasher: crc32fast::Hasher,
}

impl OpenRecord {
    fn big_size(&self) -> bool {
        self.size >= SATURATED_U32
    }

    fn big_offset(&self) -> bool {
        self.header_offset >= SATURATED_U32
    }

    fn flags(&self) -> u16 {
        if self.size > 0 {
            FLAG_UTF8 | FLAG_DATA_DESCRIPTOR
        } else {
            FLAG_UTF8
        }
    }

    /// The zip64 extra field of the local header (`local`) or of the central
    /// directory; empty when neither the size nor the offset is saturated.
    fn zip64_extra(&self, local: bool) -> Vec<u8> {
        let mut extra = Vec::new();
        if !(self.big_size() || self.big_offset()) {
            return extra;
        }
        let len = if self.big_size() { 16 } else { 0 } + if self.big_offset() { 8 } else { 0 };
        put16(&mut extra, ZIP64_EXTRA_ID);
        put16(&mut extra, len);
        if self.big_size() {
            put64(&mut extra, self.size);
            // miniz fills the local copy before compressing, with size 0.
            put64(&mut extra, if local { 0 } else { self.size });
        }
        if self.big_offset() {
            put64(&mut extra, self.header_offset);
        }
        extra
    }
}

impl<W: Write> ZipWriter<W> {
    /// Starts an archive whose records are named `<root>/<name>` and whose
    /// payloads start at multiples of `alignment` (64 for PyTorch).
    ///
    /// An empty `root`, one containing `/`, or an `alignment` outside
    /// `1..=32768` makes every later call fail.
    pub fn new(w: W, root: &str, alignment: u64) -> Self {
        ZipWriter {
            out: w,
            root: root.to_owned(),
            alignment,
            offset: 0,
            central: Vec::new(),
            count: 0,
            names: HashSet::default(),
            open: None,
            scratch: Vec::new(),
            poisoned: false,
            parallel_crc: several_cores(),
        }
    }

    /// Whether a large chunk's CRC-32 is computed on a thread of its own
    /// while the chunk is written (on by default where there are several
    /// cores). A caller keeping the other cores busy turns it off: a CRC
    /// thread waiting for a core stalls every write.
    #[must_use]
    pub fn with_parallel_crc(mut self, parallel: bool) -> Self {
        self.parallel_crc = parallel && several_cores();
        self
    }

    /// Writes a whole record.
    pub fn write_record(&mut self, name: &str, data: &[u8]) -> Result<(), ZipError> {
        self.start_record(name, data.len() as u64)?;
        self.write_chunk(data)?;
        self.end_record()
    }

    /// Starts a record of exactly `size` bytes, to be given by
    /// [`write_chunk`](Self::write_chunk) and closed by
    /// [`end_record`](Self::end_record). Writes its local header at once.
    pub fn start_record(&mut self, name: &str, size: u64) -> Result<(), ZipError> {
        self.check_usable()?;
        if let Some(open) = &self.open {
            return Err(ZipError::RecordOpen {
                name: open.name.clone(),
            });
        }
        let invalid = |reason| ZipError::InvalidRecordName {
            name: name.to_owned(),
            reason,
        };
        if name.is_empty() {
            return Err(invalid("empty"));
        }
        if name.ends_with('/') {
            return Err(invalid("ends with '/', which names a folder"));
        }
        let full = format!("{}/{}", self.root, name);
        let name_len = u16::try_from(full.len())
            .map_err(|_| invalid("longer than 65535 bytes with the root"))?;
        if self.names.contains(&full) {
            return Err(ZipError::DuplicateRecord { name: full });
        }
        let record = OpenRecord {
            name: full,
            name_len,
            header_offset: self.offset,
            size,
            written: 0,
            hasher: crc32fast::Hasher::new(),
        };
        let pad = fb_padding(self.offset, u64::from(name_len), size, self.alignment)
            .ok_or(ZipError::OffsetOverflow)?;
        let zip64 = record.zip64_extra(true);
        // pad < MAX_ALIGNMENT and zip64 has at most 28 bytes, so these fit.
        let pad16 = u16::try_from(pad).map_err(|_| ZipError::OffsetOverflow)?;
        let extra_len =
            u16::try_from(zip64.len() as u64 + 4 + pad).map_err(|_| ZipError::OffsetOverflow)?;

        let mut header = std::mem::take(&mut self.scratch);
        header.clear();
        put32(&mut header, LOCAL_HEADER_SIG);
        put16(&mut header, 0); // version needed
        put16(&mut header, record.flags());
        put16(&mut header, METHOD_STORED);
        put16(&mut header, DOS_TIME);
        put16(&mut header, DOS_DATE);
        put32(&mut header, 0); // CRC, in the descriptor
        put32(&mut header, 0); // compressed size, in the descriptor
        put32(&mut header, 0); // size, in the descriptor
        put16(&mut header, name_len);
        put16(&mut header, extra_len);
        header.extend_from_slice(record.name.as_bytes());
        header.extend_from_slice(&zip64);
        put16(&mut header, FB_EXTRA_ID);
        put16(&mut header, pad16);
        header.resize(header.len() + usize::from(pad16), FB_PAD_BYTE);
        let emitted = self.emit(&header);
        self.scratch = header;
        emitted?;

        self.open = Some(record);
        Ok(())
    }

    /// Writes the next bytes of the open record, straight to the output, and
    /// hashes them (on a second thread, at the same time, for a large chunk).
    pub fn write_chunk(&mut self, data: &[u8]) -> Result<(), ZipError> {
        let attempted = self.check_chunk(data.len() as u64)?;
        if self.parallel_crc && data.len() >= PARALLEL_CRC_MIN {
            let hashed = std::thread::scope(|s| {
                let hasher = s.spawn(|| {
                    let mut h = crc32fast::Hasher::new();
                    h.update(data);
                    h
                });
                let written = self.emit(data);
                let h = hasher
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                written.map(|()| h)
            })?;
            if let Some(open) = self.open.as_mut() {
                open.hasher.combine(&hashed);
                open.written = attempted;
            }
        } else {
            self.emit(data)?;
            if let Some(open) = self.open.as_mut() {
                open.hasher.update(data);
                open.written = attempted;
            }
        }
        Ok(())
    }

    /// Checks that `len` more bytes fit the open record; returns its new written count.
    fn check_chunk(&self, len: u64) -> Result<u64, ZipError> {
        self.check_usable()?;
        let open = self.open.as_ref().ok_or(ZipError::NoRecordOpen)?;
        let attempted = open.written.saturating_add(len);
        if attempted > open.size {
            return Err(ZipError::RecordOverflow {
                name: open.name.clone(),
                declared: open.size,
                attempted,
            });
        }
        Ok(attempted)
    }

    /// Closes the open record: writes its data descriptor and queues its
    /// central-directory entry.
    pub fn end_record(&mut self) -> Result<(), ZipError> {
        self.check_usable()?;
        let open = self.open.as_ref().ok_or(ZipError::NoRecordOpen)?;
        if open.written < open.size {
            return Err(ZipError::RecordIncomplete {
                name: open.name.clone(),
                declared: open.size,
                written: open.written,
            });
        }
        let Some(record) = self.open.take() else {
            return Err(ZipError::NoRecordOpen);
        };
        let crc = record.hasher.clone().finalize();
        if record.size > 0 {
            let mut descriptor = std::mem::take(&mut self.scratch);
            descriptor.clear();
            put32(&mut descriptor, DATA_DESCRIPTOR_SIG);
            put32(&mut descriptor, crc);
            if record.big_size() || record.big_offset() {
                put64(&mut descriptor, record.size);
                put64(&mut descriptor, record.size);
            } else {
                put32(&mut descriptor, saturate32(record.size));
                put32(&mut descriptor, saturate32(record.size));
            }
            let emitted = self.emit(&descriptor);
            self.scratch = descriptor;
            emitted?;
        }

        let zip64 = record.zip64_extra(false);
        let cd = &mut self.central;
        put32(cd, CENTRAL_HEADER_SIG);
        put16(cd, 0); // version made by
        put16(cd, 0); // version needed
        put16(cd, record.flags());
        put16(cd, METHOD_STORED);
        put16(cd, DOS_TIME);
        put16(cd, DOS_DATE);
        put32(cd, crc);
        put32(cd, saturate32(record.size));
        put32(cd, saturate32(record.size));
        put16(cd, record.name_len);
        put16(cd, saturate16(zip64.len() as u64));
        put16(cd, 0); // comment length
        put16(cd, 0); // disk number
        put16(cd, 0); // internal attributes
        put32(cd, 0); // external attributes
        put32(cd, saturate32(record.header_offset));
        cd.extend_from_slice(record.name.as_bytes());
        cd.extend_from_slice(&zip64);
        self.count += 1;
        self.names.insert(record.name);
        Ok(())
    }

    /// Writes the central directory and the end records, flushes, and returns
    /// the output.
    pub fn finish(mut self) -> Result<W, ZipError> {
        self.write_tail()?;
        if let Err(err) = self.out.flush() {
            self.poisoned = true;
            return Err(err.into());
        }
        Ok(self.out)
    }

    /// Writes the central directory and the end records.
    fn write_tail(&mut self) -> Result<(), ZipError> {
        self.check_usable()?;
        if let Some(open) = &self.open {
            return Err(ZipError::RecordOpen {
                name: open.name.clone(),
            });
        }
        let central = std::mem::take(&mut self.central);
        let cd_offset = self.offset;
        let cd_size = central.len() as u64;
        self.emit(&central)?;
        let eocd64_offset = self.offset;

        let mut tail = Vec::with_capacity(98);
        put32(&mut tail, EOCD64_SIG);
        put64(&mut tail, EOCD64_LEN - 12); // size of the rest of the record
        put16(&mut tail, EOCD64_VERSION_MADE_BY);
        put16(&mut tail, EOCD64_VERSION_NEEDED);
        put32(&mut tail, 0); // this disk
        put32(&mut tail, 0); // disk with the central directory
        put64(&mut tail, self.count);
        put64(&mut tail, self.count);
        put64(&mut tail, cd_size);
        put64(&mut tail, cd_offset);

        put32(&mut tail, EOCD64_LOCATOR_SIG);
        put32(&mut tail, 0); // disk with the zip64 record
        put64(&mut tail, eocd64_offset);
        put32(&mut tail, 1); // total disks

        put32(&mut tail, EOCD_SIG);
        put16(&mut tail, 0); // this disk
        put16(&mut tail, 0); // disk with the central directory
        put16(&mut tail, saturate16(self.count));
        put16(&mut tail, saturate16(self.count));
        put32(&mut tail, saturate32(cd_size));
        put32(&mut tail, saturate32(cd_offset));
        put16(&mut tail, 0); // comment length
        self.emit(&tail)
    }

    /// Fails when the configuration is invalid or a write failed before.
    fn check_usable(&self) -> Result<(), ZipError> {
        if self.poisoned {
            return Err(ZipError::Poisoned);
        }
        let bad_root = if self.root.is_empty() {
            Some("empty")
        } else if self.root.contains('/') {
            Some("contains '/'")
        } else {
            None
        };
        if let Some(reason) = bad_root {
            return Err(ZipError::InvalidRoot {
                root: self.root.clone(),
                reason,
            });
        }
        if !(1..=MAX_ALIGNMENT).contains(&self.alignment) {
            return Err(ZipError::InvalidAlignment {
                alignment: self.alignment,
                max: MAX_ALIGNMENT,
            });
        }
        Ok(())
    }

    /// Writes `bytes` and advances the offset; a failure poisons the writer.
    fn emit(&mut self, bytes: &[u8]) -> Result<(), ZipError> {
        let end = self
            .offset
            .checked_add(bytes.len() as u64)
            .ok_or(ZipError::OffsetOverflow)?;
        if let Err(err) = self.out.write_all(bytes) {
            self.poisoned = true;
            return Err(err.into());
        }
        self.offset = end;
        Ok(())
    }

    /// Accounts for `len` payload bytes of the open record without writing or
    /// hashing them (for [`ZipWriter::archive_len`]).
    fn skip_payload(&mut self, len: u64) -> Result<(), ZipError> {
        let attempted = self.check_chunk(len)?;
        self.offset = self
            .offset
            .checked_add(len)
            .ok_or(ZipError::OffsetOverflow)?;
        if let Some(open) = self.open.as_mut() {
            open.written = attempted;
        }
        Ok(())
    }

    /// A writer whose output pretends to start `offset` bytes into the file,
    /// to test zip64 offsets without writing 4 GiB.
    #[cfg(test)]
    pub(crate) fn starting_at(w: W, root: &str, alignment: u64, offset: u64) -> Self {
        let mut writer = ZipWriter::new(w, root, alignment);
        writer.offset = offset;
        writer
    }
}

impl ZipWriter<io::Sink> {
    /// The exact length of the archive that [`ZipWriter::new`]`(_, root, alignment)`
    /// writes for these records (name and size, in order), found by laying it out
    /// without the payloads: what to pre-size a file to.
    ///
    /// # Errors
    /// As writing the archive would (invalid names or root, duplicates, overflow).
    pub fn archive_len<'n>(
        root: &str,
        alignment: u64,
        records: impl IntoIterator<Item = (&'n str, u64)>,
    ) -> Result<u64, ZipError> {
        let mut w = ZipWriter::new(io::sink(), root, alignment);
        for (name, size) in records {
            w.start_record(name, size)?;
            w.skip_payload(size)?;
            w.end_record()?;
        }
        w.write_tail()?;
        Ok(w.offset)
    }
}

#[cfg(test)]
mod tests {
    use std::io;

    use super::*;
    use crate::format::{le16, le32, le64};
    use crate::{Method, ReadAt, ZipLimits, ZipReader};

    fn archive(records: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = ZipWriter::new(Vec::new(), "archive", 64);
        for (name, data) in records {
            w.write_record(name, data).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn round_trip_empty_tiny_and_larger_records() {
        let big: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let records: [(&str, &[u8]); 7] = [
            ("data.pkl", b"\x80\x02}q\x00."),
            (".format_version", b"1"),
            ("empty", b""),
            ("two", b"ab"),
            ("three", b"abc"),
            ("data/0", &big),
            ("byteorder", b"little"),
        ];
        let bytes = archive(&records);
        let zip = ZipReader::new(&bytes[..], &ZipLimits::default()).unwrap();
        assert_eq!(zip.root(), "archive");
        assert_eq!(zip.entries().len(), records.len());
        for ((name, data), entry) in records.iter().zip(zip.entries()) {
            assert_eq!(zip.name(entry), format!("archive/{name}"));
            assert_eq!(entry.method, Method::Stored);
            assert_eq!(zip.find(name), Some(entry));
            assert_eq!(zip.data_offset(entry).unwrap() % 64, 0, "{name}");
            assert_eq!(zip.read_to_vec(entry).unwrap(), *data);
            zip.check_crc(entry).unwrap();
        }
    }

    #[test]
    fn layout_is_minizs() {
        let bytes = archive(&[("data.pkl", b"abc"), ("e", b"")]);
        // Local header: version 0, flags 0x0808, stored, time/date/CRC/sizes 0.
        assert_eq!(&bytes[..4], b"PK\x03\x04");
        assert_eq!(
            &bytes[4..26],
            &[0, 0, 8, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        // Name 16 bytes, extra 18: "FB", pad 14, 14 × 'Z'; payload at 64.
        assert_eq!(le16(&bytes, 26), Some(16));
        assert_eq!(le16(&bytes, 28), Some(18));
        assert_eq!(&bytes[30..46], b"archive/data.pkl");
        assert_eq!(&bytes[46..50], b"FB\x0e\x00");
        assert_eq!(&bytes[50..64], &[b'Z'; 14]);
        assert_eq!(&bytes[64..67], b"abc");
        // Data descriptor with u32 sizes.
        assert_eq!(&bytes[67..71], b"PK\x07\x08");
        assert_eq!(le32(&bytes, 71), Some(crc32fast::hash(b"abc")));
        assert_eq!((le32(&bytes, 75), le32(&bytes, 79)), (Some(3), Some(3)));
        // Empty record at 83: flags 0x0800, payload at 128, no descriptor.
        assert_eq!(le16(&bytes, 83 + 6), Some(0x0800));
        let cd = 128;
        assert_eq!(&bytes[cd..cd + 4], b"PK\x01\x02");
        // Central directory: made-by 0, needed 0, flags, stored, real CRC, no extra.
        assert_eq!(&bytes[cd + 4..cd + 12], &[0, 0, 0, 0, 8, 8, 0, 0]);
        assert_eq!(le32(&bytes, cd + 16), Some(crc32fast::hash(b"abc")));
        assert_eq!(le16(&bytes, cd + 30), Some(0));
        // End records: zip64 record (56), locator (20), classic (22).
        let n = bytes.len();
        let (record, locator, eocd) = (n - 98, n - 42, n - 22);
        assert_eq!(&bytes[record..record + 4], b"PK\x06\x06");
        assert_eq!(le64(&bytes, record + 4), Some(44));
        assert_eq!(
            (le16(&bytes, record + 12), le16(&bytes, record + 14)),
            (Some(0x031E), Some(0x2D))
        );
        assert_eq!(
            (le64(&bytes, record + 24), le64(&bytes, record + 32)),
            (Some(2), Some(2))
        );
        assert_eq!(le64(&bytes, record + 48), Some(cd as u64));
        assert_eq!(&bytes[locator..locator + 4], b"PK\x06\x07");
        assert_eq!(le64(&bytes, locator + 8), Some(record as u64));
        assert_eq!(le32(&bytes, locator + 16), Some(1));
        assert_eq!(&bytes[eocd..eocd + 4], b"PK\x05\x06");
        assert_eq!(le16(&bytes, eocd + 10), Some(2));
        assert_eq!(le32(&bytes, eocd + 12), Some((record - cd) as u32));
        assert_eq!(le32(&bytes, eocd + 16), Some(cd as u32));
    }

    #[test]
    fn streaming_matches_whole_records_and_is_reproducible() {
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let whole = archive(&[("data/0", &data)]);
        let mut w = ZipWriter::new(Vec::new(), "archive", 64);
        w.start_record("data/0", data.len() as u64).unwrap();
        for chunk in data.chunks(777) {
            w.write_chunk(chunk).unwrap();
        }
        w.end_record().unwrap();
        assert_eq!(w.finish().unwrap(), whole);
        assert_eq!(archive(&[("data/0", &data)]), whole);
    }

    #[test]
    fn archive_len_is_the_written_length() {
        let big = vec![7u8; PARALLEL_CRC_MIN + 3];
        let cases: [&[(&str, &[u8])]; 4] = [
            &[],
            &[("data.pkl", b"abc")],
            &[
                ("data.pkl", b"abc"),
                ("e", b""),
                ("data/0", &big),
                ("version", b"3\n"),
            ],
            &[("a", &big[..100]), ("b", &big[..4096]), ("c", &big[..65])],
        ];
        for records in cases {
            for alignment in [1, 64, 4096] {
                let mut w = ZipWriter::new(Vec::new(), "archive", alignment);
                for (name, data) in records {
                    w.write_record(name, data).unwrap();
                }
                let bytes = w.finish().unwrap();
                let predicted = ZipWriter::archive_len(
                    "archive",
                    alignment,
                    records.iter().map(|(n, d)| (*n, <[u8]>::len(d) as u64)),
                )
                .unwrap();
                assert_eq!(predicted, bytes.len() as u64);
            }
        }
        // A zip64-sized record is laid out without being written.
        let len = ZipWriter::archive_len("archive", 64, [("big", SATURATED_U32)]).unwrap();
        assert_eq!(len, 128 + SATURATED_U32 + 24 + (46 + 11 + 20) + 98);
        assert!(ZipWriter::archive_len("archive", 64, [("a", 1), ("a", 1)]).is_err());
    }

    #[test]
    fn parallel_and_serial_crc_write_the_same_bytes() {
        let data: Vec<u8> = (0..3 * PARALLEL_CRC_MIN as u32 + 5)
            .map(|i| (i * 31 % 253) as u8)
            .collect();
        let write = |parallel| {
            let mut w = ZipWriter::new(Vec::new(), "archive", 64);
            w.parallel_crc = parallel;
            w.start_record("data/0", 2 * data.len() as u64).unwrap();
            w.write_chunk(&data).unwrap();
            w.write_chunk(&data[..10]).unwrap();
            w.write_chunk(&data[10..]).unwrap();
            w.end_record().unwrap();
            w.finish().unwrap()
        };
        let serial = write(false);
        assert!(serial == write(true));
        let zip = ZipReader::new(&serial[..], &ZipLimits::default()).unwrap();
        zip.check_crc(zip.find("data/0").unwrap()).unwrap();
    }

    #[test]
    fn other_alignments() {
        for alignment in [1, 7, 4096, MAX_ALIGNMENT] {
            let mut w = ZipWriter::new(Vec::new(), "r", alignment);
            for i in 0..5 {
                w.write_record(&format!("data/{i}"), &vec![1u8; i * 100])
                    .unwrap();
            }
            let bytes = w.finish().unwrap();
            let zip = ZipReader::new(&bytes[..], &ZipLimits::default()).unwrap();
            for e in zip.entries() {
                assert_eq!(zip.data_offset(e).unwrap() % alignment, 0);
                zip.check_crc(e).unwrap();
            }
        }
    }

    #[test]
    fn misuse_is_an_error() {
        let mut w = ZipWriter::new(Vec::new(), "archive", 64);
        w.write_record("data.pkl", b"x").unwrap();
        let err = w.write_record("data.pkl", b"y").unwrap_err();
        assert_eq!(
            err.to_string(),
            "tried to serialize file twice: \"archive/data.pkl\""
        );
        assert!(matches!(w.write_chunk(b"x"), Err(ZipError::NoRecordOpen)));
        assert!(matches!(w.end_record(), Err(ZipError::NoRecordOpen)));
        assert!(matches!(
            w.start_record("", 0),
            Err(ZipError::InvalidRecordName { .. })
        ));
        assert!(matches!(
            w.start_record("dir/", 0),
            Err(ZipError::InvalidRecordName { .. })
        ));
        let long = "x".repeat(70_000);
        assert!(matches!(
            w.start_record(&long, 0),
            Err(ZipError::InvalidRecordName { .. })
        ));
        w.start_record("data/0", 4).unwrap();
        assert!(matches!(
            w.start_record("data/1", 0),
            Err(ZipError::RecordOpen { .. })
        ));
        w.write_chunk(b"abc").unwrap();
        assert!(matches!(
            w.write_chunk(b"de"),
            Err(ZipError::RecordOverflow {
                declared: 4,
                attempted: 5,
                ..
            })
        ));
        assert!(matches!(
            w.end_record(),
            Err(ZipError::RecordIncomplete {
                declared: 4,
                written: 3,
                ..
            })
        ));
        w.write_chunk(b"d").unwrap();
        w.start_record("data/1", 0).unwrap_err();
        w.end_record().unwrap();
        // A streamed record's name is taken once it ends, as a whole one's.
        assert!(matches!(
            w.start_record("data/0", 0),
            Err(ZipError::DuplicateRecord { .. })
        ));
        let bytes = w.finish().unwrap();
        let zip = ZipReader::new(&bytes[..], &ZipLimits::default()).unwrap();
        assert_eq!(
            zip.read_to_vec(zip.find("data/0").unwrap()).unwrap(),
            b"abcd"
        );

        let mut open = ZipWriter::new(Vec::new(), "archive", 64);
        open.start_record("a", 1).unwrap();
        assert!(matches!(open.finish(), Err(ZipError::RecordOpen { .. })));
        for (root, alignment) in [("", 64), ("a/b", 64), ("a", 0), ("a", MAX_ALIGNMENT + 1)] {
            let mut bad = ZipWriter::new(Vec::new(), root, alignment);
            assert!(bad.write_record("x", b"").is_err());
            assert!(bad.finish().is_err());
        }
    }

    /// Accepts `room` bytes, then fails.
    struct Full {
        room: usize,
    }

    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.room == 0 {
                return Err(io::Error::other("disk full"));
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_poisons_the_writer() {
        let mut w = ZipWriter::new(Full { room: 100 }, "archive", 64);
        w.write_record("a", b"0123").unwrap();
        assert!(matches!(
            w.write_record("b", &[0u8; 100]),
            Err(ZipError::Io(_))
        ));
        assert!(matches!(w.write_record("c", b""), Err(ZipError::Poisoned)));
        assert!(matches!(w.finish(), Err(ZipError::Poisoned)));
    }

    /// An archive that pretends to start 4 GiB into a file of zeros.
    struct Shifted {
        base: u64,
        data: Vec<u8>,
    }

    impl ReadAt for Shifted {
        fn len(&self) -> u64 {
            self.base + self.data.len() as u64
        }

        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            for (i, byte) in buf.iter_mut().enumerate() {
                let at = offset + i as u64;
                *byte = match at.checked_sub(self.base) {
                    None => 0,
                    Some(rel) => *self
                        .data
                        .get(rel as usize)
                        .ok_or(io::ErrorKind::UnexpectedEof)?,
                };
            }
            Ok(())
        }
    }

    #[test]
    fn zip64_offsets_round_trip() {
        let base = 1u64 << 32;
        let mut w = ZipWriter::starting_at(Vec::new(), "archive", 64, base);
        w.write_record("data.pkl", b"hello").unwrap();
        w.write_record("e", b"").unwrap();
        let data = w.finish().unwrap();
        // Local header of data.pkl: zip64 field with the offset only, then FB;
        // 2^32 + 30 + 16 + 4 + 12 = 2^32 + 62, so 2 bytes of pad.
        assert_eq!(le16(&data, 28), Some(12 + 4 + 2));
        assert_eq!(&data[46..50], &[1, 0, 8, 0]);
        assert_eq!(le64(&data, 50), Some(base));
        assert_eq!(&data[58..64], b"FB\x02\x00ZZ");
        assert_eq!(&data[64..69], b"hello");
        // Data descriptor with u64 sizes.
        assert_eq!(&data[69..73], b"PK\x07\x08");
        assert_eq!((le64(&data, 77), le64(&data, 85)), (Some(5), Some(5)));
        // Central directory: saturated offset, zip64 extra with the offset.
        let cd = data.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
        assert_eq!(le32(&data, cd + 42), Some(u32::MAX));
        assert_eq!(le32(&data, cd + 20), Some(5));
        assert_eq!(le16(&data, cd + 30), Some(12));
        assert_eq!(&data[cd + 46 + 16..cd + 46 + 20], &[1, 0, 8, 0]);
        assert_eq!(le32(&data, data.len() - 6), Some(u32::MAX));

        let zip = ZipReader::new(Shifted { base, data }, &ZipLimits::default()).unwrap();
        let e = zip.find("data.pkl").unwrap();
        assert_eq!(e.local_header_offset, base);
        assert_eq!(zip.data_offset(e).unwrap(), base + 64);
        assert_eq!(zip.read_to_vec(e).unwrap(), b"hello");
        zip.check_crc(e).unwrap();
        let empty = zip.find("e").unwrap();
        assert_eq!(zip.data_offset(empty).unwrap() % 64, 0);
        assert_eq!(zip.read_to_vec(empty).unwrap(), b"");
    }

    #[test]
    fn zip64_size_header() {
        let mut w = ZipWriter::new(Vec::new(), "archive", 64);
        w.start_record("big", SATURATED_U32).unwrap();
        let header = &w.out;
        // 30 + 11 + 4 + 20 = 65, so 63 bytes of pad and the payload at 128.
        assert_eq!(header.len(), 128);
        assert_eq!(le16(header, 28), Some(20 + 4 + 63));
        // zip64 field: [size, 0] (miniz writes it before knowing the
        // compressed size).
        assert_eq!(&header[41..45], &[1, 0, 16, 0]);
        assert_eq!(le64(header, 45), Some(SATURATED_U32));
        assert_eq!(le64(header, 53), Some(0));
        assert_eq!(&header[61..65], b"FB\x3f\x00");
    }
}
