//! Hooks that accept everything, for the targets that run the pickle machine
//! alone (`pickle`, `pickle_disasm`): every global, persistent id, `REDUCE`,
//! `BUILD` and `NEWOBJ` becomes an opaque `Ext` value, so the fuzzer reaches
//! every opcode without an allowlist in the way. The classes looked up are
//! recorded, in order.

use stowage_pickle::{Graph, Hooks, PickleError, Value};

#[derive(Default)]
pub struct AcceptAll {
    /// Every `find_class` call's `(module, name)`, in order.
    #[allow(dead_code)] // read by `pickle_disasm` only
    pub classes: Vec<(String, String)>,
}

impl Hooks for AcceptAll {
    type Ext = u8;
    type Error = PickleError;

    fn find_class(&mut self, module: &str, name: &str) -> Result<Value<u8>, PickleError> {
        self.classes.push((module.to_owned(), name.to_owned()));
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
    /// The object itself, so the stack holds what the disassembler assumes.
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
