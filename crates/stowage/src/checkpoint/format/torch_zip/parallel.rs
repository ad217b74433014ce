//! Reading deferred stored records in one batch of the source's, after the
//! pickle has made the storages they fill.

use crate::checkpoint::zip::{self, ZipReader};
use crate::error::ErrorContext;
use crate::io::ReadAt;
use crate::storage::BytesMut;
use crate::{Error, Result, UntypedStorage};

/// Reads deferred stored records into their storages in one batch
/// ([`fill`]), in pieces of at most 16 MiB (so that a source reading a batch
/// on several threads, a local file, splits it evenly by bytes; each
/// storage's bytes are exclusively locked for the duration).
pub(super) fn fill_parallel<R: ReadAt>(
    zip: &ZipReader<R>,
    deferred: &[(UntypedStorage, zip::Entry)],
) -> Result<()> {
    const PIECE: usize = 16 << 20;
    fill(zip, deferred, PIECE)
}

/// The records' data and local headers in one batch of the source's
/// ([`ReadAt::read_batch_at`]: a file's two threads, an object store's
/// coalesced range requests with a bounded number in flight), whatever the
/// source. Each record's data is read at the offset PyTorch's writer gives
/// it ([`ZipReader::likely_data_offset`]), beside its header: in a store,
/// header and data adjoin and travel in one request, so a load costs no
/// request per record for headers. A record whose header says otherwise
/// (another writer) is read again at its true offset, in a second batch.
fn fill<R: ReadAt>(
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

/// One batch of [`fill`]: the data of the records marked in `records`
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
    // Every piece and header, counted first: a batch of a million records
    // grows no vector by doubling.
    let pieces: usize = guards
        .iter()
        .zip(records)
        .filter(|(_, &on)| on)
        .map(|(bytes, _)| bytes.len().div_ceil(piece))
        .sum();
    let n = pieces + headers.len();
    let mut reads: Vec<(u64, &mut [u8])> = Vec::with_capacity(n);
    let mut record_of = Vec::with_capacity(n);
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
