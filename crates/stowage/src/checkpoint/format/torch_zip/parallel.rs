//! Reading deferred stored records in one batch of the source's, after the
//! pickle has made the storages they fill.

use crate::checkpoint::zip::{self, ZipReader};
use crate::error::ErrorContext;
use crate::io::ReadAt;
use crate::storage::BytesMut;
use crate::{Error, Result, UntypedStorage};

/// The most records [`fill`] reads in one batch; a load reads its deferred
/// records each time this many are waiting, as its pickle names them.
pub(super) const BATCH_RECORDS: usize = 1 << 14;

/// Reads deferred stored records into their storages in batches
/// ([`fill`]) of at most [`BATCH_RECORDS`] records (what a batch holds per record, its
/// reads, lock and local header, stays a few MiB however many tensors the
/// file has), in pieces of at most 16 MiB (so that a source reading a batch
/// on several threads, a local file, splits it evenly by bytes; each
/// storage's bytes are exclusively locked for the duration).
pub(super) fn fill_parallel<R: ReadAt>(
    zip: &ZipReader<R>,
    deferred: &[(UntypedStorage, &zip::Entry)],
) -> Result<()> {
    fill_in_batches(zip, deferred, BATCH_RECORDS, 16 << 20)
}

/// [`fill_parallel`] in batches of at most `records` records and pieces of
/// at most `piece` bytes.
fn fill_in_batches<R: ReadAt>(
    zip: &ZipReader<R>,
    deferred: &[(UntypedStorage, &zip::Entry)],
    records: usize,
    piece: usize,
) -> Result<()> {
    deferred
        .chunks(records)
        .try_for_each(|batch| fill(zip, batch, piece))
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
    deferred: &[(UntypedStorage, &zip::Entry)],
    piece: usize,
) -> Result<()> {
    // Where the guess cannot hold, the header is read first, as before.
    let unguessed: Vec<usize> = (0..deferred.len())
        .filter(|&i| zip.likely_data_offset(deferred[i].1).is_none())
        .collect();
    let entries: Vec<&zip::Entry> = unguessed.iter().map(|&i| deferred[i].1).collect();
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
    // Every record's local header, one after the other in one buffer.
    let header_len = |e: &zip::Entry| ZipReader::<R>::local_header_len(e);
    let mut headers = vec![0; deferred.iter().map(|(_, e)| header_len(e)).sum()];
    let all = vec![true; deferred.len()];
    read_batch(
        zip,
        deferred,
        &mut guards,
        &offsets,
        &all,
        Some(&mut headers),
        piece,
    )?;
    let mut again = vec![false; deferred.len()];
    let mut header = headers.as_slice();
    for (r, (_, e)) in deferred.iter().enumerate() {
        let (this, rest) = header.split_at(header_len(e));
        header = rest;
        let actual = zip.data_offset_in(e, this).in_entry(zip.name(e))?;
        if actual != offsets[r] {
            offsets[r] = actual;
            again[r] = true;
        }
    }
    if again.contains(&true) {
        read_batch(zip, deferred, &mut guards, &offsets, &again, None, piece)?;
    }
    Ok(())
}

/// One batch of [`fill`]: the data of the records marked in `records`
/// (record `r` at `offsets[r]`, in pieces of at most `piece` bytes), and,
/// where `headers` is given, every record's local header into it, one after
/// the other.
fn read_batch<R: ReadAt>(
    zip: &ZipReader<R>,
    deferred: &[(UntypedStorage, &zip::Entry)],
    guards: &mut [BytesMut<'_>],
    offsets: &[u64],
    records: &[bool],
    headers: Option<&mut [u8]>,
    piece: usize,
) -> Result<()> {
    // Every piece and header, counted first: a batch grows no vector by
    // doubling.
    let pieces: usize = guards
        .iter()
        .zip(records)
        .filter(|(_, &on)| on)
        .map(|(bytes, _)| bytes.len().div_ceil(piece))
        .sum();
    let n = pieces + headers.as_ref().map_or(0, |_| deferred.len());
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
    if let Some(mut rest) = headers {
        for (r, (_, e)) in deferred.iter().enumerate() {
            let (h, tail) =
                std::mem::take(&mut rest).split_at_mut(ZipReader::<R>::local_header_len(e));
            reads.push((e.local_header_offset, h));
            record_of.push(r);
            rest = tail;
        }
    }
    zip.source()
        .read_batch_at(&mut reads)
        .map_err(|(i, e)| Error::Io(e).in_entry(zip.name(deferred[record_of[i]].1)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::zip::{ZipLimits, ZipWriter};

    /// Records in several batches and pieces, some placed where PyTorch's
    /// writer would not put them (aligned to 16 bytes, not 64, so their
    /// offsets are guessed wrong and read again): each storage gets exactly
    /// its record's bytes.
    #[test]
    fn every_record_lands_in_its_storage_across_batches_and_pieces() {
        let mut w = ZipWriter::new(Vec::new(), "archive", 16);
        let records: Vec<Vec<u8>> = (0..10u8)
            .map(|i| (0..3 + 7 * usize::from(i)).map(|j| i ^ j as u8).collect())
            .collect();
        for (i, r) in records.iter().enumerate() {
            w.write_record(&format!("data/{i}"), r).unwrap();
        }
        let zip = ZipReader::new(w.finish().unwrap(), &ZipLimits::default()).unwrap();
        let entries: Vec<&zip::Entry> = (0..records.len())
            .map(|i| zip.find(&format!("data/{i}")).unwrap())
            .collect();
        assert!(
            entries
                .iter()
                .any(|e| zip.likely_data_offset(e) != Some(zip.data_offset(e).unwrap())),
            "some record must be off PyTorch's place"
        );
        let deferred: Vec<(UntypedStorage, &zip::Entry)> = records
            .iter()
            .zip(&entries)
            .map(|(r, &e)| (UntypedStorage::new(r.len()).unwrap(), e))
            .collect();
        fill_in_batches(&zip, &deferred, 3, 5).unwrap();
        for (i, ((storage, _), want)) in deferred.iter().zip(&records).enumerate() {
            assert_eq!(&*storage.bytes().unwrap(), want.as_slice(), "record {i}");
        }
    }
}
