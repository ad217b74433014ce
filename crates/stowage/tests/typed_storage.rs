//! Legacy typed storages against PyTorch 2.15: `TypedStorage`, the 17 legacy
//! classes and their 12 CUDA twins, `Storage`, `tensor.storage()`, the
//! deprecation warning, and a checkpoint written by PyTorch that names every
//! class (`tests/fixtures/legacy_classes.pt`, made by
//! `scripts/make_legacy_class_fixture.py`).
//!
//! Expected messages and printouts are PyTorch's own output, copied from runs
//! of the installed PyTorch 2.15 (`storage.py`).
//!
//! The warning state (once-per-process flag, route, default dtype) is
//! process-wide, so every test here holds one lock.

use std::panic::Location;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use stowage::{StorageError, TensorError};

use num_complex::Complex64;
use stowage::checkpoint::pickle::Value;
use stowage::checkpoint::{Object, ValueRef};
use stowage::typed_storage::{PyArg, StorageArgProblem, StorageCall, StorageConstructor};
use stowage::warn::{self, Route, Warning, WarningKind};
use stowage::Checkpoint;
use stowage::{default_dtype, set_default_dtype, DTYPES};
use stowage::{
    DType, Device, DeviceType, Error, LegacyArgs, LegacyClass, LegacyStorageClass, Scalar, Storage,
    Tensor, TypedStorage, UntypedStorage,
};

static SERIAL: Mutex<()> = Mutex::new(());

/// Serialises the tests of this file and gives each a quiet, known warning state.
fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    warn::set_route(Route::Ignore);
    warn::set_always_warn_typed_storage_removal(false);
    let _ = set_default_dtype(DType::Float32);
    guard
}

/// PyTorch's deprecation message, copied from its output.
const PYTORCH_MESSAGE: &str = "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only storage class. This should only matter to you if you are using storages directly.  To access UntypedStorage directly, use tensor.untyped_storage() instead of tensor.storage()";

/// The header of a legacy class's refusal, as PyTorch prints it (`{cls}` is the class path).
fn legacy_header(path: &str) -> String {
    format!("<class '{path}'>.__new__ received an invalid combination of arguments. Expected one of:\n * no arguments\n * (int size)\n * (Sequence data)\n * (*, UntypedStorage wrap_storage)\n")
}

const TYPED_HEADER: &str = "TypedStorage.__init__ received an invalid combination of arguments. Expected one of:\n * (*, torch.device device, torch.dtype dtype)\n * (int size, *, torch.device device, torch.dtype dtype)\n * (Sequence data, *, torch.device device, torch.dtype dtype)\n * (*, UntypedStorage wrap_storage, torch.dtype dtype)\n";

fn call(args: Vec<PyArg>) -> StorageCall {
    StorageCall {
        args,
        ..StorageCall::default()
    }
}

fn problem(r: stowage::Result<TypedStorage>) -> (StorageConstructor, StorageArgProblem, String) {
    match r {
        Err(e @ Error::Storage(StorageError::StorageArguments { .. })) => {
            let msg = e.to_string();
            match e {
                Error::Storage(StorageError::StorageArguments {
                    constructor,
                    problem,
                }) => (constructor, problem, msg),
                _ => unreachable!(),
            }
        }
        Err(e) => panic!("expected StorageArguments, got {e:?}"),
        Ok(s) => panic!("expected a refusal, got {s:?}"),
    }
}

/// Values that every dtype of a class holds exactly, and how PyTorch reads them back.
fn sample(dtype: DType) -> (Vec<Scalar>, Vec<Scalar>) {
    match dtype {
        DType::Bool => (
            vec![Scalar::Bool(true), Scalar::Int(0), Scalar::Float(2.5)],
            vec![Scalar::Bool(true), Scalar::Bool(false), Scalar::Bool(true)],
        ),
        DType::Complex64 | DType::Complex128 => (
            vec![
                Scalar::Complex(Complex64::new(1.0, 2.0)),
                Scalar::Int(3),
                Scalar::Float(-0.5),
            ],
            vec![
                Scalar::Complex(Complex64::new(1.0, 2.0)),
                Scalar::Complex(Complex64::new(3.0, 0.0)),
                Scalar::Complex(Complex64::new(-0.5, 0.0)),
            ],
        ),
        d if d.is_floating_point() => (
            vec![Scalar::Float(1.5), Scalar::Int(-2), Scalar::Bool(true)],
            vec![Scalar::Float(1.5), Scalar::Float(-2.0), Scalar::Float(1.0)],
        ),
        // Integers and quantized: 2.7 truncates, -1 wraps for unsigned (as torch.tensor does).
        DType::UInt8 | DType::QUInt8 | DType::QUInt4x2 | DType::QUInt2x4 => (
            vec![Scalar::Int(7), Scalar::Float(2.7), Scalar::Int(-1)],
            vec![Scalar::Int(7), Scalar::Int(2), Scalar::Int(255)],
        ),
        _ => (
            vec![Scalar::Int(7), Scalar::Float(2.7), Scalar::Int(-1)],
            vec![Scalar::Int(7), Scalar::Int(2), Scalar::Int(-1)],
        ),
    }
}

// --------------------------------------------------------------------------- the map

#[test]
fn dtype_class_map_has_pytorchs_17_entries_both_ways() {
    let _g = serial();
    // torch/storage.py `_dtype_to_storage_type_map`, entry for entry.
    let pytorch = [
        (DType::Float64, "DoubleStorage"),
        (DType::Float32, "FloatStorage"),
        (DType::Float16, "HalfStorage"),
        (DType::Int64, "LongStorage"),
        (DType::Int32, "IntStorage"),
        (DType::Int16, "ShortStorage"),
        (DType::Int8, "CharStorage"),
        (DType::UInt8, "ByteStorage"),
        (DType::Bool, "BoolStorage"),
        (DType::BFloat16, "BFloat16Storage"),
        (DType::Complex128, "ComplexDoubleStorage"),
        (DType::Complex64, "ComplexFloatStorage"),
        (DType::QInt8, "QInt8Storage"),
        (DType::QInt32, "QInt32Storage"),
        (DType::QUInt8, "QUInt8Storage"),
        (DType::QUInt4x2, "QUInt4x2Storage"),
        (DType::QUInt2x4, "QUInt2x4Storage"),
    ];
    assert_eq!(LegacyStorageClass::ALL.len(), 17);
    for (dtype, name) in pytorch {
        let class = LegacyStorageClass::from_name(name).unwrap();
        assert_eq!(class.name(), name);
        assert_eq!(class.to_string(), name);
        assert_eq!(class.dtype(), dtype, "{name}");
        assert_eq!(LegacyStorageClass::for_dtype(dtype), Some(class));
        assert_eq!(dtype.storage_class(), Some(name));
    }
    // Every other dtype (PyTorch's `_new_dtypes`) has no class.
    let with_class: Vec<DType> = DTYPES
        .iter()
        .map(|r| r.dtype)
        .filter(|d| LegacyStorageClass::for_dtype(*d).is_some())
        .collect();
    assert_eq!(with_class.len(), 17);
    for d in [
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Float8E4M3Fn,
        DType::Float8E5M2,
        DType::Float8E4M3Fnuz,
        DType::Float8E5M2Fnuz,
        DType::Float8E8M0Fnu,
        DType::Float4E2M1FnX2,
        DType::Complex32,
        DType::Bits8,
        DType::Bits16,
        DType::Bits1x8,
        DType::Bits2x4,
        DType::Bits4x2,
    ] {
        assert_eq!(LegacyStorageClass::for_dtype(d), None, "{d}");
    }
    // `_get_dtype_from_pickle_storage_type` takes bare names only.
    for bad in [
        "UntypedStorage",
        "TypedStorage",
        "torch.FloatStorage",
        "UInt16Storage",
        "",
    ] {
        let e = LegacyStorageClass::from_name(bad).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("pickle storage type \"{bad}\" is not recognized")
        );
    }
}

#[test]
fn classes_and_modules() {
    let _g = serial();
    let all: Vec<LegacyClass> = LegacyClass::all().collect();
    assert_eq!(all.len(), 17 + 12);
    let cuda: Vec<&LegacyClass> = all.iter().filter(|c| c.is_cuda()).collect();
    assert_eq!(cuda.len(), 12);
    assert!(cuda
        .iter()
        .all(|c| c.dtype().kind() != stowage::Kind::Quantized));
    for q in [
        LegacyStorageClass::QUInt8Storage,
        LegacyStorageClass::QInt8Storage,
        LegacyStorageClass::QInt32Storage,
        LegacyStorageClass::QUInt4x2Storage,
        LegacyStorageClass::QUInt2x4Storage,
    ] {
        assert!(!q.has_cuda());
        assert_eq!(q.cuda(), None);
        // AttributeError: module 'torch.cuda' has no attribute 'QUInt8Storage'
        assert_eq!(
            LegacyClass::from_path(&format!("torch.cuda.{}", q.name())),
            None
        );
    }
    for c in &all {
        assert_eq!(LegacyClass::from_path(&c.path()), Some(*c));
        assert_eq!(c.to_string(), c.path());
        let want = if c.is_cuda() {
            format!("torch.cuda.{}", c.storage_class().name())
        } else {
            format!("torch.{}", c.storage_class().name())
        };
        assert_eq!(c.path(), want);
    }
    assert_eq!(LegacyClass::from_path("FloatStorage"), None);
    assert_eq!(LegacyClass::from_path("torch.storage.FloatStorage"), None);
    assert_eq!(
        LegacyClass::from(LegacyStorageClass::HalfStorage),
        LegacyStorageClass::HalfStorage.cpu()
    );
}

// --------------------------------------------------------------------------- constructors

#[test]
fn every_class_accepts_the_four_forms() {
    let _g = serial();
    for class in LegacyClass::all() {
        let dtype = class.dtype();
        let es = dtype.size();
        let device = class.device();
        let name = class.path();

        // torch.X()
        let s = class.new(LegacyArgs::None).unwrap();
        assert_eq!(
            (s.dtype(), s.size(), s.device()),
            (dtype, 0, device),
            "{name}"
        );

        // torch.X(3): zeroed elements
        let s = class.new(LegacyArgs::Size(3)).unwrap();
        assert_eq!(
            (s.dtype(), s.size(), s.nbytes()),
            (dtype, 3, 3 * es),
            "{name}"
        );
        assert_eq!(s.device(), device, "{name}");
        assert_eq!(s.element_size(), es);
        assert!(s.untyped().tolist().unwrap().iter().all(|&b| b == 0));

        // torch.X([...]): converted as torch.tensor(data, dtype=...) converts
        let (values, want) = sample(dtype);
        let s = class.new(LegacyArgs::Data(values)).unwrap();
        assert_eq!(s.tolist().unwrap(), want, "{name}");
        assert_eq!(s.device(), device, "{name}");

        // torch.X(wrap_storage=u): the same bytes, size rounded down to whole elements
        let u = UntypedStorage::new_on(2 * es + es / 2, device).unwrap();
        let s = class.new(LegacyArgs::WrapStorage(u.clone())).unwrap();
        assert!(s.untyped().is_same(&u), "{name}");
        assert_eq!((s.dtype(), s.size()), (dtype, 2), "{name}");

        // The result is a TypedStorage of the class, never an instance of the class:
        // isinstance holds for exactly this class.
        assert!(class.is_instance(&s), "{name}");
        for other in LegacyClass::all().filter(|o| *o != class) {
            assert!(!other.is_instance(&s), "{name} vs {other}");
        }
        assert_eq!(s.type_name(), name);
        assert_eq!(s.legacy_class(), Some(class));
        assert_eq!(
            s.pickle_storage_type().unwrap(),
            class.storage_class().name()
        );
    }
}

#[test]
fn device_comes_from_the_class() {
    let _g = serial();
    let cpu = LegacyStorageClass::FloatStorage
        .new(LegacyArgs::Size(2))
        .unwrap();
    assert_eq!(cpu.device(), Device::CPU);
    assert!(!cpu.is_cuda());
    let class = LegacyStorageClass::FloatStorage.cuda().unwrap();
    assert_eq!(class.device_type(), DeviceType::Cuda);
    let g = class
        .new(LegacyArgs::Data(vec![Scalar::Float(1.0)]))
        .unwrap();
    assert_eq!(g.device(), Device::cuda(0));
    assert!(g.is_cuda());
    assert_eq!(g.untyped().device(), Device::cuda(0));
    assert_eq!(g.type_name(), "torch.cuda.FloatStorage");
    // A CUDA class wraps only CUDA storages (any index), a CPU class only CPU ones.
    let on_cuda1 = UntypedStorage::new_on(8, "cuda:1".parse().unwrap()).unwrap();
    let s = class
        .new(LegacyArgs::WrapStorage(on_cuda1.clone()))
        .unwrap();
    assert_eq!(s.device(), Device::cuda(1));
    let (_, p, _) =
        problem(LegacyStorageClass::FloatStorage.new(LegacyArgs::WrapStorage(on_cuda1)));
    assert_eq!(
        p,
        StorageArgProblem::WrapStorageDevice {
            expected: DeviceType::Cpu,
            found: DeviceType::Cuda
        }
    );
    // Moving a storage to CUDA keeps its dtype and finds the CUDA class.
    let moved = cpu.cuda().unwrap();
    assert_eq!(moved.legacy_class(), Some(class));
    assert_eq!(
        moved.cpu().unwrap().legacy_class(),
        Some(cpu.legacy_class().unwrap())
    );
    // Quantized storages cannot be made on or moved to another device.
    let e = TypedStorage::new(2, DType::QInt8, Device::cuda(0)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Cannot create CUDA storage with quantized dtype"
    );
    let q = LegacyStorageClass::QInt8Storage
        .new(LegacyArgs::Size(3))
        .unwrap();
    assert_eq!(
        q.to(Device::cuda(0)).unwrap_err().to_string(),
        "Cannot create CUDA storage with quantized dtype"
    );
    assert_eq!(
        q.to(Device::META).unwrap_err().to_string(),
        "Cannot create META storage with quantized dtype"
    );
    assert_eq!(
        q.cuda().unwrap_err().to_string(),
        "Cannot create CUDA storage with quantized dtype"
    );
    // Meta storages have no legacy class (`type()` is TypedStorage's).
    let m = cpu.to(Device::META).unwrap();
    assert_eq!(m.legacy_class(), None);
    assert_eq!(m.type_name(), "torch.storage.TypedStorage");
    assert!(!LegacyStorageClass::FloatStorage.cpu().is_instance(&m));
}

#[test]
fn every_class_refuses_what_pytorch_refuses() {
    let _g = serial();
    // Two full messages, exactly as PyTorch 2.15 printed them.
    let (_, _, msg) = problem(
        LegacyStorageClass::FloatStorage
            .new(LegacyArgs::Call(call(vec![PyArg::Other("float".into())]))),
    );
    assert_eq!(msg, "<class 'torch.FloatStorage'>.__new__ received an invalid combination of arguments. Expected one of:\n * no arguments\n * (int size)\n * (Sequence data)\n * (*, UntypedStorage wrap_storage)\nArgument type not recognized: <class 'float'>");
    let cuda_float = LegacyStorageClass::FloatStorage.cuda().unwrap();
    let (_, _, msg) =
        problem(cuda_float.new(LegacyArgs::WrapStorage(UntypedStorage::new(4).unwrap())));
    assert_eq!(msg, "<class 'torch.cuda.FloatStorage'>.__new__ received an invalid combination of arguments. Expected one of:\n * no arguments\n * (int size)\n * (Sequence data)\n * (*, UntypedStorage wrap_storage)\nDevice of 'wrap_storage' must be cuda, but got cpu");

    let u = || PyArg::UntypedStorage(UntypedStorage::new(4).unwrap());
    for class in LegacyClass::all() {
        let here = class.device();
        let elsewhere = if class.is_cuda() {
            Device::CPU
        } else {
            Device::META
        };
        let cases: Vec<(StorageCall, &str, bool)> = vec![
            (
                StorageCall { device: Some(Device::CPU), ..call(vec![]) },
                "Keyword argument 'device' cannot be specified",
                false,
            ),
            (
                // device is checked before dtype
                StorageCall { device: Some(here), dtype: Some(class.dtype()), ..call(vec![]) },
                "Keyword argument 'device' cannot be specified",
                false,
            ),
            (
                StorageCall { dtype: Some(DType::Float32), ..call(vec![PyArg::Int(1)]) },
                "Keyword argument 'dtype' cannot be specified",
                false,
            ),
            (
                // dtype is checked before the wrap_storage problems
                StorageCall {
                    dtype: Some(DType::Int32),
                    wrap_storage: Some(PyArg::Int(3)),
                    ..call(vec![])
                },
                "Keyword argument 'dtype' cannot be specified",
                false,
            ),
            (call(vec![PyArg::Int(1), PyArg::Int(2)]), "Too many positional arguments", false),
            (
                call(vec![PyArg::Sequence(vec![]), PyArg::Other("NoneType".into())]),
                "Too many positional arguments",
                false,
            ),
            (call(vec![PyArg::Other("float".into())]), "Argument type not recognized: <class 'float'>", true),
            (call(vec![PyArg::Other("NoneType".into())]), "Argument type not recognized: <class 'NoneType'>", true),
            (call(vec![u()]), "Argument type not recognized: <class 'torch.storage.UntypedStorage'>", true),
            (
                call(vec![PyArg::Tensor(Tensor::zeros(&[2], DType::Float32).unwrap())]),
                "Argument type not recognized: <class 'torch.Tensor'>",
                true,
            ),
            (
                call(vec![PyArg::TypedStorage(TypedStorage::wrap(UntypedStorage::new(4).unwrap(), DType::Float32))]),
                "Argument type not recognized: <class 'torch.storage.TypedStorage'>",
                true,
            ),
            (
                StorageCall { wrap_storage: Some(u()), ..call(vec![PyArg::Int(1)]) },
                "No positional arguments should be given when using 'wrap_storage'",
                false,
            ),
            (
                StorageCall {
                    wrap_storage: Some(PyArg::Int(3)),
                    ..call(vec![PyArg::Int(1), PyArg::Int(2)])
                },
                "No positional arguments should be given when using 'wrap_storage'",
                false,
            ),
            (
                StorageCall {
                    wrap_storage: Some(PyArg::Tensor(Tensor::zeros(&[2], DType::Float32).unwrap())),
                    ..call(vec![])
                },
                "Argument 'wrap_storage' must be UntypedStorage, but got <class 'torch.Tensor'>",
                true,
            ),
            (
                StorageCall {
                    wrap_storage: Some(PyArg::TypedStorage(TypedStorage::wrap(UntypedStorage::new(4).unwrap(), DType::Float32))),
                    ..call(vec![])
                },
                "Argument 'wrap_storage' must be UntypedStorage, but got <class 'torch.storage.TypedStorage'>",
                true,
            ),
            (
                StorageCall { wrap_storage: Some(PyArg::Sequence(vec![Scalar::Int(1)])), ..call(vec![]) },
                "Argument 'wrap_storage' must be UntypedStorage, but got <class 'list'>",
                true,
            ),
            (
                StorageCall {
                    wrap_storage: Some(PyArg::UntypedStorage(UntypedStorage::new_on(4, elsewhere).unwrap())),
                    ..call(vec![])
                },
                if class.is_cuda() {
                    "Device of 'wrap_storage' must be cuda, but got cpu"
                } else {
                    "Device of 'wrap_storage' must be cpu, but got meta"
                },
                false,
            ),
        ];
        for (c, suffix, type_error) in cases {
            let (constructor, p, msg) = problem(class.new(LegacyArgs::Call(c)));
            assert_eq!(constructor, StorageConstructor::Legacy(class));
            assert_eq!(msg, format!("{}{suffix}", legacy_header(&class.path())));
            assert_eq!(p.is_type_error(), type_error, "{msg}");
        }
        // The explicit forms, written as calls, are accepted.
        let ok = class.new(LegacyArgs::Call(StorageCall {
            wrap_storage: Some(PyArg::UntypedStorage(
                UntypedStorage::new_on(4, here).unwrap(),
            )),
            ..call(vec![])
        }));
        assert!(ok.is_ok(), "{class}");
        assert_eq!(
            class
                .new(LegacyArgs::Call(call(vec![PyArg::Int(2)])))
                .unwrap()
                .size(),
            2
        );
    }
    // A negative size: PyTorch's allocator refuses it.
    let e = LegacyStorageClass::FloatStorage
        .new(LegacyArgs::Call(call(vec![PyArg::Int(-1)])))
        .unwrap_err();
    assert!(
        matches!(e, Error::Tensor(TensorError::NegativeSize { size: -1 })),
        "{e}"
    );
    // Sizes beyond the address space are errors, not panics.
    let e = LegacyStorageClass::DoubleStorage
        .new(LegacyArgs::Size(usize::MAX / 4))
        .unwrap_err();
    assert!(
        matches!(e, Error::Tensor(TensorError::SizeOverflow { .. })),
        "{e}"
    );
    assert!(LegacyStorageClass::ByteStorage
        .new(LegacyArgs::Size(usize::MAX))
        .is_err());
}

#[test]
fn typed_storage_init_refuses_what_pytorch_refuses() {
    let _g = serial();
    let u = || PyArg::UntypedStorage(UntypedStorage::new(4).unwrap());
    let cases: Vec<(StorageCall, &str)> = vec![
        (
            StorageCall {
                wrap_storage: Some(u()),
                ..call(vec![])
            },
            "Argument 'dtype' must be specified",
        ),
        (
            StorageCall {
                wrap_storage: Some(u()),
                dtype: Some(DType::Float32),
                ..call(vec![PyArg::Int(1)])
            },
            "No positional arguments should be given when using 'wrap_storage'",
        ),
        (
            StorageCall {
                wrap_storage: Some(u()),
                dtype: Some(DType::Float32),
                device: Some(Device::CPU),
                ..call(vec![])
            },
            "Argument 'device' should not be specified when 'wrap_storage' is given",
        ),
        (
            StorageCall {
                wrap_storage: Some(PyArg::Other("int".into())),
                dtype: Some(DType::Float32),
                ..call(vec![])
            },
            "Argument 'wrap_storage' must be UntypedStorage, but got <class 'int'>",
        ),
        (
            StorageCall {
                dtype: Some(DType::Float32),
                ..call(vec![PyArg::Int(1), PyArg::Int(2)])
            },
            "Too many positional arguments",
        ),
        (
            StorageCall {
                dtype: Some(DType::Float32),
                ..call(vec![PyArg::Other("float".into())])
            },
            "Argument type not recognized: <class 'float'>",
        ),
    ];
    for (c, suffix) in cases {
        let (constructor, _, msg) = problem(TypedStorage::construct(c));
        assert_eq!(constructor, StorageConstructor::TypedStorage);
        assert_eq!(msg, format!("{TYPED_HEADER}{suffix}"));
    }
    // Accepted forms; without dtype the default dtype, without device the cpu.
    let s = TypedStorage::construct(call(vec![PyArg::Int(2)])).unwrap();
    assert_eq!(
        (s.dtype(), s.size(), s.device()),
        (DType::Float32, 2, Device::CPU)
    );
    let s = TypedStorage::construct(StorageCall {
        wrap_storage: Some(PyArg::UntypedStorage(UntypedStorage::new(6).unwrap())),
        dtype: Some(DType::UInt16),
        ..call(vec![])
    })
    .unwrap();
    assert_eq!((s.dtype(), s.size()), (DType::UInt16, 3));
    let s = TypedStorage::construct(StorageCall {
        dtype: Some(DType::Int16),
        device: Some(Device::META),
        ..call(vec![PyArg::Sequence(vec![Scalar::Int(1), Scalar::Int(2)])])
    })
    .unwrap();
    assert_eq!((s.size(), s.nbytes(), s.device()), (2, 4, Device::META));
    // Quantized on CUDA, checked before the arguments (as in PyTorch).
    let e = TypedStorage::construct(StorageCall {
        dtype: Some(DType::QUInt8),
        device: Some(Device::cuda(0)),
        ..call(vec![PyArg::Int(1), PyArg::Int(2)])
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Cannot create CUDA storage with quantized dtype"
    );
}

#[test]
fn storage_is_the_class_of_the_default_dtype() {
    let _g = serial();
    assert_eq!(default_dtype(), DType::Float32);
    assert_eq!(Storage::class().path(), "torch.FloatStorage");
    assert_eq!(
        Storage::new(LegacyArgs::Size(2)).unwrap().dtype(),
        DType::Float32
    );
    for (d, class) in [
        (DType::Float64, "torch.DoubleStorage"),
        (DType::Float16, "torch.HalfStorage"),
        (DType::BFloat16, "torch.BFloat16Storage"),
    ] {
        set_default_dtype(d).unwrap();
        assert_eq!(default_dtype(), d);
        assert_eq!(Storage::class().path(), class);
        let s = Storage::new(LegacyArgs::Data(vec![Scalar::Float(0.5)])).unwrap();
        assert_eq!(s.dtype(), d);
        // TypedStorage without a dtype takes the default too.
        assert_eq!(
            TypedStorage::construct(StorageCall::default())
                .unwrap()
                .dtype(),
            d
        );
    }
    // PyTorch's refusals, word for word.
    for d in [
        DType::Int32,
        DType::Complex64,
        DType::Bool,
        DType::QInt8,
        DType::Bits8,
        DType::Complex32,
        DType::UInt16,
    ] {
        assert_eq!(
            set_default_dtype(d).unwrap_err().to_string(),
            "only floating-point types are supported as the default type"
        );
    }
    for (d, name) in [
        (DType::Float8E5M2, "Float8_e5m2"),
        (DType::Float8E4M3Fn, "Float8_e4m3fn"),
        (DType::Float8E4M3Fnuz, "Float8_e4m3fnuz"),
        (DType::Float8E5M2Fnuz, "Float8_e5m2fnuz"),
        (DType::Float8E8M0Fnu, "Float8_e8m0fnu"),
        (DType::Float4E2M1FnX2, "Float4_e2m1fn_x2"),
    ] {
        assert_eq!(
            set_default_dtype(d).unwrap_err().to_string(),
            format!("couldn't find storage object {name}Storage")
        );
    }
    assert_eq!(
        default_dtype(),
        DType::BFloat16,
        "a refused dtype changes nothing"
    );
    set_default_dtype(DType::Float32).unwrap();
    assert_eq!(Storage::class(), LegacyStorageClass::FloatStorage.cpu());
}

// --------------------------------------------------------------------------- behaviour

#[test]
fn prints_like_pytorch() {
    let _g = serial();
    let data = |v: Vec<Scalar>| LegacyArgs::Data(v);
    let f = Scalar::Float;
    let i = Scalar::Int;
    // print(torch.FloatStorage([1.5, 2, 3])) etc., with stowage's module name.
    let cases: Vec<(LegacyStorageClass, LegacyArgs, &str)> = vec![
        (LegacyStorageClass::FloatStorage, data(vec![f(1.5), i(2), i(3)]), " 1.5\n 2.0\n 3.0\n[stowage.TypedStorage(dtype=torch.float32, device=cpu) of size 3]"),
        (LegacyStorageClass::FloatStorage, LegacyArgs::None, " \n[stowage.TypedStorage(dtype=torch.float32, device=cpu) of size 0]"),
        (LegacyStorageClass::FloatStorage, data(vec![f(1.1)]), " 1.100000023841858\n[stowage.TypedStorage(dtype=torch.float32, device=cpu) of size 1]"),
        (LegacyStorageClass::BFloat16Storage, data(vec![f(1.1)]), " 1.1015625\n[stowage.TypedStorage(dtype=torch.bfloat16, device=cpu) of size 1]"),
        (LegacyStorageClass::HalfStorage, data(vec![f(1.5), i(2), i(3)]), " 1.5\n 2.0\n 3.0\n[stowage.TypedStorage(dtype=torch.float16, device=cpu) of size 3]"),
        (LegacyStorageClass::DoubleStorage, data(vec![f(1.1), f(1e20), f(f64::NAN), f(f64::INFINITY)]), " 1.1\n 1e+20\n nan\n inf\n[stowage.TypedStorage(dtype=torch.float64, device=cpu) of size 4]"),
        (LegacyStorageClass::DoubleStorage, data(vec![f(1e16), f(1e15), f(1e-4), f(1e-5), f(0.1), f(-0.0), f(123456789012345678.0), f(1.5e300), f(5e-324)]), " 1e+16\n 1000000000000000.0\n 0.0001\n 1e-05\n 0.1\n -0.0\n 1.2345678901234568e+17\n 1.5e+300\n 5e-324\n[stowage.TypedStorage(dtype=torch.float64, device=cpu) of size 9]"),
        (LegacyStorageClass::BoolStorage, data(vec![Scalar::Bool(true), Scalar::Bool(false)]), " True\n False\n[stowage.TypedStorage(dtype=torch.bool, device=cpu) of size 2]"),
        (LegacyStorageClass::LongStorage, data(vec![i(1), i(2)]), " 1\n 2\n[stowage.TypedStorage(dtype=torch.int64, device=cpu) of size 2]"),
        (LegacyStorageClass::LongStorage, data(vec![i(1 << 62)]), " 4611686018427387904\n[stowage.TypedStorage(dtype=torch.int64, device=cpu) of size 1]"),
        (LegacyStorageClass::ComplexFloatStorage, data(vec![Scalar::Complex(Complex64::new(1.0, 2.0)), i(3)]), " (1+2j)\n (3+0j)\n[stowage.TypedStorage(dtype=torch.complex64, device=cpu) of size 2]"),
        (
            LegacyStorageClass::ComplexDoubleStorage,
            data(vec![
                Scalar::Complex(Complex64::new(0.0, 2.0)),
                Scalar::Complex(Complex64::new(-0.0, -2.0)),
                Scalar::Complex(Complex64::new(-0.0, 1.0)),
                Scalar::Complex(Complex64::new(1e20, f64::NAN)),
                Scalar::Complex(Complex64::new(0.0, f64::NEG_INFINITY)),
            ]),
            " 2j\n (-0-2j)\n (-0+1j)\n (1e+20+nanj)\n -infj\n[stowage.TypedStorage(dtype=torch.complex128, device=cpu) of size 5]",
        ),
        (LegacyStorageClass::QUInt8Storage, data(vec![i(1), i(2)]), " 1\n 2\n[stowage.TypedStorage(dtype=torch.quint8, device=cpu) of size 2]"),
        (LegacyStorageClass::QInt8Storage, data(vec![i(-1), i(2)]), " -1\n 2\n[stowage.TypedStorage(dtype=torch.qint8, device=cpu) of size 2]"),
    ];
    for (class, args, want) in cases {
        assert_eq!(class.new(args).unwrap().to_string(), want);
    }
    let meta = TypedStorage::new(3, DType::Float32, Device::META).unwrap();
    assert_eq!(
        meta.to_string(),
        "...\n[stowage.TypedStorage(dtype=torch.float32, device=meta) of size 3]"
    );
    let c32 = TypedStorage::from_data(&[f(1.5), i(2)], DType::Complex32, Device::CPU).unwrap();
    assert_eq!(
        c32.to_string(),
        " (1.5+0j)\n (2+0j)\n[stowage.TypedStorage(dtype=torch.complex32, device=cpu) of size 2]"
    );
    let e4 = TypedStorage::from_data(
        &[f(-0.03125), f(-10.0), f(2.75)],
        DType::Float8E4M3Fn,
        Device::CPU,
    )
    .unwrap();
    assert_eq!(e4.to_string(), " -0.03125\n -10.0\n 2.75\n[stowage.TypedStorage(dtype=torch.float8_e4m3fn, device=cpu) of size 3]");
    // Bits have no values (PyTorch raises); stowage prints the raw bits rather than fail.
    let bits = TypedStorage::wrap(UntypedStorage::from_bytes(&[7, 200]).unwrap(), DType::Bits8);
    assert_eq!(
        bits.to_string(),
        " 7\n 200\n[stowage.TypedStorage(dtype=torch.bits8, device=cpu) of size 2]"
    );
    assert!(bits.tolist().is_err());
    // Debug never warns and never reads the bytes.
    assert!(format!("{meta:?}").contains("Float32"));
}

#[test]
fn elements_sizes_and_bytes() {
    let _g = serial();
    let s = LegacyStorageClass::FloatStorage
        .new(LegacyArgs::Data(vec![
            Scalar::Float(1.0),
            Scalar::Float(2.0),
            Scalar::Float(3.0),
        ]))
        .unwrap();
    assert_eq!(s.get(-1).unwrap(), Scalar::Float(3.0));
    assert_eq!(s.get(0).unwrap(), Scalar::Float(1.0));
    assert_eq!(
        s.get(3).unwrap_err().to_string(),
        "index 3 out of range for storage of size 3"
    );
    assert_eq!(
        s.get(-4).unwrap_err().to_string(),
        "index -4 out of range for storage of size 3"
    );
    assert_eq!(
        s.get(isize::MIN).unwrap_err().to_string(),
        format!("index {} out of range for storage of size 3", isize::MIN)
    );
    // Writes go through a tensor in PyTorch, so the index error is the tensor's.
    s.set(1, 2.5).unwrap();
    assert_eq!(s.get(1).unwrap(), Scalar::Float(2.5));
    assert_eq!(
        s.set(5, 1.0).unwrap_err().to_string(),
        "index 5 is out of bounds for dimension 0 with size 3"
    );
    assert_eq!(
        s.set(-4, 1.0).unwrap_err().to_string(),
        "index -4 is out of bounds for dimension 0 with size 3"
    );
    s.fill_(0.5).unwrap();
    assert_eq!(s.tolist().unwrap(), vec![Scalar::Float(0.5); 3]);

    // untyped() is the same bytes; sizes count elements.
    let u = s.untyped();
    assert_eq!(
        (u.nbytes(), s.nbytes(), s.size(), s.element_size()),
        (12, 12, 3, 4)
    );
    u.set(0, 0).unwrap();
    u.set(1, 0).unwrap();
    u.set(2, 128).unwrap();
    u.set(3, 63).unwrap();
    assert_eq!(s.get(0).unwrap(), Scalar::Float(1.0));
    assert_eq!(s.data_ptr(), u.data_ptr());

    // resize_ counts elements; clone copies.
    assert!(s.resizable());
    s.resize_(5).unwrap();
    assert_eq!((s.size(), u.nbytes()), (5, 20));
    assert_eq!(s.get(4).unwrap(), Scalar::Float(0.0));
    let c = s.deep_clone().unwrap();
    c.fill_(9).unwrap();
    assert_eq!(s.get(4).unwrap(), Scalar::Float(0.0));
    assert!(!c.untyped().is_same(&u));
    assert!(matches!(
        s.resize_(usize::MAX),
        Err(Error::Tensor(TensorError::SizeOverflow { .. }))
    ));

    // copy_ copies bytes, not values (torch.FloatStorage(2).copy_(torch.IntStorage(2))).
    let f = LegacyStorageClass::FloatStorage
        .new(LegacyArgs::Size(2))
        .unwrap();
    let ints = LegacyStorageClass::IntStorage
        .new(LegacyArgs::Data(vec![
            Scalar::Int(1065353216),
            Scalar::Int(1073741824),
        ]))
        .unwrap();
    f.copy_(&ints).unwrap();
    assert_eq!(
        f.tolist().unwrap(),
        vec![Scalar::Float(1.0), Scalar::Float(2.0)]
    );
    f.copy_(&UntypedStorage::from_bytes(&[0; 8]).unwrap())
        .unwrap();
    assert_eq!(f.tolist().unwrap(), vec![Scalar::Float(0.0); 2]);
    let three = LegacyStorageClass::FloatStorage
        .new(LegacyArgs::Size(3))
        .unwrap();
    assert!(matches!(
        f.copy_(&three),
        Err(Error::Storage(StorageError::StorageSizeMismatch {
            dst: 8,
            src: 12,
            ..
        }))
    ));

    // Conversions copy (PyTorch's storage.double() …).
    let d = ints.to_dtype(DType::Float64).unwrap();
    assert_eq!(
        d.tolist().unwrap(),
        vec![Scalar::Float(1065353216.0), Scalar::Float(1073741824.0)]
    );
    let q = LegacyStorageClass::QInt8Storage
        .new(LegacyArgs::Size(1))
        .unwrap();
    assert!(q.to_dtype(DType::Float64).is_err());

    // Dtypes without a class.
    let u16s = TypedStorage::new(2, DType::UInt16, Device::CPU).unwrap();
    assert_eq!(
        u16s.pickle_storage_type().unwrap_err().to_string(),
        "dtype torch.uint16 is not recognized"
    );
    assert_eq!(u16s.type_name(), "torch.storage.TypedStorage");
    assert_eq!(u16s.legacy_class(), None);

    // Meta: sizes but no data.
    let m = TypedStorage::new(2, DType::Float32, Device::META).unwrap();
    assert_eq!(m.size(), 2);
    for e in [
        m.get(0).unwrap_err(),
        m.tolist().unwrap_err(),
        m.fill_(1).map(|_| ()).unwrap_err(),
    ] {
        assert!(
            matches!(e, Error::Storage(StorageError::NoData { .. })),
            "{e}"
        );
    }

    // Shared memory, through the untyped storage.
    #[cfg(feature = "shm")]
    {
        let sh = LegacyStorageClass::LongStorage
            .new(LegacyArgs::Data(vec![Scalar::Int(5)]))
            .unwrap();
        assert!(!sh.is_shared());
        if sh.share_memory_().is_ok() {
            assert!(sh.is_shared());
            assert_eq!(sh.get(0).unwrap(), Scalar::Int(5));
        }
    }
}

#[test]
fn values_are_checked_as_pytorch_checks_them() {
    let _g = serial();
    let from = |d: DType, v: Scalar| {
        TypedStorage::from_data(&[v], d, Device::CPU).map(|s| s.tolist().unwrap())
    };
    let err = |r: stowage::Result<Vec<Scalar>>| r.unwrap_err().to_string();
    // torch.TypedStorage([...], dtype=...): integer ranges checked, named as dtypes.
    assert_eq!(
        err(from(DType::UInt8, Scalar::Int(300))),
        "value cannot be converted to type uint8 without overflow"
    );
    assert_eq!(
        err(from(DType::Int8, Scalar::Float(300.0))),
        "value cannot be converted to type int8 without overflow"
    );
    assert_eq!(
        err(from(DType::Int32, Scalar::Float(f64::INFINITY))),
        "value cannot be converted to type int32 without overflow"
    );
    assert_eq!(
        err(from(DType::Int32, Scalar::Float(f64::NAN))),
        "value cannot be converted to type int32 without overflow"
    );
    assert_eq!(
        err(from(DType::QInt8, Scalar::Int(300))),
        "value cannot be converted to type int8 without overflow"
    );
    assert_eq!(
        err(from(DType::QUInt8, Scalar::Int(300))),
        "value cannot be converted to type uint8 without overflow"
    );
    assert_eq!(
        from(DType::UInt8, Scalar::Int(-1)).unwrap(),
        vec![Scalar::Int(255)]
    );
    assert_eq!(
        from(DType::Int32, Scalar::Float(-2.5)).unwrap(),
        vec![Scalar::Int(-2)]
    );
    // Floats are not checked on this path: overflow gives inf.
    assert_eq!(
        from(DType::Float32, Scalar::Float(1e300)).unwrap(),
        vec![Scalar::Float(f64::INFINITY)]
    );
    assert_eq!(
        from(DType::Float16, Scalar::Float(1e6)).unwrap(),
        vec![Scalar::Float(f64::INFINITY)]
    );
    assert_eq!(
        from(DType::Float8E4M3Fn, Scalar::Float(1e6)).unwrap(),
        vec![Scalar::Float(448.0)]
    );
    assert_eq!(
        from(DType::Bool, Scalar::Int(256)).unwrap(),
        vec![Scalar::Bool(true)]
    );
    // Complex values into real dtypes: Python's TypeErrors.
    let z = Scalar::Complex(Complex64::new(1.0, 2.0));
    assert_eq!(
        err(from(DType::Float32, z)),
        "must be real number, not complex"
    );
    assert_eq!(
        err(from(DType::Int32, z)),
        "'complex' object cannot be interpreted as an integer"
    );
    assert_eq!(from(DType::Bool, z).unwrap(), vec![Scalar::Bool(true)]);
    // Dtypes without values.
    assert!(matches!(
        TypedStorage::from_data(&[Scalar::Int(1)], DType::Bits8, Device::CPU),
        Err(Error::Tensor(TensorError::DTypeUnsupported { .. }))
    ));

    // storage[i] = v and fill_(v): c10's checked_convert, named as C++ types.
    let s = |d| TypedStorage::new(2, d, Device::CPU).unwrap();
    let fill = |d: DType, v: Scalar| s(d).fill_(v).map(|s| s.tolist().unwrap());
    assert_eq!(
        err(fill(DType::UInt8, Scalar::Int(256))),
        "value cannot be converted to type uint8_t without overflow"
    );
    assert_eq!(
        err(fill(DType::UInt8, Scalar::Float(-1.0))),
        "value cannot be converted to type uint8_t without overflow"
    );
    assert_eq!(
        fill(DType::UInt8, Scalar::Int(-1)).unwrap(),
        vec![Scalar::Int(255); 2]
    );
    assert_eq!(
        fill(DType::UInt8, Scalar::Float(2.7)).unwrap(),
        vec![Scalar::Int(2); 2]
    );
    assert_eq!(
        err(fill(DType::Int32, Scalar::Float(f64::NAN))),
        "value cannot be converted to type int without overflow"
    );
    assert_eq!(
        err(fill(DType::Int32, z)),
        "value cannot be converted to type int without overflow"
    );
    assert_eq!(
        fill(DType::Int32, Scalar::Complex(Complex64::new(2.0, 0.0))).unwrap(),
        vec![Scalar::Int(2); 2]
    );
    assert_eq!(
        err(fill(DType::Float32, Scalar::Float(1e300))),
        "value cannot be converted to type float without overflow"
    );
    assert_eq!(
        err(fill(DType::Float32, z)),
        "value cannot be converted to type float without overflow"
    );
    assert_eq!(
        fill(DType::Float64, Scalar::Float(1e300)).unwrap(),
        vec![Scalar::Float(1e300); 2]
    );
    assert_eq!(
        err(fill(DType::Float16, Scalar::Float(1e6))),
        "value cannot be converted to type c10::Half without overflow"
    );
    assert_eq!(
        err(fill(DType::BFloat16, Scalar::Float(1e300))),
        "value cannot be converted to type c10::BFloat16 without overflow"
    );
    assert_eq!(
        err(fill(DType::Complex64, Scalar::Float(1e300))),
        "value cannot be converted to type c10::complex<float> without overflow"
    );
    assert_eq!(
        err(fill(DType::Float8E4M3Fn, Scalar::Float(f64::INFINITY))),
        "value cannot be converted to type c10::Float8_e4m3fn without overflow"
    );
    assert_eq!(
        err(fill(DType::QUInt8, Scalar::Int(256))),
        "value cannot be converted to type uint8_t without overflow"
    );
    assert_eq!(
        fill(DType::QInt8, Scalar::Int(-3)).unwrap(),
        vec![Scalar::Int(-3); 2]
    );
    assert_eq!(
        fill(DType::QUInt4x2, Scalar::Int(17)).unwrap(),
        vec![Scalar::Int(17); 2]
    );
    assert_eq!(
        fill(DType::Bool, Scalar::Float(2.5)).unwrap(),
        vec![Scalar::Bool(true); 2]
    );
    assert_eq!(
        fill(DType::Complex128, Scalar::Bool(true)).unwrap(),
        vec![Scalar::Complex(Complex64::new(1.0, 0.0)); 2]
    );
    let set_err = |d: DType, v: Scalar| s(d).set(0, v).unwrap_err().to_string();
    assert_eq!(
        set_err(DType::UInt8, Scalar::Int(300)),
        "value cannot be converted to type uint8_t without overflow"
    );
    assert_eq!(
        set_err(DType::Int16, Scalar::Int(1 << 20)),
        "value cannot be converted to type int16_t without overflow"
    );
    assert_eq!(
        set_err(DType::Int64, Scalar::UInt(u64::MAX)),
        "value cannot be converted to type int64_t without overflow"
    );
    assert_eq!(
        set_err(DType::Complex32, Scalar::Float(1e6)),
        "value cannot be converted to type c10::complex<c10::Half> without overflow"
    );
    // Setting one half element is not checked in PyTorch (it becomes inf).
    let h = s(DType::Float16);
    h.set(0, 1e6).unwrap();
    assert_eq!(h.get(0).unwrap(), Scalar::Float(f64::INFINITY));
}

#[test]
fn tensor_storage_is_the_whole_storage_typed() {
    let _g = serial();
    let base = Tensor::arange(0.0, 6.0, 1.0, DType::Float32).unwrap();
    let view = base.slice(0, Some(2), None, 1).unwrap();
    let s = view.storage();
    assert_eq!((s.dtype(), s.size()), (DType::Float32, 6));
    assert!(s.untyped().is_same(view.untyped_storage()));
    s.set(3, 30.0).unwrap();
    assert_eq!(view.get(&[1]).unwrap(), Scalar::Float(30.0));
    assert_eq!(
        view.storage_type(),
        Some(LegacyStorageClass::FloatStorage.cpu())
    );
    let g = base.to_device(Device::cuda(0)).unwrap();
    assert_eq!(
        g.storage_type().map(|c| c.path()),
        Some("torch.cuda.FloatStorage".into())
    );
    let u = Tensor::zeros(&[2], DType::UInt16).unwrap();
    assert_eq!(u.storage().dtype(), DType::UInt16);
    assert_eq!(u.storage_type(), None);
}

// --------------------------------------------------------------------------- warnings

/// Collects every warning routed to the handler.
fn collect() -> Arc<Mutex<Vec<Warning>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&seen);
    warn::set_handler(move |w| sink.lock().unwrap().push(*w));
    seen
}

#[test]
fn warning_is_pytorchs_and_issued_once() {
    let _g = serial();
    assert_eq!(warn::TYPED_STORAGE_REMOVAL, PYTORCH_MESSAGE);
    warn::reset_typed_storage_removal();
    assert!(!warn::typed_storage_removal_issued());
    let seen = collect();
    let line = Location::caller().line() + 1;
    let s = TypedStorage::new(2, DType::Float32, Device::CPU).unwrap();
    let _ = (s.size(), s.tolist(), s.untyped(), s.to_string());
    let t = Tensor::ones(&[2], DType::Float32).unwrap();
    let _ = t.storage();
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    let w = got[0];
    assert_eq!(w.kind, WarningKind::TypedStorageRemoval);
    assert_eq!(w.category, "UserWarning");
    assert_eq!(w.message, PYTORCH_MESSAGE);
    // The location is the caller's, like Python's stacklevel.
    let loc = w.location.expect("location");
    assert!(loc.file().ends_with("typed_storage.rs"), "{}", loc.file());
    assert_eq!(loc.line(), line);
    assert_eq!(
        w.to_string(),
        format!(
            "{}:{}: UserWarning: {PYTORCH_MESSAGE}",
            loc.file(),
            loc.line()
        )
    );
    assert!(warn::typed_storage_removal_issued());
    // Once issued, nothing more until reset.
    let _ = LegacyStorageClass::IntStorage.new(LegacyArgs::None);
    assert_eq!(seen.lock().unwrap().len(), 1);
    warn::reset_typed_storage_removal();
    let _ = t.storage();
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[test]
fn always_warn_warns_on_every_use() {
    let _g = serial();
    warn::set_always_warn_typed_storage_removal(true);
    assert!(warn::always_warn_typed_storage_removal());
    let seen = collect();
    let t = Tensor::ones(&[2], DType::Float32).unwrap();
    let s = t.storage(); // 1
    let _ = s.size(); // 2
    let _ = s.nbytes(); // 3
    let _ = s.untyped(); // 4
    let _ = s.to_string(); // 5: Display, no location
    let _ = s.dtype(); // an attribute in PyTorch: no warning
    let _ = format!("{s:?}"); // Debug: no warning
    let _ = LegacyStorageClass::FloatStorage.dtype(); // class metadata: no warning
    let _ = TypedStorage::wrap(t.untyped_storage().clone(), DType::Int32); // 6
    let got = seen.lock().unwrap().clone();
    assert_eq!(got.len(), 6, "{got:?}");
    assert!(got[4].location.is_none());
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, w)| i == 4 || w.location.is_some()));
    warn::set_always_warn_typed_storage_removal(false);
}

#[test]
fn warning_can_be_silenced_and_captured() {
    let _g = serial();
    warn::set_always_warn_typed_storage_removal(true);
    let seen = collect();
    let previous = warn::silence();
    assert!(matches!(previous, Route::Handler(_)));
    assert!(matches!(warn::route(), Route::Ignore));
    let t = Tensor::ones(&[2], DType::Float32).unwrap();
    let _ = t.storage().size();
    assert!(seen.lock().unwrap().is_empty());
    // Silenced still counts as issued (Python sets has_warned either way).
    assert!(warn::typed_storage_removal_issued());
    // Capture records and keeps warnings from the route.
    warn::set_route(previous);
    let (size, captured) = warn::capture(|| t.storage().size());
    assert_eq!(size, 2);
    assert_eq!(captured.len(), 2);
    assert!(captured.iter().all(|w| w.message == PYTORCH_MESSAGE));
    assert!(seen.lock().unwrap().is_empty());
    // Back on the route afterwards.
    let _ = t.storage();
    assert_eq!(seen.lock().unwrap().len(), 1);
    // A handler that itself uses the legacy API does not recurse.
    warn::set_handler(|_| {
        let _ = Tensor::ones(&[1], DType::Float32).unwrap().storage().size();
    });
    let _ = t.storage();
    warn::set_always_warn_typed_storage_removal(false);
}

fn legacy_fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy_classes.pt")
}

#[test]
fn internal_paths_never_warn() {
    let _g = serial();
    warn::set_always_warn_typed_storage_removal(true);
    let seen = collect();
    let (_, captured) = warn::capture(|| {
        let ckpt = stowage::load(legacy_fixture()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("again.pt");
        stowage::save(&out, &ckpt).unwrap();
        let again = stowage::load(&out).unwrap();
        for (_, t) in again.tensors().unwrap() {
            let _ = t.tensor.untyped_storage().nbytes();
            let _ = t.tensor.to_string();
        }
        for r in again.storages() {
            let _ = (
                r.storage_type(),
                TypedStorage::from_record(r).map(|s| s.dtype()),
            );
        }
        let sd = Checkpoint::from_state_dict([("w", Tensor::ones(&[2], DType::Float16).unwrap())]);
        stowage::save(dir.path().join("sd.pt"), &sd).unwrap();
        let _ = stowage::load(dir.path().join("sd.pt")).unwrap();
    });
    assert!(captured.is_empty(), "{captured:?}");
    assert!(seen.lock().unwrap().is_empty());
    warn::set_always_warn_typed_storage_removal(false);
}

// --------------------------------------------------------------------------- the PyTorch checkpoint

/// The value at `key` of the dict `v`, if any.
fn try_entry<'c>(v: &ValueRef<'c>, key: &str) -> Option<&'c Value<Object>> {
    v.as_dict()
        .expect("a dict")
        .find(|(k, _)| k.as_str().ok() == Some(key))
        .map(|(_, v)| v.raw())
}

/// The value at `key` of the dict `v`.
fn entry<'c>(v: &ValueRef<'c>, key: &str) -> &'c Value<Object> {
    try_entry(v, key).unwrap_or_else(|| panic!("no key {key}"))
}

#[test]
fn pytorch_checkpoint_naming_every_class_loads() {
    let _g = serial();
    let ckpt = stowage::load(legacy_fixture()).unwrap();
    // Every one of the 17 classes is named by a storage record.
    let mut named: Vec<&str> = ckpt.storages().iter().map(|r| r.storage_type()).collect();
    named.sort_unstable();
    named.dedup();
    let mut want: Vec<&str> = LegacyStorageClass::ALL.iter().map(|c| c.name()).collect();
    want.push("UntypedStorage");
    want.sort_unstable();
    assert_eq!(named, want);
    for r in ckpt.storages() {
        match LegacyStorageClass::from_name(r.storage_type()) {
            Ok(class) => assert_eq!(r.dtype, Some(class.dtype())),
            Err(_) => assert_eq!(r.dtype, None),
        }
    }

    // storages.<Class>: a bare storage of each class, with the values PyTorch wrote
    // (scripts/make_legacy_class_fixture.py STORAGE_VALUES).
    let i = Scalar::Int;
    let f = Scalar::Float;
    let c = |re, im| Scalar::Complex(Complex64::new(re, im));
    let values: Vec<(LegacyStorageClass, Vec<Scalar>)> = vec![
        (
            LegacyStorageClass::DoubleStorage,
            vec![f(1.5), f(-2.25), f(1e300)],
        ),
        (
            LegacyStorageClass::FloatStorage,
            vec![f(1.5), f(-2.0), f(3.0)],
        ),
        (
            LegacyStorageClass::HalfStorage,
            vec![f(0.5), f(65504.0), f(-1.0)],
        ),
        (
            LegacyStorageClass::LongStorage,
            vec![i(-(1 << 62)), i(7), i(1 << 62)],
        ),
        (
            LegacyStorageClass::IntStorage,
            vec![i(i32::MIN as i64), i(0), i(i32::MAX as i64)],
        ),
        (
            LegacyStorageClass::ShortStorage,
            vec![i(-32768), i(1), i(32767)],
        ),
        (LegacyStorageClass::CharStorage, vec![i(-128), i(0), i(127)]),
        (LegacyStorageClass::ByteStorage, vec![i(0), i(128), i(255)]),
        (
            LegacyStorageClass::BoolStorage,
            vec![Scalar::Bool(true), Scalar::Bool(false), Scalar::Bool(true)],
        ),
        (
            LegacyStorageClass::BFloat16Storage,
            vec![f(1.0), f(-0.5), f(256.0)],
        ),
        (
            LegacyStorageClass::ComplexDoubleStorage,
            vec![c(1.0, 2.0), c(-0.0, -3.5), c(4.0, 0.0)],
        ),
        (
            LegacyStorageClass::ComplexFloatStorage,
            vec![c(0.5, -1.0), c(0.0, 2.0), c(-1.0, 0.0)],
        ),
        (LegacyStorageClass::QUInt8Storage, vec![i(0), i(17), i(255)]),
        (
            LegacyStorageClass::QInt8Storage,
            vec![i(-128), i(-1), i(127)],
        ),
        (
            LegacyStorageClass::QInt32Storage,
            vec![i(i32::MIN as i64), i(5), i(i32::MAX as i64)],
        ),
        (
            LegacyStorageClass::QUInt4x2Storage,
            vec![i(0x21), i(0xF0), i(0x0F)],
        ),
        (
            LegacyStorageClass::QUInt2x4Storage,
            vec![i(0xE4), i(0x1B), i(0x00)],
        ),
    ];
    assert_eq!(values.len(), 17);
    let root = ckpt.root_value();
    let storages = root.get("storages").unwrap();
    for (class, want) in values {
        let Some(Object::Storage(r)) = entry(&storages, class.name()).as_ext() else {
            panic!("storages.{class} is not a storage");
        };
        assert_eq!(r.dtype, Some(class.dtype()), "{class}");
        let record = ckpt.storages().iter().find(|s| *s.key == *r.key).unwrap();
        assert_eq!(record.storage_type(), class.name());
        let typed = TypedStorage::from_storage_ref(r).unwrap();
        assert!(class.cpu().is_instance(&typed));
        assert_eq!(typed.tolist().unwrap(), want, "{class}");
    }

    // tensors.<Class>: the 15 classes a tensor can carry here, each on its class's record.
    let tensors = root.get("tensors").unwrap();
    let mut n = 0;
    for class in LegacyStorageClass::ALL {
        let Some(v) = try_entry(&tensors, class.name()) else {
            assert!(matches!(
                class,
                LegacyStorageClass::QUInt4x2Storage | LegacyStorageClass::QUInt2x4Storage
            ));
            continue;
        };
        let Some(Object::Tensor(t)) = v.as_ext() else {
            panic!("tensors.{class}")
        };
        n += 1;
        assert_eq!(t.tensor.dtype(), class.dtype(), "{class}");
        assert_eq!(
            t.quantization().is_some(),
            class.dtype().kind() == stowage::Kind::Quantized
        );
        assert_eq!(t.tensor.storage_type(), Some(class.cpu()));
        let record = ckpt
            .storages()
            .iter()
            .find(|r| r.storage.is_same(t.tensor.untyped_storage()))
            .unwrap();
        assert_eq!(record.storage_type(), class.name());
    }
    assert_eq!(n, 15);

    // shared_typed = tensors.FloatStorage.storage(): one record for both.
    let Some(Object::Storage(shared)) = entry(&root, "shared_typed").as_ext() else {
        panic!("shared_typed")
    };
    let Some(Object::Tensor(ft)) = entry(&tensors, "FloatStorage").as_ext() else {
        panic!()
    };
    assert!(shared.storage.is_same(ft.tensor.untyped_storage()));
    assert_eq!(shared.dtype, Some(DType::Float32));
    // untyped: an UntypedStorage record, no legacy class.
    let Some(Object::Storage(u)) = entry(&root, "untyped").as_ext() else {
        panic!()
    };
    assert_eq!(u.dtype, None);
    assert!(TypedStorage::from_storage_ref(u).is_none());
    assert_eq!(u.storage.tolist().unwrap(), vec![0, 1, 2, 3]);
}
