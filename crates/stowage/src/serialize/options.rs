//! How to load a checkpoint: the options every format's loader reads.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use super::pickle::Limits;
use crate::Device;

/// How to load a checkpoint.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Put every storage on this device (PyTorch's `map_location`); `meta`
    /// reads no bytes at all. `None` keeps each storage's recorded location
    /// (bytes in host memory, device reported).
    pub map_location: Option<Device>,
    /// Limits on the pickle machine.
    pub pickle_limits: Limits,
    /// Largest `data.pkl` accepted, in bytes.
    pub max_pickle_bytes: u64,
    /// Most records in the archive.
    pub max_records: usize,
    /// Verify each record's CRC-32 while loading (PyTorch never does).
    pub verify_crc: bool,
    /// Put storages tagged with a location (`"cuda:0"`) on another device, as
    /// PyTorch's `map_location={"cuda:0": "cpu"}`; `map_location` overrides it.
    pub location_map: HashMap<String, Device>,
    /// Load as fake tensors: every storage has its size and reports its device
    /// (after `map_location`/`location_map`) but no bytes are read. Records are
    /// still checked to be present with the declared size.
    pub fake: bool,
    /// Read each storage's bytes on first use rather than while loading
    /// ([`load_with`](super::load_with) of a torch zip archive or a safetensors
    /// file; legacy-format files load eagerly).
    /// Until then [`UntypedStorage::data_ptr`](crate::UntypedStorage::data_ptr) is 0.
    pub lazy: bool,
    /// Most bytes all the storages together may declare (default 1 TiB). Records
    /// must also hold exactly what they declare, so a file cannot claim more than
    /// it holds; this bounds meta, fake and lazy loads, which read no records.
    pub max_storage_bytes: u64,
    /// Never refuse a global: build an inert object (module, name, constructor
    /// arguments, `BUILD` state and appended items, see
    /// [`InertObject`](super::InertObject)) for each global outside PyTorch's
    /// `weights_only` allowlist, and decode the globals of
    /// [`decoded`](super::decoded) as data. Nothing named by the file is ever
    /// imported or called, with or without this option.
    pub inert: bool,
    /// Globals accepted by name (`"argparse.Namespace"`), as PyTorch's
    /// `torch.serialization.add_safe_globals`, but never called: one that
    /// [`decoded`](super::decoded) lists is decoded as data; any other is built
    /// as an inert object (PyTorch would call it; stowage cannot).
    pub allow_globals: HashSet<String>,
    /// Timeouts, retries, concurrency, coalescing and store configuration of
    /// loads by URL (feature `remote`). Default: [`RemoteOptions::from_env`](crate::io::remote::RemoteOptions::from_env).
    #[cfg(feature = "remote")]
    pub remote: crate::io::remote::RemoteOptions,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            map_location: None,
            pickle_limits: Limits::default(),
            max_pickle_bytes: 1 << 30,
            max_records: 1 << 20,
            verify_crc: false,
            location_map: HashMap::new(),
            fake: false,
            lazy: false,
            max_storage_bytes: 1 << 40,
            inert: false,
            allow_globals: HashSet::new(),
            #[cfg(feature = "remote")]
            remote: crate::io::remote::RemoteOptions::from_env(),
        }
    }
}

/// A progress callback: told the number of bytes of tensor data just
/// written (by [`SaveOptions::progress`](super::SaveOptions::progress)), so a
/// caller can drive a progress bar without the library knowing about one.
/// The calls add up to the total the operation handles.
#[derive(Clone)]
pub struct Progress(Arc<dyn Fn(u64) + Send + Sync>);

impl Progress {
    /// A callback calling `f` with each increment, in bytes.
    pub fn new(f: impl Fn(u64) + Send + Sync + 'static) -> Progress {
        Progress(Arc::new(f))
    }

    /// Reports `bytes` more done.
    pub fn add(&self, bytes: u64) {
        (self.0)(bytes);
    }
}

impl fmt::Debug for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Progress(..)")
    }
}
