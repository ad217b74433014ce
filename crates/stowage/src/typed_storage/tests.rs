//! Unit tests of the typed storage facade.

use super::display::{py_complex, py_float};
use super::*;

#[test]
fn class_table_matches_dtype_table() {
    for c in LegacyStorageClass::ALL {
        assert_eq!(c.dtype().storage_class(), Some(c.name()));
        assert_eq!(LegacyStorageClass::for_dtype(c.dtype()), Some(*c));
    }
    assert_eq!(LegacyClass::all().count(), 29);
}

#[test]
fn floats_print_as_python_repr() {
    let cases = [
        (1.5, "1.5"),
        (2.0, "2.0"),
        (-0.0, "-0.0"),
        (1e16, "1e+16"),
        (1e15, "1000000000000000.0"),
        (1e-4, "0.0001"),
        (1e-5, "1e-05"),
        (0.1, "0.1"),
        (123456789012345678.0, "1.2345678901234568e+17"),
        (1.5e300, "1.5e+300"),
        (5e-324, "5e-324"),
        (1.100000023841858, "1.100000023841858"),
        (f64::NAN, "nan"),
        (f64::NEG_INFINITY, "-inf"),
    ];
    for (x, want) in cases {
        assert_eq!(py_float(x, true), want, "{x:e}");
    }
    let c = |re, im| py_complex(Complex64::new(re, im));
    assert_eq!(c(0.0, 2.0), "2j");
    assert_eq!(c(-0.0, -2.0), "(-0-2j)");
    assert_eq!(c(-0.0, 1.0), "(-0+1j)");
    assert_eq!(c(1e20, f64::NAN), "(1e+20+nanj)");
    assert_eq!(c(0.0, f64::NEG_INFINITY), "-infj");
    assert_eq!(c(1.0, 2.0), "(1+2j)");
    assert_eq!(c(1.5, -0.0), "(1.5-0j)");
}

#[test]
fn overflow_rules_follow_c10() {
    let r = range;
    assert!(!overflows(Scalar::Int(-1), r(DType::UInt8)));
    assert!(!overflows(Scalar::Int(-255), r(DType::UInt8)));
    assert!(overflows(Scalar::Int(-256), r(DType::UInt8)));
    assert!(overflows(Scalar::Int(256), r(DType::UInt8)));
    assert!(overflows(Scalar::Float(-1.0), r(DType::UInt8)));
    assert!(!overflows(Scalar::Float(2.7), r(DType::UInt8)));
    assert!(overflows(Scalar::Float(f64::NAN), r(DType::Int32)));
    assert!(overflows(Scalar::Int(1 << 31), r(DType::Int32)));
    assert!(!overflows(Scalar::Int(i64::MIN), r(DType::Int64)));
    assert!(overflows(Scalar::UInt(u64::MAX), r(DType::Int64)));
    assert!(!overflows(Scalar::Int(-1), r(DType::UInt64)));
    assert!(overflows(Scalar::Float(1e300), r(DType::Float32)));
    assert!(!overflows(Scalar::Float(f64::INFINITY), r(DType::Float32)));
    assert!(overflows(
        Scalar::Float(f64::INFINITY),
        r(DType::Float8E4M3Fn)
    ));
    assert!(!overflows(Scalar::Float(f64::NAN), r(DType::Float8E4M3Fn)));
    assert!(overflows(
        Scalar::Complex(Complex64::new(1.0, 2.0)),
        r(DType::Float32)
    ));
    assert!(!overflows(
        Scalar::Complex(Complex64::new(2.0, 0.0)),
        r(DType::Int32)
    ));
    assert!(!overflows(Scalar::Bool(true), r(DType::Int8)));
    assert!(!overflows(Scalar::Float(1e300), r(DType::Complex128)));
    assert!(overflows(Scalar::Float(1e300), r(DType::Complex64)));
}
