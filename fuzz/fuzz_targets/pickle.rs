//! The pickle machine alone, with hooks that accept everything: every global,
//! persistent id, reduce, build and `__new__` becomes an opaque `Ext` value,
//! so the fuzzer reaches every opcode without the torch allowlist in the way.
#![no_main]

use libfuzzer_sys::fuzz_target;
use stowage::serialize::pickle::{read::Hooks, unpickle, Graph, PickleError, Value};

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

fuzz_target!(|data: &[u8]| {
    let _ = unpickle(data, &mut AcceptAll, &Default::default());
});
