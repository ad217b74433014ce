//! The globals outside PyTorch's `weights_only` allowlist that stowage still
//! reads as plain data, because their pickled form is data: numpy arrays,
//! dtypes and scalars, `argparse.Namespace`, the `collections`, `datetime`
//! and `pathlib` types, and a few builtins. Reading one never imports or
//! calls anything; the loader rebuilds the value from the arguments and state
//! the pickle holds.
//!
//! PyTorch refuses these under `weights_only=True` unless the user names them
//! with `torch.serialization.add_safe_globals`, so stowage decodes them when
//! the user allows them ([`LoadOptions`](crate::checkpoint::LoadOptions)) or loads inertly,
//! and refuses them otherwise, as PyTorch does. `scan` reports them as
//! `decoded`.
//!
//! One table, [`DECODED`], names each one with its meaning; module spellings
//! are those pickles use (`numpy.core` and numpy 2's `numpy._core`; Python 2's
//! `__builtin__` and Python 3's `builtins`, `copy_reg` and `copyreg`).

/// What a decoded global stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Decoded {
    /// `numpy.core.multiarray._reconstruct`: builds an empty `ndarray` whose
    /// `BUILD` state holds its shape, dtype, order flag and bytes.
    NdArrayReconstruct,
    /// `numpy.ndarray`, the class handed to `_reconstruct`.
    NdArrayClass,
    /// `numpy.dtype`: called with a type code (`"f4"`), its `BUILD` state
    /// holds the byte order.
    NumpyDType,
    /// `numpy.core.multiarray.scalar`: a numpy scalar from a dtype and the
    /// bytes of one element.
    NumpyScalar,
    /// `argparse.Namespace`: its attributes, by keyword or `BUILD` state.
    Namespace,
    /// `collections.defaultdict`: a dict with a default factory.
    DefaultDict,
    /// `collections.deque`.
    Deque,
    /// `datetime.datetime`, from its packed bytes and optional tzinfo.
    DateTime,
    /// `datetime.date`, from its packed bytes.
    Date,
    /// `datetime.time`, from its packed bytes and optional tzinfo.
    Time,
    /// `datetime.timedelta(days, seconds, microseconds)`.
    TimeDelta,
    /// `datetime.timezone(offset[, name])`.
    TimeZone,
    /// A `pathlib` path class, called with the path's parts.
    Path(&'static str),
    /// `builtins.frozenset`.
    FrozenSet,
    /// `builtins.slice(start, stop, step)`.
    Slice,
    /// `builtins.range` (Python 2's `xrange`, as protocol 2 names it).
    Range,
    /// A builtin type named as a value (`defaultdict(list)`'s factory).
    BuiltinType(&'static str),
    /// `builtins.bytes`, called as protocol 2 spells `b''` (`bytes()`), or
    /// with a list of byte values.
    Bytes,
    /// TorchScript's typed-list markers (`torch.jit._pickle.build_intlist`,
    /// `build_doublelist`, `build_boollist`, `build_tensorlist`): called
    /// with a list, they stand for that list. TorchScript's C++ pickler
    /// writes them for `List[int]` … attributes of scripted modules.
    ScriptList,
    /// `torch.jit._pickle.restore_type_tag(value, type_str)`: TorchScript's
    /// static type of a container, which stands for `value`.
    ScriptTypeTag,
}

/// Every decoded global, as `(module, name, meaning)`.
pub const DECODED: &[(&str, &str, Decoded)] = &[
    (
        "numpy.core.multiarray",
        "_reconstruct",
        Decoded::NdArrayReconstruct,
    ),
    (
        "numpy._core.multiarray",
        "_reconstruct",
        Decoded::NdArrayReconstruct,
    ),
    ("numpy", "ndarray", Decoded::NdArrayClass),
    ("numpy", "dtype", Decoded::NumpyDType),
    ("numpy.core.multiarray", "scalar", Decoded::NumpyScalar),
    ("numpy._core.multiarray", "scalar", Decoded::NumpyScalar),
    ("argparse", "Namespace", Decoded::Namespace),
    ("collections", "defaultdict", Decoded::DefaultDict),
    ("collections", "deque", Decoded::Deque),
    ("datetime", "datetime", Decoded::DateTime),
    ("datetime", "date", Decoded::Date),
    ("datetime", "time", Decoded::Time),
    ("datetime", "timedelta", Decoded::TimeDelta),
    ("datetime", "timezone", Decoded::TimeZone),
    ("pathlib", "Path", Decoded::Path("Path")),
    ("pathlib", "PosixPath", Decoded::Path("PosixPath")),
    ("pathlib", "WindowsPath", Decoded::Path("WindowsPath")),
    ("pathlib", "PurePath", Decoded::Path("PurePath")),
    ("pathlib", "PurePosixPath", Decoded::Path("PurePosixPath")),
    (
        "pathlib",
        "PureWindowsPath",
        Decoded::Path("PureWindowsPath"),
    ),
    ("__builtin__", "frozenset", Decoded::FrozenSet),
    ("builtins", "frozenset", Decoded::FrozenSet),
    ("__builtin__", "slice", Decoded::Slice),
    ("builtins", "slice", Decoded::Slice),
    ("__builtin__", "xrange", Decoded::Range),
    ("builtins", "range", Decoded::Range),
    ("__builtin__", "bytes", Decoded::Bytes),
    ("builtins", "bytes", Decoded::Bytes),
    ("torch.jit._pickle", "build_intlist", Decoded::ScriptList),
    ("torch.jit._pickle", "build_doublelist", Decoded::ScriptList),
    ("torch.jit._pickle", "build_boollist", Decoded::ScriptList),
    ("torch.jit._pickle", "build_tensorlist", Decoded::ScriptList),
    (
        "torch.jit._pickle",
        "restore_type_tag",
        Decoded::ScriptTypeTag,
    ),
    ("__builtin__", "list", Decoded::BuiltinType("list")),
    ("builtins", "list", Decoded::BuiltinType("list")),
    ("__builtin__", "dict", Decoded::BuiltinType("dict")),
    ("builtins", "dict", Decoded::BuiltinType("dict")),
    ("__builtin__", "int", Decoded::BuiltinType("int")),
    ("builtins", "int", Decoded::BuiltinType("int")),
    ("__builtin__", "float", Decoded::BuiltinType("float")),
    ("builtins", "float", Decoded::BuiltinType("float")),
    ("__builtin__", "str", Decoded::BuiltinType("str")),
    ("builtins", "str", Decoded::BuiltinType("str")),
    ("__builtin__", "tuple", Decoded::BuiltinType("tuple")),
    ("builtins", "tuple", Decoded::BuiltinType("tuple")),
];

/// Looks `module.name` up in [`DECODED`].
pub(crate) fn lookup(module: &str, name: &str) -> Option<Decoded> {
    DECODED
        .iter()
        .find(|(m, n, _)| *m == module && *n == name)
        .map(|(_, _, d)| *d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_both_numpy_spellings() {
        for m in ["numpy.core.multiarray", "numpy._core.multiarray"] {
            assert_eq!(lookup(m, "_reconstruct"), Some(Decoded::NdArrayReconstruct));
            assert_eq!(lookup(m, "scalar"), Some(Decoded::NumpyScalar));
        }
        assert_eq!(lookup("__builtin__", "xrange"), Some(Decoded::Range));
        assert_eq!(lookup("os", "system"), None);
        assert_eq!(lookup("numpy", "load"), None);
    }

    #[test]
    fn table_has_no_duplicate_names() {
        let mut names: Vec<_> = DECODED.iter().map(|(m, n, _)| (m, n)).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DECODED.len());
    }

    /// Nothing PyTorch already allows is listed here: the two tables split
    /// the names between them.
    #[test]
    fn disjoint_from_the_allowlist() {
        for (m, n, _) in DECODED {
            assert!(
                crate::checkpoint::globals::allowlist::resolve(m, n).is_err(),
                "{m}.{n}"
            );
        }
    }
}
