//! `Display` of tensors against PyTorch 2.15's `str(tensor)`, exactly, on the
//! table `tests/fixtures/display_cases.json` written by
//! `scripts/gen-display-cases.py`: line wrapping (the suffixes' too),
//! summarization, notation, every printable dtype, empty and 0-dim tensors,
//! `requires_grad`, negative zero, nan and inf, several dimensions.

use num_complex::Complex64;
use serde_json::Value as J;
use stowage::{DType, Scalar, Tensor};

/// One value as the script encodes it: `"True"`, an integer, a float's
/// `repr`, or `[re, im]`.
fn scalar(v: &J) -> Scalar {
    match v {
        J::Array(parts) => {
            let part = |i: usize| parts[i].as_str().unwrap().parse::<f64>().unwrap();
            Scalar::Complex(Complex64::new(part(0), part(1)))
        }
        J::String(s) if s == "True" || s == "False" => Scalar::Bool(s == "True"),
        J::String(s) => match (s.parse::<i64>(), s.parse::<u64>()) {
            (Ok(i), _) => Scalar::Int(i),
            (_, Ok(u)) => Scalar::UInt(u),
            _ => Scalar::Float(s.parse::<f64>().expect("a float repr")),
        },
        other => panic!("unexpected value {other}"),
    }
}

/// The tensor a case describes, built element by element.
fn build(case: &J) -> Tensor {
    let dtype: DType = case["dtype"].as_str().unwrap().parse().unwrap();
    let shape: Vec<usize> = case["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap() as usize)
        .collect();
    let numel: usize = shape.iter().product();
    let values: Vec<Scalar> = match (&case["values"], &case["arange"]) {
        (J::Array(v), _) => v.iter().map(scalar).collect(),
        (_, J::Array(a)) => {
            let f = |i: usize| a[i].as_str().unwrap().parse::<f64>().unwrap();
            let (start, step) = (f(0), f(1));
            (0..numel)
                .map(|i| Scalar::Float(i as f64 * step + start))
                .collect()
        }
        _ => panic!("case without values: {case}"),
    };
    assert_eq!(values.len(), numel);
    let flat = Tensor::zeros(&[numel], dtype).unwrap();
    for (i, v) in values.into_iter().enumerate() {
        // As PyTorch's `.to(dtype)`: a cast, not a checked write.
        let one = Tensor::zeros(&[], DType::Complex128).unwrap();
        one.set(&[], v).unwrap();
        let cast = if dtype.is_complex() {
            one.to_dtype(dtype).unwrap()
        } else if matches!(v, Scalar::Float(_)) {
            Tensor::scalar(v.to_f64()).unwrap().to_dtype(dtype).unwrap()
        } else {
            let t = Tensor::zeros(&[], dtype).unwrap();
            t.set(&[], v).unwrap();
            t
        };
        flat.narrow(0, i as isize, 1)
            .unwrap()
            .copy_(&cast.view(&[1]).unwrap())
            .unwrap();
    }
    let sizes: Vec<isize> = shape.iter().map(|&s| s as isize).collect();
    let mut t = flat.view(&sizes).unwrap();
    if case["requires_grad"] == J::Bool(true) {
        t.requires_grad_(true).unwrap();
    }
    match case["then"].as_str() {
        Some("mul2") => t.mul(2i64).unwrap(),
        Some("sum") => t.sum().unwrap(),
        Some(other) => panic!("unknown operation {other}"),
        None => t,
    }
}

#[test]
fn tensors_print_as_pytorch_prints_them() {
    let json: J = serde_json::from_str(include_str!("../fixtures/display_cases.json")).unwrap();
    let cases = json["cases"].as_array().unwrap();
    let mut wrong = Vec::new();
    for case in cases {
        let t = build(case);
        let (got, want) = (t.to_string(), case["str"].as_str().unwrap());
        if got != want {
            wrong.push(format!(
                "{}:\n--- stowage\n{got}\n--- PyTorch\n{want}\n",
                case["name"].as_str().unwrap()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases differ:\n{}",
        wrong.len(),
        cases.len(),
        wrong.join("\n")
    );
}
