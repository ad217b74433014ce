//! A local file's batch of reads in few system calls: reads that lie close
//! together are one `preadv`, the bytes between them read into a scratch
//! buffer. A checkpoint of many small tensors reads, a record, a local
//! header and then its data, each a few dozen bytes from the last: one
//! `pread` each was two system calls a tensor, a fifth of such a load.
//!
//! By hand because no positional-read library batches scattered ranges;
//! `rustix` gives the system call.

use std::fs::File;
use std::io::{self, IoSliceMut};

/// Reads at most this many bytes apart are read in one call.
const GAP: u64 = 4096;
/// The most bytes between reads one call reads and drops.
const SCRATCH: usize = 64 * 1024;
/// The most buffers one call fills (Linux's `IOV_MAX`).
const IOVECS: usize = 1024;

/// Fills each `(offset, buffer)` of `reads` from `file`, as one
/// `read_exact_at` each would; an error names the failed read's index
/// plus `first`.
pub(super) fn read(
    file: &File,
    reads: &mut [(u64, &mut [u8])],
    first: usize,
) -> Result<(), (usize, io::Error)> {
    // The reads in the file's order, each with its index; the buffers are
    // lent back to `reads` at the end.
    let mut order: Vec<(u64, usize, &mut [u8])> = reads
        .iter_mut()
        .enumerate()
        .map(|(i, (offset, buf))| (*offset, i, std::mem::take(buf)))
        .collect();
    order.sort_unstable_by_key(|&(offset, i, _)| (offset, i));
    let mut scratch = Vec::new();
    let mut result = Ok(());
    let mut at = 0;
    while at < order.len() && result.is_ok() {
        let end = run_end(&order, at);
        result = read_run(file, &mut order[at..end], &mut scratch).map_err(|(i, e)| (first + i, e));
        at = end;
    }
    for (_, i, buf) in order {
        reads[i].1 = buf;
    }
    result
}

/// Where the run of reads from `order[start]` ends: each next read starts
/// at or past the end of the one before, at most [`GAP`] bytes after it,
/// within [`SCRATCH`] bytes of gaps and [`IOVECS`] buffers in all.
fn run_end(order: &[(u64, usize, &mut [u8])], start: usize) -> usize {
    let (offset, _, buf) = &order[start];
    let mut end_of_last = offset.saturating_add(buf.len() as u64);
    let (mut gaps, mut iovecs) = (0usize, 1usize);
    let mut end = start + 1;
    while let Some((offset, _, buf)) = order.get(end) {
        let Some(gap) = offset.checked_sub(end_of_last).filter(|&g| g <= GAP) else {
            break;
        };
        let gap = gap as usize;
        let more = if gap > 0 { 2 } else { 1 };
        if gaps + gap > SCRATCH || iovecs + more > IOVECS {
            break;
        }
        (gaps, iovecs) = (gaps + gap, iovecs + more);
        end_of_last = offset.saturating_add(buf.len() as u64);
        end += 1;
    }
    end
}

/// One run of [`run_end`]: one `preadv` where it holds more than one read.
/// A short or failed call leaves the reads it did not fill to `pread`s of
/// their own, which fill them or give their error.
fn read_run(
    file: &File,
    run: &mut [(u64, usize, &mut [u8])],
    scratch: &mut Vec<u8>,
) -> Result<(), (usize, io::Error)> {
    let start = run[0].0;
    let mut filled = 0u64;
    if run.len() > 1 {
        let last = &run[run.len() - 1];
        let span = last.0 + last.2.len() as u64 - start;
        let gaps = span as usize - run.iter().map(|(_, _, b)| b.len()).sum::<usize>();
        if scratch.len() < gaps {
            scratch.resize(gaps, 0);
        }
        let mut slices: Vec<IoSliceMut<'_>> = Vec::with_capacity(2 * run.len());
        let mut spare = &mut scratch[..gaps];
        let mut end_of_last = start;
        for (offset, _, buf) in run.iter_mut() {
            let gap = (*offset - end_of_last) as usize;
            if gap > 0 {
                let (between, rest) = std::mem::take(&mut spare).split_at_mut(gap);
                slices.push(IoSliceMut::new(between));
                spare = rest;
            }
            end_of_last = *offset + buf.len() as u64;
            slices.push(IoSliceMut::new(buf));
        }
        filled = loop {
            match rustix::io::preadv(file, &mut slices, start) {
                Ok(n) => break n as u64,
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break 0,
            }
        };
        if filled == span {
            return Ok(());
        }
    }
    for (offset, i, buf) in run.iter_mut() {
        let done = (*offset + buf.len() as u64).saturating_sub(start) <= filled;
        if !done {
            std::os::unix::fs::FileExt::read_exact_at(file, buf, *offset).map_err(|e| (*i, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use proptest::prelude::*;

    use super::*;

    /// A file in the system's temporary folder, removed when dropped.
    struct TempFile(std::path::PathBuf);

    impl TempFile {
        fn with(bytes: &[u8]) -> (TempFile, File) {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir()
                .join(format!("stowage-zip-coalesced-{}-{n}", std::process::id()));
            File::create(&path).unwrap().write_all(bytes).unwrap();
            let file = File::open(&path).unwrap();
            (TempFile(path), file)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// Reads as a torch save's batch makes them: each record's data, then
    /// every record's local header; the bytes come back as one `pread`
    /// each gives them.
    #[test]
    fn a_batch_of_headers_and_data_reads_as_preads_do() {
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let (_tmp, file) = TempFile::with(&bytes);
        let records: Vec<(u64, usize)> = (0..2000).map(|r| (r * 96, 32)).collect();
        let mut bufs: Vec<Vec<u8>> = records
            .iter()
            .map(|&(_, n)| vec![0; n])
            .chain(records.iter().map(|_| vec![0; 49]))
            .collect();
        let offsets: Vec<u64> = records
            .iter()
            .map(|&(at, _)| at + 64)
            .chain(records.iter().map(|&(at, _)| at))
            .collect();
        let mut reads: Vec<(u64, &mut [u8])> = offsets
            .iter()
            .copied()
            .zip(bufs.iter_mut().map(|b| b.as_mut_slice()))
            .collect();
        read(&file, &mut reads, 0).unwrap();
        for (&at, buf) in offsets.iter().zip(&bufs) {
            let at = at as usize;
            assert_eq!(buf.as_slice(), &bytes[at..at + buf.len()], "at {at}");
        }
    }

    proptest! {
        /// Any reads, overlapping, far apart, empty or past the end: each
        /// buffer holds what a `pread` of its own gives, and a read that
        /// fails is named by its index.
        #[test]
        fn reads_fill_as_preads_do(
            len in 0usize..20_000,
            spec in proptest::collection::vec((0u64..22_000, 0usize..6_000), 0..40),
            first in 0usize..3,
        ) {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
            let (_tmp, file) = TempFile::with(&bytes);
            let mut bufs: Vec<Vec<u8>> = spec.iter().map(|&(_, n)| vec![0xAA; n]).collect();
            let mut reads: Vec<(u64, &mut [u8])> = spec
                .iter()
                .map(|&(at, _)| at)
                .zip(bufs.iter_mut().map(|b| b.as_mut_slice()))
                .collect();
            let result = read(&file, &mut reads, first);
            prop_assert!(reads.iter().zip(&spec).all(|((_, b), &(_, n))| b.len() == n));
            let fits = |&(at, n): &(u64, usize)| n == 0 || at as usize + n <= len;
            match spec.iter().position(|s| !fits(s)) {
                None => {
                    prop_assert!(result.is_ok());
                    for (&(at, n), buf) in spec.iter().zip(&bufs) {
                        prop_assert_eq!(buf.as_slice(), &bytes[at as usize..at as usize + n]);
                    }
                }
                Some(_) => {
                    let (i, e) = result.expect_err("a read past the end");
                    prop_assert!(!fits(&spec[i - first]));
                    prop_assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
                }
            }
        }
    }
}
