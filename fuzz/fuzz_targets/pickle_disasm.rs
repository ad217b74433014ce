//! The static disassembler against the machine it describes, both from the
//! crate `stowage-pickle`: `disassemble` with its limits lifted (its memory
//! is bounded by the input anyway) and `unpickle` with hooks that accept
//! everything (`accept_all.rs`), on the same bytes.
//!
//! What must hold, each by construction: the two walk the opcodes with the
//! one argument decoder, the disassembler stops only where the stream cannot
//! be walked, and with these hooks its abstract stack is the machine's stack
//! (strings tracked, everything else "something") for as long as the machine
//! runs without error.
//!
//! - The disassembler never panics, its `consumed` is within the input, and
//!   its error, if any, is structural (the stream cannot be walked).
//! - A pickle the machine reads, the disassembler walks to the same `STOP`:
//!   no error, the same `consumed` and `protocol`, one `STOP` counted. It
//!   names exactly the classes the machine looked up, each a `Static` name,
//!   with the same counts in the same order of first appearance (every
//!   `STACK_GLOBAL` the machine accepts takes string constants the
//!   disassembler tracks, through the memo too).
//! - Where the machine fails on the stream's structure, the disassembler
//!   fails with the same error (it walks the same opcodes to the same point).
#![no_main]

mod accept_all;

use accept_all::AcceptAll;
use libfuzzer_sys::fuzz_target;
use stowage_pickle::{disassemble, opcode, unpickle, GlobalName, Limits, PickleError};

/// The errors that mean the stream cannot be walked, the only ones the
/// disassembler stops on with its limits lifted.
fn structural(e: &PickleError) -> bool {
    matches!(
        e,
        PickleError::UnknownOpcode { .. }
            | PickleError::Truncated { .. }
            | PickleError::UnterminatedLine { .. }
            | PickleError::NoStop { .. }
            | PickleError::UnsupportedProtocol { .. }
            | PickleError::BadText {
                what: "negative length",
                ..
            }
    )
}

fuzz_target!(|data: &[u8]| {
    let lifted = Limits::default()
        .with_max_memo(usize::MAX)
        .with_max_stack(usize::MAX)
        .with_max_nodes(usize::MAX);
    let d = disassemble(data, &lifted);
    assert!(d.consumed <= data.len());
    if let Some(e) = &d.error {
        assert!(structural(e), "the disassembler stopped on {e:?}");
    }

    let mut hooks = AcceptAll::default();
    match unpickle(data, &mut hooks, &Limits::default()) {
        Ok(p) => {
            assert_eq!(
                d.error, None,
                "the machine read what the disassembler could not walk"
            );
            assert_eq!(d.consumed, p.consumed);
            assert_eq!(d.protocol, p.protocol);
            assert_eq!(d.count(opcode::STOP), 1);
            // The classes looked up, distinct, counted, in order of first lookup.
            let mut looked_up: Vec<(GlobalName, u64)> = Vec::new();
            for (module, name) in hooks.classes {
                let g = GlobalName::Static { module, name };
                match looked_up.iter_mut().find(|(h, _)| *h == g) {
                    Some((_, n)) => *n += 1,
                    None => looked_up.push((g, 1)),
                }
            }
            assert_eq!(
                d.globals, looked_up,
                "the disassembler's globals differ from the lookups"
            );
        }
        Err(e) if structural(&e) => {
            assert_eq!(d.error, Some(e), "the two stopped differently");
        }
        Err(_) => {}
    }
});
