//! Reading large stored records on two threads, after the pickle has made the
//! storages they fill.

use crate::checkpoint::zip::{self, ZipReader};
use crate::error::ErrorContext;
use crate::io::ReadAt;
use crate::io::ReadCost;
use crate::storage::BytesMut;
use crate::{Error, Result, UntypedStorage};

/// Reads deferred stored records into their storages on two threads (a remote
/// source: in one concurrent batch, [`fill_remote`]), in pieces of
/// at most 16 MiB split evenly by bytes (each storage's bytes are exclusively
/// locked for the duration).
pub(super) fn fill_parallel<R: ReadAt>(
    zip: &ZipReader<R>,
    deferred: &[(UntypedStorage, zip::Entry)],
) -> Result<()> {
    const PIECE: usize = 16 << 20;
    let remote = zip.source().read_cost() == ReadCost::Request;
    if remote {
        return fill_remote(zip, deferred, PIECE);
    }
    let mut guards = Vec::with_capacity(deferred.len());
    for (storage, entry) in deferred {
        guards.push((storage.bytes_mut()?, zip.data_offset(entry)?));
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
                .map_err(|e| Error::Io(e).in_entry(deferred[*record].1.name.clone()))?;
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

/// [`fill_parallel`] from a remote source, in one batch of coalesced range
/// requests with a bounded number in flight. Each record's local header is
/// read in the same batch as its data, the data at the offset PyTorch's
/// writer gives it ([`ZipReader::likely_data_offset`]): header and data
/// adjoin, so they travel in one request, and a load costs no request per
/// record for headers. A record whose header says otherwise (another
/// writer) is read again at its true offset, in a second batch.
fn fill_remote<R: ReadAt>(
    zip: &ZipReader<R>,
    deferred: &[(UntypedStorage, zip::Entry)],
    piece: usize,
) -> Result<()> {
    // Where the guess cannot hold, the header is read first, as before.
    let unguessed: Vec<usize> = (0..deferred.len())
        .filter(|&i| zip.likely_data_offset(&deferred[i].1).is_none())
        .collect();
    let entries: Vec<&zip::Entry> = unguessed.iter().map(|&i| &deferred[i].1).collect();
    let known = zip.data_offsets(&entries)?;
    let mut offsets: Vec<u64> = deferred
        .iter()
        .map(|(_, e)| zip.likely_data_offset(e).unwrap_or(0))
        .collect();
    for (&i, &o) in unguessed.iter().zip(&known) {
        offsets[i] = o;
    }
    let mut guards = deferred
        .iter()
        .map(|(s, _)| s.bytes_mut())
        .collect::<Result<Vec<_>>>()?;
    let mut headers: Vec<Vec<u8>> = deferred
        .iter()
        .map(|(_, e)| vec![0; ZipReader::<R>::local_header_len(e)])
        .collect();
    let all = vec![true; deferred.len()];
    read_batch(
        zip,
        deferred,
        &mut guards,
        &offsets,
        &all,
        &mut headers,
        piece,
    )?;
    let mut again = vec![false; deferred.len()];
    for (r, (_, e)) in deferred.iter().enumerate() {
        let actual = zip.data_offset_in(e, &headers[r])?;
        if actual != offsets[r] {
            offsets[r] = actual;
            again[r] = true;
        }
    }
    if again.contains(&true) {
        read_batch(zip, deferred, &mut guards, &offsets, &again, &mut [], piece)?;
    }
    Ok(())
}

/// One batch of [`fill_remote`]: the data of the records marked in `records`
/// (record `r` at `offsets[r]`, in pieces of at most `piece` bytes), and the
/// local header of each record `headers` has room for.
fn read_batch<R: ReadAt>(
    zip: &ZipReader<R>,
    deferred: &[(UntypedStorage, zip::Entry)],
    guards: &mut [BytesMut<'_>],
    offsets: &[u64],
    records: &[bool],
    headers: &mut [Vec<u8>],
    piece: usize,
) -> Result<()> {
    let mut reads: Vec<(u64, &mut [u8])> = Vec::new();
    let mut record_of = Vec::new();
    for (r, bytes) in guards.iter_mut().enumerate() {
        if !records[r] {
            continue;
        }
        let mut at = offsets[r];
        for p in bytes.chunks_mut(piece) {
            let n = p.len() as u64;
            reads.push((at, p));
            record_of.push(r);
            at += n;
        }
    }
    for (r, h) in headers.iter_mut().enumerate() {
        reads.push((deferred[r].1.local_header_offset, h.as_mut_slice()));
        record_of.push(r);
    }
    zip.source()
        .read_batch_at(&mut reads)
        .map_err(|(i, e)| Error::Io(e).in_entry(deferred[record_of[i]].1.name.clone()))
}
