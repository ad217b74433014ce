//! How to load and save a checkpoint: the options every format's loader and
//! writer reads, the one [`LoadMode`], and the progress callback.
//!
//! The options are built, never spelled out field by field, so that fields
//! can be added without breaking callers: `LoadOptions::default()` (or
//! `LoadOptions::default()`, the same and pure) and the `with_*` methods;
//! [`LoadOptions::from_env`] and [`SaveOptions::from_env`] read the
//! environment, only when asked.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use crate::checkpoint::pickle::Limits;
use crate::{Device, Limit};

/// The environment variable [`LoadOptions::from_env`] reads limits from:
/// settings `NAME=N` ([`Limit::name`]) separated by commas or spaces.
pub const LIMITS_ENV: &str = "STOWAGE_LIMITS";

/// How a load reads the storages' bytes, decided once per load
/// ([`LoadOptions::mode`]).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LoadMode {
    /// Every storage's bytes are read while loading (`torch.load`).
    #[default]
    Eager,
    /// Each storage is read on first use (a torch zip archive, a safetensors
    /// file or a distributed checkpoint; legacy-format files load eagerly).
    /// Until then [`UntypedStorage::data_ptr`](crate::UntypedStorage::data_ptr) is 0.
    Lazy,
    /// No bytes are read: each storage has its size and reports its device
    /// (after `map_location`/`location_map`) as a fake tensor's does; on
    /// `meta` it is a meta storage. Records are still checked to be present
    /// with the declared size. A `meta` [`LoadOptions::with_map_location`]
    /// makes every load this mode.
    Fake,
    /// Storages over a private mapping of the file (`torch.load(mmap=True)`).
    /// Only [`load_mmap`](crate::load_mmap) loads this way, since a mapping
    /// needs its caller's promise that the file does not change; the safe
    /// entry points refuse it.
    Mapped,
}

/// How to load a checkpoint: `LoadOptions::default().with_mode(LoadMode::Lazy)`.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub(crate) mode: LoadMode,
    pub(crate) map_location: Option<Device>,
    pub(crate) location_map: HashMap<String, Device>,
    pub(crate) pickle_limits: Limits,
    pub(crate) max_pickle_bytes: u64,
    pub(crate) max_records: usize,
    pub(crate) max_storage_bytes: u64,
    pub(crate) max_paths: usize,
    pub(crate) verify_crc: bool,
    pub(crate) huge_pages: bool,
    pub(crate) expected: Option<std::sync::Arc<crate::checkpoint::content::Expected>>,
    pub(crate) inert: bool,
    pub(crate) allow_globals: HashSet<String>,
    pub(crate) on_storage: Option<OnStorage>,
    #[cfg(feature = "remote")]
    pub(crate) remote: crate::io::remote::RemoteOptions,
}

/// A function of each storage a load makes, and its dtype.
type StorageFn = dyn Fn(&crate::UntypedStorage, crate::DType) + Send + Sync;

/// What [`LoadOptions::with_on_storage`] calls.
#[derive(Clone)]
pub(crate) struct OnStorage(pub(crate) Arc<StorageFn>);

impl fmt::Debug for OnStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("OnStorage(..)")
    }
}

impl Default for LoadOptions {
    /// Eager, storages where they were saved, PyTorch's allowlist alone,
    /// the default limits; reads no environment variable.
    fn default() -> Self {
        LoadOptions {
            mode: LoadMode::Eager,
            map_location: None,
            location_map: HashMap::new(),
            pickle_limits: Limits::default(),
            max_pickle_bytes: Limit::PickleBytes.default_value(),
            // One bound on records for loading, `verify` and `scan` (the
            // zip reader's own default too).
            max_records: Limit::Records.default_value() as usize,
            max_storage_bytes: Limit::StorageBytes.default_value(),
            max_paths: Limit::Paths.default_value() as usize,
            verify_crc: false,
            huge_pages: false,
            expected: None,
            inert: false,
            allow_globals: HashSet::new(),
            on_storage: None,
            #[cfg(feature = "remote")]
            remote: crate::io::remote::RemoteOptions::default(),
        }
    }
}

impl LoadOptions {
    /// The defaults, with what the environment sets: the limits
    /// [`LIMITS_ENV`] raises (`STOWAGE_LIMITS=paths=20000000,records=4000000`;
    /// a setting that does not parse is skipped with a warning on the `log`
    /// facade) and the remote options' `STOWAGE_REMOTE_*` variables
    /// (`io::remote::RemoteOptions::from_env`, feature `remote`). The
    /// command line and the Python package load this way.
    pub fn from_env() -> Self {
        let mut options = Self {
            #[cfg(feature = "remote")]
            remote: crate::io::remote::RemoteOptions::from_env(),
            ..Self::default()
        };
        let settings = std::env::var(LIMITS_ENV).unwrap_or_default();
        for setting in settings.split([',', ' ']).filter(|s| !s.is_empty()) {
            match Limit::parse_setting(setting) {
                Ok((limit, value)) => options = options.with_limit(limit, value),
                Err(why) => log::warn!(target: "stowage", "{LIMITS_ENV}: {why}"),
            }
        }
        options
    }

    /// Sets `limit` to `value` (`--limit NAME=N` on the command line); a
    /// fixed limit ([`Limit::adjustable`] false) stays as it is. The
    /// pickle's counts stay raised with the stream's length, `value` their
    /// floor ([`Limits::for_stream`]).
    pub fn with_limit(mut self, limit: Limit, value: u64) -> Self {
        let n = usize::try_from(value).unwrap_or(usize::MAX);
        match limit {
            Limit::PickleBytes => self.max_pickle_bytes = value,
            Limit::Records => self.max_records = n,
            Limit::StorageBytes => self.max_storage_bytes = value,
            Limit::PickleNodes => self.pickle_limits.max_nodes = n,
            Limit::PickleMemo => self.pickle_limits.max_memo = n,
            Limit::PickleStack => self.pickle_limits.max_stack = n,
            Limit::PickleDepth => self.pickle_limits.max_depth = n,
            Limit::Paths => self.max_paths = n,
            Limit::ZipNesting | Limit::TreeBytes | Limit::IndexBytes | Limit::SaveDepth => {}
        }
        self
    }

    /// The value of `limit` in these options (a fixed limit's own value).
    pub fn limit(&self, limit: Limit) -> u64 {
        let l = &self.pickle_limits;
        match limit {
            Limit::PickleBytes => self.max_pickle_bytes,
            Limit::Records => self.max_records as u64,
            Limit::StorageBytes => self.max_storage_bytes,
            Limit::PickleNodes => l.max_nodes as u64,
            Limit::PickleMemo => l.max_memo as u64,
            Limit::PickleStack => l.max_stack as u64,
            Limit::PickleDepth => l.max_depth as u64,
            Limit::Paths => self.max_paths as u64,
            Limit::ZipNesting | Limit::TreeBytes | Limit::IndexBytes | Limit::SaveDepth => {
                limit.default_value()
            }
        }
    }

    /// Loads in `mode` ([`LoadMode::Eager`] by default).
    pub fn with_mode(mut self, mode: LoadMode) -> Self {
        self.mode = mode;
        self
    }

    /// Puts every storage on `device` (PyTorch's `map_location`); `meta`
    /// reads no bytes at all. By default each storage keeps its recorded
    /// location (bytes in host memory, device reported).
    pub fn with_map_location(mut self, device: Device) -> Self {
        self.map_location = Some(device);
        self
    }

    /// Puts storages saved on `from` (`"cuda:0"`) on `to`, as PyTorch's
    /// `map_location={"cuda:0": "cpu"}`; a
    /// [`with_map_location`](Self::with_map_location) overrides it.
    pub fn with_location(mut self, from: impl Into<String>, to: Device) -> Self {
        self.location_map.insert(from.into(), to);
        self
    }

    /// Limits on the pickle machine.
    pub fn with_pickle_limits(mut self, limits: Limits) -> Self {
        self.pickle_limits = limits;
        self
    }

    /// Largest pickle (`data.pkl`) accepted, in bytes (default 1 GiB).
    pub fn with_max_pickle_bytes(mut self, bytes: u64) -> Self {
        self.max_pickle_bytes = bytes;
        self
    }

    /// Most records in an archive (default 2^20).
    pub fn with_max_records(mut self, records: usize) -> Self {
        self.max_records = records;
        self
    }

    /// Most bytes all the storages together may declare (default 1 TiB).
    /// Records must also hold exactly what they declare, so a file cannot
    /// claim more than it holds; this bounds fake, meta and lazy loads,
    /// which read no records.
    pub fn with_max_storage_bytes(mut self, bytes: u64) -> Self {
        self.max_storage_bytes = bytes;
        self
    }

    /// Reads each storage of at least 2 MiB that an eager load makes into
    /// memory advised to use transparent huge pages before it is written
    /// (`MADV_HUGEPAGE`, Linux), aligned to 2 MiB: a fault per 2 MiB rather
    /// than per 4 KiB, and the kernel zeroing huge pages, not 512 small
    /// ones. Resident memory is the same as without (the tail of a storage
    /// past its last whole 2 MiB stays in small pages). Off by default: on
    /// a virtual machine that hands free memory back to its host, the first
    /// load of a process faults every huge page in from the host and can be
    /// several times slower (`docs/performance.md`); where transparent huge
    /// pages are `never`, or none is free, the pages are ordinary ones.
    pub fn with_huge_pages(mut self, on: bool) -> Self {
        self.huge_pages = on;
        self
    }

    /// Calls `f` on the loading thread with each storage a `torch.save`
    /// archive's load makes (a zip archive's, a TorchScript archive's; not
    /// a legacy file's, nor other formats'), as it is made, and the dtype
    /// its pickle declares. Its address ([`data_ptr`](crate::UntypedStorage::data_ptr))
    /// is final when `f` sees it, but an eager load may read its bytes
    /// later, before it returns: read or write them only after the load
    /// returns. For a consumer that prepares what it builds over each
    /// storage while the rest of the file is read (the Python package makes
    /// each storage's framework tensor then).
    pub fn with_on_storage(
        mut self,
        f: impl Fn(&crate::UntypedStorage, crate::DType) + Send + Sync + 'static,
    ) -> Self {
        self.on_storage = Some(OnStorage(Arc::new(f)));
        self
    }

    /// Checks the loaded tensors against a content manifest
    /// (`stowage manifest`, [`Expected::from_manifest_json`](crate::checkpoint::content::Expected::from_manifest_json)):
    /// an eager or mapped load hashes every tensor it read, on every core,
    /// and fails with [`FormatError::ContentMismatch`](crate::FormatError::ContentMismatch)
    /// naming the first tensor that differs, is missing or is not listed.
    /// A lazy load checks the names, dtypes and shapes at once, and each
    /// storage's tensors when the storage is first read (whole, even for a
    /// window), before any of its bytes is handed out: a mismatch fails that
    /// read and every later one. A fake load refuses it (it has no data);
    /// `stowage verify --manifest` checks without loading.
    pub fn with_expected(mut self, expected: crate::checkpoint::content::Expected) -> Self {
        self.expected = Some(std::sync::Arc::new(expected));
        self
    }

    /// Verifies each record's CRC-32 while loading (PyTorch never does).
    pub fn with_verify_crc(mut self, verify: bool) -> Self {
        self.verify_crc = verify;
        self
    }

    /// Never refuses a global: builds an inert object (module, name,
    /// constructor arguments, `BUILD` state and appended items, see
    /// [`InertObject`](crate::checkpoint::InertObject)) for each global outside
    /// PyTorch's `weights_only` allowlist, and decodes the globals of
    /// [`decoded`](crate::checkpoint::globals::decoded) as data. Nothing named by the file is
    /// ever imported or called, with or without this option.
    pub fn with_inert(mut self, inert: bool) -> Self {
        self.inert = inert;
        self
    }

    /// Accepts globals by name (`"argparse.Namespace"`), as PyTorch's
    /// `torch.serialization.add_safe_globals`, but never calls them: one
    /// that [`decoded`](crate::checkpoint::globals::decoded) lists is decoded as data; any other
    /// is built as an inert object (PyTorch would call it; stowage cannot).
    pub fn with_allow_globals<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allow_globals.extend(names.into_iter().map(Into::into));
        self
    }

    /// Timeouts, retries, concurrency, coalescing and store configuration of
    /// loads by URL (feature `remote`).
    #[cfg(feature = "remote")]
    pub fn with_remote(mut self, remote: crate::io::remote::RemoteOptions) -> Self {
        self.remote = remote;
        self
    }

    /// The location `path` names, its requests (in an object store) made
    /// with these options' remote settings.
    pub fn location(&self, path: impl AsRef<std::path::Path>) -> crate::io::Location {
        let here = crate::io::Location::parse(path);
        #[cfg(feature = "remote")]
        let here = here.with_remote(&self.remote);
        here
    }

    /// How this load reads bytes: the mode asked for, or [`LoadMode::Fake`]
    /// whatever was asked where `map_location` is `meta` (nothing is read).
    pub fn mode(&self) -> LoadMode {
        if self.map_location.is_some_and(|d| d.is_meta()) {
            LoadMode::Fake
        } else {
            self.mode
        }
    }

    /// The remote options (feature `remote`).
    #[cfg(feature = "remote")]
    pub fn remote(&self) -> &crate::io::remote::RemoteOptions {
        &self.remote
    }
}

/// How to save a checkpoint: `SaveOptions::default().with_sync(false)`.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct SaveOptions {
    pub(crate) alignment: u64,
    pub(crate) sync: bool,
    pub(crate) progress: Option<Progress>,
    pub(crate) max_shard_size: u64,
    pub(crate) zstd: bool,
    pub(crate) digests: Option<crate::checkpoint::content::WrittenDigests>,
    /// Another thread of the same save hashes what it writes (a DCP's
    /// items, written as torch zip archives while the DCP's digests hash
    /// their chunks): a torch zip's CRC-32 is then computed on the
    /// writer's thread, as with digests of its own.
    pub(crate) hashed_beside: bool,
    #[cfg(feature = "remote")]
    pub(crate) remote: crate::io::remote::RemoteOptions,
}

impl Default for SaveOptions {
    /// Records aligned to 64 bytes as PyTorch's, synced, no progress,
    /// shards of at most 5 GB, DCP items uncompressed; reads no environment
    /// variable.
    fn default() -> Self {
        SaveOptions {
            alignment: 64,
            sync: true,
            progress: None,
            max_shard_size: 5_000_000_000,
            zstd: false,
            digests: None,
            hashed_beside: false,
            #[cfg(feature = "remote")]
            remote: crate::io::remote::RemoteOptions::default(),
        }
    }
}

impl SaveOptions {
    /// The defaults, with the environment's `STOWAGE_REMOTE_*` variables
    /// (feature `remote`), as [`LoadOptions::from_env`].
    pub fn from_env() -> Self {
        Self {
            #[cfg(feature = "remote")]
            remote: crate::io::remote::RemoteOptions::from_env(),
            ..Self::default()
        }
    }

    /// Alignment of each record's payload in a torch zip archive (PyTorch's
    /// default is 64).
    pub fn with_alignment(mut self, alignment: u64) -> Self {
        self.alignment = alignment;
        self
    }

    /// Makes the new file durable before it replaces the old one (on by
    /// default): the temporary file is synced to the disk, renamed over the
    /// target, and the folder synced, so that after a crash or power loss
    /// the target holds either the old file or the whole new one. Off, the
    /// rename still never exposes a partly written file to other processes,
    /// but after a power loss the target may be empty, hold zeros, or hold
    /// the old file (PyTorch's `torch.save` never syncs).
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// Tells `progress` the bytes of each storage (or each window of one)
    /// as they are written.
    pub fn with_progress(mut self, progress: Progress) -> Self {
        self.progress = Some(progress);
        self
    }

    /// The most bytes of tensor data per shard of a sharded set
    /// ([`save_to`](crate::checkpoint::save_to)), as `max_shard_size` in
    /// Hugging Face (5 GB by default; [`parse_size`](crate::checkpoint::sharded::parse_size)
    /// reads its notation).
    pub fn with_max_shard_size(mut self, bytes: u64) -> Self {
        self.max_shard_size = bytes;
        self
    }

    /// Compresses each item of a DCP ([`save_to`](crate::checkpoint::save_to))
    /// as one zstd frame (off by default; feature `zstd`).
    pub fn with_zstd(mut self, zstd: bool) -> Self {
        self.zstd = zstd;
        self
    }

    /// Hands `digests` the bytes of each tensor as they are written, for
    /// the content digests of what was written without reading it again
    /// (`stowage convert --manifest`); every format [`save_to`](crate::checkpoint::save_to)
    /// writes feeds it.
    pub fn with_digests(mut self, digests: crate::checkpoint::content::WrittenDigests) -> Self {
        self.digests = Some(digests);
        self
    }

    /// Timeouts, retries and store configuration of saves to a URL (feature
    /// `remote`).
    #[cfg(feature = "remote")]
    pub fn with_remote(mut self, remote: crate::io::remote::RemoteOptions) -> Self {
        self.remote = remote;
        self
    }

    /// The location `path` names, its requests (in an object store) made
    /// with these options' remote settings.
    pub fn location(&self, path: impl AsRef<std::path::Path>) -> crate::io::Location {
        let here = crate::io::Location::parse(path);
        #[cfg(feature = "remote")]
        let here = here.with_remote(&self.remote);
        here
    }
}

/// A progress callback: told the number of bytes of tensor data just
/// written (by [`SaveOptions::with_progress`]), so a caller can drive a
/// progress bar without the library knowing about one. The calls add up to
/// the total the operation handles.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_meta_map_location_makes_every_load_fake() {
        for mode in [LoadMode::Eager, LoadMode::Lazy, LoadMode::Fake] {
            let options = LoadOptions::default().with_mode(mode);
            assert_eq!(options.mode(), mode);
            assert_eq!(
                options.with_map_location(Device::META).mode(),
                LoadMode::Fake
            );
        }
        let cpu = LoadOptions::default()
            .with_mode(LoadMode::Lazy)
            .with_map_location(Device::CPU);
        assert_eq!(cpu.mode(), LoadMode::Lazy);
    }
}
