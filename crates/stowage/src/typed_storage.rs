//! Legacy typed storages: [`TypedStorage`], the per-dtype storage classes
//! ([`LegacyStorageClass`]: `FloatStorage`, `LongStorage`, … and their
//! `torch.cuda` twins), [`Storage`] (the class of the default dtype) and
//! `tensor.storage()`.
//!
//! Before `UntypedStorage`, each dtype had its own storage class, and
//! checkpoints still name those classes in their pickles. PyTorch keeps them
//! as a deprecated facade over `TypedStorage` = an untyped storage + a dtype;
//! stowage provides the same facade:
//!
//! - A [`TypedStorage`] is a handle to an [`UntypedStorage`] plus a [`DType`].
//!   Sizes and indices count elements. [`TypedStorage::untyped`] returns the
//!   same bytes, never a copy.
//! - Calling a legacy class ([`LegacyClass::new`], for example
//!   `LegacyStorageClass::FloatStorage.new(LegacyArgs::Size(3))` for
//!   `torch.FloatStorage(3)`) accepts exactly what PyTorch accepts (nothing, a
//!   size, a sequence of values, or `wrap_storage=`) and refuses the rest with
//!   PyTorch's messages ([`Error::StorageArguments`]). The result is a plain
//!   `TypedStorage` of the class's dtype on the class's device, never an
//!   instance of the class, as in PyTorch.
//! - The dtype ↔ class map is the `storage_class` column of
//!   [`crate::dtype::DTYPES`]: exactly PyTorch's 17 classes. Dtypes added
//!   since (uint16, float8, …) have none.
//! - Every public entry point of this legacy API issues PyTorch's deprecation
//!   warning through [`crate::warn`] (once per process by default), except
//!   plain metadata: [`TypedStorage::dtype`] (an attribute in PyTorch) and the
//!   class ↔ dtype lookups. `tensor.untyped_storage()`, loading and saving
//!   never warn.
//!
//! ```
//! use stowage::typed_storage::{LegacyArgs, LegacyStorageClass};
//! use stowage::{DType, Scalar, Tensor};
//! # fn main() -> stowage::Result<()> {
//! # stowage::warn::silence();
//! // s = torch.FloatStorage([1.5, 2, 3])
//! let s = LegacyStorageClass::FloatStorage.new(LegacyArgs::Data(vec![
//!     Scalar::Float(1.5), Scalar::Int(2), Scalar::Int(3),
//! ]))?;
//! assert_eq!((s.dtype(), s.size(), s.nbytes()), (DType::Float32, 3, 12));
//! assert_eq!(s.to_string(), " 1.5\n 2.0\n 3.0\n[stowage.TypedStorage(dtype=torch.float32, device=cpu) of size 3]");
//! // t.storage() is the whole storage, typed; t.untyped_storage() the same bytes
//! let t = Tensor::ones(&[2], DType::Int64)?;
//! assert_eq!(t.storage().pickle_storage_type()?, "LongStorage");
//! assert!(t.storage().untyped().is_same(t.untyped_storage()));
//! # Ok(()) }
//! ```

use std::fmt;
use std::panic::Location;
use std::sync::atomic::{AtomicU8, Ordering};

use num_complex::Complex64;

use crate::dtype::{Kind, DTYPES};
use crate::element::{self, Scalar};
use crate::serialize::{StorageRecord, StorageRef};
use crate::{warn, DType, Device, DeviceType, Error, Result, Tensor, UntypedStorage};

#[track_caller]
fn deprecated() {
    warn::typed_storage_removal(Some(Location::caller()));
}

// ---------------------------------------------------------------------------
// The legacy classes
// ---------------------------------------------------------------------------

/// `a == b` for strings, in a constant context.
const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The dtype whose `storage_class` in [`DTYPES`] is `name`. Evaluated at
/// compile time only: a class missing from the table fails the build.
const fn table_dtype(name: &str) -> DType {
    let mut i = 0;
    while i < DTYPES.len() {
        if let Some(class) = DTYPES[i].storage_class {
            if str_eq(class, name) {
                return DTYPES[i].dtype;
            }
        }
        i += 1;
    }
    panic!("a legacy storage class is missing from the dtype table")
}

/// How many rows of [`DTYPES`] have a legacy class.
const fn table_class_count() -> usize {
    let (mut i, mut n) = (0, 0);
    while i < DTYPES.len() {
        if DTYPES[i].storage_class.is_some() {
            n += 1;
        }
        i += 1;
    }
    n
}

macro_rules! legacy_classes {
    ($($name:ident),* $(,)?) => {
        /// One of PyTorch's 17 legacy storage classes, by name: `torch.FloatStorage`
        /// and, for the 12 non-quantized ones, its CUDA twin `torch.cuda.FloatStorage`
        /// ([`cuda`](Self::cuda)).
        ///
        /// The names are PyTorch's; each class's dtype comes from the
        /// `storage_class` column of [`crate::dtype::DTYPES`] (checked at compile
        /// time: the enum and the table cannot disagree).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum LegacyStorageClass {
            $(
                #[doc = concat!("`torch.", stringify!($name), "`")]
                $name,
            )*
        }

        const CLASS_NAMES: &[&str] = &[$(stringify!($name)),*];

        impl LegacyStorageClass {
            /// All 17 classes, in PyTorch's documentation order.
            pub const ALL: &'static [LegacyStorageClass] = &[$(LegacyStorageClass::$name),*];
        }
    };
}

legacy_classes! {
    DoubleStorage, FloatStorage, HalfStorage, LongStorage, IntStorage, ShortStorage,
    CharStorage, ByteStorage, BoolStorage, BFloat16Storage, ComplexDoubleStorage,
    ComplexFloatStorage, QUInt8Storage, QInt8Storage, QInt32Storage, QUInt4x2Storage,
    QUInt2x4Storage,
}

/// Each class's dtype, looked up in the dtype table at compile time.
const CLASS_DTYPES: [DType; 17] = {
    let mut out = [DType::Float32; 17];
    let mut i = 0;
    while i < CLASS_NAMES.len() {
        out[i] = table_dtype(CLASS_NAMES[i]);
        i += 1;
    }
    out
};

// The table has exactly these classes: as many rows with a class as names here.
const _: () = assert!(CLASS_NAMES.len() == 17 && table_class_count() == CLASS_NAMES.len());

impl LegacyStorageClass {
    /// The class name (`"FloatStorage"`): PyTorch's pickle storage type.
    pub fn name(self) -> &'static str {
        CLASS_NAMES[self as usize]
    }

    /// The dtype of the class's storages (PyTorch's `torch.FloatStorage.dtype`,
    /// without the warning).
    pub fn dtype(self) -> DType {
        CLASS_DTYPES[self as usize]
    }

    /// The class of `dtype`, if it has one (PyTorch's `_dtype_to_storage_type_map`).
    /// Dtypes newer than the legacy classes (uint16, float8, …) have none.
    pub fn for_dtype(dtype: DType) -> Option<LegacyStorageClass> {
        Self::ALL.iter().copied().find(|c| c.dtype() == dtype)
    }

    /// The class named `name` (`"FloatStorage"`): PyTorch's
    /// `_get_dtype_from_pickle_storage_type`, which takes bare names only.
    ///
    /// # Errors
    /// [`Error::UnknownStorageType`] for any other name
    /// (PyTorch: `pickle storage type "X" is not recognized`).
    pub fn from_name(name: &str) -> Result<LegacyStorageClass> {
        Self::ALL
            .iter()
            .copied()
            .find(|c| c.name() == name)
            .ok_or_else(|| Error::UnknownStorageType {
                name: name.to_owned(),
            })
    }

    /// True for the 12 classes that have a `torch.cuda` twin (all but the quantized ones).
    pub fn has_cuda(self) -> bool {
        self.dtype().kind() != Kind::Quantized
    }

    /// The class in module `torch` (device `cpu`).
    pub fn cpu(self) -> LegacyClass {
        LegacyClass {
            class: self,
            cuda: false,
        }
    }

    /// The class in module `torch.cuda` (device `cuda`), which PyTorch defines
    /// for every class but the quantized ones.
    pub fn cuda(self) -> Option<LegacyClass> {
        self.has_cuda().then_some(LegacyClass {
            class: self,
            cuda: true,
        })
    }

    /// Calls `torch.<Name>(…)`: see [`LegacyClass::new`].
    ///
    /// # Errors
    /// As [`LegacyClass::new`].
    // `__new__` of a legacy class returns a `TypedStorage`, never the class: so does this.
    #[allow(clippy::new_ret_no_self)]
    #[track_caller]
    pub fn new(self, args: LegacyArgs) -> Result<TypedStorage> {
        self.cpu().new(args)
    }
}

impl fmt::Display for LegacyStorageClass {
    /// The bare name, `FloatStorage`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A legacy storage class with its module: `torch.FloatStorage` (cpu) or
/// `torch.cuda.FloatStorage` (cuda). Made by [`LegacyStorageClass::cpu`] and
/// [`LegacyStorageClass::cuda`]; a CUDA quantized class does not exist, in
/// PyTorch or here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LegacyClass {
    class: LegacyStorageClass,
    cuda: bool,
}

impl From<LegacyStorageClass> for LegacyClass {
    /// The class in module `torch`.
    fn from(class: LegacyStorageClass) -> LegacyClass {
        class.cpu()
    }
}

impl LegacyClass {
    /// Every legacy class PyTorch defines: the 17 in `torch`, then the 12 in `torch.cuda`.
    pub fn all() -> impl Iterator<Item = LegacyClass> {
        let cpu = LegacyStorageClass::ALL.iter().map(|c| c.cpu());
        let cuda = LegacyStorageClass::ALL.iter().filter_map(|c| c.cuda());
        cpu.chain(cuda)
    }

    /// The class by name, without its module.
    pub fn storage_class(self) -> LegacyStorageClass {
        self.class
    }

    /// True for the `torch.cuda` classes.
    pub fn is_cuda(self) -> bool {
        self.cuda
    }

    /// The dtype of the class's storages.
    pub fn dtype(self) -> DType {
        self.class.dtype()
    }

    /// The device type the module gives (PyTorch's `_get_device_from_module`):
    /// `cuda` for `torch.cuda`, `cpu` for `torch`.
    pub fn device_type(self) -> DeviceType {
        if self.cuda {
            DeviceType::Cuda
        } else {
            DeviceType::Cpu
        }
    }

    /// The device new storages of the class are put on: `cpu`, or `cuda:0`
    /// for the CUDA classes (PyTorch's current CUDA device; stowage keeps the
    /// bytes in host memory).
    pub fn device(self) -> Device {
        if self.cuda {
            Device::cuda(0)
        } else {
            Device::CPU
        }
    }

    /// The module: `"torch"` or `"torch.cuda"`.
    pub fn module(self) -> &'static str {
        if self.cuda {
            "torch.cuda"
        } else {
            "torch"
        }
    }

    /// The qualified name, `torch.cuda.FloatStorage` (as PyTorch's `storage.type()` reports it).
    pub fn path(self) -> String {
        format!("{}.{}", self.module(), self.class.name())
    }

    /// The class at a qualified path (`torch.FloatStorage`, `torch.cuda.HalfStorage`).
    pub fn from_path(path: &str) -> Option<LegacyClass> {
        let (module, name) = path.rsplit_once('.')?;
        let class = LegacyStorageClass::from_name(name).ok()?;
        match module {
            "torch" => Some(class.cpu()),
            "torch.cuda" => class.cuda(),
            _ => None,
        }
    }

    /// Calls the class: `torch.FloatStorage()`, `torch.FloatStorage(3)`,
    /// `torch.FloatStorage([1, 2, 3])`, `torch.FloatStorage(wrap_storage=s)`,
    /// or any other call described by [`LegacyArgs::Call`]. Warns.
    ///
    /// The result is a [`TypedStorage`] of the class's dtype on the class's
    /// device (`cpu`, or `cuda:0` for CUDA classes). `Size(n)` allocates `n`
    /// zeroed elements; `Data` converts each value as `torch.tensor(data,
    /// dtype=…)` does; `WrapStorage` shares the given bytes (the size in
    /// elements is `nbytes / element_size`, rounded down).
    ///
    /// # Errors
    /// [`Error::StorageArguments`] with PyTorch's message for each call PyTorch
    /// refuses, checked in PyTorch's order: a `device` or `dtype` keyword,
    /// more than one positional argument, a positional argument that is
    /// neither an int nor a sequence, positional arguments with `wrap_storage`,
    /// a `wrap_storage` that is not an `UntypedStorage`, a `wrap_storage` on
    /// another device type than the class's. A negative size is
    /// [`Error::InvalidArgument`]; values that do not fit the dtype are
    /// [`Error::ValueOverflow`] or [`Error::ComplexNotReal`]; allocation failures as
    /// [`UntypedStorage::new_on`].
    // `__new__` of a legacy class returns a `TypedStorage`, never the class: so does this.
    #[allow(clippy::new_ret_no_self)]
    #[track_caller]
    pub fn new(self, args: LegacyArgs) -> Result<TypedStorage> {
        deprecated();
        self.call(StorageCall::from(args))
    }

    fn call(self, call: StorageCall) -> Result<TypedStorage> {
        let refuse = |problem| Error::StorageArguments {
            constructor: StorageConstructor::Legacy(self),
            problem,
        };
        if call.device.is_some() {
            return Err(refuse(StorageArgProblem::DeviceGiven));
        }
        if call.dtype.is_some() {
            return Err(refuse(StorageArgProblem::DTypeGiven));
        }
        match call.wrap_storage {
            None => {
                if call.args.len() > 1 {
                    return Err(refuse(StorageArgProblem::TooManyPositional));
                }
                let not_int_or_sequence =
                    |a: &&PyArg| !matches!(a, PyArg::Int(_) | PyArg::Sequence(_));
                if let Some(arg) = call.args.first().filter(not_int_or_sequence) {
                    return Err(refuse(StorageArgProblem::ArgumentType {
                        type_name: arg.python_type(),
                    }));
                }
                TypedStorage::init(StorageCall {
                    dtype: Some(self.dtype()),
                    device: Some(self.device()),
                    ..call
                })
            }
            Some(wrap) => {
                if !call.args.is_empty() {
                    return Err(refuse(StorageArgProblem::PositionalWithWrapStorage));
                }
                let PyArg::UntypedStorage(storage) = wrap else {
                    return Err(refuse(StorageArgProblem::WrapStorageType {
                        type_name: wrap.python_type(),
                    }));
                };
                let found = storage.device().kind;
                if found != self.device_type() {
                    return Err(refuse(StorageArgProblem::WrapStorageDevice {
                        expected: self.device_type(),
                        found,
                    }));
                }
                Ok(TypedStorage::internal(storage, self.dtype()))
            }
        }
    }

    /// Python's `isinstance(storage, torch.FloatStorage)`: true when the
    /// storage's dtype is the class's and its device type is the module's
    /// (PyTorch's `_LegacyStorageMeta.__instancecheck__`).
    pub fn is_instance(self, storage: &TypedStorage) -> bool {
        storage.dtype == self.dtype() && storage.storage.device().kind == self.device_type()
    }
}

impl fmt::Display for LegacyClass {
    /// The qualified name, `torch.FloatStorage` or `torch.cuda.FloatStorage`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.module(), self.class.name())
    }
}

/// The legacy class PyTorch would report for a storage of `dtype` on `device`
/// (`_get_legacy_storage_class`): cpu and cuda only, and no quantized cuda class.
fn legacy_class_of(dtype: DType, device: Device) -> Option<LegacyClass> {
    let class = LegacyStorageClass::for_dtype(dtype)?;
    match device.kind {
        DeviceType::Cpu => Some(class.cpu()),
        DeviceType::Cuda => class.cuda(),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// `Storage` and the default dtype
// ---------------------------------------------------------------------------

static DEFAULT_DTYPE: AtomicU8 = AtomicU8::new(DType::Float32 as u8);

/// The process's default floating-point dtype (PyTorch's `torch.get_default_dtype()`),
/// `float32` until [`set_default_dtype`] changes it. It names [`Storage`]'s class
/// and is the dtype of [`TypedStorage::construct`] calls without one.
pub fn default_dtype() -> DType {
    let i = DEFAULT_DTYPE.load(Ordering::SeqCst) as usize;
    DTYPES.get(i).map_or(DType::Float32, |row| row.dtype)
}

/// Sets the process's default dtype (PyTorch's `torch.set_default_dtype`).
/// PyTorch accepts only the floating-point dtypes that have a legacy class:
/// float64, float32, float16 and bfloat16.
///
/// # Errors
/// [`Error::DefaultDType`] for any other dtype, with PyTorch's message
/// ("only floating-point types are supported as the default type", or
/// "couldn't find storage object Float8_e5m2Storage" for the newer floats).
pub fn set_default_dtype(dtype: DType) -> Result<()> {
    if !dtype.is_floating_point() || dtype.storage_class().is_none() {
        return Err(Error::DefaultDType { dtype });
    }
    DEFAULT_DTYPE.store(dtype as u8, Ordering::SeqCst);
    Ok(())
}

/// The `torch.Storage` of PyTorch: the legacy class of the default dtype
/// (`FloatStorage` unless [`set_default_dtype`] changed it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Storage;

impl Storage {
    /// The class `torch.Storage` names now (`torch.FloatStorage` by default).
    pub fn class() -> LegacyClass {
        LegacyStorageClass::for_dtype(default_dtype())
            .unwrap_or(LegacyStorageClass::FloatStorage)
            .cpu()
    }

    /// Calls `torch.Storage(…)`: the class of the default dtype. Warns.
    ///
    /// # Errors
    /// As [`LegacyClass::new`].
    // `__new__` of a legacy class returns a `TypedStorage`, never the class: so does this.
    #[allow(clippy::new_ret_no_self)]
    #[track_caller]
    pub fn new(args: LegacyArgs) -> Result<TypedStorage> {
        Self::class().new(args)
    }
}

// ---------------------------------------------------------------------------
// Constructor arguments
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Value conversion, checked as PyTorch checks it
// ---------------------------------------------------------------------------

/// The dtype PyTorch reads and writes a quantized dtype's elements through
/// (its integer representation); other dtypes are themselves.
fn interpret(dtype: DType) -> DType {
    match dtype {
        DType::QUInt8 | DType::QUInt4x2 | DType::QUInt2x4 => DType::UInt8,
        DType::QInt8 => DType::Int8,
        DType::QInt32 => DType::Int32,
        d => d,
    }
}

/// The route a value takes into storage, which decides PyTorch's checks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    /// `torch.tensor(data, dtype=…)` (constructing from data): integer dtypes
    /// are range-checked and named as dtypes (`int8`); floats are not checked.
    Store,
    /// `storage[i] = v`: c10's `checked_convert` for integers, float32 and the
    /// complex floats, named as C++ types (`int8_t`).
    Set,
    /// `storage.fill_(v)`: as `Set`, and the reduced-precision floats too.
    Fill,
}

/// The range a C++ element type holds, for c10's `overflows`.
#[derive(Clone, Copy)]
enum Range {
    /// Never overflows (float64, bool, …).
    Any,
    /// An integer of `bits` bits.
    Int { signed: bool, bits: u32 },
    /// A float with largest finite value `max`.
    Float { max: f64, inf: bool, nan: bool },
    /// A complex number whose parts are such floats.
    Complex { max: f64, inf: bool, nan: bool },
}

fn range_and_cpp_name(dtype: DType) -> (Range, &'static str) {
    use DType as D;
    let int = |signed, bits| Range::Int { signed, bits };
    let float = |max, inf, nan| Range::Float { max, inf, nan };
    match interpret(dtype) {
        D::UInt8 => (int(false, 8), "uint8_t"),
        D::Int8 => (int(true, 8), "int8_t"),
        D::Int16 => (int(true, 16), "int16_t"),
        D::Int32 => (int(true, 32), "int"),
        D::Int64 => (int(true, 64), "int64_t"),
        D::UInt16 => (int(false, 16), "uint16_t"),
        D::UInt32 => (int(false, 32), "uint32_t"),
        D::UInt64 => (int(false, 64), "uint64_t"),
        D::Float32 => (float(f32::MAX as f64, true, true), "float"),
        D::Float16 => (float(65504.0, true, true), "c10::Half"),
        D::BFloat16 => (float(3.3895313892515355e38, true, true), "c10::BFloat16"),
        D::Float8E4M3Fn => (float(448.0, false, true), "c10::Float8_e4m3fn"),
        D::Float8E5M2 => (float(57344.0, true, true), "c10::Float8_e5m2"),
        D::Float8E4M3Fnuz => (float(240.0, false, true), "c10::Float8_e4m3fnuz"),
        D::Float8E5M2Fnuz => (float(57344.0, false, true), "c10::Float8_e5m2fnuz"),
        D::Complex64 => (
            Range::Complex {
                max: f32::MAX as f64,
                inf: true,
                nan: true,
            },
            "c10::complex<float>",
        ),
        D::Complex32 => (
            Range::Complex {
                max: 65504.0,
                inf: true,
                nan: true,
            },
            "c10::complex<c10::Half>",
        ),
        _ => (Range::Any, ""),
    }
}

fn float_overflows(f: f64, max: f64, inf: bool, nan: bool) -> bool {
    if inf && f.is_infinite() {
        return false;
    }
    if !nan && f.is_nan() {
        return true;
    }
    f < -max || f > max
}

/// c10's `overflows<To, From>(value)`.
fn overflows(value: Scalar, range: Range) -> bool {
    match range {
        Range::Any => false,
        Range::Int { signed, bits } => {
            let max: i128 = if signed {
                (1i128 << (bits - 1)) - 1
            } else {
                (1i128 << bits) - 1
            };
            let min: i128 = if signed { -(1i128 << (bits - 1)) } else { 0 };
            let float = |f: f64| f.is_nan() || f < min as f64 || f > max as f64;
            match value {
                Scalar::Bool(_) => false,
                // Unsigned targets let negative integers wrap (`-1` → 255).
                Scalar::Int(i) if !signed => i as i128 > max || (i < 0 && -(i as i128) > max),
                Scalar::Int(i) => (i as i128) < min || i as i128 > max,
                Scalar::UInt(u) => u as i128 > max,
                Scalar::Float(f) => float(f),
                Scalar::Complex(c) => c.im != 0.0 || float(c.re),
            }
        }
        Range::Float { max, inf, nan } => match value {
            Scalar::Bool(_) => false,
            Scalar::Complex(c) => c.im != 0.0 || float_overflows(c.re, max, inf, nan),
            other => float_overflows(other.to_f64(), max, inf, nan),
        },
        Range::Complex { max, inf, nan } => {
            let c = value.to_complex();
            !matches!(value, Scalar::Bool(_))
                && (float_overflows(c.re, max, inf, nan) || float_overflows(c.im, max, inf, nan))
        }
    }
}

/// Checks that `value` may be written into an element of `dtype` along `path`.
fn check_value(dtype: DType, value: Scalar, path: Path) -> Result<()> {
    if !dtype.has_scalar_values() {
        return Err(Error::DTypeUnsupported {
            op: "writing an element",
            dtype,
        });
    }
    let target = interpret(dtype);
    let (range, cpp) = range_and_cpp_name(target);
    let integer = matches!(range, Range::Int { .. });
    match path {
        Path::Store => {
            // torch.tensor: complex values only go into complex and bool elements.
            if let Scalar::Complex(_) = value {
                if !target.is_complex() && target != DType::Bool {
                    return Err(Error::ComplexNotReal { integer });
                }
            }
            if integer && overflows(value, range) {
                return Err(Error::ValueOverflow {
                    type_name: target.name(),
                });
            }
        }
        Path::Set | Path::Fill => {
            let checked = match range {
                Range::Float { .. } => path == Path::Fill || target == DType::Float32,
                _ => true,
            };
            if checked && overflows(value, range) {
                return Err(Error::ValueOverflow { type_name: cpp });
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// TypedStorage
// ---------------------------------------------------------------------------

/// PyTorch's `torch.TypedStorage` (deprecated): an [`UntypedStorage`] handle
/// and a [`DType`]. Sizes and indices count elements.
///
/// `Clone` makes another handle to the same storage (Python's `b = a`);
/// [`deep_clone`](Self::deep_clone) copies the bytes (PyTorch's `clone()`).
/// Every method but [`dtype`](Self::dtype) issues the deprecation warning
/// ([`crate::warn`]).
#[derive(Clone)]
pub struct TypedStorage {
    storage: UntypedStorage,
    dtype: DType,
}

/// What [`TypedStorage::copy_`] copies from: a typed or an untyped storage.
pub trait CopySource: sealed::Sealed {
    /// The bytes to copy.
    #[doc(hidden)]
    fn source_storage(&self) -> &UntypedStorage;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::TypedStorage {}
    impl Sealed for crate::UntypedStorage {}
}

impl CopySource for TypedStorage {
    fn source_storage(&self) -> &UntypedStorage {
        &self.storage
    }
}

impl CopySource for UntypedStorage {
    fn source_storage(&self) -> &UntypedStorage {
        self
    }
}

impl TypedStorage {
    /// Internal constructor (PyTorch's `_internal=True`): never warns.
    pub(crate) fn internal(storage: UntypedStorage, dtype: DType) -> TypedStorage {
        TypedStorage { storage, dtype }
    }

    /// `torch.TypedStorage(size, dtype=dtype, device=device)`: `size` zeroed elements. Warns.
    ///
    /// # Errors
    /// [`Error::QuantizedStorageDevice`] for a quantized dtype on CUDA,
    /// [`Error::SizeOverflow`] when `size * element_size` overflows, allocation failure.
    #[track_caller]
    pub fn new(size: usize, dtype: DType, device: Device) -> Result<TypedStorage> {
        deprecated();
        check_device(dtype, device)?;
        Self::alloc(size, dtype, device)
    }

    /// `torch.TypedStorage(data, dtype=dtype, device=device)`: the values,
    /// converted as `torch.tensor(data, dtype=dtype)` converts them. Warns.
    ///
    /// # Errors
    /// [`Error::ValueOverflow`] for a value outside an integer dtype's range,
    /// [`Error::ComplexNotReal`] for a complex value into a real dtype,
    /// [`Error::DTypeUnsupported`] for dtypes without values (bits),
    /// [`Error::QuantizedStorageDevice`], allocation failure.
    #[track_caller]
    pub fn from_data(data: &[Scalar], dtype: DType, device: Device) -> Result<TypedStorage> {
        deprecated();
        check_device(dtype, device)?;
        Self::from_values(data, dtype, device)
    }

    /// `torch.TypedStorage(wrap_storage=storage, dtype=dtype)`: a typed view
    /// of `storage`'s bytes, shared. Warns.
    #[track_caller]
    pub fn wrap(storage: UntypedStorage, dtype: DType) -> TypedStorage {
        deprecated();
        Self::internal(storage, dtype)
    }

    /// `torch.TypedStorage(*args, wrap_storage=…, dtype=…, device=…)`, any
    /// call, checked as PyTorch's `TypedStorage.__init__`. Without `dtype`
    /// the [`default_dtype`] is used, without `device` the cpu. Warns.
    ///
    /// # Errors
    /// [`Error::StorageArguments`] (header `TypedStorage.__init__ received an
    /// invalid combination of arguments`) for: positional arguments with
    /// `wrap_storage`, `wrap_storage` without `dtype`, `wrap_storage` with
    /// `device`, a `wrap_storage` that is not an `UntypedStorage`, an argument
    /// of another type than int or sequence, more than one positional
    /// argument; plus the errors of [`new`](Self::new) and [`from_data`](Self::from_data).
    #[track_caller]
    pub fn construct(call: StorageCall) -> Result<TypedStorage> {
        deprecated();
        Self::init(call)
    }

    /// `TypedStorage.__init__` without the warning.
    fn init(call: StorageCall) -> Result<TypedStorage> {
        let refuse = |problem| Error::StorageArguments {
            constructor: StorageConstructor::TypedStorage,
            problem,
        };
        if let Some(wrap) = call.wrap_storage {
            if !call.args.is_empty() {
                return Err(refuse(StorageArgProblem::PositionalWithWrapStorage));
            }
            let Some(dtype) = call.dtype else {
                return Err(refuse(StorageArgProblem::DTypeMissing));
            };
            if call.device.is_some() {
                return Err(refuse(StorageArgProblem::DeviceWithWrapStorage));
            }
            let PyArg::UntypedStorage(storage) = wrap else {
                return Err(refuse(StorageArgProblem::WrapStorageType {
                    type_name: wrap.python_type(),
                }));
            };
            return Ok(Self::internal(storage, dtype));
        }
        let dtype = call.dtype.unwrap_or_else(default_dtype);
        let device = call.device.unwrap_or(Device::CPU);
        check_device(dtype, device)?;
        match call.args.as_slice() {
            [] => Self::alloc(0, dtype, device),
            [PyArg::Int(n)] => {
                let n = usize::try_from(*n).map_err(|_| Error::InvalidArgument {
                    op: "TypedStorage",
                    what: "size (negative)",
                    value: n.to_string(),
                })?;
                Self::alloc(n, dtype, device)
            }
            [PyArg::Sequence(values)] => Self::from_values(values, dtype, device),
            [other] => Err(refuse(StorageArgProblem::ArgumentType {
                type_name: other.python_type(),
            })),
            _ => Err(refuse(StorageArgProblem::TooManyPositional)),
        }
    }

    fn bytes_for(size: usize, dtype: DType) -> Result<usize> {
        size.checked_mul(dtype.size())
            .ok_or_else(|| Error::SizeOverflow {
                what: "typed storage bytes",
                detail: format!("{size} elements of {dtype}"),
            })
    }

    fn alloc(size: usize, dtype: DType, device: Device) -> Result<TypedStorage> {
        let nbytes = Self::bytes_for(size, dtype)?;
        Ok(Self::internal(
            UntypedStorage::new_on(nbytes, device)?,
            dtype,
        ))
    }

    fn from_values(values: &[Scalar], dtype: DType, device: Device) -> Result<TypedStorage> {
        for &v in values {
            check_value(dtype, v, Path::Store)?;
        }
        let s = Self::alloc(values.len(), dtype, device)?;
        if s.storage.has_data() {
            let es = dtype.size();
            s.storage.with_bytes_mut("TypedStorage", |b| {
                for (&v, out) in values.iter().zip(b.chunks_exact_mut(es)) {
                    element::write(dtype, v, out)?;
                }
                Ok::<_, Error>(())
            })??;
        }
        Ok(s)
    }

    /// A typed view of a checkpoint's storage record, as `torch.load` makes it
    /// for a legacy class (`None` for an `UntypedStorage` record). Loading is
    /// an internal path: this never warns.
    pub fn from_record(record: &StorageRecord) -> Option<TypedStorage> {
        record
            .dtype
            .map(|dtype| Self::internal(record.storage.clone(), dtype))
    }

    /// A typed view of a storage object found in a checkpoint's value graph
    /// (`None` for an `UntypedStorage`). Never warns.
    pub fn from_storage_ref(storage: &StorageRef) -> Option<TypedStorage> {
        storage
            .dtype
            .map(|dtype| Self::internal(storage.storage.clone(), dtype))
    }

    /// The element type (PyTorch's `storage.dtype` attribute, which does not warn).
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    fn size_(&self) -> usize {
        self.storage.nbytes() / self.dtype.size()
    }

    /// The number of elements: `nbytes() / element_size()`, rounded down (also `len(s)`). Warns.
    #[doc(alias = "len")]
    #[track_caller]
    pub fn size(&self) -> usize {
        deprecated();
        self.size_()
    }

    /// Size in bytes. Warns.
    #[track_caller]
    pub fn nbytes(&self) -> usize {
        deprecated();
        self.storage.nbytes()
    }

    /// Bytes per element. Warns.
    #[track_caller]
    pub fn element_size(&self) -> usize {
        deprecated();
        self.dtype.size()
    }

    /// The device. Warns.
    #[track_caller]
    pub fn device(&self) -> Device {
        deprecated();
        self.storage.device()
    }

    /// True on a CUDA device. Warns.
    #[track_caller]
    pub fn is_cuda(&self) -> bool {
        deprecated();
        self.storage.is_cuda()
    }

    /// The address of the first byte (0 without bytes). Warns.
    #[track_caller]
    pub fn data_ptr(&self) -> usize {
        deprecated();
        self.storage.data_ptr()
    }

    /// Whether [`resize_`](Self::resize_) may change the size. Warns.
    #[track_caller]
    pub fn resizable(&self) -> bool {
        deprecated();
        self.storage.resizable()
    }

    /// The untyped storage underneath: the same bytes, not a copy
    /// (PyTorch's `storage.untyped()`). Warns.
    #[track_caller]
    pub fn untyped(&self) -> UntypedStorage {
        deprecated();
        self.storage.clone()
    }

    /// The element at `index` (negative counts from the end). Quantized
    /// elements read as their integer representation. Warns.
    ///
    /// # Errors
    /// [`Error::StorageIndexOutOfRange`] (PyTorch: "index 3 out of range for
    /// storage of size 3"), [`Error::NoData`] without bytes (meta),
    /// [`Error::DTypeUnsupported`] for dtypes without values.
    #[track_caller]
    pub fn get(&self, index: isize) -> Result<Scalar> {
        deprecated();
        let es = self.dtype.size();
        self.storage.with_bytes("__getitem__", |b| {
            let size = b.len() / es;
            let i = wrap_storage_index(index, size)?;
            element::read(self.dtype, &b[i * es..(i + 1) * es])
        })?
    }

    /// Writes `value`, converted to the dtype, at `index`. Warns.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] (PyTorch indexes a tensor here: "index 5 is
    /// out of bounds for dimension 0 with size 2"), [`Error::ValueOverflow`]
    /// for a value the element type cannot hold, [`Error::NoData`],
    /// [`Error::DTypeUnsupported`].
    #[track_caller]
    pub fn set(&self, index: isize, value: impl Into<Scalar>) -> Result<()> {
        deprecated();
        let value = value.into();
        let es = self.dtype.size();
        self.storage.with_bytes_mut("__setitem__", |b| {
            let i = crate::layout::wrap_index(index, 0, b.len() / es)?;
            check_value(self.dtype, value, Path::Set)?;
            element::write(self.dtype, value, &mut b[i * es..(i + 1) * es])
        })?
    }

    /// Every element, in order. Warns.
    ///
    /// # Errors
    /// [`Error::NoData`] without bytes, [`Error::DTypeUnsupported`] for dtypes without values.
    #[track_caller]
    pub fn tolist(&self) -> Result<Vec<Scalar>> {
        deprecated();
        let es = self.dtype.size();
        self.storage.with_bytes("tolist", |b| {
            b.chunks_exact(es)
                .map(|e| element::read(self.dtype, e))
                .collect()
        })?
    }

    /// Sets every element to `value`. Warns.
    ///
    /// # Errors
    /// [`Error::ValueOverflow`] for a value the element type cannot hold,
    /// [`Error::NoData`], [`Error::DTypeUnsupported`].
    #[track_caller]
    pub fn fill_(&self, value: impl Into<Scalar>) -> Result<&Self> {
        deprecated();
        let value = value.into();
        check_value(self.dtype, value, Path::Fill)?;
        let es = self.dtype.size();
        let mut one = vec![0u8; es];
        element::write(self.dtype, value, &mut one)?;
        self.storage.with_bytes_mut("fill_", |b| {
            for e in b.chunks_exact_mut(es) {
                e.copy_from_slice(&one);
            }
        })?;
        Ok(self)
    }

    /// Copies the bytes of `source` (a typed or untyped storage of the same
    /// byte size) into this storage; no dtype conversion, as in PyTorch. Warns.
    ///
    /// # Errors
    /// [`Error::StorageSizeMismatch`] when the byte sizes differ, [`Error::NoData`].
    #[track_caller]
    pub fn copy_(&self, source: &impl CopySource) -> Result<&Self> {
        deprecated();
        self.storage.copy_(source.source_storage())?;
        Ok(self)
    }

    /// A new storage with a copy of the bytes (PyTorch's `clone()`). Warns.
    ///
    /// # Errors
    /// Allocation failure.
    #[track_caller]
    pub fn deep_clone(&self) -> Result<TypedStorage> {
        deprecated();
        Ok(Self::internal(self.storage.deep_clone()?, self.dtype))
    }

    /// Changes the size to `size` elements (`size * element_size` bytes),
    /// keeping the common prefix and zero-filling growth. Warns.
    ///
    /// # Errors
    /// [`Error::SizeOverflow`], [`Error::NotResizable`], allocation failure.
    #[track_caller]
    pub fn resize_(&self, size: usize) -> Result<&Self> {
        deprecated();
        self.storage.resize_(Self::bytes_for(size, self.dtype)?)?;
        Ok(self)
    }

    /// True when other processes can see the bytes. Warns.
    #[track_caller]
    pub fn is_shared(&self) -> bool {
        deprecated();
        self.storage.is_shared()
    }

    /// Moves the bytes into shared memory ([`UntypedStorage::share_memory_`]). Warns.
    ///
    /// # Errors
    /// As [`UntypedStorage::share_memory_`].
    #[track_caller]
    pub fn share_memory_(&self) -> Result<&Self> {
        deprecated();
        self.storage.share_memory_()?;
        Ok(self)
    }

    /// True when the bytes are page-locked. Warns.
    #[track_caller]
    pub fn is_pinned(&self) -> bool {
        deprecated();
        self.storage.is_pinned()
    }

    /// A copy in page-locked memory ([`UntypedStorage::pin_memory`]). Warns.
    ///
    /// # Errors
    /// As [`UntypedStorage::pin_memory`].
    #[track_caller]
    pub fn pin_memory(&self) -> Result<TypedStorage> {
        deprecated();
        Ok(Self::internal(self.storage.pin_memory()?, self.dtype))
    }

    /// This storage on the cpu (itself when it already is). Warns.
    ///
    /// # Errors
    /// As [`UntypedStorage::cpu`].
    #[track_caller]
    pub fn cpu(&self) -> Result<TypedStorage> {
        deprecated();
        Ok(Self::internal(self.storage.cpu()?, self.dtype))
    }

    /// This storage on `device` (itself when already there, else a copy). Warns.
    ///
    /// # Errors
    /// [`Error::QuantizedStorageDevice`] for quantized dtypes, whatever the
    /// device (PyTorch: "Cannot create CUDA storage with quantized dtype");
    /// as [`UntypedStorage::to`].
    #[track_caller]
    pub fn to(&self, device: Device) -> Result<TypedStorage> {
        deprecated();
        if self.dtype.kind() == Kind::Quantized {
            return Err(Error::QuantizedStorageDevice {
                device: device.kind,
            });
        }
        Ok(Self::internal(self.storage.to(device)?, self.dtype))
    }

    /// This storage on `cuda:0`. Warns.
    ///
    /// # Errors
    /// As [`to`](Self::to).
    #[track_caller]
    pub fn cuda(&self) -> Result<TypedStorage> {
        deprecated();
        if self.dtype.kind() == Kind::Quantized {
            return Err(Error::QuantizedStorageDevice {
                device: DeviceType::Cuda,
            });
        }
        Ok(Self::internal(
            self.storage.to(Device::cuda(0))?,
            self.dtype,
        ))
    }

    /// A new storage holding the elements converted to `dtype` (PyTorch's
    /// `storage.double()`, `storage.half()`, …; always a copy). Warns.
    ///
    /// # Errors
    /// [`Error::DTypeUnsupported`] from or to a quantized dtype or a dtype
    /// without values; [`Error::NoData`]; allocation failure.
    #[track_caller]
    pub fn to_dtype(&self, dtype: DType) -> Result<TypedStorage> {
        deprecated();
        for d in [self.dtype, dtype] {
            if d.kind() == Kind::Quantized || !d.has_scalar_values() {
                return Err(Error::DTypeUnsupported {
                    op: "storage dtype conversion",
                    dtype: d,
                });
            }
        }
        let values = self.storage.with_bytes("to", |b| {
            b.chunks_exact(self.dtype.size())
                .map(|e| element::read(self.dtype, e))
                .collect::<Result<Vec<_>>>()
        })??;
        let out = Self::alloc(values.len(), dtype, self.storage.device())?;
        let es = dtype.size();
        out.storage.with_bytes_mut("to", |b| {
            for (&v, e) in values.iter().zip(b.chunks_exact_mut(es)) {
                element::write(dtype, v, e)?;
            }
            Ok::<_, Error>(())
        })??;
        Ok(out)
    }

    /// The legacy class name PyTorch pickles this storage as (`"FloatStorage"`). Warns.
    ///
    /// # Errors
    /// [`Error::NoLegacyStorageClass`] for dtypes without a class (PyTorch's
    /// `KeyError: dtype torch.uint16 is not recognized`).
    #[track_caller]
    pub fn pickle_storage_type(&self) -> Result<&'static str> {
        deprecated();
        LegacyStorageClass::for_dtype(self.dtype)
            .map(LegacyStorageClass::name)
            .ok_or(Error::NoLegacyStorageClass { dtype: self.dtype })
    }

    /// The legacy class of this storage's dtype and device, if PyTorch has one
    /// (`torch.cuda.FloatStorage` for a float32 CUDA storage; none for meta
    /// storages, newer dtypes and quantized CUDA storages). Warns.
    #[track_caller]
    pub fn legacy_class(&self) -> Option<LegacyClass> {
        deprecated();
        legacy_class_of(self.dtype, self.storage.device())
    }

    /// PyTorch's `storage.type()`: the legacy class's path (`"torch.FloatStorage"`),
    /// or `"torch.storage.TypedStorage"` when there is none. Warns.
    #[track_caller]
    pub fn type_name(&self) -> String {
        deprecated();
        legacy_class_of(self.dtype, self.storage.device()).map_or_else(
            || "torch.storage.TypedStorage".to_owned(),
            LegacyClass::path,
        )
    }
}

/// c10's name of a scalar type: the dtype name with a capital first letter
/// (`Float8_e5m2`), as PyTorch's storage-object lookup spells it.
pub(crate) fn c10_name(dtype: DType) -> String {
    let mut chars = dtype.name().chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// Checks that a new storage of `dtype` may live on `device`.
fn check_device(dtype: DType, device: Device) -> Result<()> {
    if dtype.kind() == Kind::Quantized && device.is_cuda() {
        return Err(Error::QuantizedStorageDevice {
            device: DeviceType::Cuda,
        });
    }
    Ok(())
}

/// PyTorch's `TypedStorage._maybe_wrap_index` for reads.
fn wrap_storage_index(index: isize, size: usize) -> Result<usize> {
    let i = if index < 0 {
        index.checked_add_unsigned(size).unwrap_or(-1)
    } else {
        index
    };
    match usize::try_from(i) {
        Ok(i) if i < size => Ok(i),
        _ => Err(Error::StorageIndexOutOfRange { index, size }),
    }
}

// ---------------------------------------------------------------------------
// Tensor.storage()
// ---------------------------------------------------------------------------

impl Tensor {
    /// The whole storage this tensor views, typed with the tensor's dtype
    /// (PyTorch's deprecated `tensor.storage()`). Warns; use
    /// [`untyped_storage`](Tensor::untyped_storage) instead, which never does.
    #[track_caller]
    pub fn storage(&self) -> TypedStorage {
        deprecated();
        TypedStorage::internal(self.untyped_storage().clone(), self.dtype())
    }

    /// The legacy class of the tensor's storage, if PyTorch has one
    /// (PyTorch's `tensor.storage_type()`). Warns.
    #[track_caller]
    pub fn storage_type(&self) -> Option<LegacyClass> {
        deprecated();
        legacy_class_of(self.dtype(), self.device())
    }
}

// ---------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------

/// Python's `repr(float)`: the shortest digits that round-trip, in fixed
/// notation for exponents -4 to 15 and scientific (`1e+16`) outside;
/// `add_dot_zero` appends `.0` to integral fixed values, as `repr(float)`
/// does (not inside `repr(complex)`).
fn py_float(x: f64, add_dot_zero: bool) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let mut s = format!("{x}");
        if add_dot_zero && !s.contains('.') {
            s.push_str(".0");
        }
        s
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    }
}

/// Python's `repr(complex)`: `2j`, `(1+2j)`, `(-0-2j)`, `(1e+20+nanj)`.
fn py_complex(c: Complex64) -> String {
    let im = py_float(c.im, false);
    if c.re == 0.0 && c.re.is_sign_positive() {
        return format!("{im}j");
    }
    let sign = if c.im.is_nan() || c.im.is_sign_positive() {
        "+"
    } else {
        ""
    };
    format!("({}{sign}{im}j)", py_float(c.re, false))
}

/// Python's `str()` of the value `storage[i]` returns.
fn py_scalar(v: Scalar) -> String {
    match v {
        Scalar::Bool(true) => "True".into(),
        Scalar::Bool(false) => "False".into(),
        Scalar::Int(i) => i.to_string(),
        Scalar::UInt(u) => u.to_string(),
        Scalar::Float(f) => py_float(f, true),
        Scalar::Complex(c) => py_complex(c),
    }
}

impl fmt::Display for TypedStorage {
    /// PyTorch's layout: each element on its own line after a space, then
    /// `[stowage.TypedStorage(dtype=torch.float32, device=cpu) of size 3]`
    /// (PyTorch says `torch.storage.TypedStorage`); `...` instead of the
    /// elements when the storage has no bytes. Elements of dtypes without
    /// values (bits) print as unsigned integers, where PyTorch raises. Warns.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        warn::typed_storage_removal(None);
        let es = self.dtype.size();
        let lines = self.storage.with_bytes("print", |b| {
            let mut lines = String::new();
            for (i, e) in b.chunks_exact(es).enumerate() {
                if i > 0 {
                    lines.push('\n');
                }
                lines.push(' ');
                match element::read(self.dtype, e) {
                    Ok(v) => lines.push_str(&py_scalar(v)),
                    Err(_) => lines.push_str(&raw_unsigned(e).to_string()),
                }
            }
            (lines, b.len() / es)
        });
        let (lines, size) = match lines {
            Ok((l, n)) => (if n == 0 { " ".to_owned() } else { l }, n),
            Err(_) => ("...".to_owned(), self.size_()),
        };
        write!(
            f,
            "{lines}\n[stowage.TypedStorage(dtype={}, device={}) of size {size}]",
            self.dtype,
            self.storage.device()
        )
    }
}

/// An element's bytes as a native-order unsigned integer.
fn raw_unsigned(bytes: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = bytes.len().min(8);
    if cfg!(target_endian = "little") {
        buf[..n].copy_from_slice(&bytes[..n]);
    } else {
        buf[8 - n..].copy_from_slice(&bytes[bytes.len() - n..]);
    }
    u64::from_ne_bytes(buf)
}

impl fmt::Debug for TypedStorage {
    /// Never warns.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedStorage")
            .field("dtype", &self.dtype)
            .field("device", &self.storage.device())
            .field("nbytes", &self.storage.nbytes())
            .finish()
    }
}

#[cfg(test)]
mod tests {
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
        let r = |d| range_and_cpp_name(d).0;
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
}
