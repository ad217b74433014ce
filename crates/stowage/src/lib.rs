//! # stowage
//!
//! PyTorch's tensor storage model and checkpoint format, in Rust, without libtorch.
//!
//! Load a checkpoint (`torch.save`'s zip or legacy format, safetensors, a
//! Hugging Face sharded set, a distributed checkpoint folder) and read a
//! weight and a value; nothing in the file is ever run:
//!
//! ```
//! # fn main() -> stowage::Result<()> {
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/training_checkpoint.pt");
//! let ckpt = stowage::load(path)?;
//! let weight = &ckpt.get("model.weight")?.as_tensor()?.tensor;
//! assert_eq!(weight.shape(), [3, 4]);
//! let values: &[f32] = &weight.read::<f32>()?; // borrowed from the storage
//! assert_eq!(values.len(), 12);
//! assert_eq!(ckpt.get("epoch")?.as_i64()?, 3);
//! assert_eq!(ckpt.get("config.lr")?.as_f64()?, 0.001);
//! # Ok(()) }
//! ```
//!
//! Runnable programs are in `crates/stowage/examples/`: listing a model's
//! tensors, reading values, converting to safetensors, editing a weight and
//! saving, a memory-mapped load, and a walk through the storage model.
//!
//! ## The storage model
//!
//! A [`Tensor`] is five things, as in PyTorch: an [`UntypedStorage`] (a flat,
//! untyped array of bytes, shared by handle), a [`DType`] (how to read those
//! bytes), and a [`Layout`](layout::Layout) of shape, stride and storage
//! offset (which bytes form which element). Views copy nothing: a write
//! through one is seen through every other view of the same storage.
//!
//! ```
//! use stowage::{DType, Tensor};
//! # fn main() -> stowage::Result<()> {
//! let t = Tensor::ones(&[3], DType::Float32)?;
//! assert_eq!(t.untyped_storage().tolist()?, [0, 0, 128, 63].repeat(3));
//! let copy = t.untyped_storage().deep_clone()?;
//! copy.fill_(0)?;
//! let mut t = t;
//! t.set_(&copy, 0, &[3], &[1])?;
//! assert_eq!(t.to_string(), "tensor([0., 0., 0.])");
//! # Ok(()) }
//! ```
//!
//! Devices other than `cpu` and `meta` (`cuda:0`, `mps`, …) are recorded and
//! reported, but their bytes live in host memory: stowage has no accelerator
//! back end yet. Meta storages have a size and no bytes; every data access
//! on them is [`StorageError::NoData`].
//!
//! See `docs/pytorch-users.md` for a map from PyTorch calls to stowage calls.

#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
// `unsafe` lives only in the modules that own raw memory or call libc and the
// gemm kernels; each opts in with `#[allow(unsafe_code)]` (docs/architecture.md).
#![deny(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

// Files are read positionally through `std::os::unix::fs::FileExt`, and the
// storage backings call POSIX (`mmap`, `mlock`, `shm_open`) through `libc`.
#[cfg(not(unix))]
compile_error!("stowage supports Unix-like systems only (Linux, macOS, the BSDs): it reads files through std::os::unix and maps memory through POSIX calls");

pub mod access;
#[cfg(feature = "ndarray")]
pub mod array;
pub mod autograd;
pub mod checkpoint;
mod copy;
mod device;
mod display;
mod dtype;
mod element;
mod error;
mod fake;
pub mod io;
pub mod layout;
pub mod minifloat;
mod ops;
mod overflow;
mod overlap;
#[allow(unsafe_code)] // Owns every backing's raw memory.
mod storage;
mod sync;
mod tensor;
/// PyTorch's deprecated typed storages (`torch.FloatStorage`, `TypedStorage`),
/// with the feature `typed-storage`.
#[cfg(feature = "typed-storage")]
pub mod typed_storage;
mod view;
#[cfg(feature = "typed-storage")]
pub mod warn;

pub use checkpoint::entry::{load, load_mmap, load_with};
pub use checkpoint::format::torch_zip::{save, save_with};
pub use checkpoint::options::{LoadMode, LoadOptions, SaveOptions};
pub use checkpoint::value::graph::Checkpoint;
pub use device::{Device, DeviceType};
pub use dtype::{default_dtype, set_default_dtype, DType, DTypeInfo, Kind, ValueRange, DTYPES};
pub use element::{Element, Scalar};
pub use error::{
    one_line, CheckpointError, Error, ErrorContext, FormatError, Limit, Result, StorageError,
    TensorError,
};
/// The `half` crate, whose `f16` and `bf16` are the element types of
/// `float16` and `bfloat16` tensors (`read::<half::f16>()`).
pub use half;
/// The `ndarray` crate, whose arrays and views the `ndarray` feature gives
/// (`Tensor::as_array_view`, `to_ndarray`).
#[cfg(feature = "ndarray")]
pub use ndarray;
pub use ops::Operand;
pub use storage::{BytesMut, BytesRef, UntypedStorage, ALIGN};
#[cfg(feature = "shm")]
pub use storage::{SharedMemoryHandle, SharingStrategy};
pub use tensor::Tensor;
#[cfg(feature = "typed-storage")]
pub use typed_storage::{LegacyArgs, LegacyClass, LegacyStorageClass, Storage, TypedStorage};
