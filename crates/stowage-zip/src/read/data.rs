//! An entry's data: read whole, its head only, or checked against its CRC-32.

use super::inflate::Inflater;
use super::{Entry, Method, ZipReader};
use crate::{ReadAt, ZipError};

/// Stored data read at a time when computing a CRC.
const CRC_CHUNK: usize = 1024 * 1024;
/// Extra-field bytes read along with a local header when a record's first
/// bytes are read with it (PyTorch's padding is under 64 + 4 bytes, zip64's
/// 32): past them, the data is read apart.
const EXTRA_GUESS: u64 = 128;

impl<R: ReadAt> ZipReader<R> {
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
                name: self.name(e).into(),
            })
        }
    }

    fn read_plain(&self, e: &Entry, dst: &mut [u8]) -> Result<(), ZipError> {
        if dst.len() as u64 != e.size {
            return Err(ZipError::BufferSizeMismatch {
                name: self.name(e).into(),
                expected: e.size,
                found: dst.len() as u64,
            });
        }
        let offset = self.data_offset(e)?;
        match e.method {
            Method::Stored => {
                check_stored_sizes(e, self.name(e))?;
                self.source.read_exact_at(dst, offset)?;
            }
            Method::Deflated => {
                let mut inflater = Inflater::new(&self.source, e, self.name(e), offset);
                let found = inflater.fill(dst)?;
                if found < dst.len() {
                    return Err(ZipError::InflatesTooShort {
                        name: self.name(e).into(),
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
    /// [`ZipLimits::max_record_to_vec`](crate::ZipLimits::max_record_to_vec).
    pub fn read_head(&self, e: &Entry, max: usize) -> Result<Vec<u8>, ZipError> {
        if e.encrypted {
            let mut data = self.read_to_vec(e)?;
            data.truncate(max);
            return Ok(data);
        }
        let n = usize::try_from(e.size).map_or(max, |size| size.min(max));
        if e.method == Method::Stored {
            check_stored_sizes(e, self.name(e))?;
            return self.read_stored_head(e, n);
        }
        let mut data = vec![0u8; n];
        let offset = self.data_offset(e)?;
        let found = Inflater::new(&self.source, e, self.name(e), offset).fill(&mut data)?;
        if found < n {
            return Err(ZipError::InflatesTooShort {
                name: self.name(e).into(),
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
        check_stored_sizes(e, self.name(e))?;
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
    /// [`ZipLimits::max_record_to_vec`](crate::ZipLimits::max_record_to_vec).
    pub fn read_to_vec(&self, e: &Entry) -> Result<Vec<u8>, ZipError> {
        let too_large = || ZipError::RecordTooLarge {
            name: self.name(e).into(),
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

    /// The entry's data as [`read_to_vec`](Self::read_to_vec) gives it, under
    /// the same limit, read as the caller goes rather than held whole: where
    /// the entry is stored and not flagged as encrypted, a reader of its
    /// bytes by positional reads of the archive; `None` for other entries
    /// (read them with `read_to_vec`). A clone reads on from where the
    /// reader it was made from stands, so clones of an unread reader each
    /// read the entry from its first byte.
    pub fn stored_reader(&self, e: &Entry) -> Result<Option<StoredReader<'_, R>>, ZipError> {
        if e.size > self.limits.max_record_to_vec {
            return Err(ZipError::RecordTooLarge {
                name: self.name(e).into(),
                size: e.size,
                max: self.limits.max_record_to_vec,
            });
        }
        if e.method != Method::Stored || e.encrypted {
            return Ok(None);
        }
        check_stored_sizes(e, self.name(e))?;
        Ok(Some(StoredReader {
            source: &self.source,
            offset: self.data_offset(e)?,
            left: e.size,
        }))
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
                name: self.name(e).into(),
                found,
            })
        } else {
            Err(ZipError::CrcMismatch {
                name: self.name(e).into(),
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
                check_stored_sizes(e, self.name(e))?;
                None
            }
            Method::Deflated => Some(Inflater::new(&self.source, e, self.name(e), offset)),
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
                            name: self.name(e).into(),
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
pub(super) fn check_stored_sizes(e: &Entry, name: &str) -> Result<(), ZipError> {
    if e.compressed_size == e.size {
        Ok(())
    } else {
        Err(ZipError::StoredSizeMismatch {
            name: name.into(),
            compressed: e.compressed_size,
            size: e.size,
        })
    }
}

/// A stored entry's data, read from the archive as it is asked for
/// ([`ZipReader::stored_reader`]).
pub struct StoredReader<'z, R> {
    source: &'z R,
    offset: u64,
    left: u64,
}

impl<R> Clone for StoredReader<'_, R> {
    fn clone(&self) -> Self {
        StoredReader { ..*self }
    }
}

impl<R: ReadAt> std::io::Read for StoredReader<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = usize::try_from(self.left).map_or(buf.len(), |left| left.min(buf.len()));
        self.source.read_exact_at(&mut buf[..n], self.offset)?;
        self.offset += n as u64;
        self.left -= n as u64;
        Ok(n)
    }
}
