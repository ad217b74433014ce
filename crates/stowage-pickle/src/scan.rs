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

use super::opcode as op;
use super::operand::{index_line, Operand};
use super::source::{byte_at, hold, operand, Source};
use super::Set;

/// Which memo entries a pickle reads.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct MemoPlan {
    /// Every index a `GET`, `BINGET` or `LONG_BINGET` names.
    pub(crate) read: Set<u64>,
}

/// The index `MEMOIZE` stores under: Python's `len(memo)`. Under a plan only
/// `MEMOIZE`s wrote entries (a plan excludes `PUT`s), though not all were
/// stored, so the count of those walked (`memoized`) stands for it;
/// without one, the entries stored (`stored`).
pub(crate) fn memoize_index(plan: Option<&MemoPlan>, memoized: u64, stored: usize) -> u64 {
    match plan {
        Some(_) => memoized,
        None => stored as u64,
    }
}

/// The plan for the pickle at the start of `data`, or `None` when the stream
/// cannot be walked to its `STOP` or mixes `MEMOIZE` with `PUT`s.
///
/// Arguments are read as the opcode table lays them out, as the machine
/// reads them.
pub(crate) fn memo_plan<S: Source>(src: &mut S) -> Option<MemoPlan> {
    let mut plan = MemoPlan::default();
    let (mut puts, mut memoizes) = (false, false);
    let mut pos = 0;
    loop {
        let at = pos;
        let code = byte_at(src, at)?;
        pos += 1;
        let arg = op::info(code)?.arg;
        match code {
            op::STOP => break,
            op::GET | op::BINGET | op::LONG_BINGET => {
                let (operand, end) = operand(src, at, pos, arg).ok()?;
                let index = match operand {
                    Operand::Line(line) => index_line(line)?,
                    Operand::Uint(index) => index,
                    _ => return None,
                };
                pos = end;
                plan.read.insert(index);
                continue;
            }
            op::PUT | op::BINPUT | op::LONG_BINPUT => puts = true,
            op::MEMOIZE => memoizes = true,
            _ => {}
        }
        pos = hold(src, at, pos, arg)?;
    }
    (!(puts && memoizes)).then_some(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(data: &[u8]) -> Option<Vec<u64>> {
        let mut v: Vec<u64> = memo_plan(&mut &data[..])?.read.into_iter().collect();
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
            assert!(memo_plan(&mut &data[..]).is_some(), "{}", f.name);
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
