//! `stowage::checkpoint::scan::scan_bytes` on any input (zip, legacy or bare
//! pickle, told apart by content): it never panics, and what it reports is
//! consistent (every pickle's globals are in the file's list, with counts
//! that add up; an unsafe verdict exactly when a global is unsafe).
//!
//! Differential on the input read as one pickle: every global the pickle
//! machine asks its hooks for (hooks that accept everything, as the `pickle`
//! target's) is one the static disassembler names, unless the disassembler
//! reports a `STACK_GLOBAL` it cannot name, so a scan never misses a global
//! the machine would look up.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stowage_pickle::{
    disassemble, read::Hooks, unpickle, GlobalName, Graph, Limits, PickleError, Value,
};
use stowage::checkpoint::scan::{scan_bytes, Verdict};
use stowage::LoadOptions;

/// Records every class the machine looks up, and accepts everything.
#[derive(Default)]
struct Record(Vec<(String, String)>);

impl Hooks for Record {
    type Ext = u8;
    type Error = PickleError;

    fn find_class(&mut self, module: &str, name: &str) -> Result<Value<u8>, PickleError> {
        self.0.push((module.to_owned(), name.to_owned()));
        Ok(Value::Ext(0))
    }
    fn persistent_load(
        &mut self,
        _: &mut Graph<u8>,
        _: Value<u8>,
    ) -> Result<Value<u8>, PickleError> {
        Ok(Value::Ext(1))
    }
    fn reduce(
        &mut self,
        _: &mut Graph<u8>,
        _: Value<u8>,
        _: Value<u8>,
    ) -> Result<Value<u8>, PickleError> {
        Ok(Value::Ext(2))
    }
    fn build(
        &mut self,
        _: &mut Graph<u8>,
        obj: Value<u8>,
        _: Value<u8>,
    ) -> Result<Value<u8>, PickleError> {
        Ok(obj)
    }
    fn new_obj(
        &mut self,
        _: &mut Graph<u8>,
        _: Value<u8>,
        _: Value<u8>,
    ) -> Result<Value<u8>, PickleError> {
        Ok(Value::Ext(3))
    }
}

fuzz_target!(|data: &[u8]| {
    let options = LoadOptions::default().with_max_pickle_bytes(1 << 20);
    let scan = scan_bytes(data, &options);
    for p in &scan.pickles {
        for g in &p.globals {
            let total = scan
                .globals
                .iter()
                .find(|f| f.module == g.module && f.name == g.name)
                .expect("a pickle's global is in the file's list");
            assert!(total.count >= g.count);
            assert_eq!(total.verdict, g.verdict);
        }
    }
    let summed: u64 = scan
        .pickles
        .iter()
        .flat_map(|p| &p.globals)
        .map(|g| g.count)
        .sum();
    assert_eq!(summed, scan.globals.iter().map(|g| g.count).sum::<u64>());
    assert_eq!(
        scan.is_unsafe(),
        scan.globals.iter().any(|g| g.verdict == Verdict::Unsafe)
    );

    let limits = Limits::default();
    let d = disassemble(data, &limits);
    let mut seen = Record::default();
    let _ = unpickle(data, &mut seen, &limits);
    let dynamic = d.globals.iter().any(|(g, _)| *g == GlobalName::Dynamic);
    for (module, name) in &seen.0 {
        let named = d.globals.iter().any(|(g, _)| {
            matches!(g, GlobalName::Static { module: m, name: n } if m == module && n == name)
        });
        assert!(
            named || dynamic,
            "the machine looked up {module}.{name}, the disassembler missed it"
        );
    }
});
