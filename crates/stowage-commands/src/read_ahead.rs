//! Small reads in file order served from one block read ahead: what
//! `verify` does to an archive of many records, a local header and its
//! data each, one after another. 300,000 records were 600,000 `pread`s;
//! read a MiB at a time they are a few hundred. (`std::io::BufReader`
//! reads a stream; this serves positional reads, `&self`, as `ReadAt`
//! requires, and no crate we use has one.)

use std::io;
use std::sync::Mutex;

use stowage::io::{ReadAt, ReadCost};

/// How much is read ahead at a time; a read this large or larger goes
/// straight to the source.
const BLOCK: usize = 1 << 20;

/// `source`, its small reads served from the block last read.
pub(crate) struct ReadAhead<R> {
    source: R,
    /// The source's length, asked once (a file's is a `stat`).
    len: u64,
    /// Where the block starts in `source`, and its bytes.
    block: Mutex<(u64, Vec<u8>)>,
}

impl<R: ReadAt> ReadAhead<R> {
    pub(crate) fn new(source: R) -> Self {
        ReadAhead {
            len: source.len(),
            source,
            block: Mutex::new((0, Vec::new())),
        }
    }
}

impl<R: ReadAt> ReadAt for ReadAhead<R> {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let len = buf.len() as u64;
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= self.len)
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        if buf.len() >= BLOCK {
            return self.source.read_exact_at(buf, offset);
        }
        let mut guard = self.block.lock().unwrap_or_else(|e| e.into_inner());
        let (start, bytes) = &mut *guard;
        if offset < *start || end > *start + bytes.len() as u64 {
            // The block from `offset`, as much of it as the source has.
            let n = (self.len - offset).min(BLOCK as u64) as usize;
            bytes.resize(n, 0);
            if let Err(e) = self.source.read_exact_at(bytes, offset) {
                bytes.clear();
                return Err(e);
            }
            *start = offset;
        }
        let at = (offset - *start) as usize;
        buf.copy_from_slice(&bytes[at..at + buf.len()]);
        Ok(())
    }

    fn read_cost(&self) -> ReadCost {
        self.source.read_cost()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_give_the_sources_bytes_wherever_they_fall() {
        let data: Vec<u8> = (0..3 * BLOCK + 17).map(|i| (i * 7 % 251) as u8).collect();
        let ahead = ReadAhead::new(data.clone());
        // In order, backwards, across a block's end, the last bytes, a
        // read larger than a block, and past the end.
        for (offset, len) in [
            (0, 10),
            (10, 100),
            (5, 3),
            (BLOCK - 4, 8),
            (3 * BLOCK + 10, 7),
            (7, BLOCK + 5),
            (BLOCK, 0),
        ] {
            let mut buf = vec![0; len];
            ahead.read_exact_at(&mut buf, offset as u64).unwrap();
            assert_eq!(buf, data[offset..offset + len], "{offset}+{len}");
        }
        let mut buf = vec![0; 8];
        let past = ahead.read_exact_at(&mut buf, data.len() as u64 - 4);
        assert_eq!(past.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(ahead.len(), data.len() as u64);
    }
}
