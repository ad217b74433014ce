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
use stowage_pickle::{
    dumps, unpickle, Graph, Hooks, Limits, PickleError, Pickled, Value, WriteError,
};

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

/// `AcceptAll` with an error a reader's failure converts into, as
/// `unpickle_windows` asks (a slice never fails).
#[derive(Default)]
struct Windowed(AcceptAll);

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

impl Hooks for Windowed {
    type Ext = u8;
    type Error = WindowedError;

    fn find_class(&mut self, module: &str, name: &str) -> Result<Value<u8>, WindowedError> {
        Ok(self.0.find_class(module, name)?)
    }
    fn persistent_load(
        &mut self,
        g: &mut Graph<u8>,
        pid: Value<u8>,
    ) -> Result<Value<u8>, WindowedError> {
        Ok(self.0.persistent_load(g, pid)?)
    }
    fn reduce(
        &mut self,
        g: &mut Graph<u8>,
        f: Value<u8>,
        args: Value<u8>,
    ) -> Result<Value<u8>, WindowedError> {
        Ok(self.0.reduce(g, f, args)?)
    }
    fn build(
        &mut self,
        g: &mut Graph<u8>,
        obj: Value<u8>,
        state: Value<u8>,
    ) -> Result<Value<u8>, WindowedError> {
        Ok(self.0.build(g, obj, state)?)
    }
    fn new_obj(
        &mut self,
        g: &mut Graph<u8>,
        cls: Value<u8>,
        args: Value<u8>,
    ) -> Result<Value<u8>, WindowedError> {
        Ok(self.0.new_obj(g, cls, args)?)
    }
    fn extend(
        &mut self,
        g: &mut Graph<u8>,
        target: &Value<u8>,
        items: Vec<Value<u8>>,
    ) -> Result<bool, WindowedError> {
        Ok(self.0.extend(g, target, items)?)
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
        &mut Windowed::default(),
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
