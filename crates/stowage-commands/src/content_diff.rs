//! [`content_diff`]: what two checkpoints share by content, whatever their
//! formats and names (`stowage diff --content A B`): a fine-tune against
//! its base, a `.pt` against its DCP, two steps of one run. The measure
//! that matters for deduplicating storage is the bytes of B whose content
//! A already holds.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::str::FromStr;

use serde::Serialize;
use stowage::DType;

use crate::manifest::{manifest, Manifest, ManifestOptions, TensorEntry};
use crate::{CommandError, Context};

/// Tensors of equal content under different names in A and B.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Moved {
    /// The names in A.
    pub a: Vec<String>,
    /// The names in B.
    pub b: Vec<String>,
    /// The bytes of one copy.
    pub nbytes: u64,
    /// The digest.
    pub sha256: String,
}

/// A name both hold, with different content.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Changed {
    /// A's entry.
    pub a: TensorEntry,
    /// B's entry.
    pub b: TensorEntry,
    /// The name.
    pub name: String,
}

/// What two checkpoints share by content; serializes to the JSON of
/// `stowage diff --content --json` (members in alphabetical order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ContentDiff {
    /// Distinct content of A, in bytes (a tensor held twice counts once).
    pub a_bytes: u64,
    /// Distinct content of B, in bytes.
    pub b_bytes: u64,
    /// Names both hold with different content.
    pub changed: Vec<Changed>,
    /// Names both hold with equal content.
    pub identical: usize,
    /// Equal content under other names.
    pub moved: Vec<Moved>,
    /// Names only A holds, whose content B lacks too.
    pub only_in_a: Vec<TensorEntry>,
    /// Names only B holds, whose content A lacks too.
    pub only_in_b: Vec<TensorEntry>,
    /// The bytes of B's distinct content that A holds too: what storing B
    /// beside A by content costs nothing for.
    pub shared_bytes: u64,
}

impl ContentDiff {
    /// Whether A and B hold the same tensors under the same names.
    pub fn is_same(&self) -> bool {
        self.changed.is_empty()
            && self.moved.is_empty()
            && self.only_in_a.is_empty()
            && self.only_in_b.is_empty()
    }

    /// Writes the lines `stowage diff --content` prints: each change, each
    /// content moved to another name, each tensor only on one side, then
    /// the summary `N identical, …; B shares S of its T bytes with A (P%)`.
    ///
    /// # Errors
    /// A failure to write.
    pub fn write_text(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let what = |e: &TensorEntry| format!("{} {:?} {}", e.dtype, e.shape, &e.sha256[..12]);
        for c in &self.changed {
            writeln!(
                out,
                "{}: changed: {} in A, {} in B",
                c.name,
                what(&c.a),
                what(&c.b)
            )?;
        }
        for m in &self.moved {
            writeln!(
                out,
                "{}: the same content as {} in A ({})",
                m.b.join(", "),
                m.a.join(", "),
                crate::human(m.nbytes)
            )?;
        }
        for e in &self.only_in_a {
            writeln!(out, "{}: only in A ({})", e.name, what(e))?;
        }
        for e in &self.only_in_b {
            writeln!(out, "{}: only in B ({})", e.name, what(e))?;
        }
        let percent = if self.b_bytes == 0 {
            100.0
        } else {
            self.shared_bytes as f64 * 100.0 / self.b_bytes as f64
        };
        writeln!(
            out,
            "{} identical, {} changed, {} moved, {} only in A, {} only in B; B shares {} of its {} with A ({percent:.1}%)",
            self.identical,
            self.changed.len(),
            self.moved.len(),
            self.only_in_a.len(),
            self.only_in_b.len(),
            crate::human(self.shared_bytes),
            crate::human(self.b_bytes),
        )
    }
}

/// The bytes of a tensor of `dtype` and `shape` (0 for a dtype this build
/// does not know).
fn nbytes(e: &TensorEntry) -> u64 {
    let size = DType::from_str(&e.dtype).map_or(0, |d| d.size() as u64);
    e.shape
        .iter()
        .fold(size, |n, &d| n.saturating_mul(d as u64))
}

/// Compares the checkpoints at `a` and `b` by content: their manifests,
/// each byte of each read once and hashed on every core.
///
/// # Errors
/// As [`manifest`], for either.
pub fn content_diff(a: &Path, b: &Path, cx: &Context) -> Result<ContentDiff, CommandError> {
    let options = ManifestOptions::default();
    Ok(compare(
        &manifest(a, cx, &options)?,
        &manifest(b, cx, &options)?,
    ))
}

/// How `b` differs from `a` by content (see [`ContentDiff`]).
pub fn compare(a: &Manifest, b: &Manifest) -> ContentDiff {
    // A tensor's content: its digest, dtype and shape (equal content is
    // equal elements of one dtype in one shape).
    let content = |e: &TensorEntry| -> (String, String, Vec<usize>) {
        (e.sha256.clone(), e.dtype.clone(), e.shape.clone())
    };
    let by_name = |m: &Manifest| -> BTreeMap<String, TensorEntry> {
        m.tensors()
            .iter()
            .map(|e| (e.name.clone(), e.clone()))
            .collect()
    };
    let (an, bn) = (by_name(a), by_name(b));
    let names_of = |m: &Manifest| {
        let mut map: BTreeMap<(String, String, Vec<usize>), BTreeSet<String>> = BTreeMap::new();
        for e in m.tensors() {
            map.entry(content(e)).or_default().insert(e.name.clone());
        }
        map
    };
    let (ac, bc) = (names_of(a), names_of(b));
    let mut diff = ContentDiff {
        a_bytes: ac.keys().map(|(s, d, sh)| nbytes(&entry(s, d, sh))).sum(),
        b_bytes: bc.keys().map(|(s, d, sh)| nbytes(&entry(s, d, sh))).sum(),
        changed: Vec::new(),
        identical: 0,
        moved: Vec::new(),
        only_in_a: Vec::new(),
        only_in_b: Vec::new(),
        shared_bytes: 0,
    };
    for (name, ea) in &an {
        match bn.get(name) {
            Some(eb) if content(ea) == content(eb) => diff.identical += 1,
            Some(eb) => diff.changed.push(Changed {
                a: ea.clone(),
                b: eb.clone(),
                name: name.clone(),
            }),
            None if !bc.contains_key(&content(ea)) => diff.only_in_a.push(ea.clone()),
            None => {}
        }
    }
    for (name, eb) in &bn {
        if !an.contains_key(name) && !ac.contains_key(&content(eb)) {
            diff.only_in_b.push(eb.clone());
        }
    }
    for (key, b_names) in &bc {
        let Some(a_names) = ac.get(key) else { continue };
        let e = entry(&key.0, &key.1, &key.2);
        diff.shared_bytes += nbytes(&e);
        if a_names != b_names {
            diff.moved.push(Moved {
                a: a_names.iter().cloned().collect(),
                b: b_names.iter().cloned().collect(),
                nbytes: nbytes(&e),
                sha256: key.0.clone(),
            });
        }
    }
    diff
}

/// An entry of no name with this content.
fn entry(sha256: &str, dtype: &str, shape: &[usize]) -> TensorEntry {
    TensorEntry {
        dtype: dtype.to_owned(),
        name: String::new(),
        shape: shape.to_vec(),
        sha256: sha256.to_owned(),
    }
}
