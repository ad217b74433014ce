//! Reading large stored records on two threads, after the pickle has made the
//! storages they fill.

use crate::io::ReadAt;
use crate::serialize::zip::{self, ZipReader};
use crate::{Error, Result, UntypedStorage};

/// Reads deferred stored records into their storages on two threads (a remote
/// source: in one concurrent batch), in pieces of
/// at most 16 MiB split evenly by bytes (each storage's bytes are exclusively
/// locked for the duration).
pub(super) fn fill_parallel<R: ReadAt>(
    zip: &ZipReader<R>,
    deferred: &[(UntypedStorage, zip::Entry)],
) -> Result<()> {
    const PIECE: usize = 16 << 20;
    let remote = zip.source().is_remote();
    let offsets = if remote {
        let entries: Vec<&zip::Entry> = deferred.iter().map(|(_, e)| e).collect();
        zip.data_offsets(&entries)?
    } else {
        Vec::new()
    };
    let mut guards = Vec::with_capacity(deferred.len());
    for (i, (storage, entry)) in deferred.iter().enumerate() {
        let offset = match offsets.get(i) {
            Some(&o) => o,
            None => zip.data_offset(entry)?,
        };
        guards.push((storage.bytes_mut()?, offset));
    }
    // Each piece: its bytes, where they start in the file, and its record.
    let mut work: Vec<(&mut [u8], u64, usize)> = Vec::new();
    for (record, (bytes, offset)) in guards.iter_mut().enumerate() {
        let mut at = *offset;
        for piece in bytes.chunks_mut(PIECE) {
            let n = piece.len() as u64;
            work.push((piece, at, record));
            at += n;
        }
    }
    if remote {
        // One batch: coalesced range requests, a bounded number in flight.
        let record_of: Vec<usize> = work.iter().map(|(_, _, r)| *r).collect();
        let mut reads: Vec<(u64, &mut [u8])> =
            work.into_iter().map(|(buf, at, _)| (at, buf)).collect();
        return zip
            .source()
            .read_batch_at(&mut reads)
            .map_err(|(i, e)| Error::InRecord {
                name: deferred[record_of[i]].1.name.clone(),
                source: Box::new(Error::Io(e)),
            });
    }
    let total: usize = work.iter().map(|(b, _, _)| b.len()).sum();
    let mut acc = 0;
    let mid = work
        .iter()
        .position(|(b, _, _)| {
            acc += b.len();
            acc * 2 >= total
        })
        .map_or(0, |i| i + 1);
    let (first, second) = work.split_at_mut(mid);
    let source = zip.source();
    // A failed read names its record.
    let read = |part: &mut [(&mut [u8], u64, usize)]| -> Result<()> {
        for (buf, offset, record) in part.iter_mut() {
            source
                .read_exact_at(buf, *offset)
                .map_err(|e| Error::InRecord {
                    name: deferred[*record].1.name.clone(),
                    source: Box::new(Error::Io(e)),
                })?;
        }
        Ok(())
    };
    let (a, b) = std::thread::scope(|s| {
        let other = s.spawn(|| read(second));
        let a = read(first);
        let b = other
            .join()
            .unwrap_or_else(|_| Err(Error::Io(std::io::Error::other("a reader thread panicked"))));
        (a, b)
    });
    a.and(b)
}
