//! Errors of storages: bytes, memory, devices and the typed-storage classes.

use crate::{DType, Device};

/// A storage that cannot do what was asked: too few bytes, no bytes (meta),
/// memory the system would not give, a device, a typed-storage constructor.
///
/// Part of [`Error`](crate::Error), as [`Error::Storage`](crate::Error::Storage).
#[derive(thiserror::Error, strum::IntoStaticStr)]
#[non_exhaustive]
pub enum StorageError {
    /// `share_memory_` of a meta storage: only CPU bytes go into shared memory.
    #[error("{op}: only available on CPU")]
    ShareMemoryNotCpu {
        /// PyTorch's function for the strategy (`_share_fd_`, `_share_filename_`).
        op: &'static str,
    },
    /// A name with a NUL byte where the operating system takes a C string.
    #[error("name {name:?} contains a NUL byte")]
    NulInName {
        /// The name given.
        name: String,
    },
    /// A layout reaching past the end of its storage.
    #[error("layout needs {needed} bytes but the storage holds {nbytes} (shape {shape:?}, stride {stride:?}, offset {offset}, {element_size}-byte elements)")]
    OutOfStorage {
        /// Bytes the layout reaches (offset + furthest element + 1, times element size).
        needed: u128,
        /// Bytes the storage holds.
        nbytes: usize,
        /// Shape of the layout.
        shape: Vec<usize>,
        /// Stride of the layout, in elements.
        stride: Vec<usize>,
        /// Storage offset, in elements.
        offset: usize,
        /// Element size in bytes.
        element_size: usize,
    },
    /// Storage sizes that must agree differ.
    #[error("{op}: size mismatch: destination has {dst} bytes, source has {src}")]
    StorageSizeMismatch {
        /// The operation.
        op: &'static str,
        /// Destination size in bytes.
        dst: usize,
        /// Source size in bytes.
        src: usize,
    },
    /// A typed view of elements whose address is not a multiple of the
    /// element type's alignment (a storage over part of a mapped file, say).
    #[error("{op}: the {dtype} elements start at address {address:#x}, which is not aligned to {align} bytes")]
    Misaligned {
        /// The operation.
        op: &'static str,
        /// The tensor's dtype.
        dtype: DType,
        /// The address of the first element.
        address: usize,
        /// The alignment the element type needs, in bytes.
        align: usize,
    },
    /// A mutable view of a tensor some of whose elements share memory (an
    /// expanded dimension, an overlapping `as_strided`): a mutable view would
    /// alias itself.
    #[error("{op}: the elements of a tensor of shape {shape:?} and stride {stride:?} overlap, so it has no mutable view")]
    OverlappingElements {
        /// The operation.
        op: &'static str,
        /// The tensor's shape.
        shape: Vec<usize>,
        /// The tensor's strides, in elements.
        stride: Vec<usize>,
    },
    /// Data access on a storage that has no bytes (meta device, fake tensors).
    #[error("{op}: not available for '{device}' device type (the storage has no data)")]
    NoData {
        /// The operation.
        op: &'static str,
        /// The storage's device.
        device: Device,
    },
    /// Resizing a storage whose backing cannot change size.
    #[error("Trying to resize storage that is not resizable")]
    NotResizable,
    /// An allocation the system refused.
    #[error("failed to allocate {nbytes} bytes")]
    AllocationFailed {
        /// The size requested.
        nbytes: usize,
    },
    /// A storage shrank while a save was reading it.
    #[error("the storage changed size while the file was written: the tensor needs {needed} bytes, the storage holds {nbytes}")]
    StorageShrank {
        /// Bytes the tensor needs.
        needed: usize,
        /// Bytes the storage held.
        nbytes: usize,
    },
    /// A shared-memory object (named as `shm_open` names it, or described where
    /// it has no name) could not be created, opened, sized or mapped.
    #[error("shared memory {name}: {source}")]
    SharedMemory {
        /// The object's name, or what was being done.
        name: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file shorter than the private mapping asked of it (PyTorch's `from_file` words).
    #[error("file {} size {size} is smaller than the required mapping size {nbytes}", path.display())]
    FileTooSmall {
        /// The file.
        path: std::path::PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The bytes asked for.
        nbytes: usize,
    },
    /// `pin_memory` of a storage that is not in host memory.
    #[error("cannot pin a '{device}' storage: only CPU memory can be pinned")]
    NotPinnable {
        /// The storage's device.
        device: Device,
    },
    /// The kernel refused to lock pages in memory.
    #[error("could not pin {nbytes} bytes in memory (locked-memory limit {}): {source}", limit.map_or("unlimited".to_string(), |l| format!("{l} bytes")))]
    PinFailed {
        /// The bytes asked for.
        nbytes: usize,
        /// The process's `RLIMIT_MEMLOCK` soft limit, if finite.
        limit: Option<u64>,
        /// The error `mlock` gave.
        source: std::io::Error,
    },
    #[cfg(feature = "typed-storage")]
    /// A storage constructor called with arguments PyTorch refuses
    /// (`torch.FloatStorage(1, 2)`, `TypedStorage(wrap_storage=s)` without a dtype, …).
    #[error("{}\n{problem}", constructor.expected_forms())]
    StorageArguments {
        /// The constructor called.
        constructor: crate::typed_storage::StorageConstructor,
        /// What was wrong.
        problem: crate::typed_storage::StorageArgProblem,
    },
    #[cfg(feature = "typed-storage")]
    /// A typed-storage element index outside `[-size, size - 1]`.
    #[error("index {index} out of range for storage of size {size}")]
    StorageIndexOutOfRange {
        /// The index asked for.
        index: isize,
        /// The storage's size in elements.
        size: usize,
    },
    #[cfg(feature = "typed-storage")]
    /// A quantized typed storage asked to live on a device other than the cpu.
    #[error("Cannot create {} storage with quantized dtype", device.name().to_uppercase())]
    QuantizedStorageDevice {
        /// The device type asked for.
        device: crate::DeviceType,
    },
    #[cfg(feature = "typed-storage")]
    /// A dtype without a legacy storage class where one is needed (PyTorch's `KeyError`).
    #[error("dtype {dtype} is not recognized")]
    NoLegacyStorageClass {
        /// The dtype.
        dtype: DType,
    },
    #[cfg(feature = "typed-storage")]
    /// A name that is not one of the 17 legacy storage classes.
    #[error("pickle storage type \"{name}\" is not recognized")]
    UnknownStorageType {
        /// The name given.
        name: String,
    },
    /// A byte range that does not lie inside a storage.
    #[error("bytes {offset}..+{len} are outside the storage of {nbytes} bytes")]
    StorageRange {
        /// The first byte asked for.
        offset: usize,
        /// How many bytes were asked for.
        len: usize,
        /// The storage's size.
        nbytes: usize,
    },
}

crate::error::debug_is_display!(StorageError);
