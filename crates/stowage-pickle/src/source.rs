//! Where the machine and the memo scan read a pickle's bytes: a slice held
//! whole ([`unpickle`](super::unpickle)), or a window that slides along a
//! reader ([`unpickle_reader`](super::read::unpickle_reader)), so that a
//! large pickle is never held whole beside the objects it builds.
//!
//! Both are read the same way: an opcode's byte and its argument are decoded
//! from what is held ([`Input`]), and where an argument runs past the held
//! bytes the window first reads more, keeping the opcode's own bytes. A
//! decode that fails with the whole rest of the stream held fails as it does
//! on the slice, at the same offsets.

use std::io::Read;

use super::opcode::Arg;
use super::operand::{Input, Operand};
use super::PickleError;

/// The bytes held of a pickle, from some offset on.
pub(super) trait Source {
    /// Every byte of the stream is held from the start: [`more`](Self::more)
    /// never gives any, so nothing needs checking before a decode.
    const WHOLE: bool;
    /// The bytes held; the first is the stream's byte [`base`](Self::base).
    fn held(&self) -> &[u8];
    /// The stream offset of the first byte held.
    fn base(&self) -> usize;
    /// Holds more of the stream, keeping the bytes from offset `keep` (at
    /// least [`base`](Self::base), at most the end of what is held) on;
    /// `false` when nothing more can be had (the held bytes reach the end,
    /// or reading failed).
    fn more(&mut self, keep: usize) -> bool;
}

impl Source for &[u8] {
    const WHOLE: bool = true;
    fn held(&self) -> &[u8] {
        self
    }
    fn base(&self) -> usize {
        0
    }
    fn more(&mut self, _: usize) -> bool {
        false
    }
}

/// The part of a pickle read so far from a sequential reader, from the
/// opcode being decoded on: about `chunk` bytes, more while one argument
/// (a long string) needs them.
pub(super) struct Window<R> {
    reader: R,
    total: usize,
    buf: Vec<u8>,
    base: usize,
    chunk: usize,
    /// The reader's error; the stream ends where it failed.
    error: Option<std::io::Error>,
}

impl<R: Read> Window<R> {
    /// A window on the `total` bytes `reader` gives, read `chunk` at a time.
    pub(super) fn new(reader: R, total: usize, chunk: usize) -> Self {
        Window {
            reader,
            total,
            buf: Vec::new(),
            base: 0,
            chunk: chunk.max(1),
            error: None,
        }
    }

    /// The reader's error, if reading failed.
    pub(super) fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }
}

impl<R: Read> Source for Window<R> {
    const WHOLE: bool = false;
    fn held(&self) -> &[u8] {
        &self.buf
    }
    fn base(&self) -> usize {
        self.base
    }
    fn more(&mut self, keep: usize) -> bool {
        let reach = self.base + self.buf.len();
        if reach >= self.total || keep < self.base || keep > reach {
            return false;
        }
        self.buf.drain(..keep - self.base);
        self.base = keep;
        let kept = self.buf.len();
        // A chunk, or twice what one argument already holds: an argument of
        // n bytes is read in O(n) however it is split.
        let want = kept
            .saturating_mul(2)
            .max(self.chunk)
            .min(self.total - keep);
        self.buf.resize(want, 0);
        match self.reader.read_exact(&mut self.buf[kept..]) {
            Ok(()) => true,
            Err(e) => {
                self.buf.truncate(kept);
                self.total = reach;
                self.error = Some(e);
                false
            }
        }
    }
}

/// The opcode byte at stream offset `at`; `None` at the stream's end.
#[inline(always)]
pub(super) fn byte_at<S: Source>(src: &mut S, at: usize) -> Option<u8> {
    loop {
        if let Some(&b) = src.held().get(at - src.base()) {
            return Some(b);
        }
        if !src.more(at) {
            return None;
        }
    }
}

/// Holds the whole argument laid out as `arg` that starts at `from`, for the
/// opcode at `at`, and returns where it ends; `None` where it runs past the
/// stream's end or cannot be walked (a negative length), which the decode
/// then reports. An argument that cannot be walked holds the rest of the
/// stream before it is reported: no more than `unpickle` holds throughout.
#[inline(always)]
pub(super) fn hold<S: Source>(src: &mut S, at: usize, from: usize, arg: Arg) -> Option<usize> {
    loop {
        let base = src.base();
        let mut probe = Input {
            data: src.held(),
            pos: from - base,
        };
        if probe.skip(arg).is_some() {
            return Some(base + probe.pos);
        }
        if !src.more(at) {
            return None;
        }
    }
}

/// Decodes the argument laid out as `arg` that starts at `from`, for the
/// opcode at `at`, with the stream's offsets in its errors; returns it and
/// where it ends.
#[inline(always)]
pub(super) fn operand<S: Source>(
    src: &mut S,
    at: usize,
    from: usize,
    arg: Arg,
) -> Result<(Operand<'_>, usize), PickleError> {
    if !S::WHOLE {
        hold(src, at, from, arg);
    }
    let base = src.base();
    let mut input = Input {
        data: src.held(),
        pos: from - base,
    };
    match input.operand(arg, at - base) {
        Ok(arg) => Ok((arg, base + input.pos)),
        Err(e) => Err(e.moved_by(base)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that fails after `ok` bytes.
    struct Failing<'a> {
        data: &'a [u8],
        ok: usize,
    }

    impl Read for Failing<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.ok == 0 {
                return Err(std::io::Error::other("the disk went away"));
            }
            let n = buf.len().min(self.ok).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            self.ok -= n;
            Ok(n)
        }
    }

    #[test]
    fn a_window_keeps_what_it_is_told_and_grows_for_long_arguments() {
        let data: Vec<u8> = (0..100).collect();
        let mut w = Window::new(&data[..], data.len(), 8);
        assert!(w.held().is_empty());
        assert!(w.more(0));
        assert_eq!((w.base(), w.held()), (0, &data[..8]));
        // Keeping from 6: two bytes kept, a chunk held.
        assert!(w.more(6));
        assert_eq!((w.base(), w.held()), (6, &data[6..14]));
        // Nothing dropped: twice as much.
        assert!(w.more(6));
        assert_eq!((w.base(), w.held()), (6, &data[6..22]));
        // Up to the end, and no further.
        while w.more(w.base()) {}
        assert_eq!(w.base() + w.held().len(), 100);
        assert!(!w.more(w.base()));
        assert!(w.take_error().is_none());
    }

    #[test]
    fn a_failed_read_ends_the_stream_and_is_kept() {
        let data = [7u8; 32];
        let reader = Failing {
            data: &data,
            ok: 10,
        };
        let mut w = Window::new(reader, data.len(), 8);
        assert!(w.more(0));
        assert!(!w.more(4));
        assert_eq!((w.base(), w.held().len(), w.total), (4, 4, 8));
        assert!(!w.more(4));
        assert_eq!(
            w.take_error().map(|e| e.to_string()).as_deref(),
            Some("the disk went away")
        );
    }
}
