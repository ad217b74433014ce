//! Record layouts and constants shared by the reader and the writer.
//!
//! All multi-byte fields in a zip archive are little-endian. Offsets below are
//! relative to the start of the record they describe.

/// Signature of a local file header, `PK\x03\x04`.
pub(crate) const LOCAL_HEADER_SIG: u32 = 0x0403_4b50;
/// Signature of a central-directory file header, `PK\x01\x02`.
pub(crate) const CENTRAL_HEADER_SIG: u32 = 0x0201_4b50;
/// Signature of the classic end-of-central-directory record, `PK\x05\x06`.
pub(crate) const EOCD_SIG: u32 = 0x0605_4b50;
/// Signature of the zip64 end-of-central-directory record, `PK\x06\x06`.
pub(crate) const EOCD64_SIG: u32 = 0x0606_4b50;
/// Signature of the zip64 end-of-central-directory locator, `PK\x06\x07`.
pub(crate) const EOCD64_LOCATOR_SIG: u32 = 0x0706_4b50;
/// Signature of a data descriptor, `PK\x07\x08`.
pub(crate) const DATA_DESCRIPTOR_SIG: u32 = 0x0807_4b50;

/// Fixed part of a local file header.
pub(crate) const LOCAL_HEADER_LEN: u64 = 30;
/// Fixed part of a central-directory file header.
pub(crate) const CENTRAL_HEADER_LEN: usize = 46;
/// Classic end-of-central-directory record, without its comment.
pub(crate) const EOCD_LEN: u64 = 22;
/// Zip64 end-of-central-directory record as miniz writes it (no extensible data).
pub(crate) const EOCD64_LEN: u64 = 56;
/// Zip64 end-of-central-directory locator.
pub(crate) const EOCD64_LOCATOR_LEN: u64 = 20;
/// Longest comment a classic end-of-central-directory record can carry.
pub(crate) const MAX_COMMENT_LEN: u64 = 0xFFFF;

/// Header id of the zip64 extended-information extra field.
pub(crate) const ZIP64_EXTRA_ID: u16 = 0x0001;
/// Header id of PyTorch's padding extra field: the bytes `'F' 'B'` read as LE16.
pub(crate) const FB_EXTRA_ID: u16 = 0x4246;
/// Filler byte of the `FB` padding field.
pub(crate) const FB_PAD_BYTE: u8 = b'Z';
/// Size of an extra field's header (id and length, LE16 each).
pub(crate) const EXTRA_HEADER_LEN: u64 = 4;

/// A 32-bit field holding this value defers to the zip64 extra field
/// (miniz also saturates to it, so values `>= SATURATED_U32` are zip64).
pub(crate) const SATURATED_U32: u64 = 0xFFFF_FFFF;
/// A 16-bit entry count holding this value defers to the zip64 record.
pub(crate) const SATURATED_U16: u64 = 0xFFFF;

/// General-purpose flag: the entry is encrypted.
pub(crate) const FLAG_ENCRYPTED: u16 = 0x0001;
/// General-purpose flag: strong encryption.
pub(crate) const FLAG_STRONG_ENCRYPTION: u16 = 0x0040;
/// General-purpose flag: CRC and sizes follow the data in a data descriptor.
pub(crate) const FLAG_DATA_DESCRIPTOR: u16 = 0x0008;
/// General-purpose flag: the name is UTF-8.
pub(crate) const FLAG_UTF8: u16 = 0x0800;

/// Compression method 0.
pub(crate) const METHOD_STORED: u16 = 0;
/// Compression method 8.
pub(crate) const METHOD_DEFLATED: u16 = 8;

/// "Version made by" of miniz's zip64 end-of-central-directory record.
pub(crate) const EOCD64_VERSION_MADE_BY: u16 = 0x031E;
/// "Version needed" of miniz's zip64 end-of-central-directory record (4.5).
pub(crate) const EOCD64_VERSION_NEEDED: u16 = 0x002D;

/// The DOS time written into every header (00:00:00).
///
/// PyTorch builds miniz without time support, so its archives carry a DOS
/// time and date of 0; writing the same keeps output byte-identical.
pub(crate) const DOS_TIME: u16 = 0;
/// The DOS date written into every header (0, which tools show as 1980-00-00).
pub(crate) const DOS_DATE: u16 = 0;

/// Name of a compression method, for error messages.
pub(crate) fn method_name(method: u16) -> &'static str {
    match method {
        0 => "stored",
        1 => "shrunk",
        2..=5 => "reduced",
        6 => "imploded",
        8 => "deflate",
        9 => "deflate64",
        12 => "bzip2",
        14 => "lzma",
        93 => "zstandard",
        95 => "xz",
        96 => "jpeg",
        97 => "wavpack",
        98 => "ppmd",
        99 => "aes-encrypted",
        _ => "unknown",
    }
}

/// Reads a little-endian `u16` at `at`; `None` when out of bounds.
pub(crate) fn le16(buf: &[u8], at: usize) -> Option<u16> {
    let bytes = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([bytes[0], bytes[1]]))
}

/// Reads a little-endian `u32` at `at`; `None` when out of bounds.
pub(crate) fn le32(buf: &[u8], at: usize) -> Option<u32> {
    let bytes = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// Reads a little-endian `u64` at `at`; `None` when out of bounds.
pub(crate) fn le64(buf: &[u8], at: usize) -> Option<u64> {
    let bytes = buf.get(at..at.checked_add(8)?)?;
    let mut word = [0u8; 8];
    word.copy_from_slice(bytes);
    Some(u64::from_le_bytes(word))
}

/// Number of `'Z'` bytes PyTorch's `getPadding` puts in the `FB` field so that
/// the payload of a record starts at a multiple of `alignment`.
///
/// `cursor` is the offset of the record's local header, `name_len` the length
/// of the full name (root folder included) and `size` the payload size. The
/// zip64 extra field that miniz puts first in the local header is counted
/// exactly as `getPadding` counts it. `None` on arithmetic overflow or an
/// `alignment` of zero.
pub(crate) fn fb_padding(cursor: u64, name_len: u64, size: u64, alignment: u64) -> Option<u64> {
    let mut start = cursor
        .checked_add(LOCAL_HEADER_LEN)?
        .checked_add(name_len)?
        .checked_add(EXTRA_HEADER_LEN)?;
    start = start.checked_add(zip64_local_extra_len(cursor, size))?;
    let rem = start.checked_rem(alignment)?;
    Some(if rem == 0 { 0 } else { alignment - rem })
}

/// Length of the zip64 extra field miniz writes into a local header: present
/// when the size or the header offset is saturated; 16 bytes of sizes when the
/// size is, 8 bytes of offset when the offset is.
pub(crate) fn zip64_local_extra_len(cursor: u64, size: u64) -> u64 {
    let big_size = size >= SATURATED_U32;
    let big_offset = cursor >= SATURATED_U32;
    if !(big_size || big_offset) {
        return 0;
    }
    EXTRA_HEADER_LEN + if big_size { 16 } else { 0 } + if big_offset { 8 } else { 0 }
}

/// Appends a little-endian `u16`.
pub(crate) fn put16(buf: &mut Vec<u8>, value: u16) {
    buf.extend_from_slice(&value.to_le_bytes());
}

/// Appends a little-endian `u32`.
pub(crate) fn put32(buf: &mut Vec<u8>, value: u32) {
    buf.extend_from_slice(&value.to_le_bytes());
}

/// Appends a little-endian `u64`.
pub(crate) fn put64(buf: &mut Vec<u8>, value: u64) {
    buf.extend_from_slice(&value.to_le_bytes());
}

/// Saturates a 64-bit value into a 32-bit header field, as miniz does.
pub(crate) fn saturate32(value: u64) -> u32 {
    u32::try_from(value.min(SATURATED_U32)).unwrap_or(u32::MAX)
}

/// Saturates a 64-bit count into a 16-bit header field, as miniz does.
pub(crate) fn saturate16(value: u64) -> u16 {
    u16::try_from(value.min(SATURATED_U16)).unwrap_or(u16::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_matches_the_worked_example() {
        // "archive/data.pkl" at offset 0: 30 + 16 + 4 = 50, so 14 bytes of pad.
        assert_eq!(fb_padding(0, 16, 10, 64), Some(14));
        // "simple/data.pkl" (15 bytes) in the real fixture: pad 15, payload at 64.
        assert_eq!(fb_padding(0, 15, 303, 64), Some(15));
        assert_eq!(fb_padding(0, 15, 303, 0), None);
        assert_eq!(fb_padding(u64::MAX - 10, 15, 303, 64), None);
    }

    #[test]
    fn padding_counts_the_zip64_local_extra() {
        let big = SATURATED_U32;
        assert_eq!(zip64_local_extra_len(0, big - 1), 0);
        assert_eq!(zip64_local_extra_len(0, big), 20);
        assert_eq!(zip64_local_extra_len(big, 0), 12);
        assert_eq!(zip64_local_extra_len(big, big), 28);
        // Offset 2^32, name 16: 2^32 + 30 + 16 + 4 + 12 = 2^32 + 62, so pad 2.
        assert_eq!(fb_padding(1 << 32, 16, 5, 64), Some(2));
        // Same with a saturated size: + 16 more, so 2^32 + 78, pad 50.
        assert_eq!(fb_padding(1 << 32, 16, big, 64), Some(50));
        // Small offset, saturated size: 0 + 30 + 16 + 4 + 20 = 70, pad 58.
        assert_eq!(fb_padding(0, 16, big, 64), Some(58));
    }

    #[test]
    fn little_endian_helpers_are_bounds_checked() {
        let buf = [1u8, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(le16(&buf, 0), Some(0x0201));
        assert_eq!(le32(&buf, 4), Some(0x0807_0605));
        assert_eq!(le64(&buf, 0), Some(0x0807_0605_0403_0201));
        assert_eq!(le16(&buf, 7), None);
        assert_eq!(le32(&buf, usize::MAX), None);
        assert_eq!(le64(&buf, 1), None);
        assert_eq!(saturate32(1 << 40), u32::MAX);
        assert_eq!(saturate16(70_000), u16::MAX);
        assert_eq!(method_name(12), "bzip2");
    }
}
