//! Hooks that accept everything, for the targets that run the pickle machine
//! alone (`pickle`, `pickle_disasm`): every global, persistent id, `REDUCE`,
//! `BUILD` and `NEWOBJ` becomes an opaque `Ext` value, so the fuzzer reaches
//! every opcode without an allowlist in the way. The classes looked up are
//! recorded, in order. The error type is the caller's (`PickleError` unless
//! said): one a reader's failure converts into, for `unpickle_windows`.

use std::marker::PhantomData;

use stowage_pickle::{Graph, Hooks, PickleError, Value};

pub struct AcceptAll<E = PickleError> {
    /// Every `find_class` call's `(module, name)`, in order.
    #[allow(dead_code)] // read by `pickle_disasm` only
    pub classes: Vec<(String, String)>,
    error: PhantomData<E>,
}

impl<E> AcceptAll<E> {
    /// Hooks whose errors are `E`s.
    #[allow(dead_code)] // used by `pickle` only
    pub fn with_error() -> Self {
        AcceptAll {
            classes: Vec::new(),
            error: PhantomData,
        }
    }
}

impl Default for AcceptAll {
    fn default() -> Self {
        AcceptAll::with_error()
    }
}

impl<E: From<PickleError>> Hooks for AcceptAll<E> {
    type Ext = u8;
    type Error = E;

    fn find_class(&mut self, module: &str, name: &str) -> Result<Value<u8>, E> {
        self.classes.push((module.to_owned(), name.to_owned()));
        Ok(Value::Ext(0))
    }
    fn persistent_load(&mut self, _g: &mut Graph<u8>, _pid: Value<u8>) -> Result<Value<u8>, E> {
        Ok(Value::Ext(1))
    }
    fn reduce(&mut self, _g: &mut Graph<u8>, _c: Value<u8>, _a: Value<u8>) -> Result<Value<u8>, E> {
        Ok(Value::Ext(2))
    }
    /// The object itself, so the stack holds what the disassembler assumes.
    fn build(&mut self, _g: &mut Graph<u8>, obj: Value<u8>, _s: Value<u8>) -> Result<Value<u8>, E> {
        Ok(obj)
    }
    fn new_obj(
        &mut self,
        _g: &mut Graph<u8>,
        _c: Value<u8>,
        _a: Value<u8>,
    ) -> Result<Value<u8>, E> {
        Ok(Value::Ext(3))
    }
}
