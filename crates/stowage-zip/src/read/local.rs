//! Local headers: where an entry's data starts.

use super::{Entry, ZipReader};
use crate::format::{le16, le32, LOCAL_HEADER_LEN, LOCAL_HEADER_SIG};
use crate::{ReadAt, ZipError};

impl<R: ReadAt> ZipReader<R> {
    /// Offset of the entry's data, from its local header (offset + 30 + name
    /// length + extra length, where the extra field holds PyTorch's padding),
    /// checked to lie in the file with `compressed_size` bytes after it.
    pub fn data_offset(&self, e: &Entry) -> Result<u64, ZipError> {
        let ofs = e.local_header_offset;
        let name = self.name(e).as_bytes();
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
            .checked_add(LOCAL_HEADER_LEN + e.name_len() as u64 + 4)?;
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
        LOCAL_HEADER_LEN as usize + e.name_len()
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
            let needed = LOCAL_HEADER_LEN + e.name_len() as u64;
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
            .checked_add(LOCAL_HEADER_LEN + e.name_len() as u64)
            .and_then(|o| o.checked_add(e.compressed_size));
        match least {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(ZipError::DataOutOfBounds {
                name: self.name(e).into(),
                offset: e.local_header_offset,
                size: e.compressed_size,
                len: self.len,
            }),
        }
    }

    /// The data offset the local header `header` (its fixed part and name) gives `e`.
    pub(super) fn data_offset_from(&self, e: &Entry, header: &[u8]) -> Result<u64, ZipError> {
        let ofs = e.local_header_offset;
        let name = self.name(e).as_bytes();
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
                name: self.name(e).into(),
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
                name: self.name(e).into(),
                offset: data.unwrap_or(u64::MAX),
                size: e.compressed_size,
                len: self.len,
            }),
        }
    }
}
