//! Pickle streams: the pickles of a file or a record, back to back, read to
//! the end of their bytes, and the rule that tells a pickle from other data.

use super::{merge, verdict, GlobalUse, PickleScan, Scanner, Verdict};
use crate::checkpoint::pickle::{compat, disassemble, Disassembly, GlobalName, PickleError};
use crate::error::{CheckpointError, ErrorContext, FormatError};
use crate::io::ReadAt;
use crate::{Error, Result};

/// The first bytes of a zip member read to tell whether it may hold a
/// pickle: few, since almost all data meets a byte that is no opcode within
/// them, and a scan looks at the start of every member (every tensor's
/// record of a torch save).
pub(super) const SNIFF: usize = 256;

/// The first window of a stream that may be anything, read to tell whether
/// it is a pickle.
const FIRST_WINDOW: u64 = 4096;

/// Whether the start of some data may be a pickle: a walk of `head` that
/// [`looks_like_a_pickle`] already, or that runs to the end of `head`
/// without meeting anything that is no pickle (`head` is only a start).
pub(super) fn may_be_a_pickle(d: &Disassembly) -> bool {
    looks_like_a_pickle(d) || cut_short(d)
}

/// Whether the walk of `d` stopped only because its bytes ended (an
/// argument, a line or the `STOP` past them), not at something no pickle
/// holds.
fn cut_short(d: &Disassembly) -> bool {
    matches!(
        d.error,
        Some(
            PickleError::Truncated { .. }
                | PickleError::NoStop { .. }
                | PickleError::UnterminatedLine { .. }
        )
    )
}

/// What a stream is taken for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Trust {
    /// It is a pickle (a `.pkl` record, a file named by the caller, the
    /// pickle of a `.npy` object array): every error is reported.
    Pickle,
    /// It may be anything (a zip member, a file found in a folder): it is
    /// taken for a pickle when its first one [`looks_like_a_pickle`], and
    /// is otherwise left out without an error.
    Maybe,
}

/// Whether the first pickle of a stream `d` is one, for data that may be
/// anything: it [names a Python global](names_a_python_global), and it
/// either reads to its `STOP`, or walks on past the global (a call, an
/// argument) and then runs to
/// the end of its bytes, as a malicious pickle cut short does (CPython
/// imports what it names and runs it up to the cut). Text and tensor bytes
/// whose first bytes happen to be opcodes fail one of these: they name no
/// Python names, or meet a byte that is no opcode first, or end right after
/// two lines that read as a `GLOBAL`.
pub(super) fn looks_like_a_pickle(d: &Disassembly) -> bool {
    // A call (`REDUCE`, `BUILD`, `OBJ`, …) is an opcode past the global too.
    let walked_on = d.opcodes().map(|(_, n)| n).sum::<u64>() > 1;
    names_a_python_global(d) && (d.error.is_none() || (walked_on && cut_short(d)))
}

/// Whether `d` names a global whose module and name are Python names (or,
/// from protocol 2, one named on the stack or by an extension code).
pub(super) fn names_a_python_global(d: &Disassembly) -> bool {
    d.globals.iter().any(|(g, _)| match g {
        GlobalName::Static { module, name } => python_name(module) && python_name(name),
        GlobalName::Dynamic | GlobalName::Extension(_) => d.protocol >= 2,
    })
}

/// A dotted Python name (`os`, `torch.nn.modules.linear`, `Outer.Inner`).
pub(super) fn python_name(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            let mut b = part.bytes();
            b.next()
                .is_some_and(|c| c == b'_' || c.is_ascii_alphabetic())
                && b.all(|c| c == b'_' || c.is_ascii_alphanumeric())
        })
}

/// The legacy stream's five pickles.
pub(super) const LEGACY_SECTIONS: [&str; 5] = [
    "magic number",
    "protocol version",
    "sys_info",
    "object",
    "storage keys",
];

impl Scanner<'_> {
    /// The legacy stream's five pickles, each of which must be whole; records
    /// named `{prefix}{section}`.
    pub(super) fn scan_legacy(&mut self, source: &dyn ReadAt, prefix: &str) -> Result<()> {
        let mut pos = 0u64;
        for section in LEGACY_SECTIONS {
            let d = self.read_pickle(source, pos, Trust::Pickle)?;
            let at = pos;
            pos += d.consumed as u64;
            self.add(format!("{prefix}{section}"), d, at)?;
        }
        Ok(())
    }

    /// The pickles of `source` from `start`, back to back, to the end of its
    /// bytes (a stream may hold any number: `pickle.load` called in a loop
    /// reads them all). Reading stops at the first that is no pickle; a
    /// break in the first is an error when `trust` is [`Trust::Pickle`], and
    /// later ones are read while they are pickles. Records are named
    /// `name(1)`, `name(2)`, … Data that may be anything
    /// ([`Trust::Maybe`]) whose first pickle does not [`looks_like_a_pickle`]
    /// adds nothing. `first`: the first pickle, when the caller has already
    /// read it.
    pub(super) fn scan_pickles(
        &mut self,
        source: &dyn ReadAt,
        start: u64,
        trust: Trust,
        name: &dyn Fn(usize) -> String,
        mut first: Option<Disassembly>,
    ) -> Result<()> {
        let len = source.len();
        let mut pos = start;
        let mut i = 0;
        while pos < len || i == 0 {
            let d = match first.take() {
                Some(d) => d,
                None => self.read_pickle(source, pos, if i == 0 { trust } else { Trust::Maybe })?,
            };
            if i == 0 && trust == Trust::Maybe && !looks_like_a_pickle(&d) {
                return Ok(());
            }
            if i > 0 && d.error.is_some() {
                break;
            }
            if i >= self.options.max_records {
                return Err(Error::Checkpoint(CheckpointError::LimitExceeded {
                    limit: crate::Limit::Records,
                    value: i as u64 + 1,
                    max: self.options.max_records as u64,
                }));
            }
            let at = pos;
            pos += d.consumed.max(1) as u64;
            i += 1;
            self.add(name(i), d, at)?;
        }
        Ok(())
    }

    /// Disassembles the pickle at `pos`, reading a window of the source that
    /// grows (to at most `max_pickle_bytes`) while the pickle runs past it:
    /// to what an argument declares, when it declares more than the window
    /// holds (and never when that is more than the source holds), and four
    /// times larger otherwise. Data that may be anything starts with a small
    /// window; almost all of it fails within its first bytes.
    pub(super) fn read_pickle(
        &self,
        source: &dyn ReadAt,
        pos: u64,
        trust: Trust,
    ) -> Result<Disassembly> {
        let left = source.len().saturating_sub(pos);
        let max = left.min(self.options.max_pickle_bytes);
        // A pickle of up to 16 MiB (a torch save's `data.pkl`) is read and
        // walked once, whole; a longer stream (a file whose first pickle
        // may be followed by gigabytes of other bytes) from 64 KiB up.
        let mut n: u64 = match trust {
            Trust::Pickle if max <= 16 << 20 => max,
            Trust::Pickle => 1 << 16,
            Trust::Maybe => FIRST_WINDOW,
        };
        loop {
            let n_now = n.min(max);
            let mut buf = vec![0u8; usize::try_from(n_now).unwrap_or(usize::MAX)];
            source.read_exact_at(&mut buf, pos)?;
            let d = disassemble(&buf, &self.options.pickle_limits);
            let next = match d.error {
                Some(PickleError::Truncated { offset, needed, .. }) => (offset as u64)
                    .checked_add(needed)
                    .filter(|&end| end <= max),
                Some(PickleError::NoStop { .. } | PickleError::UnterminatedLine { .. }) => {
                    Some(n_now.saturating_mul(4))
                }
                // A window that ends before the pickle's `STOP` has no memo
                // plan, so every entry counted: the whole pickle, walked as
                // the loader walks it, may hold to the limit.
                Some(PickleError::LimitExceeded {
                    limit: "max_memo", ..
                }) => Some(n_now.saturating_mul(4)),
                _ => None,
            };
            match next {
                Some(next) if n_now < max => n = next.max(n_now.saturating_mul(2)),
                _ => return Ok(d),
            }
        }
    }

    /// Adds the pickle `d` read from `record`, at `at` in the bytes being
    /// read; an error if it could not be walked to its end. Frames that
    /// disagree with the opcodes are named as the unsafe global
    /// `<malformed>.FRAME`.
    pub(super) fn add(&mut self, record: String, d: Disassembly, at: u64) -> Result<()> {
        let mut globals: Vec<GlobalUse> = d
            .globals
            .iter()
            .zip(&d.first_offsets)
            .map(|((g, count), &offset)| {
                let (module, name) = match g {
                    GlobalName::Static { module, name } => {
                        let (m, n) = compat::fix_import(module, name);
                        (m.to_owned(), n.to_owned())
                    }
                    GlobalName::Dynamic => ("<dynamic>".to_owned(), "STACK_GLOBAL".to_owned()),
                    GlobalName::Extension(code) => ("<extension>".to_owned(), code.to_string()),
                };
                let verdict = match g {
                    GlobalName::Static { .. } => verdict(&module, &name),
                    _ => Verdict::Unsafe,
                };
                GlobalUse::new(module, name, verdict, *count, at + offset as u64)
            })
            .collect();
        if let Some(offset) = d.frame_mismatch {
            globals.push(GlobalUse::new(
                "<malformed>".into(),
                "FRAME".into(),
                Verdict::Unsafe,
                1,
                at + offset as u64,
            ));
        }
        let globals = merge(globals.iter());
        let error = d.error.clone();
        self.scan.pickles.push(PickleScan {
            record: record.clone(),
            protocol: d.protocol,
            opcodes: d.opcodes().map(|(o, n)| (o.name, n)).collect(),
            globals,
            member_offset: self.base,
        });
        match error {
            Some(e) => Err(Error::Format(FormatError::Pickle(e)).in_entry(record)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::pickle::Limits;

    #[test]
    fn python_names() {
        for s in [
            "os",
            "torch.nn.modules.linear",
            "_a1",
            "Outer.Inner",
            "__builtin__",
        ] {
            assert!(python_name(s), "{s}");
        }
        for s in ["", "a b", "lass Linear(Module):", "1x", "a..b", "x-y", "ü"] {
            assert!(!python_name(s), "{s}");
        }
    }

    #[test]
    fn what_looks_like_a_pickle() {
        let l = Limits::default();
        // Whole, naming a global: yes. Cut after a call: yes.
        assert!(looks_like_a_pickle(&disassemble(
            b"cos\nsystem\n(S'x'\ntR.",
            &l
        )));
        assert!(looks_like_a_pickle(&disassemble(
            b"cbuiltins\nexec\n(S'x'\ntR",
            &l
        )));
        // Cut short inside a string argument before the call (picklescan's
        // `broken_model.pkl`): yes.
        assert!(looks_like_a_pickle(&disassemble(
            b"cbuiltins\nexec\n(X>\nf = open('x')tRX.",
            &l
        )));
        // Text whose first byte is GLOBAL: no.
        assert!(!looks_like_a_pickle(&disassemble(
            b"class A(B):\n  x = 1\n",
            &l
        )));
        assert!(!looks_like_a_pickle(&disassemble(b"cmake\nproject\n", &l)));
        // A whole pickle that names nothing: no (nothing to report).
        assert!(!looks_like_a_pickle(&disassemble(b"\x80\x02}q\x00.", &l)));
        // Float bytes.
        assert!(!looks_like_a_pickle(&disassemble(
            &[0, 0, 0x80, 0x3f, 0, 0, 0, 0x40],
            &l
        )));
    }
}
