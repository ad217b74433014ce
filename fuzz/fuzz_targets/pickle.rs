//! The pickle machine alone, with hooks that accept everything: every global,
//! persistent id, reduce, build and `__new__` becomes an opaque `Ext` value,
//! so the fuzzer reaches every opcode without the torch allowlist in the way.
//!
//! Differential: each input runs with the memo scan (the default) and without
//! it (every memo entry stored, as CPython does), and the two results must be
//! the same, but for the memo limit, which only the second can reach.
//!
//! Then the writer: whatever was read is written back with `dumps` (extension
//! values as `None`), and the writer's pickle must read again, unless the
//! graph holds a cycle the writer refuses or the reread reaches a limit.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stowage::serialize::pickle::{
    dumps, read::Hooks, unpickle, Graph, Limits, PickleError, Pickled, Value, WriteError,
};

struct AcceptAll;

impl Hooks for AcceptAll {
    type Ext = u8;
    type Error = PickleError;

    fn find_class(&mut self, _module: &str, _name: &str) -> Result<Value<u8>, PickleError> {
        Ok(Value::Ext(0))
    }
    fn persistent_load(
        &mut self,
        _g: &mut Graph<u8>,
        _pid: Value<u8>,
    ) -> Result<Value<u8>, PickleError> {
        Ok(Value::Ext(1))
    }
    fn reduce(
        &mut self,
        _g: &mut Graph<u8>,
        _c: Value<u8>,
        _a: Value<u8>,
    ) -> Result<Value<u8>, PickleError> {
        Ok(Value::Ext(2))
    }
    fn build(
        &mut self,
        _g: &mut Graph<u8>,
        obj: Value<u8>,
        _s: Value<u8>,
    ) -> Result<Value<u8>, PickleError> {
        Ok(obj)
    }
    fn new_obj(
        &mut self,
        _g: &mut Graph<u8>,
        _c: Value<u8>,
        _a: Value<u8>,
    ) -> Result<Value<u8>, PickleError> {
        Ok(Value::Ext(3))
    }
}

/// Equal results, NaNs included (`PartialEq` on floats says a NaN differs
/// from itself, so the values are compared by their `Debug` text).
fn same(a: &Pickled<u8>, b: &Pickled<u8>) -> bool {
    let text = |v: &dyn std::fmt::Debug| format!("{v:?}");
    a.protocol == b.protocol
        && a.consumed == b.consumed
        && text(&a.root) == text(&b.root)
        && a.graph.len() == b.graph.len()
        && a.graph.iter().zip(b.graph.iter()).all(|((i, x), (j, y))| {
            text(x) == text(y) && a.graph.depth(i) == b.graph.depth(j)
        })
}

fuzz_target!(|data: &[u8]| {
    let scanned = unpickle(data, &mut AcceptAll, &Limits::default());
    let every = Limits {
        scan_memo: false,
        ..Limits::default()
    };
    let stored = unpickle(data, &mut AcceptAll, &every);
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
            Ok(out) => match unpickle(&out, &mut AcceptAll, &Limits::default()) {
                Ok(_) | Err(PickleError::LimitExceeded { .. }) => {}
                Err(e) => panic!("the writer's pickle does not read: {e:?}"),
            },
            Err(WriteError::Cycle { .. }) => {}
            Err(e) => panic!("the writer refused what was read: {e:?}"),
        }
    }
});
