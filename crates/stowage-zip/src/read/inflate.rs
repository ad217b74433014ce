//! Inflating an entry's deflate data, a chunk of input at a time.

use flate2::{Decompress, FlushDecompress, Status};

use super::Entry;
use crate::{ReadAt, ZipError};

/// Compressed input read at a time when inflating.
const INFLATE_CHUNK: usize = 64 * 1024;

/// Incremental raw-deflate decoder over an entry's compressed bytes.
pub(super) struct Inflater<'a, R: ReadAt + ?Sized> {
    source: &'a R,
    entry: &'a Entry,
    name: &'a str,
    /// File offset of the next compressed byte to read.
    next_in: u64,
    /// File offset just past the compressed data.
    end_in: u64,
    input: Vec<u8>,
    in_pos: usize,
    in_len: usize,
    state: Decompress,
    ended: bool,
}

impl<'a, R: ReadAt + ?Sized> Inflater<'a, R> {
    /// `data_offset` must come from
    /// [`ZipReader::data_offset`](super::ZipReader::data_offset), which
    /// checked that the compressed bytes lie in the file.
    pub(super) fn new(source: &'a R, entry: &'a Entry, name: &'a str, data_offset: u64) -> Self {
        let chunk = usize::try_from(entry.compressed_size)
            .map_or(INFLATE_CHUNK, |size| size.min(INFLATE_CHUNK));
        Inflater {
            source,
            entry,
            name,
            next_in: data_offset,
            end_in: data_offset.saturating_add(entry.compressed_size),
            input: vec![0u8; chunk],
            in_pos: 0,
            in_len: 0,
            state: Decompress::new(false),
            ended: false,
        }
    }

    fn error(&self, reason: impl Into<String>) -> ZipError {
        ZipError::Inflate {
            name: self.name.into(),
            reason: reason.into(),
        }
    }

    /// Fills `out` unless the stream ends first; returns the bytes written.
    pub(super) fn fill(&mut self, out: &mut [u8]) -> Result<usize, ZipError> {
        let mut written = 0;
        while written < out.len() && !self.ended {
            if self.in_pos == self.in_len && self.next_in < self.end_in {
                let n = usize::try_from(self.end_in - self.next_in)
                    .map_or(self.input.len(), |left| left.min(self.input.len()));
                self.source
                    .read_exact_at(&mut self.input[..n], self.next_in)?;
                self.next_in += n as u64;
                self.in_pos = 0;
                self.in_len = n;
            }
            let (in_before, out_before) = (self.state.total_in(), self.state.total_out());
            let status = self
                .state
                .decompress(
                    &self.input[self.in_pos..self.in_len],
                    &mut out[written..],
                    FlushDecompress::None,
                )
                .map_err(|err| self.error(err.to_string()))?;
            let consumed = (self.state.total_in() - in_before) as usize;
            let produced = (self.state.total_out() - out_before) as usize;
            self.in_pos += consumed;
            written += produced;
            if status == Status::StreamEnd {
                self.ended = true;
            } else if consumed == 0 && produced == 0 {
                let reason = if self.in_pos == self.in_len && self.next_in == self.end_in {
                    "stream ends before its final block"
                } else {
                    "decoder makes no progress"
                };
                return Err(self.error(reason));
            }
        }
        Ok(written)
    }

    /// Checks that the stream ends without producing more output.
    pub(super) fn finish(&mut self) -> Result<(), ZipError> {
        let mut probe = [0u8; 1];
        if self.fill(&mut probe)? > 0 {
            return Err(ZipError::InflatesTooLarge {
                name: self.name.into(),
                expected: self.entry.size,
            });
        }
        Ok(())
    }
}
