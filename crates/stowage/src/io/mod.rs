//! Positional reads: the one I/O abstraction the checkpoint readers share.
//!
//! A [`ReadAt`] is a source of bytes read at absolute offsets through `&self`,
//! so one reader (an archive, a legacy stream, a safetensors header) can serve
//! several threads at once and read straight into a caller's buffer. Files
//! (`pread`), byte slices and memory-mapped checkpoints implement it.
//! [`ReadAt`] and [`ReadCost`] are defined in the crate `stowage-zip` (the zip
//! container reads through them) and re-exported here.
//!
//! Writing: `write_atomically` and its helpers make every save crash-safe
//! (a temporary sibling, synced, renamed over the target), and
//! [`remove_temporaries`] undoes the saves in progress for a process that
//! is being ended.

mod atomic;
mod atomic_dir;
mod location;
#[allow(unsafe_code)] // `sync_file_range`, which `rustix` does not wrap.
mod output;
mod pending;
#[cfg(feature = "remote")]
pub mod remote;
mod span;

pub(crate) use atomic::write_atomically;
pub(crate) use atomic_dir::replace_dir;
pub(crate) use location::open_regular;
pub use location::Location;
pub(crate) use output::{preallocate, Output, WRITE_BUFFER};
pub use pending::remove_temporaries;
pub(crate) use span::{windows, Opened, Span};
// Defined beside the zip container, its first reader, which knows nothing of
// stowage; the readers of every other format share them from here.
pub use stowage_zip::{ReadAt, ReadCost, Window};
