//! Positional reads: the one I/O abstraction the checkpoint readers share.
//!
//! A [`ReadAt`] is a source of bytes read at absolute offsets through `&self`,
//! so one reader (an archive, a legacy stream, a safetensors header) can serve
//! several threads at once and read straight into a caller's buffer. Files
//! (`pread`), byte slices and memory-mapped checkpoints implement it.

#[cfg(unix)]
use std::fs::File;
use std::io;
use std::sync::Arc;

#[cfg(target_os = "linux")]
mod coalesced;

/// What one read of a [`ReadAt`] costs, so that readers choose between many
/// small reads and fewer, batched ones without asking what the source is.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReadCost {
    /// Memory or a local file (the page cache away): read as needed.
    Local,
    /// Each read is a request with a round trip (an object store): batch
    /// reads ([`ReadAt::read_batch_at`]) and avoid those a reader can do
    /// without.
    Request,
}

/// A source of bytes read at absolute offsets, shareable across threads.
pub trait ReadAt: Send + Sync {
    /// Length of the source in bytes.
    fn len(&self) -> u64;

    /// Whether the source is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` with the bytes at `offset..offset + buf.len()`, or fails
    /// (with [`io::ErrorKind::UnexpectedEof`] when they run past the end).
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// What one read costs: [`ReadCost::Local`] for files and memory;
    /// [`ReadCost::Request`] where each read is a round trip, so that
    /// readers batch their reads ([`read_batch_at`](Self::read_batch_at))
    /// and avoid reads they can do without.
    fn read_cost(&self) -> ReadCost {
        ReadCost::Local
    }

    /// Fills each `(offset, buffer)` as [`read_exact_at`](Self::read_exact_at)
    /// would, in any order (a remote source coalesces them and reads them
    /// concurrently; others read them one after another).
    ///
    /// # Errors
    /// The index of a read that failed, with its error.
    fn read_batch_at(&self, reads: &mut [(u64, &mut [u8])]) -> Result<(), (usize, io::Error)> {
        read_each(self, reads, 0)
    }
}

/// `reads` one [`read_exact_at`](ReadAt::read_exact_at) after another; an
/// error names the failed read's index plus `first`.
fn read_each<R: ReadAt + ?Sized>(
    source: &R,
    reads: &mut [(u64, &mut [u8])],
    first: usize,
) -> Result<(), (usize, io::Error)> {
    for (i, (offset, buf)) in reads.iter_mut().enumerate() {
        source
            .read_exact_at(buf, *offset)
            .map_err(|e| (first + i, e))?;
    }
    Ok(())
}

/// Below this many bytes a batch is read on one thread: a thread's start
/// would cost more than it saves.
#[cfg(unix)]
const PARALLEL_MIN: usize = 4 << 20;

/// `reads` on two threads, split where half their bytes are done (callers
/// cut large reads into pieces so that the halves balance), each half read
/// by `one` (given the index of its first read). Two threads: what a load
/// of a file already in the page cache gains from, measured
/// (`docs/performance.md`); more only contend.
#[cfg(unix)]
fn read_in_two<F>(reads: &mut [(u64, &mut [u8])], one: F) -> Result<(), (usize, io::Error)>
where
    F: Fn(&mut [(u64, &mut [u8])], usize) -> Result<(), (usize, io::Error)> + Sync,
{
    let total: usize = reads.iter().map(|(_, b)| b.len()).sum();
    if total < PARALLEL_MIN || reads.len() < 2 {
        return one(reads, 0);
    }
    let mut acc = 0;
    let mid = reads
        .iter()
        .position(|(_, b)| {
            acc += b.len();
            acc * 2 >= total
        })
        .map_or(0, |i| i + 1);
    let (first, second) = reads.split_at_mut(mid);
    std::thread::scope(|s| {
        let other = s.spawn(|| one(second, mid));
        let a = one(first, 0);
        let b = other
            .join()
            .unwrap_or_else(|_| Err((mid, io::Error::other("a reader thread panicked"))));
        a.and(b)
    })
}

/// On Unix-like systems only: `pread` (`std::os::unix::fs::FileExt`).
#[cfg(unix)]
impl ReadAt for File {
    /// The length from the file's metadata, or 0 when it cannot be read.
    fn len(&self) -> u64 {
        self.metadata().map(|m| m.len()).unwrap_or(0)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, offset)
    }

    /// On two threads, split by bytes, once the batch is large enough; on
    /// Linux, reads close together in one `preadv` each.
    fn read_batch_at(&self, reads: &mut [(u64, &mut [u8])]) -> Result<(), (usize, io::Error)> {
        read_in_two(reads, |part, first| {
            #[cfg(target_os = "linux")]
            return coalesced::read(self, part, first);
            #[cfg(not(target_os = "linux"))]
            return read_each(self, part, first);
        })
    }
}

impl ReadAt for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| self.get(start..start.checked_add(buf.len())?));
        match src {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the buffer",
            )),
        }
    }
}

impl ReadAt for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.as_slice().read_exact_at(buf, offset)
    }
}

/// `ReadAt` through a pointer: every method forwarded, the provided ones too
/// (a remote object's batched reads must not fall back to one at a time).
macro_rules! forward_read_at {
    ($($ptr:ty),*) => {$(
        impl<T: ReadAt + ?Sized> ReadAt for $ptr {
            fn len(&self) -> u64 {
                (**self).len()
            }

            fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
                (**self).read_exact_at(buf, offset)
            }

            fn read_cost(&self) -> ReadCost {
                (**self).read_cost()
            }

            fn read_batch_at(&self, reads: &mut [(u64, &mut [u8])]) -> Result<(), (usize, io::Error)> {
                (**self).read_batch_at(reads)
            }
        }
    )*};
}

forward_read_at!(Arc<T>, Box<T>, &T);

/// The bytes `start..start + len` of another source, read through it in
/// place: an archive stored inside a file (a distributed checkpoint's item,
/// a zip inside a zip), read as a source of its own. Reads past `len` fail
/// as past the end of a file do; the read cost is the source's.
#[derive(Clone, Debug)]
pub struct Window<R> {
    source: R,
    start: u64,
    len: u64,
}

impl<R: ReadAt> Window<R> {
    /// The `len` bytes of `source` from `start`.
    pub fn new(source: R, start: u64, len: u64) -> Self {
        Window { source, start, len }
    }
}

impl<R: ReadAt> ReadAt for Window<R> {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let inside = offset
            .checked_add(buf.len() as u64)
            .is_some_and(|end| end <= self.len);
        if !inside {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.source.read_exact_at(buf, self.start + offset)
    }

    fn read_cost(&self) -> ReadCost {
        self.source.read_cost()
    }

    /// The source's own batched reads (a remote object's coalesced
    /// requests, a file's two threads), each read checked to lie inside.
    fn read_batch_at(&self, reads: &mut [(u64, &mut [u8])]) -> Result<(), (usize, io::Error)> {
        for (i, (offset, buf)) in reads.iter_mut().enumerate() {
            let inside = offset
                .checked_add(buf.len() as u64)
                .is_some_and(|end| end <= self.len);
            if !inside {
                return Err((i, io::ErrorKind::UnexpectedEof.into()));
            }
            *offset += self.start;
        }
        let read = self.source.read_batch_at(reads);
        // The caller's offsets as given.
        for (offset, _) in reads.iter_mut() {
            *offset -= self.start;
        }
        read
    }
}

#[cfg(test)]
mod window_tests {
    use super::*;

    /// A window's batched reads are its source's, at its offsets, inside
    /// it only; a file's batch reads what one read at a time would, on two
    /// threads once it is large.
    #[test]
    fn batched_reads_are_forwarded_and_bounded() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(10 << 20).collect();
        let window = Window::new(bytes.clone(), 100, 1000);
        let (mut a, mut b) = ([0u8; 4], [0u8; 8]);
        let mut reads = [(0u64, &mut a[..]), (992, &mut b[..])];
        window.read_batch_at(&mut reads).unwrap();
        assert_eq!((reads[0].0, reads[1].0), (0, 992));
        assert_eq!(a, [100, 101, 102, 103]);
        assert_eq!(b[0], ((100 + 992) % 256) as u8);
        let mut past = [0u8; 2];
        let mut reads = [(0u64, &mut a[..]), (999, &mut past[..])];
        assert_eq!(window.read_batch_at(&mut reads).unwrap_err().0, 1);

        let dir = std::env::temp_dir().join(format!("read_at_{}", std::process::id()));
        std::fs::write(&dir, &bytes).unwrap();
        let file = File::open(&dir).unwrap();
        let mut pieces: Vec<Vec<u8>> = (0..10).map(|_| vec![0u8; 1 << 20]).collect();
        let mut reads: Vec<(u64, &mut [u8])> = pieces
            .iter_mut()
            .enumerate()
            .map(|(i, p)| (((9 - i) << 20) as u64, &mut p[..]))
            .collect();
        file.read_batch_at(&mut reads).unwrap();
        for (i, p) in pieces.iter().enumerate() {
            assert_eq!(p[..], bytes[(9 - i) << 20..(10 - i) << 20], "piece {i}");
        }
        let mut end = [0u8; 8];
        let mut reads = [(((10 << 20) - 4) as u64, &mut end[..])];
        assert_eq!(file.read_batch_at(&mut reads).unwrap_err().0, 0);
        std::fs::remove_file(&dir).unwrap();
    }

    #[test]
    fn a_window_reads_inside_its_bounds_only() {
        let data: Vec<u8> = (0..100).collect();
        let w = Window::new(data.as_slice(), 10, 20);
        assert_eq!(w.len(), 20);
        let mut buf = [0u8; 5];
        w.read_exact_at(&mut buf, 15).unwrap();
        assert_eq!(buf, [25, 26, 27, 28, 29]);
        assert_eq!(
            w.read_exact_at(&mut buf, 16).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
    }
}
