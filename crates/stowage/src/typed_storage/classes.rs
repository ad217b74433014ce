//! The legacy storage classes (`FloatStorage` …, their `torch.cuda` twins),
//! the default dtype and `Storage`.

use super::*;
use crate::error::StorageError;

/// `a == b` for strings, in a constant context.
pub(super) const fn str_eq(a: &str, b: &str) -> bool {
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
pub(super) const fn table_dtype(name: &str) -> DType {
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
pub(super) const fn table_class_count() -> usize {
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
pub(super) const CLASS_DTYPES: [DType; 17] = {
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
    /// [`StorageError::UnknownStorageType`] for any other name
    /// (PyTorch: `pickle storage type "X" is not recognized`).
    pub fn from_name(name: &str) -> Result<LegacyStorageClass> {
        Self::ALL
            .iter()
            .copied()
            .find(|c| c.name() == name)
            .ok_or_else(|| {
                Error::Storage(StorageError::UnknownStorageType {
                    name: name.to_owned(),
                })
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
    /// [`StorageError::StorageArguments`] with PyTorch's message for each call PyTorch
    /// refuses, checked in PyTorch's order: a `device` or `dtype` keyword,
    /// more than one positional argument, a positional argument that is
    /// neither an int nor a sequence, positional arguments with `wrap_storage`,
    /// a `wrap_storage` that is not an `UntypedStorage`, a `wrap_storage` on
    /// another device type than the class's. A negative size is
    /// [`TensorError::NegativeSize`](crate::TensorError::NegativeSize); values that do not fit the dtype are
    /// [`TensorError::ValueOverflow`](crate::TensorError::ValueOverflow) or [`TensorError::ComplexNotReal`](crate::TensorError::ComplexNotReal); allocation failures as
    /// [`UntypedStorage::new_on`].
    // `__new__` of a legacy class returns a `TypedStorage`, never the class: so does this.
    #[allow(clippy::new_ret_no_self)]
    #[track_caller]
    pub fn new(self, args: LegacyArgs) -> Result<TypedStorage> {
        deprecated();
        self.call(StorageCall::from(args))
    }

    pub(super) fn call(self, call: StorageCall) -> Result<TypedStorage> {
        let refuse = |problem| {
            Error::Storage(StorageError::StorageArguments {
                constructor: StorageConstructor::Legacy(self),
                problem,
            })
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
pub(super) fn legacy_class_of(dtype: DType, device: Device) -> Option<LegacyClass> {
    let class = LegacyStorageClass::for_dtype(dtype)?;
    match device.kind {
        DeviceType::Cpu => Some(class.cpu()),
        DeviceType::Cuda => class.cuda(),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// `Storage`: the class of the default dtype (`crate::dtype::default_dtype`)
// ---------------------------------------------------------------------------

/// The `torch.Storage` of PyTorch: the legacy class of the default dtype
/// (`FloatStorage` unless [`set_default_dtype`](crate::dtype::set_default_dtype) changed it).
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
