//! The header of a numpy `.npy` file: whether a pickle follows it.
//!
//! `numpy.save` writes the magic `\x93NUMPY`, a version, the length of a
//! header that is a Python dict literal (`{'descr': '<f4', 'fortran_order':
//! False, 'shape': (4,), }`), then the data. Only an array whose dtype holds
//! objects (`descr` `'|O'`, or a structured dtype with an object field) is
//! written as a pickle (`numpy/lib/format.py`, `write_array`: `pickle.dump`
//! when `dtype.hasobject`); any other array is raw elements, and not one
//! byte of it is a pickle opcode.
//!
//! Written here because the `npy` crates parse the header to read the
//! elements and refuse object arrays, which is the one case a scanner needs.

use crate::error::FormatError;
use crate::io::ReadAt;
use crate::{Error, Result};

/// The magic that starts every `.npy` file.
pub(super) const MAGIC: &[u8] = b"\x93NUMPY";

/// The largest header read (numpy itself refuses headers over 10,000 bytes
/// unless asked; version 2 allows 4 GiB).
const MAX_HEADER: u64 = 1 << 20;

/// Where the pickle of an object array starts, or `None` for an array of
/// plain elements.
pub(super) fn pickle_offset(source: &dyn ReadAt) -> Result<Option<u64>> {
    let bad = |detail: String| {
        Error::Format(FormatError::NotACheckpoint {
            detail: format!(".npy header: {detail}"),
        })
    };
    let mut fixed = [0u8; 12];
    let n = source.len().min(12) as usize;
    source.read_exact_at(&mut fixed[..n], 0)?;
    let fixed = &fixed[..n];
    if n < 10 || !fixed.starts_with(MAGIC) {
        return Err(bad(format!("{n} bytes, no magic and version")));
    }
    let (len, start) = match fixed[6] {
        1 => (u64::from(u16::from_le_bytes([fixed[8], fixed[9]])), 10u64),
        2 | 3 if n == 12 => (
            u64::from(u32::from_le_bytes([
                fixed[8], fixed[9], fixed[10], fixed[11],
            ])),
            12,
        ),
        v => return Err(bad(format!("version {v}.{} is not 1, 2 or 3", fixed[7]))),
    };
    if len > MAX_HEADER || start + len > source.len() {
        return Err(bad(format!(
            "a header of {len} bytes in a file of {}",
            source.len()
        )));
    }
    let mut header = vec![0u8; len as usize];
    source.read_exact_at(&mut header, start)?;
    let header = String::from_utf8_lossy(&header);
    let descr = descr(&header).ok_or_else(|| bad(format!("no 'descr' in {header:?}")))?;
    Ok(holds_objects(descr).then_some(start + len))
}

/// The text of the `'descr'` value: from after its key to the next key (or
/// the end of the dict).
fn descr(header: &str) -> Option<&str> {
    let at = header
        .find("'descr'")
        .or_else(|| header.find("\"descr\""))?;
    let rest = header[at + 7..].trim_start().strip_prefix(':')?;
    let end = [
        "'fortran_order'",
        "'shape'",
        "\"fortran_order\"",
        "\"shape\"",
    ]
    .iter()
    .filter_map(|k| rest.find(k))
    .min()
    .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Whether a `descr` names an object type code (`O`) anywhere: as the
/// whole dtype (`'|O'`) or as the type of a field (`[('a', '|O')]`). Field
/// names, the first string of each field's tuple, are not type codes.
fn holds_objects(descr: &str) -> bool {
    let mut prev = ' ';
    let mut chars = descr.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if c == '\'' || c == '"' {
            let body_start = i + 1;
            let body_end = descr[body_start..]
                .find(c)
                .map_or(descr.len(), |j| body_start + j);
            let body = &descr[body_start..body_end];
            if prev != '(' {
                let code = body.trim_start_matches(['|', '<', '>', '=']);
                if code.starts_with('O') && code[1..].bytes().all(|b| b.is_ascii_digit()) {
                    return true;
                }
            }
            while chars.peek().is_some_and(|&(j, _)| j <= body_end) {
                chars.next();
            }
            prev = c;
        } else if !c.is_whitespace() {
            prev = c;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(header: &str) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[1, 0]);
        v.extend_from_slice(&(header.len() as u16).to_le_bytes());
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(b"\x80\x03cos\nsystem\n.");
        v
    }

    #[test]
    fn object_arrays_carry_a_pickle() {
        let h = "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }\n";
        assert_eq!(
            pickle_offset(&npy(h).as_slice()).unwrap(),
            Some(10 + h.len() as u64)
        );
        let h = "{'descr': [('O', '<f8'), ('b', '|O')], 'fortran_order': False, 'shape': (2,), }";
        assert!(pickle_offset(&npy(h).as_slice()).unwrap().is_some());
    }

    #[test]
    fn plain_arrays_do_not() {
        for h in [
            "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }",
            "{'descr': [('O', '<f8'), ('x', '<i4')], 'fortran_order': False, 'shape': (2,), }",
            "{'descr': '<U2', 'fortran_order': False, 'shape': (), }",
        ] {
            assert_eq!(pickle_offset(&npy(h).as_slice()).unwrap(), None, "{h}");
        }
    }

    #[test]
    fn bad_headers_are_errors() {
        assert!(pickle_offset(&&b"\x93NUMPY\x01"[..]).is_err());
        assert!(pickle_offset(&&b"\x93NUMPY\x09\x00\x04\x00abcd"[..]).is_err());
        assert!(pickle_offset(&&b"\x93NUMPY\x01\x00\xff\x00{}"[..]).is_err());
        assert!(pickle_offset(&npy("{'shape': (1,)}").as_slice()).is_err());
    }
}
