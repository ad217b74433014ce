//! Reading large stored records on two threads, after the pickle has made the
//! storages they fill.

use crate::io::ReadAt;
use crate::serialize::zip::{self, ZipReader};
use crate::{Result, UntypedStorage};

/// Reads deferred stored records into their storages on two threads, in pieces of
/// at most 16 MiB split evenly by bytes (each storage's bytes are exclusively
/// locked for the duration).
pub(super) fn fill_parallel<R: ReadAt>(
    zip: &ZipReader<R>,
    deferred: &[(UntypedStorage, zip::Entry)],
) -> Result<()> {
    const PIECE: usize = 16 << 20;
    let mut guards = Vec::with_capacity(deferred.len());
    for (storage, entry) in deferred {
        guards.push((storage.bytes_mut()?, zip.data_offset(entry)?));
    }
    let mut work: Vec<(&mut [u8], u64)> = Vec::new();
    for (bytes, offset) in guards.iter_mut() {
        let mut at = *offset;
        for piece in bytes.chunks_mut(PIECE) {
            let n = piece.len() as u64;
            work.push((piece, at));
            at += n;
        }
    }
    let total: usize = work.iter().map(|(b, _)| b.len()).sum();
    let mut acc = 0;
    let mid = work
        .iter()
        .position(|(b, _)| {
            acc += b.len();
            acc * 2 >= total
        })
        .map_or(0, |i| i + 1);
    let (first, second) = work.split_at_mut(mid);
    let source = zip.source();
    let read = |part: &mut [(&mut [u8], u64)]| -> std::io::Result<()> {
        for (buf, offset) in part.iter_mut() {
            source.read_exact_at(buf, *offset)?;
        }
        Ok(())
    };
    let (a, b) = std::thread::scope(|s| {
        let other = s.spawn(|| read(second));
        let a = read(first);
        let b = other
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("a reader thread panicked")));
        (a, b)
    });
    Ok(a.and(b)?)
}
