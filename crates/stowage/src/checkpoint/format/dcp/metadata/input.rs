//! The compact decoder's input: a stream in memory, or a file read a block
//! at a time, so that decoding a `.metadata` of hundreds of MB holds one
//! block of it beside the records, not the whole file; and the pass before
//! decoding that finds which memo entries the stream reads back.

use stowage_pickle::opcode as op;

use crate::io::ReadAt;

/// Bytes read from a file at a time.
const BLOCK: usize = 1 << 20;

/// A pickle stream, read forward. Every read is `None` past the end (or
/// where the file cannot be read: the generic reader then reports it).
pub(super) struct Input<'a> {
    /// The file, or `None` when `buf` is the whole stream.
    file: Option<&'a dyn ReadAt>,
    /// Bytes read from the file at a time ([`BLOCK`]; less in tests).
    block: usize,
    /// The stream's length.
    len: u64,
    /// Where `buf` starts in the stream.
    base: u64,
    buf: Window<'a>,
    /// The next byte, in `buf`.
    pos: usize,
}

enum Window<'a> {
    Memory(&'a [u8]),
    Block(Vec<u8>),
}

impl<'a> Input<'a> {
    pub(super) fn memory(data: &'a [u8]) -> Input<'a> {
        Input {
            file: None,
            block: BLOCK,
            len: data.len() as u64,
            base: 0,
            buf: Window::Memory(data),
            pos: 0,
        }
    }

    pub(super) fn file(file: &'a dyn ReadAt) -> Input<'a> {
        Self::file_by(file, BLOCK)
    }

    /// [`file`](Self::file), read `block` bytes at a time.
    pub(super) fn file_by(file: &'a dyn ReadAt, block: usize) -> Input<'a> {
        Input {
            file: Some(file),
            block: block.max(1),
            len: file.len(),
            base: 0,
            buf: Window::Block(Vec::new()),
            pos: 0,
        }
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    /// Back to the start of the stream.
    pub(super) fn rewind(&mut self) {
        if let Window::Block(b) = &mut self.buf {
            b.clear();
            self.base = 0;
        }
        self.pos = 0;
    }

    #[inline]
    fn window(&self) -> &[u8] {
        match &self.buf {
            Window::Memory(d) => d,
            Window::Block(b) => b,
        }
    }

    /// Bytes after the next one's position, to the end of the stream.
    pub(super) fn remaining(&self) -> u64 {
        self.len - self.base - self.pos as u64
    }

    /// At least `n` bytes from the position are in the window.
    #[inline]
    fn ensure(&mut self, n: usize) -> Option<()> {
        if self.window().len() - self.pos >= n {
            return Some(());
        }
        self.refill(n)
    }

    /// Reads the next block of the file, keeping the bytes not yet read.
    #[cold]
    #[inline(never)]
    fn refill(&mut self, n: usize) -> Option<()> {
        let (Some(file), Window::Block(b)) = (self.file, &mut self.buf) else {
            return None;
        };
        if (n as u64) > self.len - self.base - self.pos as u64 {
            return None;
        }
        b.drain(..self.pos);
        self.base += self.pos as u64;
        self.pos = 0;
        let end = self.base + b.len() as u64;
        let want = (n.max(self.block) - b.len()) as u64;
        let more = want.min(self.len - end) as usize;
        let at = b.len();
        b.resize(at + more, 0);
        file.read_exact_at(&mut b[at..], end).ok()?;
        (b.len() >= n).then_some(())
    }

    #[inline]
    pub(super) fn byte(&mut self) -> Option<u8> {
        self.ensure(1)?;
        let b = self.window()[self.pos];
        self.pos += 1;
        Some(b)
    }

    #[inline]
    pub(super) fn take(&mut self, n: usize) -> Option<&[u8]> {
        self.ensure(n)?;
        let at = self.pos;
        self.pos += n;
        Some(&self.window()[at..at + n])
    }

    pub(super) fn skip(&mut self, n: u64) -> Option<()> {
        if n > self.remaining() {
            return None;
        }
        let in_window = (self.window().len() - self.pos) as u64;
        if n <= in_window {
            self.pos += n as usize;
        } else if let Window::Block(b) = &mut self.buf {
            self.base += self.pos as u64 + n;
            b.clear();
            self.pos = 0;
        }
        Some(())
    }

    /// A little-endian unsigned integer of `n` bytes (at most 8).
    #[inline]
    pub(super) fn uint(&mut self, n: usize) -> Option<u64> {
        let mut le = [0u8; 8];
        le[..n].copy_from_slice(self.take(n)?);
        Some(u64::from_le_bytes(le))
    }

    /// A line, without its `\n`.
    pub(super) fn line(&mut self) -> Option<&[u8]> {
        let mut n = 64;
        loop {
            let have = self.window().len() - self.pos;
            if let Some(i) = self.window()[self.pos..].iter().position(|&b| b == b'\n') {
                let at = self.pos;
                self.pos += i + 1;
                return Some(&self.window()[at..at + i]);
            }
            n = n.max(have + 1);
            self.ensure(n)?;
            n *= 2;
        }
    }
}

/// The memo entries a stream reads back, as a bit per entry, and for each
/// entry read its slot among them: the decoder keeps those entries in a
/// vector of that many, with no hashing (a `.metadata` of a million chunks
/// reads the memo some 20 million times).
#[derive(Debug, Default)]
pub(super) struct MemoReads {
    bits: Vec<u64>,
    /// Entries read before each word of `bits`.
    before: Vec<u32>,
}

impl MemoReads {
    fn mark(&mut self, index: u64, limit: u64) -> Option<()> {
        // An entry past the stream's length was never made (the generic
        // reader reports it).
        if index >= limit {
            return None;
        }
        let w = (index / 64) as usize;
        if w >= self.bits.len() {
            self.bits.resize(w + 1, 0);
        }
        self.bits[w] |= 1 << (index % 64);
        Some(())
    }

    fn finish(mut self) -> MemoReads {
        let mut n = 0u32;
        self.before = self
            .bits
            .iter()
            .map(|w| {
                let at = n;
                n += w.count_ones();
                at
            })
            .collect();
        self
    }

    /// Entries read, in all.
    pub(super) fn count(&self) -> usize {
        self.bits.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The slot of entry `index`, if the stream reads it back.
    #[inline]
    pub(super) fn slot(&self, index: u64) -> Option<usize> {
        let w = usize::try_from(index / 64).ok()?;
        let word = *self.bits.get(w)?;
        let bit = 1u64 << (index % 64);
        (word & bit != 0)
            .then(|| self.before[w] as usize + (word & (bit - 1)).count_ones() as usize)
    }
}

/// The memo entries the stream reads back (`BINGET`, `LONG_BINGET`), from a
/// pass over its opcodes before decoding: only those are kept. `None` for a
/// stream of opcodes the compact decoder does not read, one that mixes
/// `MEMOIZE` with `PUT`s, or one that ends before `STOP`.
pub(super) fn memo_reads(input: &mut Input<'_>) -> Option<MemoReads> {
    let mut read = MemoReads::default();
    let limit = input.len();
    let (mut puts, mut memoizes) = (false, false);
    loop {
        let code = input.byte()?;
        let skip: u64 = match code {
            op::STOP => break,
            op::BINGET => {
                read.mark(input.uint(1)?, limit)?;
                0
            }
            op::LONG_BINGET => {
                read.mark(input.uint(4)?, limit)?;
                0
            }
            op::MEMOIZE => {
                memoizes = true;
                0
            }
            op::BINPUT => {
                puts = true;
                1
            }
            op::LONG_BINPUT => {
                puts = true;
                4
            }
            op::PROTO | op::BININT1 => 1,
            op::BININT2 => 2,
            op::BININT => 4,
            op::FRAME | op::BINFLOAT => 8,
            op::LONG1 | op::SHORT_BINUNICODE => input.uint(1)?,
            op::BINUNICODE => input.uint(4)?,
            op::BINUNICODE8 => input.uint(8)?,
            op::GLOBAL => {
                input.line()?;
                input.line()?;
                0
            }
            op::MARK
            | op::POP
            | op::NONE
            | op::NEWTRUE
            | op::NEWFALSE
            | op::EMPTY_TUPLE
            | op::TUPLE
            | op::TUPLE1
            | op::TUPLE2
            | op::TUPLE3
            | op::EMPTY_LIST
            | op::APPEND
            | op::APPENDS
            | op::EMPTY_DICT
            | op::SETITEM
            | op::SETITEMS
            | op::STACK_GLOBAL
            | op::NEWOBJ
            | op::REDUCE
            | op::BUILD => 0,
            _ => return None,
        };
        input.skip(skip)?;
    }
    (!(puts && memoizes)).then(|| read.finish())
}
