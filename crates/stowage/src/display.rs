//! Printing tensors the way PyTorch does (`torch/_tensor_str.py`): the same
//! choice between integer, fixed and scientific notation, the same widths,
//! line wrapping at 80 columns, summarising past 1000 elements with 3 edge
//! items, and the same `dtype=`/`device=`/`size=` suffixes.

use std::fmt;

use crate::element::Scalar;
use crate::{DType, Kind, Tensor};

const PRECISION: usize = 4;
const LINEWIDTH: usize = 80;
const THRESHOLD: usize = 1000;
const EDGEITEMS: usize = 3;

/// Python's `'{:.Ne}'.format(x)`: mantissa, `e`, sign, at least two exponent digits.
fn sci(x: f64, prec: usize) -> String {
    if !x.is_finite() {
        return py_nonfinite(x);
    }
    let s = format!("{x:.prec$e}");
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let (sign, digits) = exp.strip_prefix('-').map_or(("+", exp), |d| ("-", d));
    format!("{mant}e{sign}{digits:0>2}")
}

fn py_nonfinite(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

fn fixed(x: f64, prec: usize) -> String {
    if x.is_finite() {
        format!("{x:.prec$}")
    } else {
        py_nonfinite(x)
    }
}

/// PyTorch's `_Formatter` for one set of values.
struct Formatter {
    floating: bool,
    int_mode: bool,
    sci_mode: bool,
    width: usize,
}

impl Formatter {
    fn new(values: &[Scalar], floating: bool) -> Formatter {
        let mut f = Formatter {
            floating,
            int_mode: true,
            sci_mode: false,
            width: 1,
        };
        if !floating {
            for v in values {
                f.width = f.width.max(plain(v).len());
            }
            return f;
        }
        let finite: Vec<f64> = values
            .iter()
            .map(|v| v.to_f64())
            .filter(|x| x.is_finite() && *x != 0.0)
            .collect();
        if finite.is_empty() {
            return f;
        }
        let min = finite.iter().fold(f64::INFINITY, |m, x| m.min(x.abs()));
        let max = finite.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        f.int_mode = finite.iter().all(|x| *x == x.ceil());
        let wide = max / min > 1000.0 || max > 1.0e8;
        if f.int_mode {
            f.sci_mode = wide;
            for x in &finite {
                f.width = f.width.max(if wide {
                    sci(*x, PRECISION).len()
                } else {
                    fixed(*x, 0).len() + 1
                });
            }
        } else {
            f.sci_mode = wide || min < 1.0e-4;
            for x in &finite {
                f.width = f.width.max(if f.sci_mode {
                    sci(*x, PRECISION).len()
                } else {
                    fixed(*x, PRECISION).len()
                });
            }
        }
        f
    }

    fn format(&self, x: f64, value: &Scalar) -> String {
        let s = if !self.floating {
            plain(value)
        } else if self.sci_mode {
            sci(x, PRECISION)
        } else if self.int_mode {
            let mut s = fixed(x, 0);
            if x.is_finite() {
                s.push('.');
            }
            s
        } else {
            fixed(x, PRECISION)
        };
        format!("{s:>w$}", w = self.width)
    }
}

fn plain(v: &Scalar) -> String {
    match v {
        Scalar::Bool(true) => "True".into(),
        Scalar::Bool(false) => "False".into(),
        Scalar::Int(i) => i.to_string(),
        Scalar::UInt(u) => u.to_string(),
        Scalar::Float(x) => x.to_string(),
        Scalar::Complex(c) => format!("{}+{}j", c.re, c.im),
    }
}

struct Printer {
    re: Formatter,
    im: Option<Formatter>,
}

impl Printer {
    /// The width of one element and its `, ` (PyTorch's `element_length`:
    /// a complex element adds its imaginary part and the `j`).
    fn element_length(&self) -> usize {
        self.re.width + 2 + self.im.as_ref().map_or(0, |f| f.width + 1)
    }
    fn value(&self, v: &Scalar) -> String {
        match (&self.im, v) {
            (Some(imf), Scalar::Complex(c)) => {
                let re = self.re.format(c.re, &Scalar::Float(c.re));
                let im = format!("{}j", imf.format(c.im, &Scalar::Float(c.im)));
                let im = im.trim_start();
                if im.starts_with('-') || im.starts_with('+') {
                    format!("{re}{im}")
                } else {
                    format!("{re}+{im}")
                }
            }
            _ => self.re.format(v.to_f64(), v),
        }
    }
}

/// Renders `values` (row-major, of `shape`) as PyTorch's nested lists. `full` is
/// the tensor's shape; where a dimension of `full` was summarised, `shape` holds
/// only its `2 * EDGEITEMS` edge items and a `...` goes between them.
fn render(
    values: &[Scalar],
    shape: &[usize],
    full: &[usize],
    p: &Printer,
    indent: usize,
) -> String {
    let cut = |n: usize, kept: usize| n != kept;
    match (shape, full) {
        ([], _) => p.value(&values[0]),
        ([kept], [n, ..]) => {
            let per_line = (LINEWIDTH.saturating_sub(indent) / p.element_length()).max(1);
            let mut items: Vec<String> = values.iter().map(|x| p.value(x)).collect();
            if cut(*n, *kept) {
                items.insert(EDGEITEMS, " ...".into());
            }
            let lines: Vec<String> = items.chunks(per_line).map(|c| c.join(", ")).collect();
            format!(
                "[{}]",
                lines.join(&format!(",\n{}", " ".repeat(indent + 1)))
            )
        }
        ([kept, rest @ ..], [n, full_rest @ ..]) => {
            let inner: usize = rest.iter().product();
            let mut parts: Vec<String> = (0..*kept)
                .map(|i| {
                    render(
                        &values[i * inner..(i + 1) * inner],
                        rest,
                        full_rest,
                        p,
                        indent + 1,
                    )
                })
                .collect();
            if cut(*n, *kept) {
                parts.insert(EDGEITEMS, "...".into());
            }
            let sep = format!(
                ",{}{}",
                "\n".repeat(shape.len() - 1),
                " ".repeat(indent + 1)
            );
            format!("[{}]", parts.join(&sep))
        }
        _ => String::new(),
    }
}

/// The values printed, row-major: every element, or when summarising (past
/// `THRESHOLD` elements) only the first and last `EDGEITEMS` of each long
/// dimension, as PyTorch's `get_summarized_data`. Returns them with their shape.
fn printed_values(t: &Tensor) -> crate::Result<(Vec<Scalar>, Vec<usize>)> {
    let summarize = t.numel() > THRESHOLD;
    let kept: Vec<Vec<usize>> = t
        .shape()
        .iter()
        .map(|&n| {
            if summarize && n > 2 * EDGEITEMS {
                (0..EDGEITEMS).chain(n - EDGEITEMS..n).collect()
            } else {
                (0..n).collect()
            }
        })
        .collect();
    let shape: Vec<usize> = kept.iter().map(Vec::len).collect();
    let (dtype, es) = (t.dtype(), t.element_size());
    let values = t.untyped_storage().with_bytes("printing values", |b| {
        t.layout().check_fits(es, b.len())?;
        let count: usize = shape.iter().product();
        let mut index = vec![0usize; shape.len()];
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let off = kept
                .iter()
                .zip(&index)
                .zip(t.stride())
                .fold(t.storage_offset(), |o, ((k, &i), &st)| o + k[i] * st);
            out.push(crate::element::read(dtype, &b[off * es..(off + 1) * es])?);
            for d in (0..index.len()).rev() {
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Ok::<_, crate::Error>(out)
    })??;
    Ok((values, shape))
}

/// PyTorch's `_add_suffixes`: each suffix after a `, `, or on a line of its
/// own (indented past `tensor(`) when it would take the last line past
/// [`LINEWIDTH`].
fn add_suffixes(out: &mut String, suffixes: &[String], indent: usize) {
    // Python's `len(s) - s.rfind("\n") + 1` (`rfind` is -1 without a newline).
    let mut last_line = match out.rfind('\n') {
        Some(newline) => out.len() - newline + 1,
        None => out.len() + 2,
    };
    for suffix in suffixes {
        let len = suffix.chars().count();
        if last_line + len + 2 > LINEWIDTH {
            out.push_str(",\n");
            out.push_str(&" ".repeat(indent));
            last_line = indent + len;
        } else {
            out.push_str(", ");
            last_line += len + 2;
        }
        out.push_str(suffix);
    }
    out.push(')');
}

impl fmt::Display for Tensor {
    /// `tensor([0., 0., 0.])`, as PyTorch prints (default print options).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // PyTorch's `has_default_dtype`: the default dtype, its complex
        // counterpart, int64 and bool print no `dtype=`.
        let default = crate::dtype::default_dtype();
        let default_complex = if default == DType::Float64 {
            DType::Complex128
        } else {
            DType::Complex64
        };
        let has_default_dtype =
            [default, default_complex, DType::Int64, DType::Bool].contains(&self.dtype);
        let mut suffixes = Vec::new();
        if !self.device().is_cpu() {
            suffixes.push(format!("device='{}'", self.device()));
        }
        // Meta (and fake) and empty tensors name every dtype but the default one.
        let body = if !self.has_data() || self.numel() == 0 {
            if !self.has_data() || self.dim() != 1 {
                suffixes.push(format!("size={}", py_tuple(self.shape())));
            }
            if self.dtype != default {
                suffixes.push(format!("dtype={}", self.dtype));
            }
            if self.has_data() { "[]" } else { "..." }.to_string()
        } else {
            if !has_default_dtype {
                suffixes.push(format!("dtype={}", self.dtype));
            }
            if !self.dtype.has_scalar_values() {
                "[...]".to_string()
            } else {
                let (values, shape) = match printed_values(self) {
                    Ok(v) => v,
                    Err(e) => return write!(f, "<tensor: {e}>"),
                };
                let printer = if self.dtype.kind() == Kind::Complex {
                    let part = |f: fn(&Scalar) -> f64| {
                        values
                            .iter()
                            .map(|c| Scalar::Float(f(c)))
                            .collect::<Vec<_>>()
                    };
                    Printer {
                        re: Formatter::new(&part(|c| c.to_complex().re), true),
                        im: Some(Formatter::new(&part(|c| c.to_complex().im), true)),
                    }
                } else {
                    Printer {
                        re: Formatter::new(&values, self.dtype.kind() == Kind::Float),
                        im: None,
                    }
                };
                render(&values, &shape, self.shape(), &printer, "tensor(".len())
            }
        };
        match self.grad_fn_name() {
            Some(name) => suffixes.push(format!("grad_fn=<{name}>")),
            None if self.requires_grad() => suffixes.push("requires_grad=True".into()),
            None => {}
        }
        let name = if self.is_fake() {
            "FakeTensor"
        } else {
            "tensor"
        };
        let mut out = format!("{name}({body}");
        add_suffixes(&mut out, &suffixes, name.len() + 1);
        f.write_str(&out)
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape())
            .field("stride", &self.stride())
            .field("storage_offset", &self.storage_offset())
            .field("storage", &self.storage)
            .finish()
    }
}

fn py_tuple(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::{DType, Device, Tensor};

    fn show(t: &Tensor) -> String {
        t.to_string()
    }

    #[test]
    fn floats_print_like_pytorch() {
        assert_eq!(
            show(&Tensor::zeros(&[3], DType::Float32).unwrap()),
            "tensor([0., 0., 0.])"
        );
        assert_eq!(
            show(&Tensor::from_slice(&[1.5f32, -2.25]).unwrap()),
            "tensor([ 1.5000, -2.2500])"
        );
        assert_eq!(
            show(&Tensor::from_slice(&[1e-5f64, 1.0]).unwrap()),
            "tensor([1.0000e-05, 1.0000e+00], dtype=torch.float64)"
        );
        assert_eq!(
            show(&Tensor::from_slice(&[f32::NAN, 1.0, f32::INFINITY]).unwrap()),
            "tensor([nan, 1., inf])"
        );
        assert_eq!(show(&Tensor::scalar(3.0f32).unwrap()), "tensor(3.)");
    }

    #[test]
    fn ints_bools_matrices() {
        let m = Tensor::arange(0.0, 6.0, 1.0, DType::Int64)
            .unwrap()
            .view(&[2, 3])
            .unwrap();
        assert_eq!(show(&m), "tensor([[0, 1, 2],\n        [3, 4, 5]])");
        assert_eq!(
            show(&Tensor::from_slice(&[true, false]).unwrap()),
            "tensor([ True, False])"
        );
        assert_eq!(
            show(&Tensor::from_slice(&[1i32, 20]).unwrap()),
            "tensor([ 1, 20], dtype=torch.int32)"
        );
    }

    #[test]
    fn empty_meta_and_summaries() {
        assert_eq!(
            show(&Tensor::zeros(&[0], DType::Float32).unwrap()),
            "tensor([])"
        );
        assert_eq!(
            show(&Tensor::zeros(&[2, 0], DType::Float32).unwrap()),
            "tensor([], size=(2, 0))"
        );
        let m = Tensor::zeros_on(&[2, 3], DType::Float16, Device::META).unwrap();
        assert_eq!(
            show(&m),
            "tensor(..., device='meta', size=(2, 3), dtype=torch.float16)"
        );
        // Meta tensors name every dtype but the default one (PyTorch 2.15).
        let m = Tensor::zeros_on(&[2], DType::Int64, Device::META).unwrap();
        assert_eq!(
            show(&m),
            "tensor(..., device='meta', size=(2,), dtype=torch.int64)"
        );
        let m = Tensor::zeros_on(&[], DType::Complex64, Device::META).unwrap();
        assert_eq!(
            show(&m),
            "tensor(..., device='meta', size=(), dtype=torch.complex64)"
        );
        let big = Tensor::arange(0.0, 2000.0, 1.0, DType::Int64).unwrap();
        assert_eq!(
            show(&big),
            "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"
        );
    }

    #[test]
    fn summaries_read_only_the_edges_like_pytorch() {
        // Strings printed by PyTorch 2.15 for the same tensors.
        let m = Tensor::arange(0.0, 2000.0, 1.0, DType::Int64)
            .unwrap()
            .view(&[1000, 2])
            .unwrap();
        assert_eq!(
            show(&m),
            "tensor([[   0,    1],\n        [   2,    3],\n        [   4,    5],\n        ...,\n        [1994, 1995],\n        [1996, 1997],\n        [1998, 1999]])"
        );
        // 2^33 elements through a stride-0 view: printing must not read them all.
        let huge = Tensor::ones(&[1], DType::Float32)
            .unwrap()
            .expand(&[1 << 33])
            .unwrap();
        assert_eq!(show(&huge), "tensor([1., 1., 1.,  ..., 1., 1., 1.])");
    }
}
