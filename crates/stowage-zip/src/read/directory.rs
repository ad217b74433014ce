//! The end records and the central directory: where the directory is, and
//! its entries.

use super::data::check_stored_sizes;
use super::{Entry, Method};
use crate::format::{
    le16, le32, le64, method_name, CENTRAL_HEADER_LEN, CENTRAL_HEADER_SIG, EOCD64_LEN,
    EOCD64_LOCATOR_LEN, EOCD64_LOCATOR_SIG, EOCD64_SIG, EOCD_LEN, EOCD_SIG, FLAG_ENCRYPTED,
    FLAG_STRONG_ENCRYPTION, LOCAL_HEADER_LEN, MAX_COMMENT_LEN, METHOD_DEFLATED, METHOD_STORED,
    SATURATED_U32, ZIP64_EXTRA_ID,
};
use crate::{ReadAt, ZipError};

/// Where the central directory is, from the end records.
pub(super) struct Directory {
    pub(super) offset: u64,
    pub(super) size: u64,
    pub(super) count: u64,
    /// Start of the end records: the directory has to end before it.
    pub(super) end: u64,
}

/// Reads `n` bytes at `offset` into a new vector.
fn read_at(source: &impl ReadAt, offset: u64, n: u64) -> Result<Vec<u8>, ZipError> {
    let mut buf = vec![0u8; usize::try_from(n).unwrap_or(0)];
    source.read_exact_at(&mut buf, offset)?;
    Ok(buf)
}

/// The first read of an archive's end: the end record of an archive with
/// no comment (every one `torch.save` writes), its zip64 records, and a
/// small archive's whole directory (a distributed checkpoint's items are
/// an archive each) in one read. Only an archive whose end record is not
/// in it (a comment longer than about 4 KiB) is read further back.
const FIRST_TAIL: u64 = 4096;

/// The last bytes of the archive, read once: the end records, and what of
/// the directory they hold.
pub(super) struct Tail {
    start: u64,
    bytes: Vec<u8>,
}

impl Tail {
    /// `n` bytes at `offset`: from the tail where it holds them, else read.
    pub(super) fn read(
        &self,
        source: &impl ReadAt,
        offset: u64,
        n: u64,
    ) -> Result<Vec<u8>, ZipError> {
        let held = offset
            .checked_sub(self.start)
            .and_then(|at| Some(at..at.checked_add(n)?))
            .and_then(|r| {
                self.bytes
                    .get(usize::try_from(r.start).ok()?..usize::try_from(r.end).ok()?)
            });
        match held {
            Some(bytes) => Ok(bytes.to_vec()),
            None => read_at(source, offset, n),
        }
    }
}

/// The last end record signature in `tail` whose record (comment included)
/// ends within it.
fn find_end_record(tail: &[u8]) -> Option<usize> {
    (0..tail.len().saturating_sub(EOCD_LEN as usize - 1))
        .rev()
        .find(|&i| {
            le32(tail, i) == Some(EOCD_SIG)
                && le16(tail, i + 20)
                    .is_some_and(|c| i + EOCD_LEN as usize + usize::from(c) <= tail.len())
        })
}

/// Finds the classic end record, then the zip64 locator and record if
/// present; gives the tail it read too.
pub(super) fn locate_directory(
    source: &impl ReadAt,
    len: u64,
) -> Result<(Directory, Tail), ZipError> {
    // The last signature whose record (comment included) fits in the file,
    // searched from the end: in the first tail, then in the longest tail a
    // comment allows. (A record found in the first is the one the longest
    // would give: the search is from the end in both.)
    let mut tail_len = len.min(FIRST_TAIL);
    let mut tail = read_at(source, len - tail_len, tail_len)?;
    let mut found = find_end_record(&tail);
    if found.is_none() && tail_len < len.min(EOCD_LEN + MAX_COMMENT_LEN) {
        tail_len = len.min(EOCD_LEN + MAX_COMMENT_LEN);
        tail = read_at(source, len - tail_len, tail_len)?;
        found = find_end_record(&tail);
    }
    let found = found.ok_or(ZipError::NotZip { len })?;
    let tail_start = len - tail_len;
    let tail = Tail {
        start: tail_start,
        bytes: tail,
    };
    let eocd = &tail.bytes[found..];
    let eocd_pos = tail_start + found as u64;
    let mut dir = Directory {
        count: u64::from(le16(eocd, 10).unwrap_or(0)),
        size: u64::from(le32(eocd, 12).unwrap_or(0)),
        offset: u64::from(le32(eocd, 16).unwrap_or(0)),
        end: eocd_pos,
    };

    let Some(locator_pos) = eocd_pos.checked_sub(EOCD64_LOCATOR_LEN) else {
        return Ok((dir, tail));
    };
    let locator = tail.read(source, locator_pos, EOCD64_LOCATOR_LEN)?;
    if le32(&locator, 0) != Some(EOCD64_LOCATOR_SIG) {
        return Ok((dir, tail));
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
    let record = tail.read(source, record_pos, EOCD64_LEN)?;
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
    Ok((dir, tail))
}

/// Parses the central-directory entry at `pos` of `cd` (which starts at file
/// offset `cd_offset`); returns it (its name not yet placed), its name and
/// the position of the next one.
pub(super) fn parse_central_entry(
    cd: &[u8],
    pos: usize,
    cd_offset: u64,
    file_len: u64,
    lenient: bool,
) -> Result<(Entry, &str, usize), ZipError> {
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
        Ok(name) => name,
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
            name: name.to_owned(),
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
        return Err(ZipError::Encrypted { name: name.into() });
    }
    let method = match method {
        METHOD_STORED => Method::Stored,
        METHOD_DEFLATED => Method::Deflated,
        other => {
            return Err(ZipError::UnsupportedMethod {
                name: name.into(),
                method: other,
                method_name: method_name(other),
            })
        }
    };
    let entry = Entry {
        // The reader places the name among its names.
        name_start: 0,
        // A zip name's length is a 16-bit field.
        name_len: name_len as u16,
        method,
        compressed_size,
        size,
        crc32: field32(16),
        local_header_offset,
        encrypted,
    };
    if method == Method::Stored {
        check_stored_sizes(&entry, name)?;
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
            name: name.into(),
        });
    }
    Ok((entry, name, pos + total))
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
