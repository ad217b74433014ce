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
//!   PyTorch's messages ([`StorageError::StorageArguments`](crate::StorageError::StorageArguments)). The result is a plain
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

use num_complex::Complex64;

use crate::checkpoint::{StorageRecord, StorageRef};
use crate::dtype::{default_dtype, Kind, DTYPES};
use crate::element::{self, Scalar};
use crate::overflow::*;
use crate::{warn, DType, Device, DeviceType, Error, Result, Tensor, UntypedStorage};

#[track_caller]
fn deprecated() {
    warn::typed_storage_removal(Some(Location::caller()));
}

mod args;
mod classes;
mod display;
#[cfg(test)]
mod tests;
mod typed;

/// The default dtype lives with the dtypes; re-exported where PyTorch users of
/// `torch.Storage` look for it.
pub use args::*;
pub use classes::*;
pub use typed::*;
