//! The globals a checkpoint's pickle may name: exactly those PyTorch's
//! `weights_only` unpickler allows by default (`_get_allowed_globals` in
//! `torch/_weights_only_unpickler.py`), each mapped to what stowage builds
//! for it. Nothing else resolves, and there is no unsafe fallback.
//!
//! Three kinds of name resolve here that PyTorch 2.15's loader refuses,
//! because stowage reads them as data: `torch._utils._rebuild_nested_tensor`,
//! the CUDA quantized storage classes (`torch.cuda.QInt8Storage` …) and the
//! old module name `torch.tensor`; `scan` reports them as `decoded`, and the
//! scan's tests pin the difference against PyTorch's own list.
//!
//! One table, [`GLOBALS`], gives every allowed global with a fixed name and
//! its meaning: reading looks names up in it ([`resolve`]) and writing takes
//! them back from it ([`Global::path`], generated from the same rows, so a
//! variant missing from the table does not compile). Dtype objects
//! (`torch.float16`) and legacy storage classes (`torch.FloatStorage`) are
//! named by the dtype table, [`crate::dtype::DTYPES`].

use crate::dtype::DTYPES;
use crate::error::CheckpointError;
use crate::{DType, Error, Result};

/// What an allowed global stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Global {
    /// `torch._utils._rebuild_tensor` (pre-1.x: storage, offset, size, stride).
    RebuildTensor,
    /// `torch._utils._rebuild_tensor_v2`.
    RebuildTensorV2,
    /// `torch._utils._rebuild_tensor_v3` (untyped storage plus dtype).
    RebuildTensorV3,
    /// `torch._utils._rebuild_parameter`.
    RebuildParameter,
    /// `torch._utils._rebuild_parameter_with_state`.
    RebuildParameterWithState,
    /// `torch._utils._rebuild_qtensor`.
    RebuildQTensor,
    /// `torch._tensor._rebuild_from_type_v2`.
    RebuildFromTypeV2,
    /// An allowed rebuild function stowage recognises but does not rebuild
    /// (sparse, nested, meta without storage, wrapper subclasses, device tensors).
    UnsupportedRebuild(&'static str),
    /// `collections.OrderedDict`.
    OrderedDict,
    /// `collections.Counter`.
    Counter,
    /// `torch.Size`.
    Size,
    /// `torch.device`.
    Device,
    /// `torch.Tensor` (the class, as named by `_rebuild_from_type_v2`).
    TensorClass,
    /// `torch.nn.parameter.Parameter` (the class).
    ParameterClass,
    /// A legacy tensor class (`torch.FloatTensor` …).
    LegacyTensorClass(&'static str),
    /// A legacy tensor class of another module, as `(module, name)`:
    /// `torch.cuda.FloatTensor`, `torch.sparse.FloatTensor`,
    /// `torch.cuda.sparse.FloatTensor` (no sparse `BoolTensor`).
    LegacyTensorClassIn(&'static str, &'static str),
    /// A storage class: legacy (`FloatStorage`, with its dtype) or `UntypedStorage` (`None`).
    Storage(Option<DType>),
    /// `torch.storage.TypedStorage`.
    TypedStorage,
    /// `_codecs.encode`, how protocol 2 pickles `bytes`.
    CodecsEncode,
    /// `builtins.set`.
    Set,
    /// `builtins.bytearray`.
    ByteArray,
    /// `builtins.complex`.
    Complex,
    /// A quantization scheme (`torch.per_tensor_affine` …).
    QScheme(&'static str),
    /// `torch.serialization._get_layout`.
    GetLayout,
    /// A dtype object (`torch.float16`).
    DType(DType),
    /// A sub-byte integer dtype object (`torch.uint1` … `torch.int7`), allowed but not a storage dtype.
    SubByteDType(&'static str),
}

/// Generates [`GLOBALS`] and [`Global::path`] from one list of rows.
macro_rules! globals {
    ($( ($module:literal, $name:literal) => $variant:ident $(($($arg:tt)*))?, )*) => {
        /// Every allowed global with a fixed name, as `(module, name, meaning)`.
        /// Modules are spelt as stowage writes them: protocol 2 with CPython's
        /// `fix_imports`, so builtins are `__builtin__` (see [`MODULE_ALIASES`]
        /// for the other spellings [`resolve`] accepts).
        pub const GLOBALS: &[(&str, &str, Global)] = &[
            $( ($module, $name, Global::$variant $(($($arg)*))?), )*
        ];

        impl Global {
            /// The `(module, name)` this global is written as: its row of the
            /// allowlist's table of globals (the one the loader resolves names
            /// with), or for dtypes and legacy storage classes the dtype table's
            /// names (a storage class the dtype table lacks is written as
            /// `torch.storage.UntypedStorage`).
            pub fn path(&self) -> (&'static str, &'static str) {
                match self {
                    $( Global::$variant $(($($arg)*))? => ($module, $name), )*
                    Global::UnsupportedRebuild(name) => ("torch._utils", name),
                    Global::LegacyTensorClassIn(module, name) => (module, name),
                    Global::LegacyTensorClass(name)
                    | Global::SubByteDType(name)
                    | Global::QScheme(name) => ("torch", name),
                    Global::Storage(Some(d)) => match d.storage_class() {
                        Some(class) => ("torch", class),
                        None => ("torch.storage", "UntypedStorage"),
                    },
                    Global::DType(d) => ("torch", d.name()),
                }
            }
        }
    };
}

globals! {
    ("torch._utils", "_rebuild_tensor") => RebuildTensor,
    ("torch._utils", "_rebuild_tensor_v2") => RebuildTensorV2,
    ("torch._utils", "_rebuild_tensor_v3") => RebuildTensorV3,
    ("torch._utils", "_rebuild_parameter") => RebuildParameter,
    ("torch._utils", "_rebuild_parameter_with_state") => RebuildParameterWithState,
    ("torch._utils", "_rebuild_qtensor") => RebuildQTensor,
    ("torch._utils", "_rebuild_sparse_tensor") => UnsupportedRebuild("_rebuild_sparse_tensor"),
    ("torch._utils", "_rebuild_meta_tensor_no_storage") => UnsupportedRebuild("_rebuild_meta_tensor_no_storage"),
    ("torch._utils", "_rebuild_nested_tensor") => UnsupportedRebuild("_rebuild_nested_tensor"),
    ("torch._utils", "_rebuild_wrapper_subclass") => UnsupportedRebuild("_rebuild_wrapper_subclass"),
    ("torch._utils", "_rebuild_device_tensor_from_numpy") => UnsupportedRebuild("_rebuild_device_tensor_from_numpy"),
    ("torch._utils", "_rebuild_device_tensor_from_cpu_tensor") => UnsupportedRebuild("_rebuild_device_tensor_from_cpu_tensor"),
    ("torch._tensor", "_rebuild_from_type_v2") => RebuildFromTypeV2,
    ("collections", "OrderedDict") => OrderedDict,
    ("collections", "Counter") => Counter,
    ("torch", "Size") => Size,
    ("torch", "device") => Device,
    ("torch", "Tensor") => TensorClass,
    ("torch.nn.parameter", "Parameter") => ParameterClass,
    ("torch.storage", "UntypedStorage") => Storage(None),
    ("torch.storage", "TypedStorage") => TypedStorage,
    ("torch.serialization", "_get_layout") => GetLayout,
    ("_codecs", "encode") => CodecsEncode,
    ("__builtin__", "set") => Set,
    ("__builtin__", "bytearray") => ByteArray,
    ("__builtin__", "complex") => Complex,
    ("torch", "per_tensor_affine") => QScheme("per_tensor_affine"),
    ("torch", "per_tensor_symmetric") => QScheme("per_tensor_symmetric"),
    ("torch", "per_channel_affine") => QScheme("per_channel_affine"),
    ("torch", "per_channel_symmetric") => QScheme("per_channel_symmetric"),
    ("torch", "per_channel_affine_float_qparams") => QScheme("per_channel_affine_float_qparams"),
    ("torch", "DoubleTensor") => LegacyTensorClass("DoubleTensor"),
    ("torch", "FloatTensor") => LegacyTensorClass("FloatTensor"),
    ("torch", "HalfTensor") => LegacyTensorClass("HalfTensor"),
    ("torch", "BFloat16Tensor") => LegacyTensorClass("BFloat16Tensor"),
    ("torch", "LongTensor") => LegacyTensorClass("LongTensor"),
    ("torch", "IntTensor") => LegacyTensorClass("IntTensor"),
    ("torch", "ShortTensor") => LegacyTensorClass("ShortTensor"),
    ("torch", "CharTensor") => LegacyTensorClass("CharTensor"),
    ("torch", "ByteTensor") => LegacyTensorClass("ByteTensor"),
    ("torch", "BoolTensor") => LegacyTensorClass("BoolTensor"),
    ("torch", "uint1") => SubByteDType("uint1"),
    ("torch", "uint2") => SubByteDType("uint2"),
    ("torch", "uint3") => SubByteDType("uint3"),
    ("torch", "uint4") => SubByteDType("uint4"),
    ("torch", "uint5") => SubByteDType("uint5"),
    ("torch", "uint6") => SubByteDType("uint6"),
    ("torch", "uint7") => SubByteDType("uint7"),
    ("torch", "int1") => SubByteDType("int1"),
    ("torch", "int2") => SubByteDType("int2"),
    ("torch", "int3") => SubByteDType("int3"),
    ("torch", "int4") => SubByteDType("int4"),
    ("torch", "int5") => SubByteDType("int5"),
    ("torch", "int6") => SubByteDType("int6"),
    ("torch", "int7") => SubByteDType("int7"),
}

/// Other spellings of a module that [`resolve`] reads as the one [`GLOBALS`]
/// uses: `(alias, module)`. Python 3's `builtins` is Python 2's `__builtin__`
/// (as PyTorch's unpickler maps them); `torch.tensor` is the old name of
/// `torch._tensor`.
pub const MODULE_ALIASES: &[(&str, &str)] = &[
    ("builtins", "__builtin__"),
    ("torch.tensor", "torch._tensor"),
];

/// Resolves `module.name` to an allowed global, or refuses it.
///
/// Looks the name up in [`GLOBALS`] (module aliases per [`MODULE_ALIASES`]),
/// then among the dtype table's legacy storage classes (as `torch.X` and, for
/// CUDA storages, `torch.cuda.X`) and dtype objects (under their primary
/// names only, as `str(torch.float32)` gives them).
///
/// # Errors
/// [`CheckpointError::GlobalNotAllowed`] for anything outside PyTorch's default allowlist.
pub fn resolve(module: &str, name: &str) -> Result<Global> {
    let canonical = MODULE_ALIASES
        .iter()
        .find(|(alias, _)| *alias == module)
        .map_or(module, |(_, m)| m);
    if let Some((_, _, g)) = GLOBALS
        .iter()
        .find(|(m, n, _)| *m == canonical && *n == name)
    {
        return Ok(g.clone());
    }
    let found = match canonical {
        "torch.cuda" | "torch.sparse" | "torch.cuda.sparse" if name.ends_with("Tensor") => {
            legacy_tensor_class_in(canonical, name)
        }
        "torch" | "torch.cuda" if name.ends_with("Storage") => {
            DType::from_storage_class(name).map(|d| Global::Storage(Some(d)))
        }
        "torch" => DTYPES
            .iter()
            .find(|d| d.name == name)
            .map(|d| Global::DType(d.dtype)),
        _ => None,
    };
    found.ok_or_else(|| {
        Error::Checkpoint(CheckpointError::GlobalNotAllowed {
            module: module.to_owned(),
            name: name.to_owned(),
        })
    })
}

/// The modules besides `torch` that name legacy tensor classes, as
/// PyTorch's `weights_only` unpickler allows them (`_tensor_classes`).
const TENSOR_CLASS_MODULES: [&str; 3] = ["torch.cuda", "torch.sparse", "torch.cuda.sparse"];

/// `module.name` for a legacy tensor class `torch.name` of [`GLOBALS`] in
/// one of [`TENSOR_CLASS_MODULES`]; the sparse modules have no `BoolTensor`.
fn legacy_tensor_class_in(module: &str, name: &str) -> Option<Global> {
    let module = TENSOR_CLASS_MODULES.iter().find(|m| **m == module)?;
    if module.ends_with("sparse") && name == "BoolTensor" {
        return None;
    }
    GLOBALS.iter().find_map(|(_, _, g)| match g {
        Global::LegacyTensorClass(n) if *n == name => Some(Global::LegacyTensorClassIn(module, n)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CheckpointError;

    #[test]
    fn allows_what_pytorch_allows() {
        assert_eq!(
            resolve("torch._utils", "_rebuild_tensor_v2").unwrap(),
            Global::RebuildTensorV2
        );
        assert_eq!(
            resolve("torch", "FloatStorage").unwrap(),
            Global::Storage(Some(DType::Float32))
        );
        assert_eq!(
            resolve("torch.cuda", "HalfStorage").unwrap(),
            Global::Storage(Some(DType::Float16))
        );
        assert_eq!(
            resolve("torch.storage", "UntypedStorage").unwrap(),
            Global::Storage(None)
        );
        assert_eq!(
            resolve("torch", "float8_e4m3fn").unwrap(),
            Global::DType(DType::Float8E4M3Fn)
        );
        assert_eq!(resolve("__builtin__", "set").unwrap(), Global::Set);
        assert_eq!(
            resolve("torch", "uint3").unwrap(),
            Global::SubByteDType("uint3")
        );
        for m in TENSOR_CLASS_MODULES {
            let g = resolve(m, "HalfTensor").unwrap();
            assert_eq!(g, Global::LegacyTensorClassIn(m, "HalfTensor"));
            assert_eq!(g.path(), (m, "HalfTensor"));
        }
        assert!(resolve("torch.cuda", "BoolTensor").is_ok());
        assert!(resolve("torch.sparse", "BoolTensor").is_err());
        assert!(resolve("torch.cuda", "FooTensor").is_err());
    }

    #[test]
    fn refuses_everything_else() {
        for (m, n) in [
            ("os", "system"),
            ("posix", "system"),
            ("builtins", "eval"),
            ("builtins", "exec"),
            ("subprocess", "Popen"),
            ("__main__", "MyModule"),
            ("torch", "load"),
            ("torch", "float"),
            ("torch._utils", "_rebuild_from_anything"),
            ("torch", "FooStorage"),
            ("torch.nn", "Linear"),
        ] {
            match resolve(m, n) {
                Err(Error::Checkpoint(CheckpointError::GlobalNotAllowed { module, name })) => {
                    assert_eq!((module.as_str(), name.as_str()), (m, n))
                }
                other => panic!("{m}.{n}: {other:?}"),
            }
        }
    }

    /// Every row of the table, every dtype object and every legacy storage
    /// class resolves to its meaning, and the meaning writes back as the name.
    #[test]
    fn every_global_round_trips() {
        for (module, name, g) in GLOBALS {
            assert_eq!(resolve(module, name).unwrap(), *g, "{module}.{name}");
            assert_eq!(g.path(), (*module, *name), "{g:?}");
        }
        for info in DTYPES {
            let g = Global::DType(info.dtype);
            assert_eq!(resolve("torch", info.name).unwrap(), g);
            assert_eq!(g.path(), ("torch", info.name));
            if let Some(class) = info.storage_class {
                let g = Global::Storage(Some(info.dtype));
                assert_eq!(resolve("torch", class).unwrap(), g);
                assert_eq!(resolve("torch.cuda", class).unwrap(), g);
                assert_eq!(g.path(), ("torch", class));
            }
        }
        for (alias, module) in MODULE_ALIASES {
            let (_, name, g) = GLOBALS.iter().find(|(m, _, _)| m == module).unwrap();
            assert_eq!(resolve(alias, name).unwrap(), *g, "{alias}.{name}");
        }
    }

    #[test]
    fn table_has_no_duplicate_names() {
        let mut names: Vec<_> = GLOBALS.iter().map(|(m, n, _)| (m, n)).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), GLOBALS.len());
    }
}
