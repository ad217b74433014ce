//! The non-tensor half of `diff`: every leaf (`inspect --json`'s `"values"`)
//! compared by path, floats within the tolerance when one is given; and the
//! classes of the inert objects (`inspect --json`'s `"objects"`), by path.

use std::collections::HashMap;

use serde_json::{json, Value as Json};
use stowage::checkpoint::{dotted, PathKey, ValueKind, ValueRef};
use stowage::Checkpoint;

use super::{Difference, Tolerance, What};
use crate::values::typed_json;

/// Where each tensor path's row is.
pub(super) type TensorIndex<'r> = HashMap<&'r [PathKey], usize>;

/// Differences between the non-tensor leaves: in A's order, then those only in B.
pub(super) fn compare_values(
    leaves_a: &[ValueRef<'_>],
    leaves_b: &[ValueRef<'_>],
    (tensors_a, tensors_b): (&TensorIndex<'_>, &TensorIndex<'_>),
    tolerance: Option<Tolerance>,
) -> Vec<Difference> {
    let tensor = || json!({"type": "tensor", "value": null});
    let index = |leaves: &[ValueRef<'_>]| {
        let mut m: HashMap<Vec<PathKey>, usize> = HashMap::new();
        for (i, l) in leaves.iter().enumerate() {
            m.entry(l.path().to_vec()).or_insert(i);
        }
        m
    };
    let (index_a, mut index_b) = (index(leaves_a), index(leaves_b));
    // As for tensors: a path that matches nothing is matched by its dotted name.
    let mut dotted_b: HashMap<String, usize> = HashMap::new();
    for (j, lb) in leaves_b.iter().enumerate() {
        dotted_b.entry(dotted(lb.path())).or_insert(j);
    }
    let mut aliased_b = std::collections::HashSet::new();
    for la in leaves_a {
        if index_b.contains_key(la.path()) {
            continue;
        }
        if let Some(&j) = dotted_b.get(&dotted(la.path())) {
            if !index_a.contains_key(leaves_b[j].path()) && aliased_b.insert(j) {
                index_b.insert(la.path().to_vec(), j);
            }
        }
    }
    let mut differences = Vec::new();
    for (i, la) in leaves_a.iter().enumerate() {
        if index_a[la.path()] != i {
            continue;
        }
        let ja = Json::Object(typed_json(la));
        let b = match index_b.get(la.path()) {
            Some(&j) => {
                let lb = &leaves_b[j];
                // Two inert objects: their classes, compared by `compare_objects`.
                let objects = la.kind() == ValueKind::Object && lb.kind() == ValueKind::Object;
                if objects || same_value(la, lb, tolerance) {
                    continue;
                }
                Some(Json::Object(typed_json(lb)))
            }
            None if tensors_b.contains_key(la.path()) => Some(tensor()),
            None => None,
        };
        differences.push(Difference {
            path: la.path().to_vec(),
            kind: What::Value { a: Some(ja), b },
        });
    }
    for (j, lb) in leaves_b.iter().enumerate() {
        if index_a.contains_key(lb.path()) || aliased_b.contains(&j) {
            continue;
        }
        let a = tensors_a.contains_key(lb.path()).then(tensor);
        differences.push(Difference {
            path: lb.path().to_vec(),
            kind: What::Value {
                a,
                b: Some(Json::Object(typed_json(lb))),
            },
        });
    }
    differences
}

/// An inert object's class, as `"objects"` lists it.
pub(super) type Class = (String, String);

/// Differences of kind `object`: a path holding inert objects of different
/// classes on the two sides, or an inert object on one side and a plain
/// container on the other (a leaf there is a `value` difference, and a
/// missing path the object's contents' `missing_in_*`).
///
/// # Errors
/// A structure shared too often to list its objects.
pub(super) fn compare_objects(
    a: &Checkpoint,
    b: &Checkpoint,
) -> Result<Vec<Difference>, stowage::Error> {
    let classes = |c: &Checkpoint| -> Result<Vec<(Vec<PathKey>, Class)>, stowage::Error> {
        Ok(c.root_value()
            .objects()?
            .iter()
            .map(|o| {
                let (m, n) = o.class().unwrap_or_default();
                (o.path().to_vec(), (m.to_owned(), n.to_owned()))
            })
            .collect())
    };
    let (oa, ob) = (classes(a)?, classes(b)?);
    let index = |os: &[(Vec<PathKey>, Class)]| -> HashMap<Vec<PathKey>, Class> {
        let mut m = HashMap::new();
        for (p, c) in os {
            m.entry(p.clone()).or_insert_with(|| c.clone());
        }
        m
    };
    let (ia, ib) = (index(&oa), index(&ob));
    // The other side holds a container (not a leaf, not nothing) at `path`.
    let container = |c: &Checkpoint, path: &[PathKey]| {
        c.root_value().get_path(path).is_ok_and(|v| {
            matches!(
                v.kind(),
                ValueKind::Dict
                    | ValueKind::List
                    | ValueKind::Tuple
                    | ValueKind::Set
                    | ValueKind::FrozenSet
            )
        })
    };
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (path, class) in &oa {
        if !seen.insert(path.clone()) {
            continue;
        }
        let other = match ib.get(path) {
            Some(theirs) if theirs == class => continue,
            Some(theirs) => Some(theirs.clone()),
            None if container(b, path) => None,
            None => continue,
        };
        out.push(Difference {
            path: path.clone(),
            kind: What::Object {
                a: Some(class.clone()),
                b: other,
            },
        });
    }
    for (path, class) in &ob {
        if ia.contains_key(path) || !seen.insert(path.clone()) || !container(a, path) {
            continue;
        }
        out.push(Difference {
            path: path.clone(),
            kind: What::Object {
                a: None,
                b: Some(class.clone()),
            },
        });
    }
    Ok(out)
}

/// Whether two leaves are the same: same type and value, floats (and complex
/// numbers) within the tolerance when there is one.
fn same_value(a: &ValueRef<'_>, b: &ValueRef<'_>, tolerance: Option<Tolerance>) -> bool {
    if typed_json(a) == typed_json(b) {
        return true;
    }
    let Some(tol) = tolerance else { return false };
    let number = |v: &ValueRef<'_>| match v.kind() {
        ValueKind::Float => v.as_f64().ok().map(|f| num_complex::Complex64::new(f, 0.0)),
        ValueKind::Complex => v.as_complex().ok(),
        _ => None,
    };
    match (a.kind() == b.kind(), number(a), number(b)) {
        (true, Some(x), Some(y)) => tol.close(x, y),
        _ => false,
    }
}

/// `int 3`, `str "gpt"`, `tensor`.
pub(super) fn value_words(v: &Json) -> String {
    match (&v["type"], &v["value"]) {
        (Json::String(t), Json::Null) if t == "tensor" => "tensor".into(),
        (Json::String(t), value) => format!("{t} {value}"),
        (_, value) => value.to_string(),
    }
}
