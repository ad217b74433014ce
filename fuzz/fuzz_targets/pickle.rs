//! The pickle machine alone (the crate `stowage-pickle`), with hooks that
//! accept everything (`accept_all.rs`): every global, persistent id, reduce,
//! build and `__new__` becomes an opaque `Ext` value, so the fuzzer reaches
//! every opcode without the torch allowlist in the way.
//!
//! Differential: each input runs with the memo scan (the default) and without
//! it (every memo entry stored, as CPython does), and the two results must be
//! the same, but for the memo limit, which only the second can reach.
//!
//! The same input read through windows of a few bytes (`unpickle_windows`,
//! what `unpickle_reader` does with 256 KiB) must give the same result or
//! the same error.
//!
//! Then the writer: whatever was read is written back with `dumps` (extension
//! values as `None`), and the writer's pickle must read again, unless the
//! graph holds a cycle the writer refuses or the reread reaches a limit.
#![no_main]

mod accept_all;

use accept_all::AcceptAll;
use libfuzzer_sys::fuzz_target;
use stowage_pickle::read::unpickle_windows;
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

/// The error of a run through windows: the machine's, or the reader's
/// (a slice never fails).
#[derive(Debug)]
enum WindowedError {
    Pickle(PickleError),
    // Shown by `Debug` when a run fails (a slice never does).
    Io(#[allow(dead_code)] std::io::Error),
}

impl From<PickleError> for WindowedError {
    fn from(e: PickleError) -> Self {
        WindowedError::Pickle(e)
    }
}

impl From<std::io::Error> for WindowedError {
    fn from(e: std::io::Error) -> Self {
        WindowedError::Io(e)
    }
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
    let open = || Ok::<_, std::io::Error>(data);
    let chunk = 1 + data.len() % 17;
    let windowed = unpickle_windows(
        data.len(),
        chunk,
        open,
        &mut AcceptAll::<WindowedError>::with_error(),
        &Limits::default(),
    );
    match (&scanned, &windowed) {
        (Ok(a), Ok(b)) => assert!(same(a, b), "windows of {chunk} changed the result"),
        (Err(a), Err(WindowedError::Pickle(b))) => {
            assert_eq!(a, b, "windows of {chunk} changed the error")
        }
        _ => panic!("windows of {chunk} changed the outcome: {scanned:?} vs {windowed:?}"),
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
