//! Reading an opcode's argument from the stream, as its [`Arg`] lays it out:
//! the one decoder of argument formats, shared by the machine
//! ([`unpickle`](super::unpickle)) and the memo scan.

use super::opcode::Arg;
use super::PickleError;

/// An argument as read, before the opcode gives it a meaning.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Operand<'a> {
    /// [`Arg::None`].
    None,
    /// [`Arg::Uint`].
    Uint(u64),
    /// [`Arg::Int4`].
    Int(i32),
    /// [`Arg::Float8`].
    Float(f64),
    /// [`Arg::Line`], without its newline.
    Line(&'a [u8]),
    /// [`Arg::LinePair`], without the newlines.
    Lines(&'a [u8], &'a [u8]),
    /// [`Arg::Counted`]: the bytes after the length.
    Bytes(&'a [u8]),
}

/// A memo index given as a decimal line (`GET`, `PUT`), as the machine and
/// the memo scan both read it; `None` when it is not one.
pub(super) fn index_line(line: &[u8]) -> Option<u64> {
    std::str::from_utf8(line).ok()?.trim().parse().ok()
}

/// A pickle and a read position in it. Every read checks its length against
/// what is left before touching the bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Input<'a> {
    pub(super) data: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Input<'a> {
    /// `n` more bytes are left, as a `usize`.
    ///
    /// # Errors
    /// [`PickleError::Truncated`] if fewer are left.
    #[inline(always)]
    pub(super) fn check_len(&self, n: u64) -> Result<usize, PickleError> {
        let available = self.data.len() - self.pos;
        match usize::try_from(n) {
            Ok(n) if n <= available => Ok(n),
            _ => Err(PickleError::Truncated {
                offset: self.pos,
                needed: n,
                available,
            }),
        }
    }

    /// The next `n` bytes.
    #[inline(always)]
    fn take(&mut self, n: u64) -> Result<&'a [u8], PickleError> {
        let n = self.check_len(n)?;
        let bytes = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    #[inline(always)]
    fn array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N as u64)?);
        Ok(out)
    }

    /// A little-endian unsigned integer of `n` bytes: 1, 2, 4 or 8 (the
    /// table's only widths; others read as 8).
    #[inline(always)]
    fn uint(&mut self, n: u8) -> Result<u64, PickleError> {
        Ok(match n {
            1 => self.array::<1>()?[0].into(),
            2 => u16::from_le_bytes(self.array()?).into(),
            4 => u32::from_le_bytes(self.array()?).into(),
            _ => u64::from_le_bytes(self.array()?),
        })
    }

    /// A line without its `\n`.
    #[inline(always)]
    fn line(&mut self) -> Result<&'a [u8], PickleError> {
        let rest = &self.data[self.pos..];
        let n = rest.iter().position(|&b| b == b'\n');
        let n = n.ok_or(PickleError::UnterminatedLine { offset: self.pos })?;
        self.pos += n + 1;
        Ok(&rest[..n])
    }

    /// Moves past the argument laid out as `arg`, as [`Input::operand`] reads
    /// it, finding only its end: no values and no errors are built (the memo
    /// scan's hot loop, where a stream it cannot walk just gets no plan).
    /// `None` where the argument runs past the end or a signed length is
    /// negative; the position is then unspecified.
    #[inline(always)]
    pub(super) fn skip(&mut self, arg: Arg) -> Option<()> {
        let data = self.data;
        let fixed = |pos: usize, n: usize| -> Option<usize> {
            let end = pos.checked_add(n)?;
            (end <= data.len()).then_some(end)
        };
        let line = |pos: usize| -> Option<usize> {
            Some(pos + data.get(pos..)?.iter().position(|&b| b == b'\n')? + 1)
        };
        let pos = self.pos;
        self.pos = match arg {
            Arg::None => pos,
            Arg::Uint(n) => fixed(pos, n.into())?,
            Arg::Int4 => fixed(pos, 4)?,
            Arg::Float8 => fixed(pos, 8)?,
            Arg::Line => line(pos)?,
            Arg::LinePair => line(line(pos)?)?,
            Arg::Counted { len, signed } => {
                let end = fixed(pos, len.into())?;
                let bytes = &data[pos..end];
                let n = match (len, signed) {
                    (1, _) => u64::from(bytes[0]),
                    (4, true) => u64::try_from(i32::from_le_bytes(bytes.try_into().ok()?)).ok()?,
                    (4, false) => u32::from_le_bytes(bytes.try_into().ok()?).into(),
                    _ => u64::from_le_bytes(bytes.try_into().ok()?),
                };
                fixed(end, usize::try_from(n).ok()?)?
            }
        };
        Some(())
    }

    /// Reads the argument laid out as `arg`, for the opcode at offset `at`.
    ///
    /// # Errors
    /// [`PickleError::Truncated`] or [`PickleError::UnterminatedLine`] where
    /// the input ends first, [`PickleError::BadText`] for a negative signed
    /// length.
    #[inline(always)]
    pub(super) fn operand(&mut self, arg: Arg, at: usize) -> Result<Operand<'a>, PickleError> {
        Ok(match arg {
            Arg::None => Operand::None,
            Arg::Uint(n) => Operand::Uint(self.uint(n)?),
            Arg::Int4 => Operand::Int(i32::from_le_bytes(self.array()?)),
            Arg::Float8 => Operand::Float(f64::from_be_bytes(self.array()?)),
            Arg::Line => Operand::Line(self.line()?),
            Arg::LinePair => Operand::Lines(self.line()?, self.line()?),
            Arg::Counted { len, signed } => {
                let n = if signed {
                    let n = i32::from_le_bytes(self.array()?);
                    u64::try_from(n).map_err(|_| PickleError::BadText {
                        what: "negative length",
                        offset: at,
                    })?
                } else {
                    self.uint(len)?
                };
                Operand::Bytes(self.take(n)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(arg: Arg, data: &[u8]) -> Result<(Operand<'_>, usize), PickleError> {
        let mut input = Input { data, pos: 0 };
        let operand = input.operand(arg, 0)?;
        Ok((operand, input.pos))
    }

    #[test]
    fn every_layout() {
        let counted = |len, signed| Arg::Counted { len, signed };
        assert_eq!(read(Arg::None, b"x"), Ok((Operand::None, 0)));
        assert_eq!(
            read(Arg::Uint(2), b"\x01\x02"),
            Ok((Operand::Uint(0x0201), 2))
        );
        assert_eq!(
            read(Arg::Uint(8), &[0xff; 8]),
            Ok((Operand::Uint(u64::MAX), 8))
        );
        assert_eq!(read(Arg::Int4, &[0xff; 4]), Ok((Operand::Int(-1), 4)));
        assert_eq!(
            read(Arg::Float8, &1.5f64.to_be_bytes()),
            Ok((Operand::Float(1.5), 8))
        );
        assert_eq!(read(Arg::Line, b"12\nx"), Ok((Operand::Line(b"12"), 3)));
        assert_eq!(
            read(Arg::LinePair, b"m\nn\n"),
            Ok((Operand::Lines(b"m", b"n"), 4))
        );
        assert_eq!(
            read(counted(1, false), b"\x02abc"),
            Ok((Operand::Bytes(b"ab"), 3))
        );
        assert_eq!(
            read(counted(4, true), b"\x01\x00\x00\x00a"),
            Ok((Operand::Bytes(b"a"), 5))
        );
    }

    #[test]
    fn errors_name_the_read() {
        assert_eq!(
            read(Arg::Uint(4), b"\x01\x02"),
            Err(PickleError::Truncated {
                offset: 0,
                needed: 4,
                available: 2
            })
        );
        assert_eq!(
            read(Arg::LinePair, b"m\nn"),
            Err(PickleError::UnterminatedLine { offset: 2 })
        );
        assert_eq!(
            read(
                Arg::Counted {
                    len: 4,
                    signed: true
                },
                &[0xff; 4]
            ),
            Err(PickleError::BadText {
                what: "negative length",
                offset: 0
            })
        );
        assert_eq!(
            read(
                Arg::Counted {
                    len: 8,
                    signed: false
                },
                &[0xff; 9]
            ),
            Err(PickleError::Truncated {
                offset: 8,
                needed: u64::MAX,
                available: 1
            })
        );
    }

    proptest::proptest! {
        /// `skip` ends where `operand` ends, and fails where it fails, for
        /// every layout in the opcode table and any bytes.
        #[test]
        fn skip_agrees_with_operand(
            code in proptest::prelude::any::<u8>(),
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
        ) {
            let Some(info) = super::super::opcode::info(code) else { return Ok(()) };
            let mut read = Input { data: &data, pos: 0 };
            let read = read.operand(info.arg, 0).map(|_| read.pos);
            let mut skipped = Input { data: &data, pos: 0 };
            let skipped = skipped.skip(info.arg).map(|()| skipped.pos);
            proptest::prop_assert_eq!(read.ok(), skipped, "{}", info.name);
        }
    }
}
