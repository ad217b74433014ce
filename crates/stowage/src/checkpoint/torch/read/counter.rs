//! `collections.Counter(arg)`, as Python builds it: from a mapping, a copy of
//! its items (what `Counter.__reduce__` pickles: `Counter({'a': 2})`); from
//! any other iterable, each element counted (`Counter("abca")`, `Counter([1,
//! True])` is `{1: 2}`); from nothing, empty.

use crate::error::FormatError;
use std::collections::HashMap;

use crate::checkpoint::pickle::{Graph, Node, NodeId, Value};
use crate::checkpoint::value::dict_key::DictKey;
use crate::checkpoint::value::graph::Object;
use crate::{Error, Result};

/// The dict node of `Counter(*args)`.
pub(super) fn counter(graph: &mut Graph<Object>, args: &[Value<Object>]) -> Result<NodeId> {
    let bad = |found: String| {
        Error::Format(FormatError::BadObject {
            context: "collections.Counter",
            expected: "a mapping or an iterable of hashable values",
            found,
        })
    };
    if args.len() > 1 {
        return Err(bad(format!("{} arguments", args.len())));
    }
    let items: Vec<(Value<Object>, Value<Object>)> = match args.first() {
        None | Some(Value::None) => Vec::new(),
        Some(Value::Node(id)) => match graph.try_get(*id) {
            Some(Node::Dict(d)) => d.clone(),
            Some(Node::Tuple(v) | Node::List(v) | Node::Set(v) | Node::FrozenSet(v)) => {
                count(v.iter().cloned())?
            }
            Some(Node::ByteArray(b)) => count(b.iter().map(|&b| Value::Int(i64::from(b))))?,
            None => return Err(bad("a node the pickle never made".into())),
        },
        Some(Value::Str(s)) => count(s.chars().map(|c| Value::str(c.encode_utf8(&mut [0; 4]))))?,
        Some(Value::Bytes(b)) => count(b.iter().map(|&b| Value::Int(i64::from(b))))?,
        Some(other) => return Err(bad(kind_name(other).to_owned())),
    };
    Ok(graph.dict(items))
}

/// Each element with the number of times it occurs, in order of first
/// occurrence.
fn count(
    values: impl Iterator<Item = Value<Object>>,
) -> Result<Vec<(Value<Object>, Value<Object>)>> {
    let mut at: HashMap<DictKey, usize> = HashMap::new();
    let mut out: Vec<(Value<Object>, i64)> = Vec::new();
    for v in values {
        let Some(k) = DictKey::of(&v) else {
            return Err(Error::Format(FormatError::BadObject {
                context: "collections.Counter",
                expected: "hashable values to count",
                found: format!("{} (unhashable here)", kind_name(&v)),
            }));
        };
        match at.get(&k) {
            Some(&i) => out[i].1 += 1,
            None => {
                at.insert(k, out.len());
                out.push((v, 1));
            }
        }
    }
    Ok(out.into_iter().map(|(k, n)| (k, Value::Int(n))).collect())
}

fn kind_name(v: &Value<Object>) -> &'static str {
    match v {
        Value::None => "None",
        Value::Bool(_) => "a bool",
        Value::Int(_) | Value::BigInt(_) => "an int",
        Value::Float(_) => "a float",
        Value::Str(_) => "a str",
        Value::Bytes(_) => "bytes",
        Value::Node(_) => "a container",
        Value::Ext(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(g: &Graph<Object>, id: NodeId) -> Vec<(String, i64)> {
        match g.try_get(id) {
            Some(Node::Dict(d)) => d
                .iter()
                .map(|(k, v)| {
                    let k = match k {
                        Value::Str(s) => s.to_string(),
                        Value::Int(i) => i.to_string(),
                        Value::Bool(b) => b.to_string(),
                        _ => "?".into(),
                    };
                    let Value::Int(n) = v else { panic!("a count") };
                    (k, *n)
                })
                .collect(),
            _ => panic!("a dict"),
        }
    }

    #[test]
    fn copies_a_mapping_and_counts_an_iterable() {
        let mut g: Graph<Object> = Graph::new();
        let d = g.dict(vec![
            (Value::str("a"), Value::Int(2)),
            (Value::str("b"), Value::Int(-1)),
        ]);
        let c = counter(&mut g, &[Value::Node(d)]).unwrap();
        assert_eq!(items(&g, c), [("a".into(), 2), ("b".into(), -1)]);
        let c = counter(&mut g, &[Value::str("abca")]).unwrap();
        assert_eq!(
            items(&g, c),
            [("a".into(), 2), ("b".into(), 1), ("c".into(), 1)]
        );
        let l = g.list(vec![
            Value::Int(1),
            Value::Bool(true),
            Value::Float(1.0),
            Value::Int(2),
        ]);
        let c = counter(&mut g, &[Value::Node(l)]).unwrap();
        assert_eq!(items(&g, c), [("1".into(), 3), ("2".into(), 1)]);
        let c = counter(&mut g, &[]).unwrap();
        assert!(items(&g, c).is_empty());
        assert!(counter(&mut g, &[Value::Int(3)]).is_err());
        let l = g.list(vec![Value::Float(f64::NAN)]);
        assert!(counter(&mut g, &[Value::Node(l)]).is_err());
    }
}
