//! The arguments of a legacy class or `TypedStorage` call, and PyTorch's
//! refusals of the combinations it does not accept.

use super::*;

/// The arguments of a legacy class call (`torch.FloatStorage(…)`).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum LegacyArgs {
    /// `torch.FloatStorage()`: an empty storage.
    #[default]
    None,
    /// `torch.FloatStorage(3)`: `n` zeroed elements.
    Size(usize),
    /// `torch.FloatStorage([1, 2, 3])`: the values, converted to the class's dtype.
    Data(Vec<Scalar>),
    /// `torch.FloatStorage(wrap_storage=s)`: a typed view of `s`'s bytes.
    WrapStorage(UntypedStorage),
    /// Any call, as Python sees it; this is how the calls PyTorch refuses are
    /// expressed (a `device=` keyword, two positional arguments, a float, …).
    Call(StorageCall),
}

/// A storage constructor call as Python sees it: positional arguments and
/// the `wrap_storage`, `dtype` and `device` keywords (`None` = not given).
#[derive(Clone, Debug, Default)]
pub struct StorageCall {
    /// The positional arguments.
    pub args: Vec<PyArg>,
    /// The `wrap_storage=` keyword.
    pub wrap_storage: Option<PyArg>,
    /// The `dtype=` keyword.
    pub dtype: Option<DType>,
    /// The `device=` keyword.
    pub device: Option<Device>,
}

impl From<LegacyArgs> for StorageCall {
    fn from(args: LegacyArgs) -> StorageCall {
        let positional = |arg| StorageCall {
            args: vec![arg],
            ..StorageCall::default()
        };
        match args {
            LegacyArgs::None => StorageCall::default(),
            LegacyArgs::Size(n) => positional(PyArg::Int(i64::try_from(n).unwrap_or(i64::MAX))),
            LegacyArgs::Data(values) => positional(PyArg::Sequence(values)),
            LegacyArgs::WrapStorage(s) => StorageCall {
                wrap_storage: Some(PyArg::UntypedStorage(s)),
                ..StorageCall::default()
            },
            LegacyArgs::Call(call) => call,
        }
    }
}

/// A value passed to a storage constructor, as far as the constructor looks at it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum PyArg {
    /// A Python `int` (numpy integers count too).
    Int(i64),
    /// A sequence of numbers (`list`, `tuple`; nested lists are flattened by PyTorch).
    Sequence(Vec<Scalar>),
    /// A `torch.UntypedStorage`.
    UntypedStorage(UntypedStorage),
    /// A `torch.TypedStorage` (not a sequence, and not an untyped storage).
    TypedStorage(TypedStorage),
    /// A `torch.Tensor` (not a sequence).
    Tensor(Tensor),
    /// Any other object, by its Python type's qualified name: `"float"`, `"NoneType"`.
    Other(String),
}

impl PyArg {
    /// The qualified name of the argument's Python type (`int`, `list`,
    /// `torch.storage.UntypedStorage`, …), as PyTorch's messages print it
    /// inside `<class '…'>`.
    pub fn python_type(&self) -> String {
        match self {
            PyArg::Int(_) => "int".into(),
            PyArg::Sequence(_) => "list".into(),
            PyArg::UntypedStorage(_) => "torch.storage.UntypedStorage".into(),
            PyArg::TypedStorage(_) => "torch.storage.TypedStorage".into(),
            PyArg::Tensor(_) => "torch.Tensor".into(),
            PyArg::Other(name) => name.clone(),
        }
    }
}

/// Which constructor refused a call, for the first part of the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StorageConstructor {
    /// `TypedStorage.__init__`.
    TypedStorage,
    /// A legacy class's `__new__`.
    Legacy(LegacyClass),
}

impl StorageConstructor {
    /// PyTorch's header: what was called and the forms it accepts.
    pub(crate) fn expected_forms(&self) -> String {
        match self {
            StorageConstructor::TypedStorage => "TypedStorage.__init__ received an invalid combination of arguments. Expected one of:\n * (*, torch.device device, torch.dtype dtype)\n * (int size, *, torch.device device, torch.dtype dtype)\n * (Sequence data, *, torch.device device, torch.dtype dtype)\n * (*, UntypedStorage wrap_storage, torch.dtype dtype)".to_owned(),
            StorageConstructor::Legacy(class) => format!("<class '{class}'>.__new__ received an invalid combination of arguments. Expected one of:\n * no arguments\n * (int size)\n * (Sequence data)\n * (*, UntypedStorage wrap_storage)"),
        }
    }
}

/// What was wrong with a storage constructor call; `Display` gives PyTorch's
/// last line of the message.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StorageArgProblem {
    /// `device=` given to a legacy class (the class fixes the device).
    DeviceGiven,
    /// `dtype=` given to a legacy class (the class fixes the dtype).
    DTypeGiven,
    /// More than one positional argument.
    TooManyPositional,
    /// A positional argument that is neither an int nor a sequence (a `TypeError` in Python).
    ArgumentType {
        /// The argument's Python type (`float`).
        type_name: String,
    },
    /// Positional arguments together with `wrap_storage`.
    PositionalWithWrapStorage,
    /// A `wrap_storage` that is not an `UntypedStorage` (a `TypeError` in Python).
    WrapStorageType {
        /// The argument's Python type.
        type_name: String,
    },
    /// A `wrap_storage` on another device type than the legacy class's.
    WrapStorageDevice {
        /// The class's device type.
        expected: DeviceType,
        /// The storage's device type.
        found: DeviceType,
    },
    /// `TypedStorage(wrap_storage=…)` without `dtype`.
    DTypeMissing,
    /// `TypedStorage(wrap_storage=…, device=…)`.
    DeviceWithWrapStorage,
}

impl StorageArgProblem {
    /// True where Python raises `TypeError` (else `RuntimeError`).
    pub fn is_type_error(&self) -> bool {
        matches!(
            self,
            StorageArgProblem::ArgumentType { .. } | StorageArgProblem::WrapStorageType { .. }
        )
    }
}

impl fmt::Display for StorageArgProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageArgProblem::DeviceGiven => {
                f.write_str("Keyword argument 'device' cannot be specified")
            }
            StorageArgProblem::DTypeGiven => {
                f.write_str("Keyword argument 'dtype' cannot be specified")
            }
            StorageArgProblem::TooManyPositional => f.write_str("Too many positional arguments"),
            StorageArgProblem::ArgumentType { type_name } => {
                write!(f, "Argument type not recognized: <class '{type_name}'>")
            }
            StorageArgProblem::PositionalWithWrapStorage => {
                f.write_str("No positional arguments should be given when using 'wrap_storage'")
            }
            StorageArgProblem::WrapStorageType { type_name } => write!(
                f,
                "Argument 'wrap_storage' must be UntypedStorage, but got <class '{type_name}'>"
            ),
            StorageArgProblem::WrapStorageDevice { expected, found } => write!(
                f,
                "Device of 'wrap_storage' must be {}, but got {}",
                expected.name(),
                found.name()
            ),
            StorageArgProblem::DTypeMissing => f.write_str("Argument 'dtype' must be specified"),
            StorageArgProblem::DeviceWithWrapStorage => f.write_str(
                "Argument 'device' should not be specified when 'wrap_storage' is given",
            ),
        }
    }
}
