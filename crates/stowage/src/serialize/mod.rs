//! Reading and writing `torch.save` checkpoints.
//!
//! Three layers that do not know each other's insides: the container
//! ([`zip`], and the legacy stream format), the generic [`pickle`] machine,
//! and the PyTorch meaning of the pickle (`allowlist`, `read`, `write`):
//! which globals may be named, how persistent ids become storages, and how
//! tensors are rebuilt on them. Loading never runs code: a global outside
//! PyTorch's `weights_only` allowlist is an error.

mod allowlist;
mod legacy;
pub(crate) mod object;
pub mod pickle;
mod read;
mod write;
pub mod zip;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

pub use allowlist::Global;
pub use object::{
    dotted, ByteOrder, Checkpoint, Format, Object, PathKey, StorageRecord, StorageRef,
    TensorObject, MAX_PATHS,
};
pub(crate) use write::write_atomically;
pub use write::{archive_name, save, save_to_writer, save_with, SaveOptions};

use self::pickle::Limits;
use self::read::{StorageSource, TorchHooks};
use self::zip::{Method, ReadAt, ZipLimits, ZipReader};
use crate::storage::{Fetch, MappedFile, MappedReader};
use crate::{DType, Device, Error, Result, UntypedStorage};

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
    /// ([`load_with`] of a torch zip archive; other formats load eagerly).
    /// Until then [`UntypedStorage::data_ptr`] is 0.
    pub lazy: bool,
    /// Most bytes all the storages together may declare (default 1 TiB). Records
    /// must also hold exactly what they declare, so a file cannot claim more than
    /// it holds; this bounds meta, fake and lazy loads, which read no records.
    pub max_storage_bytes: u64,
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
        }
    }
}

/// Loads a checkpoint (torch zip, torch legacy or safetensors, detected by content).
///
/// # Errors
/// [`Error::InFile`] wrapping what went wrong: I/O, an unknown format, a
/// refused global, a missing or short record, a tensor past its storage.
pub fn load(path: impl AsRef<Path>) -> Result<Checkpoint> {
    load_with(path, &LoadOptions::default())
}

/// Loads a checkpoint with options.
///
/// # Errors
/// As [`load`].
pub fn load_with(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Checkpoint> {
    let path = path.as_ref();
    let in_file = |e: Error| Error::InFile {
        path: path.to_owned(),
        source: Box::new(e),
    };
    let file = File::open(path).map_err(|e| {
        in_file(Error::Io {
            path: path.to_owned(),
            source: e,
        })
    })?;
    if options.lazy && matches!(detect_format(&file), Ok(Format::TorchZip)) {
        return load_lazy(file, path, options).map_err(in_file);
    }
    load_from(file, options).map_err(in_file)
}

/// A torch zip archive whose storages read their records on first use, through
/// the archive reader they share.
/// A later read names the file and the record, since it happens long after the load.
fn load_lazy(file: File, path: &Path, options: &LoadOptions) -> Result<Checkpoint> {
    let zip = Arc::new(ZipReader::new(file, &zip_limits(options))?);
    let verify_crc = options.verify_crc;
    let path: Arc<Path> = Arc::from(path);
    let make = |entry: &zip::Entry| -> Fetch {
        let (zip, entry, path) = (zip.clone(), entry.clone(), path.clone());
        Arc::new(move |dst: &mut [u8]| {
            let mut read = || -> Result<()> {
                zip.read_into(&entry, dst)?;
                if verify_crc {
                    zip.check_crc(&entry)?;
                }
                Ok(())
            };
            read().map_err(|e| Error::InFile {
                path: path.to_path_buf(),
                source: Box::new(Error::InRecord {
                    name: entry.name.clone(),
                    source: Box::new(e),
                }),
            })
        })
    };
    load_zip_archive(&zip, options, None, Some(&make))
}

/// Loads a checkpoint memory-mapped, as `torch.load(mmap=True)`: the file is
/// mapped once, privately (copy-on-write, PyTorch's default `MAP_PRIVATE`), and
/// each stored record of a torch zip archive becomes a storage over its part of
/// the mapping, so nothing is read until it is touched and writes never reach
/// the file. Such storages report [`UntypedStorage::is_shared`] (as PyTorch's
/// do) and cannot be resized. Deflated records, and records that would overlap
/// another, are copied. Legacy-format files (which PyTorch refuses to map) are
/// mapped too, storage by storage where the bytes start at a multiple of the
/// element size, else copied; safetensors files are read as by [`load_with`].
///
/// # Safety
/// The storages' bytes are the file's pages: while any storage of the
/// checkpoint lives, the file must not be truncated (reads would fault) or
/// written by anyone.
///
/// # Errors
/// As [`load`].
pub unsafe fn load_mmap(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Checkpoint> {
    let path = path.as_ref();
    let in_file = |e: Error| Error::InFile {
        path: path.to_owned(),
        source: Box::new(e),
    };
    let io = |e| {
        in_file(Error::Io {
            path: path.to_owned(),
            source: e,
        })
    };
    let file = File::open(path).map_err(io)?;
    // SAFETY: the caller promises the file is neither truncated nor written meanwhile.
    let map = unsafe { MappedFile::private(&file) }.map_err(io)?;
    let reader = MappedReader(map.clone());
    let loaded = match detect_format(&reader) {
        Ok(Format::TorchZip) => load_zip(reader, options, Some(map)),
        Ok(Format::TorchLegacy) => legacy::load(&reader, options, Some(map)),
        Ok(Format::Safetensors) => crate::safetensors::load(&reader, options),
        Err(e) => Err(e),
    };
    loaded.map_err(in_file)
}

/// Loads a checkpoint held in memory (PyTorch's `torch.load(io.BytesIO(...))`).
///
/// # Errors
/// As [`load`], without the file name.
pub fn load_bytes(bytes: &[u8], options: &LoadOptions) -> Result<Checkpoint> {
    load_from(bytes, options)
}

/// The kind of checkpoint `source` holds, from its content (never its name).
///
/// # Errors
/// [`Error::NotACheckpoint`] for empty or unrecognised files and the `PYTORCH1`
/// preview format, [`Error::Unsupported`] for PyTorch ≤ 0.3 tar files, I/O errors.
pub fn detect_format<R: ReadAt>(source: &R) -> Result<Format> {
    let len = source.len();
    let mut head = [0u8; 16];
    let n = len.min(16) as usize;
    source
        .read_exact_at(&mut head[..n], 0)
        .map_err(|e| Error::Io {
            path: Default::default(),
            source: e,
        })?;
    let head = &head[..n];
    if head.starts_with(b"PK\x03\x04") {
        return Ok(Format::TorchZip);
    }
    if head.starts_with(b"PYTORCH1") {
        return Err(Error::NotACheckpoint {
            detail: "an unsupported archive format from the preview release (PYTORCH1)".into(),
        });
    }
    if head.starts_with(legacy::MAGIC_PREFIX) {
        return Ok(Format::TorchLegacy);
    }
    if len >= 265 {
        let mut ustar = [0u8; 5];
        source
            .read_exact_at(&mut ustar, 257)
            .map_err(|e| Error::Io {
                path: Default::default(),
                source: e,
            })?;
        if &ustar == b"ustar" {
            return Err(Error::Unsupported {
                what: "the tar checkpoint format of PyTorch 0.3 and older".into(),
            });
        }
    }
    if n >= 9 && head[8] == b'{' {
        return Ok(Format::Safetensors);
    }
    if len == 0 {
        return Err(Error::NotACheckpoint {
            detail: "the file is empty".into(),
        });
    }
    Err(Error::NotACheckpoint {
        detail: format!("unrecognised leading bytes {:02x?}", &head[..n.min(8)]),
    })
}

fn load_from<R: ReadAt>(source: R, options: &LoadOptions) -> Result<Checkpoint> {
    match detect_format(&source)? {
        Format::TorchZip => load_zip(source, options, None),
        Format::TorchLegacy => legacy::load(&source, options, None),
        Format::Safetensors => crate::safetensors::load(&source, options),
    }
}

struct ZipSource<'z, R: ReadAt> {
    zip: &'z ZipReader<R>,
    verify_crc: bool,
    /// For memory-mapped loading: the mapped file and the ranges handed out so far.
    mapped: Option<MappedRecords>,
    /// For lazy loading: makes each record's fetcher.
    lazy: Option<MakeFetch<'z>>,
    /// Large stored records, read after the pickle on two threads into the storages
    /// made for them (eager loads of little-endian files; `None` otherwise).
    deferred: Option<Vec<(UntypedStorage, zip::Entry)>>,
}

/// Records at least this large are read after the pickle, two at a time.
const DEFER_MIN: usize = 1 << 20;

/// The records of a mapped checkpoint handed out as storages, so that no two
/// storages share bytes (two storages over overlapping records of a hostile
/// archive would alias under different locks; such a record is copied instead).
pub(crate) struct MappedRecords {
    pub(crate) map: Arc<MappedFile>,
    /// Start → end of each range handed out.
    taken: BTreeMap<u64, u64>,
}

impl MappedRecords {
    pub(crate) fn new(map: Arc<MappedFile>) -> MappedRecords {
        MappedRecords {
            map,
            taken: BTreeMap::new(),
        }
    }

    /// Claims `start..end` if it overlaps no range handed out before.
    pub(crate) fn claim(&mut self, start: u64, end: u64) -> bool {
        if start == end {
            return true;
        }
        let before = self
            .taken
            .range(..=start)
            .next_back()
            .is_some_and(|(_, &e)| e > start);
        let after = self
            .taken
            .range(start..)
            .next()
            .is_some_and(|(&s, _)| s < end);
        if before || after {
            return false;
        }
        self.taken.insert(start, end);
        true
    }
}

impl<R: ReadAt> StorageSource for ZipSource<'_, R> {
    fn load(
        &mut self,
        key: &str,
        nbytes: usize,
        _dtype: Option<DType>,
        device: Device,
    ) -> Result<UntypedStorage> {
        let name = format!("data/{key}");
        let entry = self
            .zip
            .find(&name)
            .ok_or_else(|| Error::MissingRecord { name: name.clone() })?;
        if entry.size != nbytes as u64 {
            return Err(Error::RecordSize {
                name,
                expected: nbytes as u64,
                found: entry.size,
            });
        }
        if device.is_meta() {
            return UntypedStorage::new_on(nbytes, device);
        }
        // A deflated record cannot expand more than deflate's maximum ratio; refuse
        // impossible claims before allocating what they declare.
        if entry.method == Method::Deflated
            && entry.size
                > entry
                    .compressed_size
                    .saturating_mul(1032)
                    .saturating_add(1024)
        {
            return Err(Error::ImplausibleRecord {
                name,
                declared: entry.size,
                compressed: entry.compressed_size,
            });
        }
        if let Some(make) = self.lazy {
            return Ok(UntypedStorage::lazy(nbytes, device, make(entry)));
        }
        if let (Some(m), Method::Stored) = (&mut self.mapped, entry.method) {
            let start = self.zip.data_offset(entry)?;
            let end = start.saturating_add(entry.size);
            if end <= m.map.len() as u64 && m.claim(start, end) {
                if self.verify_crc {
                    self.zip.check_crc(entry)?;
                }
                // SAFETY: `start..end` lies inside the mapping (checked above), and `claim`
                // checked that it overlaps no other storage made from this mapping.
                return Ok(unsafe {
                    UntypedStorage::from_mapped_record(&m.map, start as usize, nbytes, device)
                });
            }
        }
        let storage = UntypedStorage::new_on(nbytes, device)?;
        if let (Some(d), Method::Stored, false) =
            (&mut self.deferred, entry.method, self.verify_crc)
        {
            if nbytes >= DEFER_MIN {
                d.push((storage.clone(), entry.clone()));
                return Ok(storage);
            }
        }
        {
            let mut bytes = storage.bytes_mut()?;
            self.zip.read_into(entry, &mut bytes)?;
        }
        if self.verify_crc {
            self.zip.check_crc(entry)?;
        }
        Ok(storage)
    }
}

fn load_zip<R: ReadAt>(
    source: R,
    options: &LoadOptions,
    mapped: Option<Arc<MappedFile>>,
) -> Result<Checkpoint> {
    let zip = ZipReader::new(source, &zip_limits(options))?;
    load_zip_archive(&zip, options, mapped, None)
}

/// Makes the fetcher of a lazily loaded record.
type MakeFetch<'z> = &'z dyn Fn(&zip::Entry) -> Fetch;

fn zip_limits(options: &LoadOptions) -> ZipLimits {
    ZipLimits {
        max_entries: options.max_records,
        max_record_to_vec: options.max_pickle_bytes,
    }
}

fn load_zip_archive<R: ReadAt>(
    zip: &ZipReader<R>,
    options: &LoadOptions,
    mapped: Option<Arc<MappedFile>>,
    lazy: Option<MakeFetch<'_>>,
) -> Result<Checkpoint> {
    if zip.find("constants.pkl").is_some() {
        return Err(Error::Unsupported {
            what: "TorchScript archives (constants.pkl)".into(),
        });
    }
    let pkl_entry = zip.find("data.pkl").ok_or_else(|| Error::MissingRecord {
        name: "data.pkl".into(),
    })?;
    let pkl = zip.read_to_vec(pkl_entry)?;
    let byteorder = match zip.find("byteorder") {
        None => ByteOrder::Little,
        Some(e) => match zip.read_to_vec(e)?.as_slice() {
            b"little" => ByteOrder::Little,
            b"big" => ByteOrder::Big,
            other => {
                return Err(Error::BadObject {
                    context: "byteorder record",
                    expected: "'little' or 'big'",
                    found: String::from_utf8_lossy(&other[..other.len().min(16)]).into_owned(),
                })
            }
        },
    };
    let mut src = ZipSource {
        mapped: mapped.map(MappedRecords::new),
        // A big-endian file's storages are byte-swapped as they are made, so they
        // must be read then too.
        deferred: (lazy.is_none() && byteorder == ByteOrder::Little).then(Vec::new),
        lazy,
        zip,
        verify_crc: options.verify_crc,
    };
    let mut hooks = TorchHooks::new(&mut src, options, byteorder, false);
    let pickled = pickle::unpickle(&pkl, &mut hooks, &options.pickle_limits).map_err(|e| {
        Error::InRecord {
            name: "data.pkl".into(),
            source: Box::new(e),
        }
    })?;
    let (records, ordered, state) = (hooks.records, hooks.ordered, hooks.state);
    if let Some(deferred) = src.deferred.take() {
        fill_parallel(zip, &deferred)?;
    }
    check_views(Checkpoint {
        format: Format::TorchZip,
        byteorder,
        graph: pickled.graph,
        root: pickled.root,
        storages: records,
        ordered,
        state,
        safetensors_metadata: None,
    })
}

/// Checks that every tensor of a freshly read checkpoint lies inside its storage,
/// naming the first that does not by its path (`AtPath`, then the storage key).
pub(crate) fn check_views(mut ckpt: Checkpoint) -> Result<Checkpoint> {
    match view_error(&ckpt) {
        None => {
            ckpt.compact();
            Ok(ckpt)
        }
        Some(e) => Err(e),
    }
}

fn view_error(ckpt: &Checkpoint) -> Option<Error> {
    let fits = |t: &TensorObject| {
        let x = &t.tensor;
        x.layout()
            .check_fits(x.element_size(), x.untyped_storage().nbytes())
    };
    let (bad, error) = ckpt
        .graph
        .iter()
        .flat_map(|(_, node)| node.values())
        .chain(std::iter::once(&ckpt.root))
        .filter_map(|v| match v {
            pickle::Value::Ext(Object::Tensor(t)) => Some(&**t),
            _ => None,
        })
        .find_map(|t| fits(t).err().map(|e| (t, e)))?;
    let key = ckpt.storage_key(&bad.tensor).unwrap_or("?").to_owned();
    let error = Error::InStorage {
        key,
        source: Box::new(error),
    };
    // The path, when a walk from the root reaches the tensor.
    let path = ckpt.tensors().ok().and_then(|ts| {
        ts.into_iter()
            .find(|(_, t)| std::ptr::eq(*t, bad))
            .map(|(p, _)| dotted(&p))
    });
    Some(match path {
        Some(path) => Error::AtPath {
            path,
            source: Box::new(error),
        },
        None => error,
    })
}

/// Reads deferred stored records into their storages on two threads, in pieces of
/// at most 16 MiB split evenly by bytes (each storage's bytes are exclusively
/// locked for the duration).
fn fill_parallel<R: ReadAt>(
    zip: &ZipReader<R>,
    deferred: &[(UntypedStorage, zip::Entry)],
) -> Result<()> {
    const PIECE: usize = 16 << 20;
    let mut guards = Vec::with_capacity(deferred.len());
    for (storage, entry) in deferred {
        guards.push((storage.bytes_mut()?, zip.data_offset(entry)?));
    }
    let mut work: Vec<(&mut [u8], u64)> = Vec::new();
    for (bytes, offset) in guards.iter_mut() {
        let mut at = *offset;
        for piece in bytes.chunks_mut(PIECE) {
            let n = piece.len() as u64;
            work.push((piece, at));
            at += n;
        }
    }
    let total: usize = work.iter().map(|(b, _)| b.len()).sum();
    let mut acc = 0;
    let mid = work
        .iter()
        .position(|(b, _)| {
            acc += b.len();
            acc * 2 >= total
        })
        .map_or(0, |i| i + 1);
    let (first, second) = work.split_at_mut(mid);
    let source = zip.source();
    let read = |part: &mut [(&mut [u8], u64)]| -> std::io::Result<()> {
        for (buf, offset) in part.iter_mut() {
            source.read_exact_at(buf, *offset)?;
        }
        Ok(())
    };
    let (a, b) = std::thread::scope(|s| {
        let other = s.spawn(|| read(second));
        let a = read(first);
        let b = other
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("a reader thread panicked")));
        (a, b)
    });
    a.and(b).map_err(|e| Error::Io {
        path: Default::default(),
        source: e,
    })
}
