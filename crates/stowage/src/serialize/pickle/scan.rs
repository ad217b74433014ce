//! A pass over a pickle's opcodes, before running it, to learn which memo
//! entries are ever read.
//!
//! Python's pickler memoizes nearly every object it writes (`BINPUT` after
//! each tuple, string and reduce), but a checkpoint reads back only a few of
//! them (`BINGET` of a repeated global, string or shared object). Storing every
//! entry cost a state dict of 100,000 tensors some 800,000 memo entries, about
//! 50 MB at the peak of a load. With the set of indices the stream reads, the
//! machine stores only those. The scan decodes arguments only as far as their
//! lengths (and the indices of `GET`s), so it costs a small fraction of the
//! run.
//!
//! The plan is exact, not a guess: the machine executes the same bytes, so
//! every `GET` it can reach is in the set. Where the scan cannot be sure, it
//! gives no plan and the machine stores everything, as before: a stream it
//! cannot walk to `STOP`, or one that mixes `MEMOIZE` (whose index is the
//! count of distinct entries so far) with explicit `PUT`s (whose skipped
//! entries that count would then miss).

use std::collections::HashSet;

use super::opcode as op;

/// Which memo entries a pickle reads, and how `MEMOIZE` numbers them.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct MemoPlan {
    /// Every index a `GET`, `BINGET` or `LONG_BINGET` names.
    pub(crate) read: HashSet<u64>,
}

/// The plan for the pickle at the start of `data`, or `None` when the stream
/// cannot be walked to its `STOP` or mixes `MEMOIZE` with `PUT`s.
pub(crate) fn memo_plan(data: &[u8]) -> Option<MemoPlan> {
    let mut plan = MemoPlan::default();
    let (mut puts, mut memoizes) = (false, false);
    let mut pos = 0;
    loop {
        let code = *data.get(pos)?;
        pos += 1;
        match code {
            op::STOP => break,
            op::GET => {
                let line = line(data, &mut pos)?;
                plan.read
                    .insert(std::str::from_utf8(line).ok()?.trim().parse().ok()?);
            }
            op::BINGET => {
                plan.read.insert(fixed(data, &mut pos, 1)?[0].into());
            }
            op::LONG_BINGET => {
                let b = fixed(data, &mut pos, 4)?;
                plan.read
                    .insert(u32::from_le_bytes([b[0], b[1], b[2], b[3]]).into());
            }
            op::PUT => {
                puts = true;
                line(data, &mut pos)?;
            }
            op::BINPUT => {
                puts = true;
                fixed(data, &mut pos, 1)?;
            }
            op::LONG_BINPUT => {
                puts = true;
                fixed(data, &mut pos, 4)?;
            }
            op::MEMOIZE => memoizes = true,
            _ => skip_args(code, data, &mut pos)?,
        }
    }
    (!(puts && memoizes)).then_some(plan)
}

/// Moves past the arguments of every opcode other than the memo ones;
/// `None` for an opcode the table does not know or arguments past the end.
fn skip_args(code: u8, data: &[u8], pos: &mut usize) -> Option<()> {
    match code {
        // A line: decimal numbers, literals, persistent ids.
        op::INT | op::LONG | op::STRING | op::UNICODE | op::FLOAT | op::PERSID => {
            line(data, pos)?;
        }
        // Two lines: module and name.
        op::GLOBAL | op::INST => {
            line(data, pos)?;
            line(data, pos)?;
        }
        op::BININT1 | op::EXT1 | op::PROTO => {
            fixed(data, pos, 1)?;
        }
        op::BININT2 | op::EXT2 => {
            fixed(data, pos, 2)?;
        }
        op::BININT | op::EXT4 => {
            fixed(data, pos, 4)?;
        }
        op::BINFLOAT | op::FRAME => {
            fixed(data, pos, 8)?;
        }
        // A length, then that many bytes.
        op::LONG1 | op::SHORT_BINSTRING | op::SHORT_BINBYTES | op::SHORT_BINUNICODE => {
            let n = fixed(data, pos, 1)?[0];
            fixed(data, pos, n.into())?;
        }
        op::LONG4 | op::BINSTRING => {
            let b = fixed(data, pos, 4)?;
            let n = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            fixed(data, pos, usize::try_from(n).ok()?)?;
        }
        op::BINBYTES | op::BINUNICODE => {
            let b = fixed(data, pos, 4)?;
            let n = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            fixed(data, pos, usize::try_from(n).ok()?)?;
        }
        op::BINBYTES8 | op::BINUNICODE8 | op::BYTEARRAY8 => {
            let b = fixed(data, pos, 8)?;
            let n = u64::from_le_bytes(b.try_into().ok()?);
            fixed(data, pos, usize::try_from(n).ok()?)?;
        }
        // No arguments.
        op::NONE
        | op::NEWTRUE
        | op::NEWFALSE
        | op::EMPTY_LIST
        | op::APPEND
        | op::APPENDS
        | op::LIST
        | op::EMPTY_TUPLE
        | op::TUPLE
        | op::TUPLE1
        | op::TUPLE2
        | op::TUPLE3
        | op::EMPTY_DICT
        | op::DICT
        | op::SETITEM
        | op::SETITEMS
        | op::EMPTY_SET
        | op::ADDITEMS
        | op::FROZENSET
        | op::POP
        | op::DUP
        | op::MARK
        | op::POP_MARK
        | op::STACK_GLOBAL
        | op::REDUCE
        | op::BUILD
        | op::OBJ
        | op::NEWOBJ
        | op::NEWOBJ_EX
        | op::BINPERSID
        | op::NEXT_BUFFER
        | op::READONLY_BUFFER => {}
        _ => return None,
    }
    Some(())
}

/// The next `n` bytes.
fn fixed<'a>(data: &'a [u8], pos: &mut usize, n: usize) -> Option<&'a [u8]> {
    let end = pos.checked_add(n)?;
    let bytes = data.get(*pos..end)?;
    *pos = end;
    Some(bytes)
}

/// The bytes up to the next newline, which is skipped too.
fn line<'a>(data: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let rest = data.get(*pos..)?;
    let n = rest.iter().position(|&b| b == b'\n')?;
    *pos += n + 1;
    Some(&rest[..n])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(data: &[u8]) -> Option<Vec<u64>> {
        let mut v: Vec<u64> = memo_plan(data)?.read.into_iter().collect();
        v.sort_unstable();
        Some(v)
    }

    #[test]
    fn collects_every_get_and_skips_arguments() {
        // PROTO 2, a string that contains 'h' and '\n' bytes, BINPUT 0, BINPUT 1,
        // BINGET 0, LONG_BINGET 7, GET 3 (a line), TUPLE, STOP.
        let data = b"\x80\x02(X\x03\x00\x00\x00h\nhq\x00q\x01h\x00j\x07\x00\x00\x00g3\nt.";
        assert_eq!(read(data), Some(vec![0, 3, 7]));
        // Nothing after STOP counts.
        assert_eq!(read(b"N.h\x05"), Some(vec![]));
    }

    /// The scan walks every opcode of protocols 0–5 (the CPython fixtures use
    /// each one), so real pickles get a plan rather than the fallback.
    #[test]
    fn every_cpython_fixture_gets_a_plan() {
        use super::super::testkit::{unhex, FIXTURES};
        for f in FIXTURES {
            let data = unhex(f.hex);
            assert!(memo_plan(&data).is_some(), "{}", f.name);
        }
    }

    #[test]
    fn no_plan_where_the_scan_cannot_be_sure() {
        assert_eq!(read(b"Nq\x00"), None, "no STOP");
        assert_eq!(read(b"X\xff\x00\x00\x00ab."), None, "a string past the end");
        assert_eq!(read(b"\xffN."), None, "an unknown opcode");
        assert_eq!(read(b"Nq\x00\x94h\x00."), None, "PUT mixed with MEMOIZE");
        assert_eq!(
            read(b"N\x94\x94h\x01."),
            Some(vec![1]),
            "MEMOIZE alone is fine"
        );
    }
}
