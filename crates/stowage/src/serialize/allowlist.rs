//! The globals a checkpoint's pickle may name: exactly those PyTorch's
//! `weights_only` unpickler allows by default (`_get_allowed_globals` in
//! `torch/_weights_only_unpickler.py`), each mapped to what stowage builds
//! for it. Nothing else resolves, and there is no unsafe fallback.

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
    LegacyTensorClass(String),
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
    SubByteDType(String),
}

const UNSUPPORTED_REBUILDS: &[&str] = &[
    "_rebuild_sparse_tensor",
    "_rebuild_meta_tensor_no_storage",
    "_rebuild_nested_tensor",
    "_rebuild_wrapper_subclass",
    "_rebuild_device_tensor_from_numpy",
    "_rebuild_device_tensor_from_cpu_tensor",
];

const QSCHEMES: &[&str] = &[
    "per_tensor_affine",
    "per_tensor_symmetric",
    "per_channel_affine",
    "per_channel_symmetric",
    "per_channel_affine_float_qparams",
];

const LEGACY_TENSOR_CLASSES: &[&str] = &[
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "LongTensor",
    "IntTensor",
    "ShortTensor",
    "CharTensor",
    "ByteTensor",
    "BoolTensor",
];

/// Resolves `module.name` to an allowed global, or refuses it.
///
/// Python 2 module names (`__builtin__`) are mapped as PyTorch's unpickler maps them.
///
/// # Errors
/// [`Error::GlobalNotAllowed`] for anything outside PyTorch's default allowlist.
pub fn resolve(module: &str, name: &str) -> Result<Global> {
    let refuse = || Error::GlobalNotAllowed {
        module: module.to_owned(),
        name: name.to_owned(),
    };
    let module_norm = match module {
        "__builtin__" => "builtins",
        "torch.tensor" => "torch._tensor",
        m => m,
    };
    let g = match (module_norm, name) {
        ("torch._utils", "_rebuild_tensor") => Global::RebuildTensor,
        ("torch._utils", "_rebuild_tensor_v2") => Global::RebuildTensorV2,
        ("torch._utils", "_rebuild_tensor_v3") => Global::RebuildTensorV3,
        ("torch._utils", "_rebuild_parameter") => Global::RebuildParameter,
        ("torch._utils", "_rebuild_parameter_with_state") => Global::RebuildParameterWithState,
        ("torch._utils", "_rebuild_qtensor") => Global::RebuildQTensor,
        ("torch._utils", n) => match UNSUPPORTED_REBUILDS.iter().find(|u| **u == n) {
            Some(u) => Global::UnsupportedRebuild(u),
            None => return Err(refuse()),
        },
        ("torch._tensor", "_rebuild_from_type_v2") => Global::RebuildFromTypeV2,
        ("collections", "OrderedDict") => Global::OrderedDict,
        ("collections", "Counter") => Global::Counter,
        ("torch", "Size") => Global::Size,
        ("torch", "device") => Global::Device,
        ("torch", "Tensor") => Global::TensorClass,
        ("torch.nn.parameter", "Parameter") => Global::ParameterClass,
        ("torch.storage", "UntypedStorage") => Global::Storage(None),
        ("torch.storage", "TypedStorage") => Global::TypedStorage,
        ("torch.serialization", "_get_layout") => Global::GetLayout,
        ("_codecs", "encode") => Global::CodecsEncode,
        ("builtins", "set") => Global::Set,
        ("builtins", "bytearray") => Global::ByteArray,
        ("builtins", "complex") => Global::Complex,
        ("torch", n) if QSCHEMES.contains(&n) => {
            Global::QScheme(QSCHEMES.iter().find(|q| **q == n).copied().unwrap_or(""))
        }
        ("torch", n) if LEGACY_TENSOR_CLASSES.contains(&n) => {
            Global::LegacyTensorClass(n.to_owned())
        }
        ("torch", n) if is_sub_byte_int(n) => Global::SubByteDType(n.to_owned()),
        // Legacy storage classes are allowed as `torch.X` and their CUDA twins `torch.cuda.X`.
        ("torch" | "torch.cuda", n) if n.ends_with("Storage") => {
            Global::Storage(Some(DType::from_storage_class(n).ok_or_else(refuse)?))
        }
        // Dtype objects are allowed under their primary names only (`str(torch.float32)`).
        ("torch", n) => {
            return crate::dtype::DTYPES
                .iter()
                .find(|d| d.name == n)
                .map(|d| Global::DType(d.dtype))
                .ok_or_else(refuse)
        }
        _ => return Err(refuse()),
    };
    Ok(g)
}

fn is_sub_byte_int(n: &str) -> bool {
    matches!(n.strip_prefix("uint").or_else(|| n.strip_prefix("int")), Some(d) if d.len() == 1 && ("1"..="7").contains(&d))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            Global::SubByteDType("uint3".into())
        );
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
                Err(Error::GlobalNotAllowed { module, name }) => {
                    assert_eq!((module.as_str(), name.as_str()), (m, n))
                }
                other => panic!("{m}.{n}: {other:?}"),
            }
        }
    }
}
