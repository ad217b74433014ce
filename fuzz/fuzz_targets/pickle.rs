//! The pickle machine alone (the crate `stowage-pickle`), with hooks that
//! accept everything (`accept_all.rs`): every global, persistent id, reduce,
//! build and `__new__` becomes an opaque `Ext` value, so the fuzzer reaches
//! every opcode without the torch allowlist in the way.
//!
//! Differential: each input runs with the memo scan (the default) and without
//! it (every memo entry stored, as CPython does), and the two results must be
//! the same, but for the memo limit, which only the second can reach.
//!
//! Then the writer: whatever was read is written back with `dumps` (extension
//! values as `None`), and the writer's pickle must read again, unless the
//! graph holds a cycle the writer refuses or the reread reaches a limit.
#![no_main]

mod accept_all;

use accept_all::AcceptAll;
use libfuzzer_sys::fuzz_target;
use stowage_pickle::{dumps, unpickle, Limits, PickleError, Pickled, WriteError};

/// Equal results, NaNs included (`PartialEq` on floats says a NaN differs
/// from itself, so the values are compared by their `Debug` text).
fn same(a: &Pickled<u8>, b: &Pickled<u8>) -> bool {
    let text = |v: &dyn std::fmt::Debug| format!("{v:?}");
    a.protocol == b.protocol
        && a.consumed == b.consumed
        && text(&a.root) == text(&b.root)
        && a.graph.len() == b.graph.len()
        && a.graph
            .iter()
            .zip(b.graph.iter())
            .all(|((i, x), (j, y))| text(x) == text(y) && a.graph.depth(i) == b.graph.depth(j))
}

fuzz_target!(|data: &[u8]| {
    let scanned = unpickle(data, &mut AcceptAll::default(), &Limits::default());
    let every = Limits::default().with_scan_memo(false);
    let stored = unpickle(data, &mut AcceptAll::default(), &every);
    match (&scanned, &stored) {
        (
            _,
            Err(PickleError::LimitExceeded {
                limit: "max_memo", ..
            }),
        ) => {}
        (Ok(a), Ok(b)) => assert!(same(a, b), "the memo scan changed the result"),
        (Err(a), Err(b)) => assert_eq!(a, b, "the memo scan changed the error"),
        _ => panic!("the memo scan changed the outcome: {scanned:?} vs {stored:?}"),
    }
    if let Ok(a) = &scanned {
        match dumps(&a.graph, &a.root, |p, _| p.none()) {
            Ok(out) => match unpickle(&out, &mut AcceptAll::default(), &Limits::default()) {
                Ok(_) | Err(PickleError::LimitExceeded { .. }) => {}
                Err(e) => panic!("the writer's pickle does not read: {e:?}"),
            },
            Err(WriteError::Cycle { .. }) => {}
            Err(e) => panic!("the writer refused what was read: {e:?}"),
        }
    }
});
