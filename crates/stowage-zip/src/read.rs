//! Reading an archive: end records, central directory, local headers, data.
//!
//! Reads are positional ([`ReadAt`]), so one [`ZipReader`] can serve several
//! threads and read stored records straight into a caller's buffer.

use std::collections::HashMap;
use std::fmt;

use flate2::{Decompress, FlushDecompress, Status};

use super::format::{
    le16, le32, le64, method_name, CENTRAL_HEADER_LEN, CENTRAL_HEADER_SIG, EOCD64_LEN,
    EOCD64_LOCATOR_LEN, EOCD64_LOCATOR_SIG, EOCD64_SIG, EOCD_LEN, EOCD_SIG, FLAG_ENCRYPTED,
    FLAG_STRONG_ENCRYPTION, LOCAL_HEADER_LEN, LOCAL_HEADER_SIG, MAX_COMMENT_LEN, METHOD_DEFLATED,
    METHOD_STORED, SATURATED_U32, ZIP64_EXTRA_ID,
};
use super::{ZipError, ZipLimits};
use crate::ReadAt;

/// Compressed input read at a time when inflating.
const INFLATE_CHUNK: usize = 64 * 1024;
/// Stored data read at a time when computing a CRC.
const CRC_CHUNK: usize = 1024 * 1024;
/// Extra-field bytes read along with a local header when a record's first
/// bytes are read with it (PyTorch's padding is under 64 + 4 bytes, zip64's
/// 32): past them, the data is read apart.
const EXTRA_GUESS: u64 = 128;

/// How an entry's data is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Not compressed (method 0); what PyTorch writes.
    Stored,
    /// Raw deflate (method 8).
    Deflated,
}

/// One central-directory entry, with zip64 values already applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Full name, root folder included.
    pub name: String,
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

/// A zip archive opened for reading.
pub struct ZipReader<R: ReadAt> {
    source: R,
    len: u64,
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
    root: String,
    limits: ZipLimits,
}

impl<R: ReadAt> fmt::Debug for ZipReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZipReader")
            .field("len", &self.len)
            .field("root", &self.root)
            .field("entries", &self.entries.len())
            .finish_non_exhaustive()
    }
}

/// Where the central directory is, from the end records.
struct Directory {
    offset: u64,
    size: u64,
    count: u64,
    /// Start of the end records: the directory has to end before it.
    end: u64,
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
        let dir = locate_directory(&source, len)?;
        if dir.count > limits.max_entries as u64 {
            return Err(ZipError::TooManyEntries {
                count: dir.count,
                max: limits.max_entries,
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
        let mut cd = vec![0u8; usize::try_from(dir.size).map_err(|_| out_of_bounds)?];
        source.read_exact_at(&mut cd, dir.offset)?;

        // `count <= max_entries` and `count * 46 <= size`: both bound this.
        let mut entries = Vec::with_capacity(usize::try_from(dir.count).unwrap_or(0));
        let mut by_name = HashMap::with_capacity(entries.capacity());
        let mut pos = 0usize;
        while (entries.len() as u64) < dir.count {
            let (entry, next) = parse_central_entry(&cd, pos, dir.offset, len, lenient)?;
            if by_name.contains_key(&entry.name) {
                if !lenient {
                    return Err(ZipError::DuplicateEntry { name: entry.name });
                }
            } else {
                by_name.insert(entry.name.clone(), entries.len());
            }
            entries.push(entry);
            pos = next;
        }
        let first = entries.first().ok_or(ZipError::Empty)?;
        let root = match first.name.split_once('/') {
            Some((root, _)) => root.to_owned(),
            None if lenient => String::new(),
            None => {
                return Err(ZipError::NoRootFolder {
                    name: first.name.clone(),
                })
            }
        };
        Ok(ZipReader {
            source,
            len,
            entries,
            by_name,
            root,
            limits: *limits,
        })
    }

    /// All entries, in central-directory order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The root folder: the first entry's name up to its first `/`.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The entry `<root>/<record>`, e.g. `find("data.pkl")` or `find("data/0")`
    /// (`<record>` itself when the root is empty).
    pub fn find(&self, record: &str) -> Option<&Entry> {
        let i = if self.root.is_empty() {
            self.by_name.get(record)
        } else {
            self.by_name.get(&format!("{}/{}", self.root, record))
        };
        i.and_then(|&i| self.entries.get(i))
    }

    /// The underlying source.
    pub fn source(&self) -> &R {
        &self.source
    }

    /// Offset of the entry's data, from its local header (offset + 30 + name
    /// length + extra length, where the extra field holds PyTorch's padding),
    /// checked to lie in the file with `compressed_size` bytes after it.
    pub fn data_offset(&self, e: &Entry) -> Result<u64, ZipError> {
        let ofs = e.local_header_offset;
        let name = e.name.as_bytes();
        let needed = LOCAL_HEADER_LEN + name.len() as u64;
        let mut header = vec![0u8; LOCAL_HEADER_LEN as usize + name.len()];
        match ofs.checked_add(needed) {
            Some(end) if end <= self.len => {}
            _ => {
                return Err(ZipError::Truncated {
                    what: "local header",
                    offset: ofs,
                    needed,
                    available: self.len.saturating_sub(ofs),
                })
            }
        }
        self.source.read_exact_at(&mut header, ofs)?;
        self.data_offset_from(e, &header)
    }

    /// Where PyTorch's writer puts the entry's data, guessed without reading
    /// its local header: after the header, the name and an extra field of
    /// padding (`FB`, its length, zeros) that brings the data to a multiple of
    /// 64 bytes, with ZIP64 fields first for a record at or past 4 GiB or of
    /// 4 GiB or more (`getPadding` of PyTorch's `inline_container.cc`).
    /// `None` when the guess would not leave the data inside the file. Only
    /// a guess: check it with [`data_offset_in`](Self::data_offset_in) once
    /// the local header is read (a remote load reads both in one request).
    pub fn likely_data_offset(&self, e: &Entry) -> Option<u64> {
        const U32_MAX: u64 = 0xFFFF_FFFF;
        let mut start = e
            .local_header_offset
            .checked_add(LOCAL_HEADER_LEN + e.name.len() as u64 + 4)?;
        if e.compressed_size >= U32_MAX || e.local_header_offset >= U32_MAX {
            start += 4;
            if e.compressed_size >= U32_MAX {
                start += 16;
            }
            if e.local_header_offset >= U32_MAX {
                start += 8;
            }
        }
        let data = start.checked_next_multiple_of(64)?;
        (data.checked_add(e.compressed_size)? <= self.len).then_some(data)
    }

    /// The bytes of the entry's local header that give its data offset: the
    /// fixed part and the name.
    pub fn local_header_len(e: &Entry) -> usize {
        LOCAL_HEADER_LEN as usize + e.name.len()
    }

    /// [`data_offset`](Self::data_offset) from the entry's local header read
    /// by the caller (its first [`local_header_len`](Self::local_header_len)
    /// bytes), checked as `data_offset` checks it.
    ///
    /// # Errors
    /// As [`data_offset`](Self::data_offset).
    pub fn data_offset_in(&self, e: &Entry, header: &[u8]) -> Result<u64, ZipError> {
        self.data_offset_from(e, header)
    }

    /// [`data_offset`](Self::data_offset) of several entries, their local
    /// headers read in one batch ([`ReadAt::read_batch_at`]: concurrent
    /// range requests on a remote source).
    pub fn data_offsets(&self, entries: &[&Entry]) -> Result<Vec<u64>, ZipError> {
        let mut headers = Vec::with_capacity(entries.len());
        for e in entries {
            let ofs = e.local_header_offset;
            let needed = LOCAL_HEADER_LEN + e.name.len() as u64;
            match ofs.checked_add(needed) {
                Some(end) if end <= self.len => {}
                _ => {
                    return Err(ZipError::Truncated {
                        what: "local header",
                        offset: ofs,
                        needed,
                        available: self.len.saturating_sub(ofs),
                    })
                }
            }
            headers.push(vec![0u8; needed as usize]);
        }
        let mut reads: Vec<(u64, &mut [u8])> = entries
            .iter()
            .zip(headers.iter_mut())
            .map(|(e, h)| (e.local_header_offset, h.as_mut_slice()))
            .collect();
        self.source
            .read_batch_at(&mut reads)
            .map_err(|(_, e)| ZipError::from(e))?;
        entries
            .iter()
            .zip(&headers)
            .map(|(e, h)| self.data_offset_from(e, h))
            .collect()
    }

    /// Checks, without reading, that the entry's local header and data can
    /// lie in the file (the local extra field is not known until read).
    pub fn check_fits(&self, e: &Entry) -> Result<(), ZipError> {
        let least = e
            .local_header_offset
            .checked_add(LOCAL_HEADER_LEN + e.name.len() as u64)
            .and_then(|o| o.checked_add(e.compressed_size));
        match least {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(ZipError::DataOutOfBounds {
                name: e.name.clone(),
                offset: e.local_header_offset,
                size: e.compressed_size,
                len: self.len,
            }),
        }
    }

    /// The data offset the local header `header` (its fixed part and name) gives `e`.
    fn data_offset_from(&self, e: &Entry, header: &[u8]) -> Result<u64, ZipError> {
        let ofs = e.local_header_offset;
        let name = e.name.as_bytes();
        let needed = LOCAL_HEADER_LEN + name.len() as u64;
        let sig = le32(header, 0).unwrap_or(0);
        if sig != LOCAL_HEADER_SIG {
            return Err(ZipError::BadSignature {
                what: "local header",
                offset: ofs,
                expected: LOCAL_HEADER_SIG,
                found: sig,
            });
        }
        let name_len = le16(header, 26).unwrap_or(0);
        let extra_len = le16(header, 28).unwrap_or(0);
        if usize::from(name_len) != name.len()
            || header.get(LOCAL_HEADER_LEN as usize..) != Some(name)
        {
            return Err(ZipError::LocalHeaderMismatch {
                name: e.name.clone(),
                offset: ofs,
            });
        }
        let data = ofs
            .checked_add(needed)
            .and_then(|o| o.checked_add(u64::from(extra_len)));
        match data {
            Some(data)
                if data
                    .checked_add(e.compressed_size)
                    .is_some_and(|end| end <= self.len) =>
            {
                Ok(data)
            }
            _ => Err(ZipError::DataOutOfBounds {
                name: e.name.clone(),
                offset: data.unwrap_or(u64::MAX),
                size: e.compressed_size,
                len: self.len,
            }),
        }
    }

    /// Reads the entry's data into `dst`, whose length must be `e.size`.
    ///
    /// Stored data is one positional read straight into `dst`. Deflate data is
    /// inflated into `dst` and must come to exactly `e.size` bytes; output
    /// never goes past `dst`, so a deflate bomb only costs its compressed size.
    ///
    /// An entry flagged as encrypted ([`Entry::encrypted`]) is read only when
    /// its data is plain: it inflates (if deflated) and its CRC-32 matches.
    pub fn read_into(&self, e: &Entry, dst: &mut [u8]) -> Result<(), ZipError> {
        if !e.encrypted {
            return self.read_plain(e, dst);
        }
        let plain = self
            .read_plain(e, dst)
            .is_ok_and(|()| crc32fast::hash(dst) == e.crc32);
        if plain {
            Ok(())
        } else {
            Err(ZipError::Encrypted {
                name: e.name.clone(),
            })
        }
    }

    fn read_plain(&self, e: &Entry, dst: &mut [u8]) -> Result<(), ZipError> {
        if dst.len() as u64 != e.size {
            return Err(ZipError::BufferSizeMismatch {
                name: e.name.clone(),
                expected: e.size,
                found: dst.len() as u64,
            });
        }
        let offset = self.data_offset(e)?;
        match e.method {
            Method::Stored => {
                check_stored_sizes(e)?;
                self.source.read_exact_at(dst, offset)?;
            }
            Method::Deflated => {
                let mut inflater = Inflater::new(&self.source, e, offset);
                let found = inflater.fill(dst)?;
                if found < dst.len() {
                    return Err(ZipError::InflatesTooShort {
                        name: e.name.clone(),
                        expected: e.size,
                        found: found as u64,
                    });
                }
                inflater.finish()?;
            }
        }
        Ok(())
    }

    /// The first `max` bytes of the entry's data (all of it when shorter),
    /// decompressed; for a look at what a record holds without reading it
    /// all. An entry flagged as encrypted is read whole, to tell whether its
    /// data is plain ([`read_into`](Self::read_into)), within
    /// [`ZipLimits::max_record_to_vec`].
    pub fn read_head(&self, e: &Entry, max: usize) -> Result<Vec<u8>, ZipError> {
        if e.encrypted {
            let mut data = self.read_to_vec(e)?;
            data.truncate(max);
            return Ok(data);
        }
        let n = usize::try_from(e.size).map_or(max, |size| size.min(max));
        if e.method == Method::Stored {
            check_stored_sizes(e)?;
            return self.read_stored_head(e, n);
        }
        let mut data = vec![0u8; n];
        let offset = self.data_offset(e)?;
        let found = Inflater::new(&self.source, e, offset).fill(&mut data)?;
        if found < n {
            return Err(ZipError::InflatesTooShort {
                name: e.name.clone(),
                expected: e.size,
                found: found as u64,
            });
        }
        Ok(data)
    }

    /// [`read_head`](Self::read_head) of several entries, in their order,
    /// each `(entry, max)` with its own `max`. Stored entries that lie close
    /// together (a torch save's small records: `data.pkl`, `byteorder`,
    /// `version`, …) are read in one read per group, so that a look at every
    /// record does not cost a read each.
    pub fn read_heads(&self, entries: &[(&Entry, usize)]) -> Vec<Result<Vec<u8>, ZipError>> {
        /// Bytes between two entries' windows still read through.
        const GAP: u64 = 4096;
        /// The most one group's read spans.
        const SPAN: u64 = 1 << 16;
        let window = |&(e, max): &(&Entry, usize)| {
            let n = e.size.min(max as u64);
            let len = Self::local_header_len(e) as u64 + EXTRA_GUESS + n;
            (
                e.local_header_offset,
                e.local_header_offset.saturating_add(len).min(self.len),
            )
        };
        let mut out: Vec<Option<Result<Vec<u8>, ZipError>>> =
            entries.iter().map(|_| None).collect();
        let mut grouped: Vec<usize> = (0..entries.len())
            .filter(|&i| entries[i].0.method == Method::Stored && !entries[i].0.encrypted)
            .collect();
        grouped.sort_by_key(|&i| entries[i].0.local_header_offset);
        let mut at = 0;
        while at < grouped.len() {
            let (start, mut end) = window(&entries[grouped[at]]);
            let mut last = at + 1;
            while last < grouped.len() {
                let (s, e) = window(&entries[grouped[last]]);
                if s > end.saturating_add(GAP) || e.saturating_sub(start) > SPAN {
                    break;
                }
                end = end.max(e);
                last += 1;
            }
            if last - at > 1 && start < end {
                let mut buf = vec![0u8; (end - start) as usize];
                // A failed group read leaves its entries to be read one by
                // one, each with its own error.
                if self.source.read_exact_at(&mut buf, start).is_ok() {
                    for &i in &grouped[at..last] {
                        let (e, max) = entries[i];
                        out[i] = Some(self.head_from(e, max, &buf, start));
                    }
                }
            }
            at = last;
        }
        out.into_iter()
            .zip(entries)
            .map(|(head, &(e, max))| head.unwrap_or_else(|| self.read_head(e, max)))
            .collect()
    }

    /// The head of the stored entry `e` out of `buf`, the file's bytes from
    /// `start`; read apart when its header or data runs past what `buf` holds.
    fn head_from(
        &self,
        e: &Entry,
        max: usize,
        buf: &[u8],
        start: u64,
    ) -> Result<Vec<u8>, ZipError> {
        check_stored_sizes(e)?;
        let n = usize::try_from(e.size).map_or(max, |size| size.min(max));
        match self.head_in(e, n, buf, start)? {
            Some(head) => Ok(head),
            None => self.read_stored_head(e, n),
        }
    }

    /// The first `n` bytes of the stored entry `e` out of `buf`, the file's
    /// bytes from `start`, its local header checked; `None` when `buf` does
    /// not hold the header and those bytes.
    fn head_in(
        &self,
        e: &Entry,
        n: usize,
        buf: &[u8],
        start: u64,
    ) -> Result<Option<Vec<u8>>, ZipError> {
        let Some(at) = e.local_header_offset.checked_sub(start) else {
            return Ok(None);
        };
        let at = at as usize;
        let Some(header) = buf.get(at..at + Self::local_header_len(e)) else {
            return Ok(None);
        };
        let from = (self.data_offset_from(e, header)? - start) as usize;
        Ok(buf.get(from..from + n).map(<[u8]>::to_vec))
    }

    /// The first `n` bytes of a stored entry, read with its local header in
    /// one read when the header's extra field is short (as PyTorch's and
    /// Python's writers make it): a scan looks at the start of every record.
    fn read_stored_head(&self, e: &Entry, n: usize) -> Result<Vec<u8>, ZipError> {
        let ofs = e.local_header_offset;
        let header_len = Self::local_header_len(e) as u64;
        let window = (header_len + EXTRA_GUESS + n as u64).min(self.len.saturating_sub(ofs));
        if window < header_len {
            return Err(ZipError::Truncated {
                what: "local header",
                offset: ofs,
                needed: header_len,
                available: window,
            });
        }
        let mut buf = vec![0u8; window as usize];
        self.source.read_exact_at(&mut buf, ofs)?;
        if let Some(head) = self.head_in(e, n, &buf, ofs)? {
            return Ok(head);
        }
        let mut head = vec![0u8; n];
        self.source.read_exact_at(
            &mut head,
            self.data_offset_from(e, &buf[..header_len as usize])?,
        )?;
        Ok(head)
    }

    /// Reads the entry's data into a new vector, refusing entries larger than
    /// [`ZipLimits::max_record_to_vec`].
    pub fn read_to_vec(&self, e: &Entry) -> Result<Vec<u8>, ZipError> {
        let too_large = || ZipError::RecordTooLarge {
            name: e.name.clone(),
            size: e.size,
            max: self.limits.max_record_to_vec,
        };
        if e.size > self.limits.max_record_to_vec {
            return Err(too_large());
        }
        let mut data = vec![0u8; usize::try_from(e.size).map_err(|_| too_large())?];
        self.read_into(e, &mut data)?;
        Ok(data)
    }

    /// Computes the CRC-32 of the entry's data in chunks and compares it with
    /// the recorded one. A recorded 0 with other data gives
    /// [`ZipError::CrcNotRecorded`] (PyTorch's `compute_crc32=False`), any
    /// other difference [`ZipError::CrcMismatch`].
    pub fn check_crc(&self, e: &Entry) -> Result<(), ZipError> {
        let mut hasher = crc32fast::Hasher::new();
        self.for_each_chunk(e, |chunk| hasher.update(chunk))?;
        let found = hasher.finalize();
        if found == e.crc32 {
            Ok(())
        } else if e.crc32 == 0 {
            Err(ZipError::CrcNotRecorded {
                name: e.name.clone(),
                found,
            })
        } else {
            Err(ZipError::CrcMismatch {
                name: e.name.clone(),
                expected: e.crc32,
                found,
            })
        }
    }

    /// Passes the entry's data to `f` in chunks of bounded size.
    fn for_each_chunk(&self, e: &Entry, mut f: impl FnMut(&[u8])) -> Result<(), ZipError> {
        let offset = self.data_offset(e)?;
        let chunk_len = usize::try_from(e.size).map_or(CRC_CHUNK, |size| size.min(CRC_CHUNK));
        let mut buf = vec![0u8; chunk_len];
        let mut done = 0u64;
        let mut inflater = match e.method {
            Method::Stored => {
                check_stored_sizes(e)?;
                None
            }
            Method::Deflated => Some(Inflater::new(&self.source, e, offset)),
        };
        while done < e.size {
            let want = usize::try_from(e.size - done).map_or(chunk_len, |left| left.min(chunk_len));
            let chunk = &mut buf[..want];
            match inflater.as_mut() {
                None => self.source.read_exact_at(chunk, offset + done)?,
                Some(inflater) => {
                    let found = inflater.fill(chunk)?;
                    if found < want {
                        return Err(ZipError::InflatesTooShort {
                            name: e.name.clone(),
                            expected: e.size,
                            found: done + found as u64,
                        });
                    }
                }
            }
            f(chunk);
            done += want as u64;
        }
        match inflater {
            Some(mut inflater) => inflater.finish(),
            None => Ok(()),
        }
    }
}

/// A stored entry's data is its own compressed form.
fn check_stored_sizes(e: &Entry) -> Result<(), ZipError> {
    if e.compressed_size == e.size {
        Ok(())
    } else {
        Err(ZipError::StoredSizeMismatch {
            name: e.name.clone(),
            compressed: e.compressed_size,
            size: e.size,
        })
    }
}

/// Reads `n` bytes at `offset` (a few KiB at most: end records) into a new vector.
fn read_at(source: &impl ReadAt, offset: u64, n: u64) -> Result<Vec<u8>, ZipError> {
    let mut buf = vec![0u8; usize::try_from(n).unwrap_or(0)];
    source.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

/// Finds the classic end record, then the zip64 locator and record if present.
fn locate_directory(source: &impl ReadAt, len: u64) -> Result<Directory, ZipError> {
    let tail_len = len.min(EOCD_LEN + MAX_COMMENT_LEN);
    let tail_start = len - tail_len;
    let tail = read_at(source, tail_start, tail_len)?;
    // The last signature whose record (comment included) fits in the file.
    let found = (0..tail.len().saturating_sub(EOCD_LEN as usize - 1))
        .rev()
        .find(|&i| {
            le32(&tail, i) == Some(EOCD_SIG)
                && le16(&tail, i + 20)
                    .is_some_and(|c| i + EOCD_LEN as usize + usize::from(c) <= tail.len())
        })
        .ok_or(ZipError::NotZip { len })?;
    let eocd = &tail[found..];
    let eocd_pos = tail_start + found as u64;
    let mut dir = Directory {
        count: u64::from(le16(eocd, 10).unwrap_or(0)),
        size: u64::from(le32(eocd, 12).unwrap_or(0)),
        offset: u64::from(le32(eocd, 16).unwrap_or(0)),
        end: eocd_pos,
    };

    let Some(locator_pos) = eocd_pos.checked_sub(EOCD64_LOCATOR_LEN) else {
        return Ok(dir);
    };
    let locator = read_at(source, locator_pos, EOCD64_LOCATOR_LEN)?;
    if le32(&locator, 0) != Some(EOCD64_LOCATOR_SIG) {
        return Ok(dir);
    }
    let record_pos = le64(&locator, 8).unwrap_or(u64::MAX);
    match record_pos.checked_add(EOCD64_LEN) {
        Some(end) if end <= locator_pos => {}
        _ => {
            return Err(ZipError::Truncated {
                what: "zip64 end of central directory record",
                offset: record_pos,
                needed: EOCD64_LEN,
                available: locator_pos.saturating_sub(record_pos),
            })
        }
    }
    let record = read_at(source, record_pos, EOCD64_LEN)?;
    let sig = le32(&record, 0).unwrap_or(0);
    if sig != EOCD64_SIG {
        return Err(ZipError::BadSignature {
            what: "zip64 end of central directory record",
            offset: record_pos,
            expected: EOCD64_SIG,
            found: sig,
        });
    }
    dir.count = le64(&record, 32).unwrap_or(u64::MAX);
    dir.size = le64(&record, 40).unwrap_or(u64::MAX);
    dir.offset = le64(&record, 48).unwrap_or(u64::MAX);
    dir.end = record_pos;
    Ok(dir)
}

/// Parses the central-directory entry at `pos` of `cd` (which starts at file
/// offset `cd_offset`); returns it and the position of the next one.
fn parse_central_entry(
    cd: &[u8],
    pos: usize,
    cd_offset: u64,
    file_len: u64,
    lenient: bool,
) -> Result<(Entry, usize), ZipError> {
    let at = cd_offset + pos as u64;
    let truncated = |needed: usize| ZipError::Truncated {
        what: "central directory entry",
        offset: at,
        needed: needed as u64,
        available: cd.len().saturating_sub(pos) as u64,
    };
    let fixed = cd
        .get(pos..pos + CENTRAL_HEADER_LEN)
        .ok_or_else(|| truncated(CENTRAL_HEADER_LEN))?;
    let field16 = |o| le16(fixed, o).unwrap_or(0);
    let field32 = |o| le32(fixed, o).unwrap_or(0);
    if field32(0) != CENTRAL_HEADER_SIG {
        return Err(ZipError::BadSignature {
            what: "central directory entry",
            offset: at,
            expected: CENTRAL_HEADER_SIG,
            found: field32(0),
        });
    }
    let (flags, method) = (field16(8), field16(10));
    let (name_len, extra_len, comment_len) = (
        usize::from(field16(28)),
        usize::from(field16(30)),
        usize::from(field16(32)),
    );
    let total = CENTRAL_HEADER_LEN + name_len + extra_len + comment_len;
    let var = cd
        .get(pos + CENTRAL_HEADER_LEN..pos + total)
        .ok_or_else(|| truncated(total))?;
    let (name_bytes, rest) = var.split_at(name_len);
    let extra = &rest[..extra_len];
    let name = match std::str::from_utf8(name_bytes) {
        Ok(name) => name.to_owned(),
        Err(_) => {
            return Err(ZipError::NameNotUtf8 {
                offset: at,
                lossy: String::from_utf8_lossy(name_bytes).into_owned(),
            })
        }
    };

    // Saturated fields take their values, in this order, from the zip64 extra.
    let mut zip64 = find_extra(extra, ZIP64_EXTRA_ID).unwrap_or(&[]);
    let mut widen = |value: u32, field: &'static str| -> Result<u64, ZipError> {
        if u64::from(value) != SATURATED_U32 {
            return Ok(u64::from(value));
        }
        let wide = le64(zip64, 0).ok_or_else(|| ZipError::MissingZip64Field {
            name: name.clone(),
            field,
        })?;
        zip64 = &zip64[8..];
        Ok(wide)
    };
    let size = widen(field32(24), "size")?;
    let compressed_size = widen(field32(20), "compressed size")?;
    let local_header_offset = widen(field32(42), "local header offset")?;

    let encrypted = flags & (FLAG_ENCRYPTED | FLAG_STRONG_ENCRYPTION) != 0;
    if encrypted && !lenient {
        return Err(ZipError::Encrypted { name });
    }
    let method = match method {
        METHOD_STORED => Method::Stored,
        METHOD_DEFLATED => Method::Deflated,
        other => {
            return Err(ZipError::UnsupportedMethod {
                name,
                method: other,
                method_name: method_name(other),
            })
        }
    };
    let entry = Entry {
        name,
        method,
        compressed_size,
        size,
        crc32: field32(16),
        local_header_offset,
        encrypted,
    };
    if method == Method::Stored {
        check_stored_sizes(&entry)?;
    }
    // The smallest footprint the entry can have: a local header with the same
    // name, then the data.
    let footprint = LOCAL_HEADER_LEN + name_len as u64;
    let fits = local_header_offset
        .checked_add(footprint)
        .and_then(|o| o.checked_add(compressed_size))
        .is_some_and(|end| end <= file_len);
    if !fits {
        return Err(ZipError::DataOutOfBounds {
            offset: local_header_offset.saturating_add(footprint),
            size: compressed_size,
            len: file_len,
            name: entry.name,
        });
    }
    Ok((entry, pos + total))
}

/// The data of the first extra field with header id `id`, if well formed.
fn find_extra(mut extra: &[u8], id: u16) -> Option<&[u8]> {
    while extra.len() >= 4 {
        let field_id = le16(extra, 0)?;
        let field_len = usize::from(le16(extra, 2)?);
        let data = extra.get(4..4 + field_len)?;
        if field_id == id {
            return Some(data);
        }
        extra = &extra[4 + field_len..];
    }
    None
}

/// Incremental raw-deflate decoder over an entry's compressed bytes.
struct Inflater<'a, R: ReadAt + ?Sized> {
    source: &'a R,
    entry: &'a Entry,
    /// File offset of the next compressed byte to read.
    next_in: u64,
    /// File offset just past the compressed data.
    end_in: u64,
    input: Vec<u8>,
    in_pos: usize,
    in_len: usize,
    state: Decompress,
    ended: bool,
}

impl<'a, R: ReadAt + ?Sized> Inflater<'a, R> {
    /// `data_offset` must come from [`ZipReader::data_offset`], which checked
    /// that the compressed bytes lie in the file.
    fn new(source: &'a R, entry: &'a Entry, data_offset: u64) -> Self {
        let chunk = usize::try_from(entry.compressed_size)
            .map_or(INFLATE_CHUNK, |size| size.min(INFLATE_CHUNK));
        Inflater {
            source,
            entry,
            next_in: data_offset,
            end_in: data_offset.saturating_add(entry.compressed_size),
            input: vec![0u8; chunk],
            in_pos: 0,
            in_len: 0,
            state: Decompress::new(false),
            ended: false,
        }
    }

    fn error(&self, reason: impl Into<String>) -> ZipError {
        ZipError::Inflate {
            name: self.entry.name.clone(),
            reason: reason.into(),
        }
    }

    /// Fills `out` unless the stream ends first; returns the bytes written.
    fn fill(&mut self, out: &mut [u8]) -> Result<usize, ZipError> {
        let mut written = 0;
        while written < out.len() && !self.ended {
            if self.in_pos == self.in_len && self.next_in < self.end_in {
                let n = usize::try_from(self.end_in - self.next_in)
                    .map_or(self.input.len(), |left| left.min(self.input.len()));
                self.source
                    .read_exact_at(&mut self.input[..n], self.next_in)?;
                self.next_in += n as u64;
                self.in_pos = 0;
                self.in_len = n;
            }
            let (in_before, out_before) = (self.state.total_in(), self.state.total_out());
            let status = self
                .state
                .decompress(
                    &self.input[self.in_pos..self.in_len],
                    &mut out[written..],
                    FlushDecompress::None,
                )
                .map_err(|err| self.error(err.to_string()))?;
            let consumed = (self.state.total_in() - in_before) as usize;
            let produced = (self.state.total_out() - out_before) as usize;
            self.in_pos += consumed;
            written += produced;
            if status == Status::StreamEnd {
                self.ended = true;
            } else if consumed == 0 && produced == 0 {
                let reason = if self.in_pos == self.in_len && self.next_in == self.end_in {
                    "stream ends before its final block"
                } else {
                    "decoder makes no progress"
                };
                return Err(self.error(reason));
            }
        }
        Ok(written)
    }

    /// Checks that the stream ends without producing more output.
    fn finish(&mut self) -> Result<(), ZipError> {
        let mut probe = [0u8; 1];
        if self.fill(&mut probe)? > 0 {
            return Err(ZipError::InflatesTooLarge {
                name: self.entry.name.clone(),
                expected: self.entry.size,
            });
        }
        Ok(())
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
    use crate::format::{put16, put32, put64};
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
