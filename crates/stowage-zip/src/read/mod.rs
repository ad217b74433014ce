//! Reading an archive: end records, central directory, local headers, data.
//!
//! Reads are positional ([`ReadAt`]), so one [`ZipReader`] can serve several
//! threads and read stored records straight into a caller's buffer.
//!
//! The end records and central directory are read in `directory`, local
//! headers (where an entry's data starts) in `local`, an entry's data in
//! `data`, deflate data through `inflate`.

mod data;

pub use data::StoredReader;
mod directory;
mod inflate;
mod local;

use std::fmt;
use std::hash::BuildHasher;

use hashbrown::HashTable;

use self::directory::{locate_directory, parse_central_entry};
use super::format::CENTRAL_HEADER_LEN;
use super::{ZipError, ZipLimits};
use crate::ReadAt;

/// `name` below the root folder whose names start with `prefix` (`data/0`
/// of `archive/data/0`, `prefix` being `archive/`), or `None` when it is
/// not there; `name` itself when there is no root (`prefix` is empty). A
/// root folder with an empty name (a first name `/data.pkl`) has the prefix
/// `/`: PyTorch finds record `data.pkl` at `/data.pkl`.
fn below<'n>(prefix: &str, name: &'n str) -> Option<&'n str> {
    name.strip_prefix(prefix)
}

/// The name of `entry` in `names`, the names of its directory; `""` where
/// the entry is not of that directory (never a panic).
fn name_in<'n>(names: &'n str, entry: &Entry) -> &'n str {
    let start = usize::try_from(entry.name_start).unwrap_or(usize::MAX);
    names
        .get(start..start.saturating_add(entry.name_len()))
        .unwrap_or_default()
}

/// How an entry's data is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Not compressed (method 0); what PyTorch writes.
    Stored,
    /// Raw deflate (method 8).
    Deflated,
}

/// One central-directory entry, with zip64 values already applied. Its
/// name, root folder included, is its reader's to give
/// ([`ZipReader::name`]): the names of a directory are kept in one string,
/// not a `String` an entry (a checkpoint of a million tensors has a million
/// records).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Where the name starts in its reader's names.
    name_start: u64,
    /// The name's length in bytes (a zip name is at most 65,535).
    name_len: u16,
    /// Compression method.
    pub method: Method,
    /// Size of the data in the file.
    pub compressed_size: u64,
    /// Size of the data once decompressed.
    pub size: u64,
    /// CRC-32 recorded in the central directory.
    pub crc32: u32,
    /// Offset of the entry's local header.
    pub local_header_offset: u64,
    /// The general-purpose flags mark the entry as encrypted (bit 0 or 6).
    /// Only [`ZipReader::new_lenient`] lists such entries; reading one
    /// succeeds when its data is in fact plain (its CRC-32 matches).
    pub encrypted: bool,
}

// The directory holds one an entry: 40 bytes.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Entry>() <= 40);

impl Entry {
    /// The name's length in bytes.
    pub fn name_len(&self) -> usize {
        usize::from(self.name_len)
    }
}

/// A zip archive opened for reading.
pub struct ZipReader<R: ReadAt> {
    source: R,
    len: u64,
    entries: Vec<Entry>,
    /// Every entry's name, one after another, in central-directory order.
    names: String,
    /// Each entry by its name below the root (`data/0`; an entry outside
    /// the root by its whole name, which no record lookup matches), as its
    /// index in `entries` (the first, of duplicates a lenient reader
    /// lists): the names are not copied, and [`find`](ZipReader::find)
    /// looks a record up without making its full name. A load of a million
    /// records looks each up once.
    by_record: HashTable<u32>,
    /// Whether two entries share a name (only a lenient reader lists them).
    duplicates: bool,
    hasher: foldhash::fast::RandomState,
    /// The root folder and a `/` (`archive/`); empty where there is none.
    prefix: String,
    limits: ZipLimits,
}

impl<R: ReadAt> fmt::Debug for ZipReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZipReader")
            .field("len", &self.len)
            .field("root", &self.root())
            .field("entries", &self.entries.len())
            .finish_non_exhaustive()
    }
}

impl<R: ReadAt> ZipReader<R> {
    /// Opens an archive: finds the end records (the classic one in the last
    /// 64 KiB + 22 bytes, then the zip64 locator and record before it) and
    /// reads the central directory. Offsets, sizes and counts are checked
    /// against the file length before anything is allocated for them.
    pub fn new(source: R, limits: &ZipLimits) -> Result<Self, ZipError> {
        Self::open(source, limits, false)
    }

    /// Opens an archive as a scanner must see it, for readers that must see
    /// everything it holds (`stowage scan`); a loader should refuse what this
    /// lets through:
    /// - entries whose names repeat are all kept, as PyTorch's reader (miniz)
    ///   reads them: [`entries`](Self::entries) lists every one, and
    ///   [`find`](Self::find) gives the first;
    /// - the entries need not share a root folder (PyTorch's layout);
    ///   [`root`](Self::root) is then empty;
    /// - entries whose flags say encrypted are listed, with
    ///   [`Entry::encrypted`]: reading one succeeds only when its data is
    ///   plain after all (its CRC-32 matches), and is
    ///   [`ZipError::Encrypted`] otherwise.
    pub fn new_lenient(source: R, limits: &ZipLimits) -> Result<Self, ZipError> {
        Self::open(source, limits, true)
    }

    fn open(source: R, limits: &ZipLimits, lenient: bool) -> Result<Self, ZipError> {
        let len = source.len();
        let (dir, tail) = locate_directory(&source, len)?;
        // Entries are known by `u32` positions (4 bytes an entry, not 8, in
        // the tables by name): 4 billion entries would be 200 GB of directory.
        let max_entries = limits.max_entries.min(u32::MAX as usize);
        if dir.count > max_entries as u64 {
            return Err(ZipError::TooManyEntries {
                count: dir.count,
                max: max_entries,
            });
        }
        let out_of_bounds = ZipError::DirectoryOutOfBounds {
            offset: dir.offset,
            size: dir.size,
            end: dir.end,
        };
        match dir.offset.checked_add(dir.size) {
            Some(cd_end) if cd_end <= dir.end => {}
            _ => return Err(out_of_bounds),
        }
        if dir.count.saturating_mul(CENTRAL_HEADER_LEN as u64) > dir.size {
            return Err(ZipError::EntryCountBeyondDirectory {
                count: dir.count,
                size: dir.size,
            });
        }
        // A directory no vector can hold is out of bounds (on 32 bits).
        usize::try_from(dir.size).map_err(|_| out_of_bounds)?;
        let cd = tail.read(&source, dir.offset, dir.size)?;

        // `count <= max_entries` and `count * 46 <= size`: both bound this.
        let mut entries: Vec<Entry> = Vec::with_capacity(usize::try_from(dir.count).unwrap_or(0));
        let hasher = foldhash::fast::RandomState::default();
        let mut names = String::new();
        // One table serves both the check for repeated names and the
        // lookups by record: each entry is hashed by its name below the root
        // (the whole name when outside it), so a directory is hashed once.
        // The root is the first name's folder, known once it is parsed.
        let mut by_record: HashTable<u32> = HashTable::with_capacity(entries.capacity());
        let mut prefix: Option<String> = None;
        let mut pos = 0usize;
        let mut duplicates = false;
        while (entries.len() as u64) < dir.count {
            let (mut entry, name, next) = parse_central_entry(&cd, pos, dir.offset, len, lenient)?;
            // A first name with no folder is refused after the whole
            // directory is read (strict), or has the empty root (lenient).
            let prefix = prefix.get_or_insert_with(|| {
                name.split_once('/')
                    .map_or_else(String::new, |(root, _)| format!("{root}/"))
            });
            let key = |name: &str| hasher.hash_one(below(prefix, name).unwrap_or(name));
            let hash = key(name);
            if by_record
                .find(hash, |&i| name_in(&names, &entries[i as usize]) == name)
                .is_some()
            {
                if !lenient {
                    return Err(ZipError::DuplicateEntry { name: name.into() });
                }
                duplicates = true;
            } else {
                // Below `max_entries`, so below `u32::MAX`.
                by_record.insert_unique(hash, entries.len() as u32, |&i| {
                    key(name_in(&names, &entries[i as usize]))
                });
            }
            entry.name_start = names.len() as u64;
            names.push_str(name);
            entries.push(entry);
            pos = next;
        }
        drop(cd);
        names.shrink_to_fit();
        let first = entries.first().ok_or(ZipError::Empty)?;
        // Empty only when the first name has no `/` (a root named "" is `/`).
        let prefix = prefix.unwrap_or_default();
        if prefix.is_empty() && !lenient {
            return Err(ZipError::NoRootFolder {
                name: name_in(&names, first).to_owned(),
            });
        }
        Ok(ZipReader {
            source,
            len,
            entries,
            names,
            by_record,
            duplicates,
            hasher,
            prefix,
            limits: *limits,
        })
    }

    /// All entries, in central-directory order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The full name of `entry`, one of this reader's entries (an entry of
    /// another reader has no name here: `""`, or another entry's).
    pub fn name(&self, entry: &Entry) -> &str {
        name_in(&self.names, entry)
    }

    /// The root folder: the first entry's name up to its first `/`.
    pub fn root(&self) -> &str {
        self.prefix.strip_suffix('/').unwrap_or_default()
    }

    /// The entry `<root>/<record>`, e.g. `find("data.pkl")` or `find("data/0")`
    /// (`/<record>` when the root folder's name is empty, as PyTorch finds
    /// it; `<record>` itself where there is no root folder, a lenient
    /// reader's).
    pub fn find(&self, record: &str) -> Option<&Entry> {
        self.entries.get(self.position(record)?)
    }

    /// Where [`find`](Self::find)'s entry is in [`entries`](Self::entries):
    /// a number for the record that a reader can index its own tables by.
    pub fn position(&self, record: &str) -> Option<usize> {
        let hash = self.hasher.hash_one(record);
        let i = self.by_record.find(hash, |&i| {
            below(&self.prefix, self.name(&self.entries[i as usize])) == Some(record)
        })?;
        Some(*i as usize)
    }

    /// [`position`](Self::position), looking at entry `hint` first: a
    /// reader that finds its records in the directory's order (PyTorch
    /// writes `data/0`, `data/1`, … as its pickle names them) passes the
    /// position after the last it found, and finds each without hashing
    /// the name or reading the directory out of order.
    pub fn position_near(&self, record: &str, hint: usize) -> Option<usize> {
        // Of duplicates, `position` gives the first: the hint is taken only
        // where no two entries share a name.
        let at_hint = self
            .entries
            .get(hint)
            .is_some_and(|e| below(&self.prefix, self.name(e)) == Some(record));
        if at_hint && !self.duplicates {
            return Some(hint);
        }
        self.position(record)
    }

    /// The underlying source.
    pub fn source(&self) -> &R {
        &self.source
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::sync::Arc;

    use flate2::write::DeflateEncoder;
    use flate2::Compression;
    use proptest::prelude::*;

    use super::*;
    use crate::format::{
        le32, put16, put32, put64, CENTRAL_HEADER_SIG, EOCD64_LOCATOR_SIG, EOCD64_SIG, EOCD_SIG,
        LOCAL_HEADER_SIG, ZIP64_EXTRA_ID,
    };
    use crate::ZipWriter;

    /// One entry of a hand-built archive.
    struct Raw {
        name: Vec<u8>,
        method: u16,
        flags: u16,
        payload: Vec<u8>,
        size: u64,
        crc: u32,
    }

    impl Raw {
        fn stored(name: &str, data: &[u8]) -> Self {
            Raw {
                name: name.as_bytes().to_vec(),
                method: 0,
                flags: 0,
                payload: data.to_vec(),
                size: data.len() as u64,
                crc: crc32fast::hash(data),
            }
        }

        fn deflated(name: &str, data: &[u8]) -> Self {
            let mut encoder = DeflateEncoder::new(Vec::new(), Compression::default());
            encoder.write_all(data).unwrap();
            Raw {
                method: 8,
                payload: encoder.finish().unwrap(),
                ..Raw::stored(name, data)
            }
        }
    }

    /// A classic archive; with `zip64`, every central-directory size and
    /// offset is saturated and given in a zip64 extra, and the end records are
    /// zip64 ones with a saturated classic record after them.
    fn build(entries: &[Raw], zip64: bool) -> Vec<u8> {
        let (mut out, mut cd) = (Vec::new(), Vec::new());
        for e in entries {
            let offset = out.len() as u64;
            put32(&mut out, LOCAL_HEADER_SIG);
            for v in [20, e.flags, e.method, 0, 0] {
                put16(&mut out, v);
            }
            put32(&mut out, e.crc);
            put32(&mut out, e.payload.len() as u32);
            put32(&mut out, e.size as u32);
            put16(&mut out, e.name.len() as u16);
            put16(&mut out, 0);
            out.extend_from_slice(&e.name);
            out.extend_from_slice(&e.payload);

            put32(&mut cd, CENTRAL_HEADER_SIG);
            for v in [20, 20, e.flags, e.method, 0, 0] {
                put16(&mut cd, v);
            }
            put32(&mut cd, e.crc);
            let sat = |v: u64| if zip64 { u32::MAX } else { v as u32 };
            put32(&mut cd, sat(e.payload.len() as u64));
            put32(&mut cd, sat(e.size));
            put16(&mut cd, e.name.len() as u16);
            put16(&mut cd, if zip64 { 4 + 24 + 4 } else { 0 });
            for v in [0, 0, 0] {
                put16(&mut cd, v);
            }
            put32(&mut cd, 0);
            put32(&mut cd, sat(offset));
            cd.extend_from_slice(&e.name);
            if zip64 {
                // An unrelated field first, then the zip64 one.
                put16(&mut cd, 0x5455);
                put16(&mut cd, 0);
                put16(&mut cd, ZIP64_EXTRA_ID);
                put16(&mut cd, 24);
                put64(&mut cd, e.size);
                put64(&mut cd, e.payload.len() as u64);
                put64(&mut cd, offset);
            }
        }
        let (cd_offset, count) = (out.len() as u64, entries.len() as u64);
        out.extend_from_slice(&cd);
        if zip64 {
            let record = out.len() as u64;
            put32(&mut out, EOCD64_SIG);
            put64(&mut out, 44);
            put16(&mut out, 45);
            put16(&mut out, 45);
            put64(&mut out, 0);
            for v in [count, count, cd.len() as u64, cd_offset] {
                put64(&mut out, v);
            }
            put32(&mut out, EOCD64_LOCATOR_SIG);
            put32(&mut out, 0);
            put64(&mut out, record);
            put32(&mut out, 1);
        }
        put32(&mut out, EOCD_SIG);
        put32(&mut out, 0);
        let count16 = if zip64 { u16::MAX } else { count as u16 };
        put16(&mut out, count16);
        put16(&mut out, count16);
        put32(&mut out, if zip64 { u32::MAX } else { cd.len() as u32 });
        put32(&mut out, if zip64 { u32::MAX } else { cd_offset as u32 });
        put16(&mut out, 0);
        out
    }

    fn open(bytes: &[u8]) -> Result<ZipReader<&[u8]>, ZipError> {
        ZipReader::new(bytes, &ZipLimits::default())
    }

    fn written(records: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = ZipWriter::new(Vec::new(), "archive", 64);
        for (name, data) in records {
            w.write_record(name, data).unwrap();
        }
        w.finish().unwrap()
    }

    /// Opens and reads everything; must never panic, whatever the bytes.
    fn exercise(bytes: &[u8]) {
        let limits = ZipLimits {
            max_entries: 1000,
            max_record_to_vec: 1 << 20,
        };
        if let Ok(zip) = ZipReader::new(bytes, &limits) {
            let _ = zip.find("data.pkl");
            for e in zip.entries() {
                let _ = zip.data_offset(e);
                let _ = zip.read_to_vec(e);
                let _ = zip.check_crc(e);
            }
        }
    }

    #[test]
    fn reads_stored_and_deflated_entries() {
        let text = b"the quick brown fox jumps over the lazy dog ".repeat(500);
        let bytes = build(
            &[
                Raw::stored("model/data.pkl", b"\x80\x02."),
                Raw::deflated("model/data/0", &text),
                Raw::deflated("model/empty", b""),
                Raw::stored("outside.txt", b"x"),
            ],
            false,
        );
        let zip = open(&bytes).unwrap();
        assert_eq!(zip.root(), "model");
        assert_eq!(zip.entries().len(), 4);
        let e = zip.find("data/0").unwrap();
        assert_eq!(e.method, Method::Deflated);
        assert!(e.compressed_size < e.size);
        assert_eq!(zip.read_to_vec(e).unwrap(), text);
        zip.check_crc(e).unwrap();
        assert_eq!(zip.read_to_vec(zip.find("empty").unwrap()).unwrap(), b"");
        assert_eq!(
            zip.read_to_vec(zip.find("data.pkl").unwrap()).unwrap(),
            b"\x80\x02."
        );
        // Listed, but not under the root.
        assert!(zip.find("outside.txt").is_none());
        assert!(zip.find("../outside.txt").is_none());
    }

    /// Each entry's name comes back from its reader's one string of names,
    /// multi-byte characters included; an entry of another reader whose
    /// name lies past this reader's names, or across a character, is `""`.
    #[test]
    fn names_come_from_their_reader() {
        let names = [
            "model/data.pkl",
            "model/données/é",
            "model/data/0",
            "model/ü",
        ];
        let raws: Vec<Raw> = names.iter().map(|n| Raw::stored(n, b"x")).collect();
        let bytes = build(&raws, false);
        let zip = open(&bytes).unwrap();
        let listed: Vec<&str> = zip.entries().iter().map(|e| zip.name(e)).collect();
        assert_eq!(listed, names);
        assert_eq!(zip.name(zip.find("données/é").unwrap()), "model/données/é");

        let short = build(&[Raw::stored("m/a", b"x")], false);
        let other = open(&short).unwrap();
        assert_eq!(other.name(&zip.entries()[2]), "");
        // Names "m/é" then "m/a": bytes 3..6 of "m/ém/a" start inside `é`.
        let mid = build(&[Raw::stored("m/é", b"x"), Raw::stored("m/a", b"x")], false);
        let mid = open(&mid).unwrap();
        let one_in = Entry {
            name_start: 3,
            ..mid.entries()[1].clone()
        };
        assert_eq!(mid.name(&one_in), "");
    }

    /// `position_near` gives what `position` gives, whatever the hint: the
    /// hinted entry when it is the record, the looked-up one when not (a
    /// wrong hint, one past the end, an entry outside the root), and the
    /// first of duplicates even when the hint is a later one.
    #[test]
    fn a_hint_finds_what_position_finds() {
        // `data/1` outside the root is not `m/data/1` repeated, nor found
        // as record `data/1`.
        let names = [
            "m/data.pkl",
            "m/data/0",
            "m/data/1",
            "other/x",
            "m/data/2",
            "data/1",
        ];
        let raws: Vec<Raw> = names.iter().map(|n| Raw::stored(n, b"x")).collect();
        let bytes = build(&raws, false);
        let zip = open(&bytes).unwrap();
        assert_eq!(zip.entries().len(), names.len());
        assert_eq!(zip.position("data/1"), Some(2));
        assert_eq!(zip.position("data/2"), Some(4));
        for record in [
            "data.pkl", "data/0", "data/1", "data/2", "x", "other/x", "absent",
        ] {
            for hint in 0..names.len() + 2 {
                assert_eq!(
                    zip.position_near(record, hint),
                    zip.position(record),
                    "{record} near {hint}"
                );
            }
        }
        assert_eq!(zip.position_near("data/1", 2), Some(2));

        let twice = [Raw::stored("z/a", b"1"), Raw::stored("z/a", b"2")];
        let data = build(&twice, false);
        let z = ZipReader::new_lenient(data.as_slice(), &ZipLimits::default()).unwrap();
        assert_eq!(z.position_near("a", 1), Some(0));
    }

    /// A source that counts its reads and the bytes they asked for.
    struct Counted<'a> {
        bytes: &'a [u8],
        reads: std::sync::atomic::AtomicU64,
        read_bytes: std::sync::atomic::AtomicU64,
    }

    impl crate::ReadAt for Counted<'_> {
        fn len(&self) -> u64 {
            self.bytes.len() as u64
        }
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            use std::sync::atomic::Ordering::Relaxed;
            self.reads.fetch_add(1, Relaxed);
            self.read_bytes.fetch_add(buf.len() as u64, Relaxed);
            self.bytes.read_exact_at(buf, offset)
        }
    }

    #[test]
    fn a_small_archive_is_opened_with_one_read_of_its_end_records_and_directory() {
        use std::sync::atomic::Ordering::Relaxed;
        // As a distributed checkpoint's item is: one torch.save archive of
        // half a MiB, zip64 records and all.
        for zip64 in [false, true] {
            let data = vec![7u8; 512 << 10];
            let bytes = build(
                &[
                    Raw::stored("item/data.pkl", b"\x80\x02."),
                    Raw::stored("item/byteorder", b"little"),
                    Raw::stored("item/data/0", &data),
                ],
                zip64,
            );
            let source = Counted {
                bytes: &bytes,
                reads: 0.into(),
                read_bytes: 0.into(),
            };
            let zip = ZipReader::new(&source, &ZipLimits::default()).unwrap();
            assert_eq!(zip.entries().len(), 3);
            assert_eq!(source.reads.load(Relaxed), 1, "zip64: {zip64}");
            assert!(source.read_bytes.load(Relaxed) <= 4096, "zip64: {zip64}");
        }
    }

    #[test]
    fn an_end_record_behind_a_long_comment_is_found_further_back() {
        let plain = build(&[Raw::stored("model/data.pkl", b"\x80\x02.")], false);
        for comment_len in [0usize, 100, 4074, 4075, 5000, 65535] {
            let mut bytes = plain.clone();
            let n = bytes.len();
            bytes[n - 2..].copy_from_slice(&(comment_len as u16).to_le_bytes());
            // Up to 5000 bytes, a comment that is all end record
            // signatures whose length fields (19,280) never fit: none of
            // them is taken for the record. (In a longer one they would
            // fit: a comment may hide a record, as in every zip reader.)
            let filler = if comment_len <= 5000 {
                b"PK\x05\x06"
            } else {
                b"cccc"
            };
            bytes.extend((0..comment_len).map(|i| filler[i % 4]));
            let zip = open(&bytes).unwrap_or_else(|e| panic!("comment of {comment_len}: {e}"));
            assert_eq!(
                zip.read_to_vec(zip.find("data.pkl").unwrap()).unwrap(),
                b"\x80\x02."
            );
        }
        // A record whose comment would run past the end is none.
        let mut bytes = plain.clone();
        let n = bytes.len();
        bytes[n - 2..].copy_from_slice(&10u16.to_le_bytes());
        assert!(matches!(open(&bytes), Err(ZipError::NotZip { .. })));
    }

    #[test]
    fn reads_zip64_end_records_and_extras() {
        let bytes = build(
            &[
                Raw::stored("z/a", b"hello"),
                Raw::deflated("z/b", &[7u8; 5000]),
            ],
            true,
        );
        let zip = open(&bytes).unwrap();
        let a = zip.find("a").unwrap();
        assert_eq!(
            (a.size, a.compressed_size, a.local_header_offset),
            (5, 5, 0)
        );
        assert_eq!(zip.read_to_vec(a).unwrap(), b"hello");
        let b = zip.find("b").unwrap();
        assert_eq!(b.size, 5000);
        assert_eq!(b.local_header_offset, 30 + 3 + 5);
        assert_eq!(zip.read_to_vec(b).unwrap(), vec![7u8; 5000]);
        zip.check_crc(b).unwrap();
    }

    #[test]
    fn zip64_extra_without_the_needed_field_is_an_error() {
        let mut bytes = build(&[Raw::stored("z/a", b"hello")], true);
        // Shrink the zip64 field from 24 to 16 bytes: the offset goes missing.
        let at = bytes.windows(4).position(|w| w == [1, 0, 24, 0]).unwrap();
        bytes[at + 2] = 16;
        let err = open(&bytes).unwrap_err();
        assert!(
            matches!(
                &err,
                ZipError::MissingZip64Field {
                    field: "local header offset",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn deflate_bomb_is_bounded() {
        let mut bomb = Raw::deflated("z/bomb", &vec![0u8; 10 << 20]);
        assert!(bomb.payload.len() < 20_000);
        bomb.size = 100;
        let bytes = build(&[bomb], false);
        let zip = open(&bytes).unwrap();
        let e = &zip.entries()[0];
        let err = zip.read_to_vec(e).unwrap_err();
        assert!(
            matches!(err, ZipError::InflatesTooLarge { expected: 100, .. }),
            "{err}"
        );
        assert!(matches!(
            zip.check_crc(e),
            Err(ZipError::InflatesTooLarge { .. })
        ));
    }

    #[test]
    fn deflate_shorter_than_declared_or_corrupt_is_an_error() {
        let mut short = Raw::deflated("z/short", b"abcdef");
        short.size = 10;
        let mut corrupt = Raw::deflated("z/corrupt", &[1u8; 1000]);
        corrupt.payload = vec![0xFF; 16];
        let mut cut = Raw::deflated("z/cut", &(0..5000u32).map(|i| i as u8).collect::<Vec<_>>());
        cut.payload.truncate(cut.payload.len() / 2);
        let bytes = build(&[short, corrupt, cut], false);
        let zip = open(&bytes).unwrap();
        let err = zip.read_to_vec(zip.find("short").unwrap()).unwrap_err();
        assert!(
            matches!(
                err,
                ZipError::InflatesTooShort {
                    expected: 10,
                    found: 6,
                    ..
                }
            ),
            "{err}"
        );
        let err = zip.read_to_vec(zip.find("corrupt").unwrap()).unwrap_err();
        assert!(matches!(err, ZipError::Inflate { .. }), "{err}");
        let err = zip.read_to_vec(zip.find("cut").unwrap()).unwrap_err();
        assert!(matches!(err, ZipError::Inflate { .. }), "{err}");
    }

    #[test]
    fn lenient_reads_any_layout_and_plain_data_flagged_encrypted() {
        // No root folder, one entry flagged encrypted (bit 0) but stored
        // plainly, one flagged strongly encrypted (bit 6) and deflated
        // plainly, one truly encrypted (a ZipCrypto header and other bytes:
        // its CRC-32 cannot match).
        let mut flagged = Raw::stored("a.pkl", b"plain");
        flagged.flags = 0x1;
        let mut strong = Raw::deflated("dir/b.bin", &[7u8; 500]);
        strong.flags = 0x40;
        let mut locked = Raw::stored("c.pkl", b"secret");
        locked.flags = 0x1;
        locked.payload = vec![0x5a; 18];
        locked.size = 18;
        let data = build(&[flagged, strong, locked], false);
        assert!(matches!(
            open(&data),
            Err(ZipError::NoRootFolder { .. } | ZipError::Encrypted { .. })
        ));
        let z = ZipReader::new_lenient(data.as_slice(), &ZipLimits::default()).unwrap();
        assert_eq!(z.root(), "");
        assert!(z.entries().iter().all(|e| e.encrypted));
        assert_eq!(z.read_to_vec(z.find("a.pkl").unwrap()).unwrap(), b"plain");
        assert_eq!(z.read_head(z.find("a.pkl").unwrap(), 3).unwrap(), b"pla");
        assert_eq!(
            z.read_to_vec(z.find("dir/b.bin").unwrap()).unwrap(),
            [7u8; 500]
        );
        let err = z.read_to_vec(z.find("c.pkl").unwrap()).unwrap_err();
        assert!(
            matches!(&err, ZipError::Encrypted { name } if name == "c.pkl"),
            "{err}"
        );
        let err = z.read_head(z.find("c.pkl").unwrap(), 4).unwrap_err();
        assert!(matches!(err, ZipError::Encrypted { .. }), "{err}");
    }

    #[test]
    fn read_heads_reads_close_entries_together() {
        let big: Vec<u8> = (0..100_000u32).map(|i| (i * 13) as u8).collect();
        let entries = [
            Raw::stored("z/a", b"first"),
            Raw::stored("z/b", b"second"),
            Raw::deflated("z/c", b"third, deflated"),
            Raw::stored("z/big", &big),
            Raw::stored("z/d", b"after the big one"),
        ];
        let bytes = build(&entries, false);
        let zip = open(&bytes).unwrap();
        let all: Vec<(&Entry, usize)> = zip.entries().iter().map(|e| (e, 8)).collect();
        let heads = zip.read_heads(&all);
        let heads: Vec<Vec<u8>> = heads.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            heads,
            [
                &b"first"[..],
                b"second",
                b"third, d",
                &big[..8],
                b"after th"
            ]
            .map(<[u8]>::to_vec)
        );
        for &(e, _) in &all {
            let whole = zip.read_heads(&[(e, 1 << 20)]);
            assert_eq!(whole[0].as_ref().unwrap(), &zip.read_to_vec(e).unwrap());
        }
    }

    #[test]
    fn read_head_reads_a_prefix() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let bytes = build(
            &[Raw::stored("z/s", &data), Raw::deflated("z/d", &data)],
            false,
        );
        let zip = open(&bytes).unwrap();
        for name in ["s", "d"] {
            let e = zip.find(name).unwrap();
            assert_eq!(zip.read_head(e, 100).unwrap(), &data[..100]);
            assert_eq!(zip.read_head(e, 1 << 20).unwrap(), data);
        }
    }

    /// A stored entry's reader gives what `read_to_vec` gives, in reads of
    /// any size, and each clone from the start; a deflated entry has none.
    #[test]
    fn stored_reader_reads_what_read_to_vec_reads() {
        use std::io::Read as _;
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let bytes = build(
            &[Raw::stored("z/s", &data), Raw::deflated("z/d", &data)],
            false,
        );
        let zip = open(&bytes).unwrap();
        let reader = zip.stored_reader(zip.find("s").unwrap()).unwrap().unwrap();
        for step in [1, 7, 4096, 10_000] {
            let (mut r, mut got, mut buf) = (reader.clone(), Vec::new(), vec![0u8; step]);
            loop {
                match r.read(&mut buf).unwrap() {
                    0 => break,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
            assert_eq!(got, data, "reads of {step}");
        }
        assert!(zip.stored_reader(zip.find("d").unwrap()).unwrap().is_none());
    }

    #[test]
    fn refuses_unsupported_entries() {
        let mut bzip = Raw::stored("z/a", b"abc");
        bzip.method = 12;
        let err = open(&build(&[bzip], false)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "entry \"z/a\" uses unsupported compression method 12 (bzip2)"
        );
        let mut locked = Raw::stored("z/a", b"abc");
        locked.flags = 1;
        assert!(matches!(
            open(&build(&[locked], false)),
            Err(ZipError::Encrypted { .. })
        ));
        let mut latin1 = Raw::stored("z/a", b"abc");
        latin1.name = b"z/caf\xe9".to_vec();
        let err = open(&build(&[latin1], false)).unwrap_err();
        assert!(
            matches!(err, ZipError::NameNotUtf8 { offset: 39, .. }),
            "{err}"
        );
        let twice = [Raw::stored("z/a", b"1"), Raw::stored("z/a", b"2")];
        assert!(matches!(
            open(&build(&twice, false)),
            Err(ZipError::DuplicateEntry { .. })
        ));
        // Kept when asked for, as PyTorch's reader keeps them: `find` gives
        // the first.
        let data = build(&twice, false);
        let z = ZipReader::new_lenient(data.as_slice(), &ZipLimits::default()).unwrap();
        assert_eq!(z.entries().len(), 2);
        assert_eq!(z.read_to_vec(z.find("a").unwrap()).unwrap(), b"1");
        assert_eq!(z.read_to_vec(&z.entries()[1]).unwrap(), b"2");
        let mut odd = Raw::stored("z/a", b"abc");
        odd.size = 4;
        assert!(matches!(
            open(&build(&[odd], false)),
            Err(ZipError::StoredSizeMismatch {
                compressed: 3,
                size: 4,
                ..
            })
        ));
    }

    #[test]
    fn root_rules() {
        let err = open(&build(&[Raw::stored("flat", b"x")], false)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "file in archive is not in a subdirectory: \"flat\""
        );
        assert!(matches!(open(&build(&[], false)), Err(ZipError::Empty)));
        let spaced = build(&[Raw::stored("a b/c/d", b"x")], false);
        let zip = open(&spaced).unwrap();
        assert_eq!(zip.root(), "a b");
        assert!(zip.find("c/d").is_some());
        // A root folder named "" (names start with `/`): PyTorch's reader
        // finds record `data/0` at `/data/0`, and so does this one (a
        // fuzzer's find: `find` once looked for `data/0` whole).
        let slashed = build(
            &[Raw::stored("/data.pkl", b"x"), Raw::stored("/data/0", b"y")],
            false,
        );
        let zip = open(&slashed).unwrap();
        assert_eq!(zip.root(), "");
        assert_eq!(zip.position("data/0"), Some(1));
        assert_eq!(zip.position("/data/0"), None);
    }

    #[test]
    fn not_a_zip() {
        for bytes in [
            &b""[..],
            b"PK\x03\x04",
            b"PYTORCH1 preview format data",
            &[0u8; 100_000],
        ] {
            assert!(
                matches!(open(bytes), Err(ZipError::NotZip { .. })),
                "{bytes:?}"
            );
        }
    }

    #[test]
    fn hostile_end_records() {
        let good = written(&[("data.pkl", b"abc"), ("data/0", &[1u8; 100])]);
        let n = good.len();
        let (eocd, locator, record) = (n - 22, n - 42, n - 98);
        assert_eq!(le32(&good, record), Some(EOCD64_SIG));

        // 2^40 entries in the zip64 record.
        let mut huge = good.clone();
        huge[record + 32..record + 40].copy_from_slice(&(1u64 << 40).to_le_bytes());
        let err = open(&huge).unwrap_err();
        assert!(
            matches!(err, ZipError::TooManyEntries { count, .. } if count == 1 << 40),
            "{err}"
        );
        // More entries than the directory can hold.
        let mut many = good.clone();
        many[record + 32..record + 40].copy_from_slice(&1000u64.to_le_bytes());
        assert!(matches!(
            open(&many),
            Err(ZipError::EntryCountBeyondDirectory { count: 1000, .. })
        ));
        // Directory offset past the end of the file.
        let mut far = good.clone();
        far[record + 48..record + 56].copy_from_slice(&(1u64 << 50).to_le_bytes());
        assert!(matches!(
            open(&far),
            Err(ZipError::DirectoryOutOfBounds { .. })
        ));
        let mut wrap = good.clone();
        wrap[record + 48..record + 56].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(
            open(&wrap),
            Err(ZipError::DirectoryOutOfBounds { .. })
        ));
        // Locator pointing past the end, or at something else.
        let mut lost = good.clone();
        lost[locator + 8..locator + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(matches!(open(&lost), Err(ZipError::Truncated { .. })));
        let mut wrong = good.clone();
        wrong[locator + 8..locator + 16].copy_from_slice(&0u64.to_le_bytes());
        assert!(matches!(
            open(&wrong),
            Err(ZipError::BadSignature { offset: 0, .. })
        ));
        // Classic record only (locator gone): still readable.
        let mut classic = good.clone();
        classic[locator] = b'X';
        assert_eq!(open(&classic).unwrap().entries().len(), 2);
        // A classic record claiming 0xFFFF entries without zip64.
        classic[eocd + 10] = 0xFF;
        classic[eocd + 11] = 0xFF;
        assert!(matches!(
            open(&classic),
            Err(ZipError::EntryCountBeyondDirectory { .. })
        ));
    }

    #[test]
    fn hostile_entries() {
        let good = written(&[("data.pkl", b"abc"), ("data/0", &[1u8; 100])]);
        let cd = good
            .windows(4)
            .position(|w| w == [0x50, 0x4b, 1, 2])
            .unwrap();
        // Local header offset of the first entry past the end of the file.
        let mut far = good.clone();
        far[cd + 42..cd + 46].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
        let err = open(&far).unwrap_err();
        assert!(matches!(err, ZipError::DataOutOfBounds { .. }), "{err}");
        // Compressed size past the end of the file.
        let mut long = good.clone();
        long[cd + 20..cd + 28].copy_from_slice(&[0xF0, 0xFF, 0xFF, 0x0F, 0xF0, 0xFF, 0xFF, 0x0F]);
        assert!(matches!(open(&long), Err(ZipError::DataOutOfBounds { .. })));
        // Local header signature damaged: found when reading.
        let mut bad = good.clone();
        bad[0] = b'X';
        let zip = open(&bad).unwrap();
        let err = zip.read_to_vec(&zip.entries()[0]).unwrap_err();
        assert!(
            matches!(
                err,
                ZipError::BadSignature {
                    what: "local header",
                    offset: 0,
                    ..
                }
            ),
            "{err}"
        );
        // Local header naming another file.
        let mut renamed = good.clone();
        renamed[30] = b'X';
        let zip = open(&renamed).unwrap();
        assert!(matches!(
            zip.data_offset(&zip.entries()[0]),
            Err(ZipError::LocalHeaderMismatch { offset: 0, .. })
        ));
        // Local extra length pushing the data past the end of the file.
        let mut padded = good.clone();
        padded[28..30].copy_from_slice(&0xFFFFu16.to_le_bytes());
        let zip = open(&padded).unwrap();
        let err = zip.read_to_vec(&zip.entries()[0]).unwrap_err();
        assert!(
            matches!(
                err,
                ZipError::DataOutOfBounds {
                    offset: 65581,
                    size: 3,
                    ..
                }
            ),
            "{err}"
        );
        assert!(zip.read_to_vec(&zip.entries()[1]).is_ok());
    }

    #[test]
    fn limits_and_buffer_sizes() {
        let bytes = written(&[("data.pkl", b"abcdef")]);
        let limits = ZipLimits {
            max_entries: 1,
            max_record_to_vec: 4,
        };
        let zip = ZipReader::new(&bytes[..], &limits).unwrap();
        let e = zip.find("data.pkl").unwrap();
        assert!(matches!(
            zip.read_to_vec(e),
            Err(ZipError::RecordTooLarge {
                size: 6,
                max: 4,
                ..
            })
        ));
        assert!(matches!(
            zip.stored_reader(e),
            Err(ZipError::RecordTooLarge {
                size: 6,
                max: 4,
                ..
            })
        ));
        let mut small = [0u8; 5];
        assert!(matches!(
            zip.read_into(e, &mut small),
            Err(ZipError::BufferSizeMismatch {
                expected: 6,
                found: 5,
                ..
            })
        ));
        let mut exact = [0u8; 6];
        zip.read_into(e, &mut exact).unwrap();
        assert_eq!(&exact, b"abcdef");
        let two = written(&[("a", b""), ("b", b"")]);
        assert!(matches!(
            ZipReader::new(&two[..], &limits),
            Err(ZipError::TooManyEntries { count: 2, max: 1 })
        ));
    }

    #[test]
    fn crc_checks() {
        let mut unrecorded = Raw::stored("z/a", b"abc");
        unrecorded.crc = 0;
        let mut wrong = Raw::stored("z/b", b"abc");
        wrong.crc = 1;
        let mut empty = Raw::stored("z/c", b"");
        empty.crc = 0;
        let zip_bytes = build(&[unrecorded, wrong, empty], false);
        let zip = open(&zip_bytes).unwrap();
        let found = crc32fast::hash(b"abc");
        let err = zip.check_crc(&zip.entries()[0]).unwrap_err();
        assert!(
            matches!(err, ZipError::CrcNotRecorded { found: f, .. } if f == found),
            "{err}"
        );
        let err = zip.check_crc(&zip.entries()[1]).unwrap_err();
        assert!(
            matches!(err, ZipError::CrcMismatch { expected: 1, .. }),
            "{err}"
        );
        zip.check_crc(&zip.entries()[2]).unwrap();
        // Data is still readable either way: PyTorch never checks.
        assert_eq!(zip.read_to_vec(&zip.entries()[1]).unwrap(), b"abc");
    }

    #[test]
    fn shared_across_threads() {
        let records: Vec<(String, Vec<u8>)> = (0..8)
            .map(|i| (format!("data/{i}"), vec![i as u8; 1000 * (i + 1)]))
            .collect();
        let mut w = ZipWriter::new(Vec::new(), "archive", 64);
        for (name, data) in &records {
            w.write_record(name, data).unwrap();
        }
        let bytes: Arc<[u8]> = w.finish().unwrap().into();
        let zip = ZipReader::new(Arc::clone(&bytes), &ZipLimits::default()).unwrap();
        std::thread::scope(|s| {
            for (name, data) in &records {
                let zip = &zip;
                s.spawn(move || {
                    assert_eq!(&zip.read_to_vec(zip.find(name).unwrap()).unwrap(), data)
                });
            }
        });
    }

    #[test]
    fn every_truncation_fails_cleanly() {
        let bytes = written(&[
            ("data.pkl", b"\x80\x02."),
            ("byteorder", b"little"),
            ("data/0", &[9u8; 300]),
        ]);
        let deflated = build(
            &[
                Raw::deflated("z/a", &[3u8; 3000]),
                Raw::stored("z/b", b"xy"),
            ],
            true,
        );
        for full in [&bytes, &deflated] {
            assert!(open(full).is_ok());
            for n in 0..full.len() {
                assert!(open(&full[..n]).is_err(), "truncated to {n} bytes");
                exercise(&full[..n]);
            }
        }
    }

    proptest! {
        #[test]
        fn mutated_archives_never_panic(
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
            which in 0usize..2,
        ) {
            let mut bytes = if which == 0 {
                written(&[("data.pkl", b"\x80\x02."), ("data/0", &[5u8; 200]), ("e", b"")])
            } else {
                build(&[Raw::deflated("z/a", &[3u8; 3000]), Raw::stored("z/b", b"xy")], true)
            };
            let n = bytes.len();
            for (at, value) in edits {
                bytes[at % n] = value;
            }
            exercise(&bytes);
        }

        #[test]
        fn random_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            exercise(&bytes);
            // Give it an end record so that parsing goes further.
            bytes.extend_from_slice(b"PK\x05\x06\0\0\0\0\x01\0\x01\0\x2e\0\0\0\0\0\0\0\0\0");
            exercise(&bytes);
        }
    }
}
