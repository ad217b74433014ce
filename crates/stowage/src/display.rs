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
    fn width(&self) -> usize {
        self.re.width + self.im.as_ref().map_or(0, |f| f.width + 3)
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

/// Renders `values` (row-major, of `shape`) as PyTorch's nested lists.
fn render(
    values: &[Scalar],
    shape: &[usize],
    p: &Printer,
    indent: usize,
    summarize: bool,
) -> String {
    match shape {
        [] => p.value(&values[0]),
        [n] => {
            let per_line = ((LINEWIDTH.saturating_sub(indent)) / (p.width() + 2)).max(1);
            let items: Vec<String> = if summarize && *n > 2 * EDGEITEMS {
                let mut v: Vec<String> = values[..EDGEITEMS].iter().map(|x| p.value(x)).collect();
                v.push(" ...".into());
                v.extend(values[n - EDGEITEMS..].iter().map(|x| p.value(x)));
                v
            } else {
                values.iter().map(|x| p.value(x)).collect()
            };
            let lines: Vec<String> = items.chunks(per_line).map(|c| c.join(", ")).collect();
            format!(
                "[{}]",
                lines.join(&format!(",\n{}", " ".repeat(indent + 1)))
            )
        }
        [n, rest @ ..] => {
            let inner: usize = rest.iter().product();
            let sub = |i: usize| {
                render(
                    &values[i * inner..(i + 1) * inner],
                    rest,
                    p,
                    indent + 1,
                    summarize,
                )
            };
            let parts: Vec<String> = if summarize && *n > 2 * EDGEITEMS {
                let mut v: Vec<String> = (0..EDGEITEMS).map(sub).collect();
                v.push("...".into());
                v.extend((n - EDGEITEMS..*n).map(sub));
                v
            } else {
                (0..*n).map(sub).collect()
            };
            let sep = format!(
                ",{}{}",
                "\n".repeat(shape.len() - 1),
                " ".repeat(indent + 1)
            );
            format!("[{}]", parts.join(&sep))
        }
    }
}

/// The values printed for a summarised tensor: only the edge items of each dimension.
fn summarized_values(t: &Tensor) -> Option<Vec<Scalar>> {
    let mut v = t.clone();
    for d in 0..t.dim() {
        let n = v.shape()[d];
        if n > 2 * EDGEITEMS {
            let head = v.narrow(d as isize, 0, EDGEITEMS).ok()?;
            let tail = v
                .narrow(d as isize, (n - EDGEITEMS) as isize, EDGEITEMS)
                .ok()?;
            // Only the formatter's statistics need these values, so concatenation order is irrelevant.
            let mut vals = head.scalars().ok()?;
            vals.extend(tail.scalars().ok()?);
            return Some(vals);
        }
        v = v.clone();
    }
    t.scalars().ok()
}

impl fmt::Display for Tensor {
    /// `tensor([0., 0., 0.])`, as PyTorch prints (default print options).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let default_dtypes = [DType::Float32, DType::Int64, DType::Bool, DType::Complex64];
        let mut suffixes = Vec::new();
        if !self.device().is_cpu() {
            suffixes.push(format!("device='{}'", self.device()));
        }
        let body = if self.is_meta() {
            suffixes.push(format!("size={}", py_tuple(self.shape())));
            "...".to_string()
        } else if self.numel() == 0 {
            if self.dim() != 1 {
                suffixes.push(format!("size={}", py_tuple(self.shape())));
            }
            "[]".to_string()
        } else if !self.dtype.has_scalar_values() {
            "[...]".to_string()
        } else {
            let values = match self.scalars() {
                Ok(v) => v,
                Err(e) => return write!(f, "<tensor: {e}>"),
            };
            let summarize = values.len() > THRESHOLD;
            let stats = if summarize {
                summarized_values(self).unwrap_or_else(|| values.clone())
            } else {
                values.clone()
            };
            let printer = if self.dtype.kind() == Kind::Complex {
                let re: Vec<Scalar> = stats
                    .iter()
                    .map(|c| Scalar::Float(c.to_complex().re))
                    .collect();
                let im: Vec<Scalar> = stats
                    .iter()
                    .map(|c| Scalar::Float(c.to_complex().im))
                    .collect();
                Printer {
                    re: Formatter::new(&re, true),
                    im: Some(Formatter::new(&im, true)),
                }
            } else {
                Printer {
                    re: Formatter::new(&stats, self.dtype.kind() == Kind::Float),
                    im: None,
                }
            };
            render(&values, self.shape(), &printer, "tensor(".len(), summarize)
        };
        if !default_dtypes.contains(&self.dtype) {
            suffixes.push(format!("dtype={}", self.dtype));
        }
        if self.requires_grad {
            suffixes.push("requires_grad=True".into());
        }
        write!(f, "tensor({body}")?;
        for s in suffixes {
            write!(f, ", {s}")?;
        }
        f.write_str(")")
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
        let big = Tensor::arange(0.0, 2000.0, 1.0, DType::Int64).unwrap();
        assert_eq!(
            show(&big),
            "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])"
        );
    }
}
