//! Out-of-place `+ - * /` against PyTorch 2.15's own answers: every pair of a
//! 1-D or 0-dim tensor of each dtype with arithmetic and a 1-D tensor, a 0-dim
//! tensor or a Python number, with the result's dtype and values (or
//! PyTorch's error message); and the rounding of `float16` and `bfloat16`
//! arithmetic, in place (`add_`, `mul_`) too. The table is `tests/fixtures/arith_cases.json`,
//! written by `scripts/gen-arith-cases.py`.
//!
//! Values must be equal to the bit, except complex quotients: PyTorch divides
//! complex vectors with SIMD code of its CPU's capability (AVX2, AVX-512 or
//! none, each rounding its own way), and stowage with c10's scalar formula, so
//! those agree to a few units in the last place of the quotient's magnitude.

use num_complex::Complex64;
use serde_json::Value as J;
use stowage::{DType, Operand, Scalar, Tensor};

/// One value as the script encodes it: `"True"`, an integer, a float's
/// `repr`, or `[re, im]`.
fn scalar(v: &J) -> Scalar {
    match v {
        J::Array(parts) => {
            let part = |i: usize| parts[i].as_str().unwrap().parse::<f64>().unwrap();
            Scalar::Complex(Complex64::new(part(0), part(1)))
        }
        J::String(s) if s == "True" || s == "False" => Scalar::Bool(s == "True"),
        J::String(s) => match s.parse::<i64>() {
            Ok(i) => Scalar::Int(i),
            Err(_) => Scalar::Float(s.parse::<f64>().expect("a float repr")),
        },
        other => panic!("unexpected value {other}"),
    }
}

/// The tensor an operand key names (`"L:int8/1"` or `"/n"`: a vector of
/// the values; `"/0"` or `"/z"`: 0-dim).
fn tensor(key: &str, values: &J) -> Tensor {
    let (dtype, dim) = key[2..].split_once('/').unwrap();
    let dtype: DType = dtype.parse().unwrap();
    let values: Vec<Scalar> = values.as_array().unwrap().iter().map(scalar).collect();
    let zero_dim = dim == "0" || dim == "z";
    let shape: &[usize] = if zero_dim { &[] } else { &[values.len()] };
    let t = Tensor::zeros(shape, dtype).unwrap();
    for (i, v) in values.into_iter().enumerate() {
        let index: &[isize] = if zero_dim { &[] } else { &[i as isize] };
        t.set(index, v).unwrap();
    }
    t
}

/// Equal values: the same number (NaNs equal), bools as bools.
fn same(got: Scalar, want: Scalar) -> bool {
    let f = |a: f64, b: f64| {
        a == b && a.is_sign_negative() == b.is_sign_negative() || a.is_nan() && b.is_nan()
    };
    match (got, want) {
        (Scalar::Bool(a), Scalar::Bool(b)) => a == b,
        (Scalar::Complex(a), Scalar::Complex(b)) => f(a.re, b.re) && f(a.im, b.im),
        (Scalar::Int(a), Scalar::Int(b)) => a == b,
        (Scalar::UInt(a), Scalar::Int(b)) => i128::from(a) == i128::from(b),
        (a, b) => f(a.to_f64(), b.to_f64()),
    }
}

#[test]
fn arithmetic_is_pytorchs_for_every_pair_of_operand_kinds() {
    let json: J = serde_json::from_str(include_str!("../fixtures/arith_cases.json")).unwrap();
    assert_eq!(json["default_dtype"], "float32");
    assert_eq!(stowage::default_dtype(), DType::Float32);
    let operands = json["operands"].as_object().unwrap();
    let cases = json["cases"].as_array().unwrap();
    let mut wrong = Vec::new();
    for case in cases {
        let [op, lhs, rhs, dtype, expected] = &case.as_array().unwrap()[..] else {
            panic!("malformed case {case}");
        };
        let (op, lhs, rhs) = (
            op.as_str().unwrap(),
            lhs.as_str().unwrap(),
            rhs.as_str().unwrap(),
        );
        let a = tensor(lhs, &operands[lhs]);
        let b_tensor;
        let b = if rhs.starts_with("N:") {
            Operand::Scalar(scalar(&operands[rhs]))
        } else {
            b_tensor = tensor(rhs, &operands[rhs]);
            Operand::Tensor(&b_tensor)
        };
        let got = match op {
            "add" => a.add(b),
            "sub" => a.sub(b),
            "mul" => a.mul(b),
            "div" => a.div(b),
            "add_" => a.add_(b).cloned(),
            "mul_" => a.mul_(b).cloned(),
            other => panic!("unknown op {other}"),
        };
        let what = format!("{lhs} {op} {rhs}");
        match (got, dtype.as_str()) {
            (Ok(t), Some(want)) => {
                if t.dtype().name() != want {
                    wrong.push(format!("{what}: dtype {}, PyTorch {want}", t.dtype()));
                    continue;
                }
                let values = t.scalars().unwrap();
                let want: Vec<Scalar> = expected.as_array().unwrap().iter().map(scalar).collect();
                let eps = if t.dtype() == DType::Complex128 {
                    f64::EPSILON
                } else {
                    f64::from(f32::EPSILON)
                };
                let close = |g: Scalar, w: Scalar| {
                    let (g, w) = (g.to_complex(), w.to_complex());
                    (g - w).norm() <= 4.0 * eps * w.norm()
                };
                let complex_quotient = op == "div" && t.dtype().is_complex();
                let equal = values.len() == want.len()
                    && values
                        .iter()
                        .zip(&want)
                        .all(|(&g, &w)| same(g, w) || complex_quotient && close(g, w));
                if !equal {
                    wrong.push(format!("{what}: {values:?}, PyTorch {want:?}"));
                }
            }
            (Ok(t), None) => wrong.push(format!(
                "{what}: gave {} where PyTorch refuses: {}",
                t.dtype(),
                expected.as_str().unwrap()
            )),
            (Err(e), Some(want)) => {
                wrong.push(format!("{what}: error {e} where PyTorch gives {want}"))
            }
            (Err(e), None) => {
                let want = expected.as_str().unwrap();
                if e.to_string() != want {
                    wrong.push(format!("{what}: error {e:?} ({e}), PyTorch: {want}"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases differ:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
    assert!(cases.len() > 2000, "only {} cases", cases.len());
}
