//! `diff`: two checkpoints compared tensor by tensor and value by value, by
//! path, as the CLI contract specifies for `stowage diff`
//! (`docs/cli-contract.md`): [`diff`] gives a [`DiffReport`], which
//! serializes to `diff --json`'s object and writes its lines.
//!
//! For every tensor path: present on both sides, same dtype, same shape, the
//! same logical values (with the lazy conjugation and negation bits applied,
//! as `inspect` hashes them), and the same quantization parameters. Values
//! are bit for bit by default; with a tolerance (`--atol`/`--rtol`), floating and complex
//! elements match when bit-identical or when `|a - b| <= atol + rtol * |b|`
//! (`torch.allclose`; NaN matches only a bit-identical NaN). Across paths:
//! the same sharing structure, that is the same partition of the paths
//! present on both sides into groups viewing one storage
//! ([`DiffOptions::with_ignore_sharing`] leaves it out).
//!
//! For every non-tensor leaf (`inspect --json`'s `"values"`): present on both
//! sides with the same type and value; floats within the tolerance when one
//! is given. A path holding a tensor on one side and a value on the other is
//! one difference of kind `value`.
//!
//! Both files are loaded lazily and compared window by window, so memory
//! does not grow with their size.
//!
//! The JSON's kinds: `missing_in_a`, `missing_in_b`, `dtype`, `shape`, `values`
//! (`elements_differing`, `numel`, `max_abs_diff` for floats,
//! `elements_outside_tolerance` with a tolerance), `sharing`, and `value` for
//! a non-tensor value, with `a` and `b` each `{"type", "value"}` as `inspect
//! --json` lists values (`{"type": "tensor", "value": null}` for a tensor); a
//! value present on one side only is `missing_in_a`/`missing_in_b` with the
//! other side `null`; and `object` for inert objects of different classes at
//! one path (or an object against a plain container), `a` and `b` each
//! `{"module", "name"}` or `null`.
//!
//! The command line exits 0 when nothing differs, 1 when something does
//! (one line per difference, or one JSON object with `--json`), 2 when
//! either file cannot be read.

mod report;
mod values;

pub use self::report::DiffReport;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::{json, Value as Json};
use stowage::checkpoint::{dotted, PathKey, TensorObject, ValueRef};
use stowage::layout::Layout;
use stowage::{Checkpoint, DType, Kind, Scalar, Tensor, UntypedStorage};

use self::values::{compare_objects, compare_values, Class};
use crate::data::Reader;
use crate::listing::rows;
use crate::values::float_json;
use crate::{CommandError, Context};

/// How close two floats must be: `|a - b| <= atol + rtol * |b|`.
#[derive(Clone, Copy, Debug)]
struct Tolerance {
    atol: f64,
    rtol: f64,
}

impl Tolerance {
    fn close(self, a: num_complex::Complex64, b: num_complex::Complex64) -> bool {
        (a - b).norm() <= self.atol + self.rtol * b.norm()
    }
}

/// What [`diff`] compares.
#[derive(Clone, Copy, Debug, Default)]
#[non_exhaustive]
pub struct DiffOptions {
    /// `None`: bit for bit.
    tolerance: Option<Tolerance>,
    ignore_sharing: bool,
}

impl DiffOptions {
    /// Floating and complex elements and values match when bit-identical
    /// or when `|a - b| <= atol + rtol * |b|`, as in `torch.allclose`
    /// (`--atol`, `--rtol`). Without, every element is compared bit for bit.
    ///
    /// # Errors
    /// [`CommandError::Usage`] for a tolerance that is negative or not finite.
    pub fn with_tolerance(mut self, atol: f64, rtol: f64) -> Result<DiffOptions, CommandError> {
        for (name, x) in [("atol", atol), ("rtol", rtol)] {
            if !(x.is_finite() && x >= 0.0) {
                return Err(CommandError::usage(format!(
                    "diff: {name} {x} is not a finite number >= 0"
                )));
            }
        }
        self.tolerance = Some(Tolerance { atol, rtol });
        Ok(self)
    }

    /// Leaves out which tensors share a storage (`--ignore-sharing`).
    #[must_use]
    pub fn with_ignore_sharing(mut self, ignore: bool) -> DiffOptions {
        self.ignore_sharing = ignore;
        self
    }
}

/// Compares the checkpoints at `a` and `b` (files, folders or URLs), both
/// loaded lazily and compared window by window.
///
/// ```
/// use std::path::Path;
/// use stowage_commands::diff::{diff, DiffOptions};
/// use stowage_commands::Context;
///
/// let fixtures = Path::new("../stowage/tests/fixtures");
/// let (a, b) = (fixtures.join("state_dict.pt"), fixtures.join("params.pt"));
/// let report = diff(&a, &b, &Context::default(), &DiffOptions::default())?;
/// assert!(!report.is_same());
/// for d in report.differences() {
///     println!("{d}"); // `0.weight: missing in B`, as `stowage diff` prints it
/// }
/// let json = serde_json::to_value(&report)?; // `stowage diff --json`'s object
/// assert_eq!(json["same"], false);
/// assert_eq!(json["differences"][0]["kind"], report.differences()[0].kind());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`CommandError::Input`] when either cannot be read or is refused.
pub fn diff(
    a: &Path,
    b: &Path,
    cx: &Context,
    options: &DiffOptions,
) -> Result<DiffReport, CommandError> {
    let ckpt_a = cx.load(a, false)?;
    let ckpt_b = cx.load(b, false)?;
    let differences = compare(&ckpt_a, &ckpt_b, *options, cx)?;
    Ok(DiffReport {
        differences,
        transfer: crate::transfer_json(cx),
    })
}

/// One difference between the two checkpoints: its path and kind, and
/// (`Display`) the line `stowage diff` prints for it. Its JSON is the
/// entry of [`DiffReport`]'s `"differences"`.
#[derive(Debug)]
pub struct Difference {
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
    /// The layout kind differs (`strided`, `sparse_coo`, `nested` …).
    Layout {
        a: &'static str,
        b: &'static str,
    },
    Values(Values),
    /// A non-tensor value that differs, or a tensor on one side and a value on
    /// the other: each side's `{"type", "value"}` (`None`: missing there).
    Value {
        a: Option<Json>,
        b: Option<Json>,
    },
    /// Inert objects of different classes at one path, or an object on one
    /// side and a plain container on the other (`None` there).
    Object {
        a: Option<Class>,
        b: Option<Class>,
    },
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

/// A quantized tensor's parameters as JSON (`qscheme`, and `scale` and
/// `zero_point`, or `axis` and the SHA-256 of the per-channel `scales` and
/// `zero_points`), `None` for others: equal exactly when the parameters are.
type Quantization = Option<Json>;

/// The [`Quantization`] summary of `t`.
fn quantization(t: &TensorObject) -> Result<Quantization, stowage::Error> {
    use stowage::checkpoint::Quantization as Q;
    let Some(q) = t.quantization() else {
        return Ok(None);
    };
    Ok(Some(match q {
        Q::PerChannel {
            scales,
            zero_points,
            axis,
        } => {
            let hash = |x: &Tensor| crate::data::sha256(&TensorObject::new(x.clone()), |_| ());
            json!({"qscheme": q.qscheme(), "axis": axis, "scales_sha256": hash(scales)?, "zero_points_sha256": hash(zero_points)?})
        }
        q => match q.per_tensor() {
            Some((scale, zero_point)) => {
                json!({"qscheme": q.qscheme(), "scale": float_json(scale), "zero_point": zero_point})
            }
            None => json!({"qscheme": q.qscheme()}),
        },
    }))
}

/// How the values of two tensors of one dtype and shape differ.
#[derive(Debug, Default)]
struct Values {
    /// Elements whose bytes differ.
    differing: usize,
    /// With a tolerance: the elements outside it.
    outside_tolerance: Option<usize>,
    /// Elements in all.
    numel: usize,
    /// For float and complex dtypes: the largest `|a - b|`.
    max_abs_diff: Option<f64>,
    /// Quantization `(scale, zero_point)` on each side, when they differ.
    quantization: Option<(Quantization, Quantization)>,
}

/// Every difference between `a` and `b`: per tensor path in A's order, then
/// tensor paths only in B, then the values, then the sharing structure.
fn compare(
    a: &Checkpoint,
    b: &Checkpoint,
    options: DiffOptions,
    cx: &Context,
) -> Result<Vec<Difference>, CommandError> {
    let rows_a = rows(a)?;
    let rows_b = rows(b)?;
    let (leaves_a, _) = crate::values::leaves(a, std::path::Path::new("A"))?;
    let (leaves_b, _) = crate::values::leaves(b, std::path::Path::new("B"))?;
    let value_paths = |leaves: &[ValueRef<'_>]| -> HashSet<Vec<PathKey>> {
        leaves.iter().map(|l| l.path().to_vec()).collect()
    };
    let (values_a, values_b) = (value_paths(&leaves_a), value_paths(&leaves_b));
    // A path can only repeat when dict keys of other types print alike; the first one counts.
    let mut by_path_b: HashMap<&[PathKey], usize> = HashMap::new();
    for (i, r) in rows_b.iter().enumerate() {
        by_path_b.entry(r.path.as_slice()).or_insert(i);
    }
    let mut by_path_a: HashMap<&[PathKey], usize> = HashMap::new();
    for (i, r) in rows_a.iter().enumerate() {
        by_path_a.entry(r.path.as_slice()).or_insert(i);
    }
    // Across formats one side may be nested and the other flat (a DCP
    // checkpoint and the safetensors set made from it): a path that matches
    // nothing on the other side is matched by its dotted name.
    let mut dotted_b: HashMap<String, usize> = HashMap::new();
    for (i, r) in rows_b.iter().enumerate() {
        dotted_b.entry(dotted(&r.path)).or_insert(i);
    }
    let mut aliased_b = HashSet::new();
    for ra in &rows_a {
        if by_path_b.contains_key(ra.path.as_slice()) {
            continue;
        }
        if let Some(&j) = dotted_b.get(&dotted(&ra.path)) {
            if !by_path_a.contains_key(rows_b[j].path.as_slice()) && aliased_b.insert(j) {
                by_path_b.insert(ra.path.as_slice(), j);
            }
        }
    }
    let total: u64 = rows_a
        .iter()
        .filter(|r| by_path_b.contains_key(r.path.as_slice()) && !r.is_container())
        .map(|r| r.object.tensor.nbytes() as u64)
        .sum();
    let bar = cx.progress().bytes(total, "comparing".into());

    let mut differences = Vec::new();
    // Paths on both sides, in A's order, with their storage key on each side.
    let mut common: Vec<(&[PathKey], &str, &str)> = Vec::new();
    for (i, ra) in rows_a.iter().enumerate() {
        if by_path_a[ra.path.as_slice()] != i {
            continue;
        }
        let Some(&j) = by_path_b.get(ra.path.as_slice()) else {
            // A value at the path in B is reported with the values.
            if !values_b.contains(&ra.path) {
                differences.push(Difference {
                    path: ra.path.clone(),
                    kind: What::MissingInB,
                });
            }
            continue;
        };
        let rb = &rows_b[j];
        common.push((&ra.path, &ra.key, &rb.key));
        let kind = compare_tensors(&ra.path, &ra.object, &rb.object, options.tolerance, &|n| {
            bar.inc(n)
        });
        if let Some(kind) = kind? {
            differences.push(Difference {
                path: ra.path.clone(),
                kind,
            });
        }
    }
    bar.finish_and_clear();
    for (j, rb) in rows_b.iter().enumerate() {
        if by_path_b[rb.path.as_slice()] == j
            && !aliased_b.contains(&j)
            && !by_path_a.contains_key(rb.path.as_slice())
            && !values_a.contains(&rb.path)
        {
            differences.push(Difference {
                path: rb.path.clone(),
                kind: What::MissingInA,
            });
        }
    }
    differences.extend(compare_values(
        &leaves_a,
        &leaves_b,
        (&by_path_a, &by_path_b),
        options.tolerance,
    ));
    differences.extend(compare_objects(a, b).map_err(CommandError::input)?);
    if !options.ignore_sharing {
        differences.extend(sharing(&common));
    }
    Ok(differences)
}

/// Elements decoded to values at a time when two windows differ.
const DECODE: usize = 1 << 16;

/// A window of `dtype` elements as a tensor, to read its values.
fn window_tensor(bytes: &[u8], dtype: DType) -> Result<Tensor, stowage::Error> {
    let n = bytes.len() / dtype.size().max(1);
    Tensor::from_parts(
        UntypedStorage::from_bytes(bytes)?,
        dtype,
        Layout::contiguous(&[n])?,
    )
}

/// What differs between the tensors at one path, if anything: dtype, else
/// shape, else values (read a window at a time from both sides).
fn compare_tensors(
    path: &[PathKey],
    a: &TensorObject,
    b: &TensorObject,
    tolerance: Option<Tolerance>,
    progress: &dyn Fn(u64),
) -> Result<Option<What>, CommandError> {
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
    let (la, lb) = (a.kind().layout_name(), b.kind().layout_name());
    if la != lb {
        return Ok(Some(What::Layout { a: la, b: lb }));
    }
    let at = |e| CommandError::at(path, e);
    let quantization = {
        let (qa, qb) = (quantization(a).map_err(at)?, quantization(b).map_err(at)?);
        (qa != qb).then_some((qa, qb))
    };
    // A sparse or nested tensor's values are compared through its component
    // rows; meta tensors (no storage) have no values to compare.
    if !a.kind().is_strided() || (!ta.has_data() && !tb.has_data() && ta.is_meta() && tb.is_meta())
    {
        return Ok(quantization.map(|q| {
            What::Values(Values {
                numel: ta.numel(),
                quantization: Some(q),
                ..Values::default()
            })
        }));
    }
    let dtype = ta.dtype();
    let numeric = matches!(dtype.kind(), Kind::Float | Kind::Complex) && dtype.has_scalar_values();
    let tolerance = tolerance.filter(|_| numeric);
    let mut ra = Reader::new(a).map_err(at)?;
    let mut rb = Reader::new(b).map_err(at)?;
    let size = ta.element_size().max(1);
    let mut differing = 0usize;
    let mut outside = 0usize;
    let mut max_diff: Option<f64> = None;
    loop {
        let wa = ra.next_window().map_err(at)?.map(<[u8]>::to_vec);
        let wb = rb.next_window().map_err(at)?;
        let (Some(wa), Some(wb)) = (wa, wb) else {
            break;
        };
        progress(wa.len() as u64);
        if wa == wb {
            continue;
        }
        let bitwise: Vec<bool> = wa
            .chunks(size)
            .zip(wb.chunks(size))
            .map(|(x, y)| x != y)
            .collect();
        differing += bitwise.iter().filter(|&&d| d).count();
        if !numeric {
            continue;
        }
        // Values are decoded a slice of the window at a time, to keep memory small.
        let slice = DECODE * size;
        for ((ca, cb), bits) in wa
            .chunks(slice)
            .zip(wb.chunks(slice))
            .zip(bitwise.chunks(DECODE))
        {
            if ca == cb {
                continue;
            }
            // A dtype whose values cannot be read leaves the maximum out rather than failing.
            let values = window_tensor(ca, dtype)
                .and_then(|x| x.scalars())
                .and_then(|x| Ok((x, window_tensor(cb, dtype)?.scalars()?)));
            let Ok((xa, xb)) = values else {
                outside += bits.iter().filter(|&&d| d).count();
                continue;
            };
            let m = max_abs_diff(&xa, &xb);
            max_diff = Some(match max_diff {
                Some(p) if p.is_nan() || m.is_nan() => f64::NAN,
                Some(p) => p.max(m),
                None => m,
            });
            if let Some(tol) = tolerance {
                outside += xa
                    .iter()
                    .zip(&xb)
                    .zip(bits)
                    .filter(|((x, y), &d)| d && !tol.close(x.to_complex(), y.to_complex()))
                    .count();
            }
        }
    }
    let differs = match tolerance {
        Some(_) => outside > 0,
        None => differing > 0,
    };
    if !differs && quantization.is_none() {
        return Ok(None);
    }
    Ok(Some(What::Values(Values {
        differing,
        outside_tolerance: tolerance.map(|_| outside),
        numel: ta.numel(),
        max_abs_diff: if differing > 0 { max_diff } else { None },
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

#[cfg(test)]
mod tests {
    use super::report::{difference_json, difference_line};
    use super::*;
    use stowage::Tensor;

    fn k(s: &str) -> Vec<PathKey> {
        vec![PathKey::Key(s.into())]
    }

    #[test]
    fn identical_checkpoints_have_no_differences() {
        let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0]).unwrap();
        let a = Checkpoint::from_state_dict([("w", t.clone()), ("v", t.clone())]);
        assert!(compare(&a, &a, DiffOptions::default(), &Context::default())
            .unwrap()
            .is_empty());
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
        let diffs = compare(&a, &b, DiffOptions::default(), &Context::default()).unwrap();
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

    #[test]
    fn tolerances_follow_allclose() {
        let w = |v: &[f32]| Tensor::from_slice(v).unwrap();
        let a = Checkpoint::builder()
            .tensors("m", [("w", w(&[1.0, 100.0, f32::NAN, 5.0]))])
            .value("lr", 1e-3)
            .build()
            .unwrap();
        let b = Checkpoint::builder()
            .tensors("m", [("w", w(&[1.05, 101.0, f32::NAN, 5.0]))])
            .value("lr", 1.04e-3)
            .build()
            .unwrap();
        // Bit for bit: the weights and the value differ.
        let lines: Vec<String> = compare(&a, &b, DiffOptions::default(), &Context::default())
            .unwrap()
            .iter()
            .map(difference_line)
            .collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].starts_with("m.w: values differ in 2 of 4 elements"),
            "{lines:?}"
        );
        assert_eq!(lines[1], "lr: float 0.001 in A, float 0.00104 in B");
        let with = |atol: f64, rtol: f64| DiffOptions {
            tolerance: Some(Tolerance { atol, rtol }),
            ignore_sharing: false,
        };
        // |1 - 1.05| = 0.05 <= 0.1; |100 - 101| = 1 > 0.1 + 0 * 101.
        let d = compare(&a, &b, with(0.1, 0.0), &Context::default()).unwrap();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            difference_line(&d[0]),
            "m.w: values differ in 2 of 4 elements, 1 outside the tolerance, max abs diff 1e0"
        );
        assert_eq!(difference_json(&d[0])["elements_outside_tolerance"], 1);
        // rtol 0.01 of |b| = 1.01 covers the second; the value is within 1e-4.
        assert!(compare(&a, &b, with(0.1, 0.01), &Context::default())
            .unwrap()
            .is_empty());
        // The identical NaNs match; a tolerance of 0 is bit for bit on these.
        assert_eq!(
            compare(&a, &b, with(0.0, 0.0), &Context::default())
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn values_are_compared_by_path() {
        let t = Tensor::from_slice(&[1i64, 2]).unwrap();
        let a = Checkpoint::builder()
            .value("epoch", 3)
            .value("config.name", "gpt")
            .value("config.only_a", true)
            .value("x", t.clone())
            .value("nan", f64::NAN)
            .build()
            .unwrap();
        let b = Checkpoint::builder()
            .value("epoch", 4)
            .value("config.name", "gpt")
            .value("config.only_b", vec![1, 2])
            .value("x", 7)
            .value("nan", f64::NAN)
            .build()
            .unwrap();
        let d = compare(&a, &b, DiffOptions::default(), &Context::default()).unwrap();
        let lines: Vec<String> = d.iter().map(difference_line).collect();
        assert_eq!(
            lines,
            [
                "epoch: int 3 in A, int 4 in B",
                "config.only_a: missing in B (bool true)",
                "config.only_b.0: missing in A (int 1)",
                "config.only_b.1: missing in A (int 2)",
                "x: tensor in A, int 7 in B",
            ]
        );
        let j = difference_json(&d[0]);
        assert_eq!(j["kind"], "value");
        assert_eq!(j["path"], json!(["epoch"]));
        assert_eq!(j["a"], json!({"type": "int", "value": 3}));
        assert_eq!(j["b"], json!({"type": "int", "value": 4}));
        assert_eq!(difference_json(&d[1])["kind"], "missing_in_b");
        assert_eq!(difference_json(&d[4])["a"]["type"], "tensor");
        for d in &d {
            assert_eq!(difference_json(d)["kind"], d.kind(), "{d}");
        }
    }

    #[test]
    fn sharing_can_be_ignored() {
        let w = Tensor::from_slice(&[1.0f32, 2.0]).unwrap();
        let a = Checkpoint::from_state_dict([("w", w.clone()), ("v", w.clone())]);
        let b = Checkpoint::from_state_dict([("w", w.clone()), ("v", w.deep_clone().unwrap())]);
        assert_eq!(
            compare(&a, &b, DiffOptions::default(), &Context::default())
                .unwrap()
                .len(),
            1
        );
        let options = DiffOptions {
            ignore_sharing: true,
            ..DiffOptions::default()
        };
        assert!(compare(&a, &b, options, &Context::default())
            .unwrap()
            .is_empty());
    }
}
