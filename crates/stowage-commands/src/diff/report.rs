//! What [`diff`](super::diff) gives: the [`DiffReport`], its JSON (`stowage
//! diff --json`'s object) and its lines, and each [`Difference`] with its
//! entry and its line.

use std::fmt;
use std::io::Write;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{json, Map, Value as Json};
use stowage::checkpoint::{dotted, PathKey};

use super::values::{value_words, Class};
use super::{Difference, Quantization, What};
use crate::listing::path_json;
use crate::values::float_json;

/// How two checkpoints differ: [`diff`](super::diff)'s result.
///
/// Serializes to the JSON object of `stowage diff --json`: `{"differences":
/// [...], "same": bool}`, and `"transfer"` when anything was fetched.
#[derive(Debug)]
pub struct DiffReport {
    pub(super) differences: Vec<Difference>,
    pub(super) transfer: Option<Json>,
}

impl DiffReport {
    /// Whether nothing differs.
    pub fn is_same(&self) -> bool {
        self.differences.is_empty()
    }

    /// Every difference: per tensor path in A's order, then tensor paths
    /// only in B, then the values, then the sharing structure.
    pub fn differences(&self) -> &[Difference] {
        &self.differences
    }

    /// Writes the lines `stowage diff` prints: one per difference, then
    /// `same`, `1 difference` or `N differences`.
    ///
    /// # Errors
    /// A failure to write.
    pub fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        for d in &self.differences {
            writeln!(out, "{d}")?;
        }
        match self.differences.len() {
            0 => writeln!(out, "same"),
            1 => writeln!(out, "1 difference"),
            n => writeln!(out, "{n} differences"),
        }
    }
}

impl Serialize for DiffReport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(None)?;
        map.serialize_key("differences")?;
        map.serialize_value(&Listed(&self.differences))?;
        map.serialize_entry("same", &self.is_same())?;
        if let Some(transfer) = &self.transfer {
            map.serialize_entry("transfer", transfer)?;
        }
        map.end()
    }
}

/// The differences, each entry made as it is written.
struct Listed<'d>(&'d [Difference]);

impl Serialize for Listed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(difference_json))
    }
}

fn quantization_json(q: &Quantization) -> Json {
    q.clone().unwrap_or(Json::Null)
}

pub(super) fn difference_json(d: &Difference) -> Json {
    let mut o = Map::new();
    o.insert("path".into(), path_json(&d.path));
    let kind = match &d.kind {
        What::MissingInA => "missing_in_a",
        What::MissingInB => "missing_in_b",
        What::DType { a, b } => {
            o.insert("a".into(), json!(a.name()));
            o.insert("b".into(), json!(b.name()));
            "dtype"
        }
        What::Shape { a, b } => {
            o.insert("a".into(), json!(a));
            o.insert("b".into(), json!(b));
            "shape"
        }
        What::Layout { a, b } => {
            o.insert("a".into(), json!(a));
            o.insert("b".into(), json!(b));
            "layout"
        }
        What::Values(v) => {
            o.insert("elements_differing".into(), json!(v.differing));
            o.insert("numel".into(), json!(v.numel));
            if let Some(m) = v.max_abs_diff {
                o.insert("max_abs_diff".into(), float_json(m));
            }
            if let Some(n) = v.outside_tolerance {
                o.insert("elements_outside_tolerance".into(), json!(n));
            }
            if let Some((qa, qb)) = &v.quantization {
                o.insert("quantization_a".into(), quantization_json(qa));
                o.insert("quantization_b".into(), quantization_json(qb));
            }
            "values"
        }
        What::Value { a, b } => {
            o.insert("a".into(), a.clone().unwrap_or(Json::Null));
            o.insert("b".into(), b.clone().unwrap_or(Json::Null));
            match (a, b) {
                (Some(_), None) => "missing_in_b",
                (None, Some(_)) => "missing_in_a",
                _ => "value",
            }
        }
        What::Object { a, b } => {
            let class = |c: &Option<Class>| match c {
                Some((module, name)) => json!({"module": module, "name": name}),
                None => Json::Null,
            };
            o.insert("a".into(), class(a));
            o.insert("b".into(), class(b));
            "object"
        }
        What::Sharing { side, paths, other } => {
            o.insert("shared_in".into(), json!(side.name().to_lowercase()));
            o.insert(
                "paths".into(),
                Json::Array(paths.iter().map(|p| path_json(p)).collect()),
            );
            let groups = other
                .iter()
                .map(|g| Json::Array(g.iter().map(|p| path_json(p)).collect()))
                .collect();
            o.insert("groups_in_other".into(), Json::Array(groups));
            "sharing"
        }
    };
    o.insert("kind".into(), json!(kind));
    Json::Object(o)
}

fn shape(s: &[usize]) -> String {
    format!("{s:?}")
}

fn list(paths: &[Vec<PathKey>]) -> String {
    paths
        .iter()
        .map(|p| dotted(p))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Difference {
    /// The tensor or value path (for sharing: the group's first path).
    pub fn path(&self) -> &[PathKey] {
        &self.path
    }

    /// Its kind, as the JSON names it: `missing_in_a`, `missing_in_b`,
    /// `dtype`, `shape`, `layout`, `values`, `value`, `object` or `sharing`.
    pub fn kind(&self) -> &'static str {
        match &self.kind {
            What::MissingInA => "missing_in_a",
            What::MissingInB => "missing_in_b",
            What::DType { .. } => "dtype",
            What::Shape { .. } => "shape",
            What::Layout { .. } => "layout",
            What::Values(_) => "values",
            What::Value { a, b } => match (a, b) {
                (Some(_), None) => "missing_in_b",
                (None, Some(_)) => "missing_in_a",
                _ => "value",
            },
            What::Object { .. } => "object",
            What::Sharing { .. } => "sharing",
        }
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&difference_line(self))
    }
}

pub(super) fn difference_line(d: &Difference) -> String {
    let path = dotted(&d.path);
    match &d.kind {
        What::MissingInA => format!("{path}: missing in A"),
        What::MissingInB => format!("{path}: missing in B"),
        What::DType { a, b } => format!("{path}: dtype {} in A, {} in B", a.name(), b.name()),
        What::Shape { a, b } => format!("{path}: shape {} in A, {} in B", shape(a), shape(b)),
        What::Layout { a, b } => format!("{path}: layout {a} in A, {b} in B"),
        What::Values(v) => {
            let mut line = format!(
                "{path}: values differ in {} of {} elements",
                v.differing, v.numel
            );
            if let Some(n) = v.outside_tolerance {
                line.push_str(&format!(", {n} outside the tolerance"));
            }
            if let Some(m) = v.max_abs_diff {
                line.push_str(&format!(", max abs diff {m:e}"));
            }
            if let Some((qa, qb)) = &v.quantization {
                let q = |q: &Quantization| match q {
                    None => "none".to_string(),
                    Some(j) => j.to_string(),
                };
                line.push_str(&format!("; quantization {} in A, {} in B", q(qa), q(qb)));
            }
            line
        }
        What::Value { a, b } => match (a, b) {
            (Some(a), None) => format!("{path}: missing in B ({})", value_words(a)),
            (None, Some(b)) => format!("{path}: missing in A ({})", value_words(b)),
            (a, b) => format!(
                "{path}: {} in A, {} in B",
                a.as_ref().map_or_else(String::new, value_words),
                b.as_ref().map_or_else(String::new, value_words)
            ),
        },
        What::Object { a, b } => {
            let class = |c: &Option<Class>| match c {
                Some((module, name)) => format!("an object {module}.{name}"),
                None => "a plain container".to_owned(),
            };
            format!("{path}: {} in A, {} in B", class(a), class(b))
        }
        What::Sharing { side, paths, other } => {
            let there = other
                .iter()
                .map(|g| {
                    if g.len() == 1 {
                        format!("{} alone", list(g))
                    } else {
                        format!("[{}]", list(g))
                    }
                })
                .collect::<Vec<_>>()
                .join("; ");
            format!(
                "{path}: sharing: {} share one storage in {} but not in {} (there: {there})",
                list(paths),
                side.name(),
                side.other().name()
            )
        }
    }
}
