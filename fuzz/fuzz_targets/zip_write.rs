//! The zip writer against the reader, both from the crate `stowage-zip`:
//! records drawn from the input (names, sizes, whole or in chunks), written
//! with `ZipWriter` under a root and an alignment also drawn from it, then
//! read back with `ZipReader`.
//!
//! - The writer refuses a record exactly when its name is unusable (empty,
//!   a folder, a duplicate) or the root or alignment is; a refused record
//!   leaves the writer usable.
//! - `ZipWriter::archive_len` of the accepted records is the length of the
//!   archive written.
//! - The reader opens every archive the writer finishes (an empty one is
//!   `ZipError::Empty`) and lists exactly the accepted records, in order:
//!   each found by its record name, stored, its data at a multiple of the
//!   alignment (where `likely_data_offset` guesses it, for PyTorch's 64),
//!   read back byte for byte, its CRC right.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stowage_zip::{Method, ZipError, ZipLimits, ZipReader, ZipWriter};

/// The input, read front to back; past its end, zeros.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    /// Up to `max` bytes, as UTF-8 (invalid bytes replaced).
    fn text(&mut self, max: u8) -> String {
        let n = usize::from(self.byte() % (max + 1)).min(self.0.len());
        let (text, rest) = self.0.split_at(n);
        self.0 = rest;
        String::from_utf8_lossy(text).into_owned()
    }
}

/// PyTorch's alignment first; 0 and one past the largest are refused.
const ALIGNMENTS: [u64; 8] = [64, 1, 2, 7, 4096, 32 * 1024, 0, 32 * 1024 + 1];

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let config = input.byte();
    let alignment = ALIGNMENTS[usize::from(config & 7)];
    let root = if config & 0x80 == 0 {
        "archive".to_owned()
    } else {
        input.text(8)
    };
    let usable = !root.is_empty() && !root.contains('/') && (1..=32 * 1024).contains(&alignment);

    let mut w = ZipWriter::new(Vec::new(), &root, alignment);
    let mut accepted: Vec<(String, Vec<u8>)> = Vec::new();
    while !input.0.is_empty() && accepted.len() < 24 {
        let flags = input.byte();
        let name = match accepted.last() {
            Some((last, _)) if flags & 1 != 0 => last.clone(),
            _ => input.text(24),
        };
        let size = usize::from(input.u16() % 8192);
        let seed = input.byte();
        let record: Vec<u8> = (0..size)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect();
        let chunk = usize::from(flags >> 1) * 16;
        let written = if chunk == 0 {
            w.write_record(&name, &record)
        } else {
            w.start_record(&name, size as u64).and_then(|()| {
                for c in record.chunks(chunk) {
                    w.write_chunk(c)?;
                }
                w.end_record()
            })
        };
        let duplicate = accepted.iter().any(|(n, _)| *n == name);
        let name_ok = !name.is_empty() && !name.ends_with('/') && !duplicate;
        match written {
            Ok(()) => {
                assert!(
                    usable && name_ok,
                    "accepted {name:?} under {root:?}, {alignment}"
                );
                accepted.push((name, record));
            }
            Err(ZipError::InvalidRoot { .. } | ZipError::InvalidAlignment { .. }) => {
                assert!(!usable)
            }
            Err(ZipError::InvalidRecordName { .. }) => {
                assert!(usable && (name.is_empty() || name.ends_with('/')))
            }
            Err(ZipError::DuplicateRecord { .. }) => assert!(usable && duplicate),
            Err(e) => panic!("record {name:?} of {size} bytes refused: {e}"),
        }
    }

    let predicted = ZipWriter::archive_len(
        &root,
        alignment,
        accepted.iter().map(|(n, d)| (n.as_str(), d.len() as u64)),
    );
    let finished = w.finish();
    if !usable {
        assert!(finished.is_err() && predicted.is_err());
        return;
    }
    let bytes = finished.expect("a usable writer finishes");
    assert_eq!(predicted.expect("archive_len"), bytes.len() as u64);

    let zip = match ZipReader::new(&bytes[..], &ZipLimits::default()) {
        Ok(zip) => zip,
        Err(ZipError::Empty) if accepted.is_empty() => return,
        Err(e) => panic!("the reader refuses the writer's archive: {e}"),
    };
    assert_eq!(zip.root(), root);
    assert_eq!(zip.entries().len(), accepted.len());
    let offsets = zip
        .data_offsets(&zip.entries().iter().collect::<Vec<_>>())
        .expect("data_offsets");
    for ((e, (name, record)), offset) in zip.entries().iter().zip(&accepted).zip(offsets) {
        assert_eq!(zip.name(e), format!("{root}/{name}"));
        assert_eq!(e.method, Method::Stored);
        assert_eq!(e.size, record.len() as u64);
        assert_eq!(zip.find(name), Some(e));
        assert_eq!(zip.data_offset(e).expect("data_offset"), offset);
        assert_eq!(offset % alignment, 0);
        if alignment == 64 {
            assert_eq!(zip.likely_data_offset(e), Some(offset));
        }
        assert_eq!(&zip.read_to_vec(e).expect("read_to_vec"), record);
        zip.check_crc(e).expect("check_crc");
    }
});
