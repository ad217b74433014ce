//! A value as a dict key, compared by Python's equality where a pickle's
//! keys need it: for counting (`collections.Counter`) and for a dict
//! rebuilt from a record that must not name one key twice (a safetensors
//! file's values tree).

use std::sync::Arc;

use crate::checkpoint::pickle::{NodeId, Value};

use super::object::Object;

/// Python's equality for the keys a pickle holds: `True == 1 == 1.0`,
/// `-0.0 == 0`, strings and bytes by content, big ints by value; tuples,
/// like every container, by identity (the pickle machine compares the
/// tuples a pickle builds by their items, as Python does; a Counter's
/// tuples and a values tree's do not, for now).
#[derive(PartialEq, Eq, Hash)]
pub(crate) enum DictKey {
    None,
    Int(i64),
    Float(u64),
    Big(Vec<u8>),
    Str(Arc<str>),
    Bytes(Arc<[u8]>),
    Node(NodeId),
}

impl DictKey {
    /// The key `v` is, or `None` where it equals nothing (a `NaN`, an
    /// object such as a tensor: equal only to itself, which no two values
    /// of a record are).
    pub(crate) fn of(v: &Value<Object>) -> Option<DictKey> {
        const TWO_63: f64 = 9_223_372_036_854_775_808.0;
        Some(match v {
            Value::None => DictKey::None,
            Value::Bool(b) => DictKey::Int(i64::from(*b)),
            Value::Int(i) => DictKey::Int(*i),
            Value::Float(f) if f.is_nan() => return None,
            // Integral floats in i64's range equal the int.
            Value::Float(f) if f.fract() == 0.0 && (-TWO_63..TWO_63).contains(f) => {
                DictKey::Int(*f as i64)
            }
            Value::Float(f) => DictKey::Float(f.to_bits()),
            // Its bytes, not its digits (quadratic time in their length).
            Value::BigInt(b) => DictKey::Big(b.to_signed_bytes_le()),
            Value::Str(s) => DictKey::Str(s.clone()),
            Value::Bytes(b) => DictKey::Bytes(b.clone()),
            Value::Node(id) => DictKey::Node(*id),
            Value::Ext(_) => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(a: Value<Object>, b: Value<Object>) -> bool {
        let (a, b) = (DictKey::of(&a), DictKey::of(&b));
        a.is_some() && a == b
    }

    #[test]
    fn keys_follow_python_equality() {
        assert!(same(Value::Bool(true), Value::Int(1)));
        assert!(same(Value::Float(1.0), Value::Int(1)));
        assert!(same(Value::Float(-0.0), Value::Int(0)));
        assert!(!same(Value::Float(0.5), Value::Int(0)));
        assert!(same(Value::str("w1"), Value::str("w1")));
        assert!(!same(Value::str("a"), Value::bytes(b"a")));
        assert!(!same(Value::Float(f64::NAN), Value::Float(f64::NAN)));
        let big = || Value::int(num_bigint::BigInt::from(1u64 << 63));
        assert!(same(big(), big()));
        assert!(!same(Value::Node(NodeId(1)), Value::Node(NodeId(2))));
    }
}
