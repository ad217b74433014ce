//! `stowage diff A B [--json]`: two checkpoints compared tensor by tensor, by
//! path, as the CLI contract specifies (`docs/cli-contract.md`).
//!
//! For every path: present on both sides, same dtype, same shape, the same
//! logical values bit for bit (with the lazy conjugation and negation bits
//! applied, as `inspect` hashes them), and the same quantization parameters.
//! Across paths: the same sharing structure, that is the same partition of the
//! paths present on both sides into groups viewing one storage.
//!
//! Exit 0 when nothing differs, 1 when something does (one line per
//! difference, or one JSON object with `--json`), 2 when either file cannot be
//! read.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Map, Value as Json};
use stowage::serialize::{dotted, PathKey, TensorObject};
use stowage::{Checkpoint, DType, Kind, Scalar};

use crate::inspect::{logical_bytes, path_json, rows};
use crate::Failure;

/// Arguments of `diff`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The first checkpoint ("A")
    a: PathBuf,
    /// The second checkpoint ("B")
    b: PathBuf,
    /// Print one JSON object `{"same": bool, "differences": [...]}` instead of lines
    #[arg(long)]
    json: bool,
}

/// One difference between the two checkpoints.
#[derive(Debug)]
struct Difference {
    /// The tensor path (for sharing: the group's first path).
    path: Vec<PathKey>,
    /// What differs.
    kind: What,
}

#[derive(Debug)]
enum What {
    MissingInA,
    MissingInB,
    DType {
        a: DType,
        b: DType,
    },
    Shape {
        a: Vec<usize>,
        b: Vec<usize>,
    },
    Values(Values),
    /// `paths` share one storage in `side` but are not grouped that way in
    /// the other file, where they fall into `other`.
    Sharing {
        side: Side,
        paths: Vec<Vec<PathKey>>,
        other: Vec<Vec<Vec<PathKey>>>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    A,
    B,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::A => "A",
            Side::B => "B",
        }
    }
    fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// A quantized tensor's `(scale, zero_point)`, `None` for others.
type Quantization = Option<(f64, i64)>;

/// How the values of two tensors of one dtype and shape differ.
#[derive(Debug, Default)]
struct Values {
    /// Elements whose bytes differ.
    differing: usize,
    /// Elements in all.
    numel: usize,
    /// For float and complex dtypes: the largest `|a - b|`.
    max_abs_diff: Option<f64>,
    /// Quantization `(scale, zero_point)` on each side, when they differ.
    quantization: Option<(Quantization, Quantization)>,
}

/// Runs `diff`.
pub fn run(args: Args, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let a = stowage::load(&args.a).map_err(Failure::input)?;
    let b = stowage::load(&args.b).map_err(Failure::input)?;
    let differences = compare(&a, &b)?;
    if args.json {
        let list: Vec<Json> = differences.iter().map(difference_json).collect();
        writeln!(
            out,
            "{}",
            json!({"same": differences.is_empty(), "differences": list})
        )?;
    } else {
        for d in &differences {
            writeln!(out, "{}", difference_line(d))?;
        }
        match differences.len() {
            0 => writeln!(out, "same")?,
            1 => writeln!(out, "1 difference")?,
            n => writeln!(out, "{n} differences")?,
        }
    }
    Ok(if differences.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Every difference between `a` and `b`: per path in A's order, then paths
/// only in B, then the sharing structure.
fn compare(a: &Checkpoint, b: &Checkpoint) -> Result<Vec<Difference>, Failure> {
    let rows_a = rows(a)?;
    let rows_b = rows(b)?;
    // A path can only repeat when dict keys of other types print alike; the first one counts.
    let mut by_path_b: HashMap<&[PathKey], usize> = HashMap::new();
    for (i, r) in rows_b.iter().enumerate() {
        by_path_b.entry(r.path.as_slice()).or_insert(i);
    }
    let mut by_path_a: HashMap<&[PathKey], usize> = HashMap::new();
    for (i, r) in rows_a.iter().enumerate() {
        by_path_a.entry(r.path.as_slice()).or_insert(i);
    }

    let mut differences = Vec::new();
    // Paths on both sides, in A's order, with their storage key on each side.
    let mut common: Vec<(&[PathKey], &str, &str)> = Vec::new();
    for (i, ra) in rows_a.iter().enumerate() {
        if by_path_a[ra.path.as_slice()] != i {
            continue;
        }
        let Some(&j) = by_path_b.get(ra.path.as_slice()) else {
            differences.push(Difference {
                path: ra.path.clone(),
                kind: What::MissingInB,
            });
            continue;
        };
        let rb = &rows_b[j];
        common.push((&ra.path, &ra.key, &rb.key));
        if let Some(kind) = compare_tensors(&ra.path, ra.object, rb.object)? {
            differences.push(Difference {
                path: ra.path.clone(),
                kind,
            });
        }
    }
    for (j, rb) in rows_b.iter().enumerate() {
        if by_path_b[rb.path.as_slice()] == j && !by_path_a.contains_key(rb.path.as_slice()) {
            differences.push(Difference {
                path: rb.path.clone(),
                kind: What::MissingInA,
            });
        }
    }
    differences.extend(sharing(&common));
    Ok(differences)
}

/// What differs between the tensors at one path, if anything: dtype, else
/// shape, else values.
fn compare_tensors(
    path: &[PathKey],
    a: &TensorObject,
    b: &TensorObject,
) -> Result<Option<What>, Failure> {
    let (ta, tb) = (&a.tensor, &b.tensor);
    if ta.dtype() != tb.dtype() {
        return Ok(Some(What::DType {
            a: ta.dtype(),
            b: tb.dtype(),
        }));
    }
    if ta.shape() != tb.shape() {
        return Ok(Some(What::Shape {
            a: ta.shape().to_vec(),
            b: tb.shape().to_vec(),
        }));
    }
    let at = |e| Failure::at(path, e);
    let la = a.resolved().map_err(at)?;
    let lb = b.resolved().map_err(at)?;
    let bytes_a = logical_bytes(&la).map_err(at)?;
    let bytes_b = logical_bytes(&lb).map_err(at)?;
    let quantization =
        (a.quantization != b.quantization).then_some((a.quantization, b.quantization));
    if bytes_a == bytes_b && quantization.is_none() {
        return Ok(None);
    }
    let size = ta.element_size().max(1);
    let differing = bytes_a
        .chunks(size)
        .zip(bytes_b.chunks(size))
        .filter(|(x, y)| x != y)
        .count();
    let dtype = ta.dtype();
    let max_abs_diff = if differing > 0
        && matches!(dtype.kind(), Kind::Float | Kind::Complex)
        && dtype.has_scalar_values()
    {
        // A dtype whose values cannot be read leaves the maximum out rather than failing.
        match (la.scalars(), lb.scalars()) {
            (Ok(x), Ok(y)) => Some(max_abs_diff(&x, &y)),
            _ => None,
        }
    } else {
        None
    };
    Ok(Some(What::Values(Values {
        differing,
        numel: ta.numel(),
        max_abs_diff,
        quantization,
    })))
}

/// The largest `|a - b|` over the elements (complex: the modulus): 0 where
/// both are the same (NaN against NaN, and equal infinities, included),
/// infinite where one side is infinite and the other not, NaN where only one
/// side is NaN.
fn max_abs_diff(a: &[Scalar], b: &[Scalar]) -> f64 {
    fn part(p: f64, q: f64) -> f64 {
        match (p.is_nan(), q.is_nan()) {
            (true, true) => 0.0,
            (true, false) | (false, true) => f64::NAN,
            _ if p == q => 0.0,
            _ => (p - q).abs(),
        }
    }
    let mut max = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (x.to_complex(), y.to_complex());
        let d = part(x.re, y.re).hypot(part(x.im, y.im));
        if d.is_nan() || max.is_nan() {
            max = f64::NAN;
        } else {
            max = max.max(d);
        }
    }
    max
}

/// Differences in the partition of the common paths by storage: every group
/// of two or more paths sharing a storage on one side that is not a group
/// on the other side.
fn sharing(common: &[(&[PathKey], &str, &str)]) -> Vec<Difference> {
    let groups = |side: Side| -> Vec<Vec<usize>> {
        let mut order: Vec<&str> = Vec::new();
        let mut members: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, (_, ka, kb)) in common.iter().enumerate() {
            let key = if side == Side::A { *ka } else { *kb };
            let entry = members.entry(key).or_default();
            if entry.is_empty() {
                order.push(key);
            }
            entry.push(i);
        }
        order
            .into_iter()
            .map(|k| members.remove(k).unwrap_or_default())
            .collect()
    };
    let (groups_a, groups_b) = (groups(Side::A), groups(Side::B));
    let mut differences = Vec::new();
    for (side, mine, theirs) in [
        (Side::A, &groups_a, &groups_b),
        (Side::B, &groups_b, &groups_a),
    ] {
        let theirs_set: HashSet<&[usize]> = theirs.iter().map(Vec::as_slice).collect();
        let mut group_of = vec![0usize; common.len()];
        for (g, members) in theirs.iter().enumerate() {
            for &i in members {
                group_of[i] = g;
            }
        }
        for group in mine
            .iter()
            .filter(|g| g.len() > 1 && !theirs_set.contains(g.as_slice()))
        {
            // How the group's paths fall apart (or join others) on the other side.
            let mut other: Vec<Vec<Vec<PathKey>>> = Vec::new();
            let mut seen: HashSet<usize> = HashSet::new();
            for &i in group {
                let g = group_of[i];
                if seen.insert(g) {
                    other.push(theirs[g].iter().map(|&j| common[j].0.to_vec()).collect());
                }
            }
            differences.push(Difference {
                path: common[group[0]].0.to_vec(),
                kind: What::Sharing {
                    side,
                    paths: group.iter().map(|&i| common[i].0.to_vec()).collect(),
                    other,
                },
            });
        }
    }
    differences
}

/// A float as JSON: a number when finite, else `"inf"`, `"-inf"` or `"nan"`.
fn float_json(v: f64) -> Json {
    if v.is_finite() {
        json!(v)
    } else if v.is_nan() {
        json!("nan")
    } else if v > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}

fn quantization_json(q: Quantization) -> Json {
    match q {
        None => Json::Null,
        Some((scale, zero_point)) => json!({"scale": float_json(scale), "zero_point": zero_point}),
    }
}

fn difference_json(d: &Difference) -> Json {
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
        What::Values(v) => {
            o.insert("elements_differing".into(), json!(v.differing));
            o.insert("numel".into(), json!(v.numel));
            if let Some(m) = v.max_abs_diff {
                o.insert("max_abs_diff".into(), float_json(m));
            }
            if let Some((qa, qb)) = v.quantization {
                o.insert("quantization_a".into(), quantization_json(qa));
                o.insert("quantization_b".into(), quantization_json(qb));
            }
            "values"
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

fn difference_line(d: &Difference) -> String {
    let path = dotted(&d.path);
    match &d.kind {
        What::MissingInA => format!("{path}: missing in A"),
        What::MissingInB => format!("{path}: missing in B"),
        What::DType { a, b } => format!("{path}: dtype {} in A, {} in B", a.name(), b.name()),
        What::Shape { a, b } => format!("{path}: shape {} in A, {} in B", shape(a), shape(b)),
        What::Values(v) => {
            let mut line = format!(
                "{path}: values differ in {} of {} elements",
                v.differing, v.numel
            );
            if let Some(m) = v.max_abs_diff {
                line.push_str(&format!(", max abs diff {m:e}"));
            }
            if let Some((qa, qb)) = v.quantization {
                let q = |q: Quantization| match q {
                    None => "none".to_string(),
                    Some((s, z)) => format!("scale {s}, zero point {z}"),
                };
                line.push_str(&format!("; quantization {} in A, {} in B", q(qa), q(qb)));
            }
            line
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

#[cfg(test)]
mod tests {
    use super::*;
    use stowage::Tensor;

    fn k(s: &str) -> Vec<PathKey> {
        vec![PathKey::Key(s.into())]
    }

    #[test]
    fn identical_checkpoints_have_no_differences() {
        let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).unwrap();
        let a = Checkpoint::from_state_dict([("w", t.clone()), ("v", t.clone())]);
        assert!(compare(&a, &a).unwrap().is_empty());
    }

    #[test]
    fn each_kind_is_found() {
        let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).unwrap();
        let w2 = Tensor::from_slice(&[1.0f32, 2.5, 3.0]).unwrap();
        let s = Tensor::from_slice(&[1i64, 2]).unwrap();
        let a = Checkpoint::from_state_dict([
            ("w", w.clone()),
            ("x", w.clone()),
            ("d", Tensor::from_slice(&[1.0f32]).unwrap()),
            ("s", s.clone()),
            ("only_a", s.clone()),
        ]);
        let b = Checkpoint::from_state_dict([
            ("w", w2),
            ("x", w.deep_clone().unwrap()),
            ("d", Tensor::from_slice(&[1.0f64]).unwrap()),
            ("s", s.reshape(&[2, 1]).unwrap()),
            ("only_b", s),
        ]);
        let diffs = compare(&a, &b).unwrap();
        let lines: Vec<String> = diffs.iter().map(difference_line).collect();
        assert_eq!(
            lines,
            [
                "w: values differ in 1 of 3 elements, max abs diff 5e-1",
                "d: dtype float32 in A, float64 in B",
                "s: shape [2] in A, [2, 1] in B",
                "only_a: missing in B",
                "only_b: missing in A",
                "w: sharing: w, x share one storage in A but not in B (there: w alone; x alone)",
            ]
        );
        let j = difference_json(&diffs[0]);
        assert_eq!(j["kind"], "values");
        assert_eq!(j["path"], json!(["w"]));
        assert_eq!(j["max_abs_diff"], json!(0.5));
        assert_eq!(diffs[5].path, k("w"));
    }

    #[test]
    fn nan_and_infinities() {
        let f = |v: &[f64]| v.iter().map(|&x| Scalar::Float(x)).collect::<Vec<_>>();
        assert_eq!(
            max_abs_diff(&f(&[f64::NAN, 1.0]), &f(&[f64::NAN, 3.0])),
            2.0
        );
        assert!(max_abs_diff(&f(&[f64::NAN]), &f(&[1.0])).is_nan());
        assert_eq!(
            max_abs_diff(&f(&[f64::INFINITY]), &f(&[f64::INFINITY])),
            0.0
        );
        assert_eq!(
            max_abs_diff(&f(&[f64::INFINITY]), &f(&[1.0])),
            f64::INFINITY
        );
        assert_eq!(
            max_abs_diff(&f(&[f64::INFINITY]), &f(&[f64::NEG_INFINITY])),
            f64::INFINITY
        );
        assert_eq!(float_json(f64::NAN), json!("nan"));
    }
}
