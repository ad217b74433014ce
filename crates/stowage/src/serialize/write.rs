//! The PyTorch meaning of a checkpoint's pickle, for writing, and the zip
//! records around it, in the order PyTorch 2.x writes them: `data.pkl`,
//! `.format_version`, `.storage_alignment`, `byteorder`, `data/0..N`,
//! `version`, `.data/serialization_id`.
//!
//! Tensors pickle as `_rebuild_tensor_v2` with a legacy storage class, or
//! `_rebuild_tensor_v3` with `UntypedStorage` for dtypes that have no class;
//! Parameters as `_rebuild_parameter`. Storage keys are assigned in order of
//! first appearance, keyed by storage identity, so tensors sharing a storage
//! share a key and its bytes are written once.
//!
//! The pickle is written by the one pickle writer,
//! [`write_value`](super::pickle::write_value), in
//! [`Layout::Checkpoint`](super::pickle::Layout::Checkpoint), with
//! `TorchHooks` for tensors, storages and PyTorch's other objects; every
//! global's name comes from the allowlist's table ([`Global::path`]).

mod output;

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::allowlist::Global;
use super::object::{Checkpoint, Object, TensorObject};
use super::pickle::{write_value, Layout, NodeId, Pickler, Value, WriteError, WriteHooks};
use super::zip::ZipWriter;
use crate::{DType, Error, Result, UntypedStorage};

/// How to save a checkpoint.
#[derive(Clone, Debug)]
pub struct SaveOptions {
    /// Alignment of each record's payload (PyTorch's default is 64).
    pub alignment: u64,
    /// Make the new file durable before it replaces the old one: [`save`] syncs the
    /// temporary file to the disk, renames it over the target, and syncs the folder,
    /// so that after a crash or power loss the target holds either the old file or the
    /// whole new one. On by default. Off, the rename still never exposes a partly
    /// written file to other processes, but after a power loss the target may be
    /// empty, hold zeros, or hold the old file (PyTorch's `torch.save` never syncs).
    pub sync: bool,
}

impl Default for SaveOptions {
    fn default() -> Self {
        SaveOptions {
            alignment: 64,
            sync: true,
        }
    }
}

/// Deepest value nesting written (the reader's default limit).
const MAX_DEPTH: usize = 1000;

fn io(e: std::io::Error) -> Error {
    Error::Io {
        path: PathBuf::new(),
        source: e,
    }
}

/// The pickler's errors as saving reports them.
impl From<WriteError> for Error {
    fn from(e: WriteError) -> Error {
        match e {
            WriteError::Io(e) => io(e),
            WriteError::DanglingNode { id } => Error::BadObject {
                context: "saving",
                expected: "a node of the checkpoint's graph",
                found: format!("node {id}"),
            },
            WriteError::Cycle { .. } => Error::Unsupported {
                what: "a tuple or set that contains itself".into(),
            },
            WriteError::TooDeep { depth, max } => Error::LimitExceeded {
                limit: "nesting depth when saving",
                value: depth as u64,
                max: max as u64,
            },
            WriteError::Refused { kind } => Error::Unsupported {
                what: format!("saving a {kind} (PyTorch's loader refuses it)"),
            },
            other => io(std::io::Error::new(std::io::ErrorKind::InvalidInput, other)),
        }
    }
}

/// Storages in key order (order of first appearance), each with the dtype it
/// was first saved as (`None`: untyped).
type Storages = Vec<(UntypedStorage, Option<DType>)>;

/// A checkpoint's pickle (`data.pkl`), and the storages it names.
fn pickle(ckpt: &Checkpoint) -> Result<(Vec<u8>, Storages)> {
    let mut p = Pickler::new(Vec::new())?;
    let mut hooks = TorchHooks {
        ckpt,
        storages: Vec::new(),
        keys: HashMap::new(),
    };
    write_value(&mut p, &ckpt.graph, &ckpt.root, &mut hooks)?;
    p.stop()?;
    Ok((p.finish(), hooks.storages))
}

type P = Pickler<Vec<u8>>;

/// The PyTorch side of writing a checkpoint's pickle: tensors, storages and
/// the other [`Object`]s, and which dicts are `OrderedDict`s with what state.
struct TorchHooks<'c> {
    ckpt: &'c Checkpoint,
    storages: Storages,
    /// Index into `storages` by storage identity.
    keys: HashMap<usize, usize>,
}

impl<'c> WriteHooks<'c, Object, Vec<u8>> for TorchHooks<'c> {
    type Error = Error;
    const LAYOUT: Layout = Layout::Checkpoint;
    const MAX_DEPTH: usize = MAX_DEPTH;

    fn ext(&mut self, p: &mut P, o: &Object) -> Result<()> {
        self.object(p, o)
    }

    fn dict_class(&self, id: NodeId) -> Option<(&'static str, &'static str)> {
        self.ckpt
            .ordered
            .contains(&id)
            .then(|| Global::OrderedDict.path())
    }

    fn state(&self, id: NodeId) -> Option<&'c Value<Object>> {
        self.ckpt.state.get(&id)
    }
}

/// Writes `g` as CPython writes a class or function: memoized.
fn global(p: &mut P, g: &Global) -> Result<()> {
    let (module, name) = g.path();
    Ok(p.global_memoized(module, name)?)
}

/// A tuple of sizes or strides.
fn ints(p: &mut P, xs: &[usize]) -> Result<()> {
    if xs.len() > 3 {
        p.mark()?;
    }
    for &x in xs {
        let x = i64::try_from(x).map_err(|_| Error::SizeOverflow {
            what: "size when saving",
            detail: x.to_string(),
        })?;
        p.int(x)?;
    }
    if xs.len() > 3 {
        p.tuple_from_mark()?;
    } else {
        p.tuple(xs.len())?;
    }
    Ok(())
}

/// `collections.OrderedDict()`, as PyTorch passes for backward hooks.
fn empty_ordered_dict(p: &mut P) -> Result<()> {
    global(p, &Global::OrderedDict)?;
    p.tuple(0)?;
    Ok(p.reduce()?)
}

impl TorchHooks<'_> {
    /// The persistent id of a storage viewed as `dtype` (`None`: untyped).
    fn persid(&mut self, p: &mut P, storage: &UntypedStorage, dtype: Option<DType>) -> Result<()> {
        if !storage.has_data() {
            return Err(Error::NoData {
                op: "saving a storage",
                device: storage.device(),
            });
        }
        let index = match self.keys.get(&storage.id()) {
            Some(&i) => {
                // PyTorch: "Cannot save multiple tensors or storages that view the same data as different types".
                let first = self.storages[i].1.unwrap_or(DType::UInt8);
                let now = dtype.unwrap_or(DType::UInt8);
                if first != now {
                    return Err(Error::SaveConflict {
                        key: i.to_string(),
                        first,
                        second: now,
                    });
                }
                i
            }
            None => {
                self.storages.push((storage.clone(), dtype));
                self.keys.insert(storage.id(), self.storages.len() - 1);
                self.storages.len() - 1
            }
        };
        let nbytes = storage.nbytes();
        let numel = match dtype {
            Some(d) if nbytes % d.size() != 0 => {
                return Err(Error::StorageSizeMismatch {
                    op: "saving a typed storage",
                    dst: nbytes - nbytes % d.size(),
                    src: nbytes,
                })
            }
            Some(d) => nbytes / d.size(),
            None => nbytes,
        };
        p.mark()?;
        p.str_memoized("storage")?;
        global(p, &Global::Storage(dtype))?;
        p.str_memoized(&index.to_string())?;
        p.str_memoized(&storage.device().to_string())?;
        p.int(numel as i64)?;
        p.tuple_from_mark()?;
        Ok(p.binpersid()?)
    }

    fn tensor(&mut self, p: &mut P, t: &TensorObject, requires_grad: bool) -> Result<()> {
        let x = &t.tensor;
        let dtype = x.dtype();
        let v2 = dtype.storage_class().is_some();
        let func = match (t.quantization, v2) {
            (Some(_), _) => Global::RebuildQTensor,
            (None, true) => Global::RebuildTensorV2,
            (None, false) => Global::RebuildTensorV3,
        };
        global(p, &func)?;
        p.mark()?;
        self.persid(p, x.untyped_storage(), v2.then_some(dtype))?;
        p.int(x.storage_offset() as i64)?;
        ints(p, x.shape())?;
        ints(p, x.stride())?;
        if let Some((scale, zero_point)) = t.quantization {
            global(p, &Global::QScheme("per_tensor_affine"))?;
            p.float(scale)?;
            p.int(zero_point)?;
            p.tuple(3)?;
        }
        p.bool(requires_grad)?;
        empty_ordered_dict(p)?;
        if !v2 {
            global(p, &Global::DType(dtype))?;
        }
        if t.conj || t.neg {
            // PyTorch appends `{'conj': True}` / `{'neg': True}` only when set.
            p.empty_dict()?;
            p.memo_put()?;
            p.mark()?;
            for (name, on) in [("conj", t.conj), ("neg", t.neg)] {
                if on {
                    p.str_memoized(name)?;
                    p.bool(true)?;
                }
            }
            p.setitems()?;
        }
        p.tuple_from_mark()?;
        p.reduce()?;
        p.memo_put()?;
        Ok(())
    }

    fn object(&mut self, p: &mut P, o: &Object) -> Result<()> {
        match o {
            Object::Tensor(t) if t.parameter => {
                global(p, &Global::RebuildParameter)?;
                self.tensor(p, t, false)?;
                p.bool(t.tensor.requires_grad())?;
                empty_ordered_dict(p)?;
                p.tuple(3)?;
                p.reduce()?;
                p.memo_put()?;
            }
            Object::Tensor(t) => self.tensor(p, t, t.tensor.requires_grad())?,
            Object::Storage(s) => self.persid(p, &s.storage, s.dtype)?,
            Object::DType(d) => global(p, &Global::DType(*d))?,
            Object::Device(d) => {
                global(p, &Global::Device)?;
                p.str_memoized(&d.to_string())?;
                p.tuple(1)?;
                p.reduce()?;
                p.memo_put()?;
            }
            Object::Size(dims) => {
                global(p, &Global::Size)?;
                ints(p, dims)?;
                p.tuple(1)?;
                p.reduce()?;
                p.memo_put()?;
            }
            Object::Complex(c) => {
                global(p, &Global::Complex)?;
                p.float(c.re)?;
                p.float(c.im)?;
                p.tuple(2)?;
                p.reduce()?;
            }
            Object::QScheme(q) => global(p, &Global::QScheme(q))?,
            Object::Layout(name) => {
                global(p, &Global::GetLayout)?;
                p.str_memoized(name)?;
                p.tuple(1)?;
                p.reduce()?;
            }
            Object::Global(g) => global(p, g)?,
        }
        Ok(())
    }
}

/// A checkpoint ready to be written: the records before the storages (`data.pkl`
/// … `byteorder`), the storages in key order, and the records after them.
struct Plan {
    head: [(&'static str, Vec<u8>); 4],
    /// Each storage with the size the pickle gives it.
    storages: Vec<(UntypedStorage, u64)>,
    tail: [(&'static str, Vec<u8>); 2],
}

impl Plan {
    fn new(ckpt: &Checkpoint, options: &SaveOptions) -> Result<Plan> {
        let (pkl, storages) = pickle(ckpt)?;
        let storages: Vec<(UntypedStorage, u64)> = storages
            .into_iter()
            .map(|(s, _)| {
                let n = s.nbytes() as u64;
                (s, n)
            })
            .collect();
        // PyTorch's id is a hash of record names and CRCs; readers only log it. stowage's is
        // deterministic: record count and a CRC of the pickle and storage sizes.
        let mut crc = crc32fast::Hasher::new();
        crc.update(&pkl);
        for (_, nbytes) in &storages {
            crc.update(&nbytes.to_le_bytes());
        }
        let id = format!("{:020}{:020}", storages.len() + 7, crc.finalize());
        let byteorder: &[u8] = if cfg!(target_endian = "little") {
            b"little"
        } else {
            b"big"
        };
        Ok(Plan {
            head: [
                ("data.pkl", pkl),
                (".format_version", b"1".to_vec()),
                (
                    ".storage_alignment",
                    options.alignment.to_string().into_bytes(),
                ),
                ("byteorder", byteorder.to_vec()),
            ],
            tail: [
                ("version", b"3\n".to_vec()),
                (".data/serialization_id", id.into_bytes()),
            ],
            storages,
        })
    }

    /// The exact length of the archive, from the sizes the pickle gives the storages.
    fn archive_len(&self, root: &str, alignment: u64) -> Result<u64> {
        let names: Vec<String> = (0..self.storages.len())
            .map(|i| format!("data/{i}"))
            .collect();
        let small = |(name, bytes): &(&'static str, Vec<u8>)| (*name, bytes.len() as u64);
        let records = self
            .head
            .iter()
            .map(small)
            .chain(
                names
                    .iter()
                    .zip(&self.storages)
                    .map(|(n, (_, nbytes))| (n.as_str(), *nbytes)),
            )
            .chain(self.tail.iter().map(small));
        Ok(ZipWriter::archive_len(root, alignment, records)?)
    }

    fn write<W: Write>(&self, w: W, root: &str, alignment: u64) -> Result<W> {
        let mut zip = ZipWriter::new(w, root, alignment);
        for (name, bytes) in &self.head {
            zip.write_record(name, bytes)?;
        }
        for (i, (storage, nbytes)) in self.storages.iter().enumerate() {
            // One read lock at a time, held while the bytes are written and hashed,
            // so the CRC is that of the bytes in the file.
            let bytes = storage.bytes()?;
            // The record has the size the pickle gives the storage: one resized since
            // fails the record's size check instead of writing an inconsistent archive.
            zip.start_record(&format!("data/{i}"), *nbytes)?;
            zip.write_chunk(&bytes)?;
            zip.end_record()?;
        }
        for (name, bytes) in &self.tail {
            zip.write_record(name, bytes)?;
        }
        Ok(zip.finish()?)
    }
}

/// Writes `ckpt` as a torch zip archive with root folder `archive_name` to `w`.
///
/// Storage bytes go from the storages' memory straight to `w`, in one call per
/// storage, and their CRC-32 is computed as they are written (on a second thread
/// for large storages when there is one); the output depends only on `ckpt`,
/// `archive_name` and `options.alignment`. Wrap a file in a
/// [`BufWriter`](std::io::BufWriter).
///
/// # Errors
/// [`Error::SaveConflict`] when one storage is viewed as two dtypes, [`Error::NoData`]
/// for meta tensors, I/O errors.
pub fn save_to_writer<W: Write>(
    w: W,
    archive_name: &str,
    ckpt: &Checkpoint,
    options: &SaveOptions,
) -> Result<W> {
    Plan::new(ckpt, options)?.write(w, archive_name, options.alignment)
}

/// Saves `ckpt` to `path` as PyTorch does, crash-safely: the archive is written to a
/// temporary file in the same directory, synced to the disk, and renamed over `path`
/// (then the directory is synced), so an interrupted save, a crash or a power loss
/// leaves either the earlier file or the whole new one. The root folder is `path`'s stem.
///
/// # Errors
/// As [`save_to_writer`], wrapped in [`Error::InFile`].
pub fn save(path: impl AsRef<Path>, ckpt: &Checkpoint) -> Result<()> {
    save_with(path.as_ref(), ckpt, &SaveOptions::default())
}

/// [`save`] with options.
///
/// The temporary file is first sized to the archive's exact length (`fallocate`
/// on Linux, so the file system allocates its blocks once, up front), then
/// written in large sequential writes straight from the storages' memory. With
/// [`SaveOptions::sync`], the kernel is asked to start writing each 8 MiB to the
/// disk as soon as they are written (`sync_file_range` on Linux), so the final
/// sync overlaps the writing instead of following it. A large file that the save
/// replaces is released on a thread of its own (see `docs/performance.md`).
///
/// # Errors
/// As [`save`].
pub fn save_with(path: &Path, ckpt: &Checkpoint, options: &SaveOptions) -> Result<()> {
    let stem = archive_name(path);
    write_atomically_with(path, options.sync, |tmp| {
        let plan = Plan::new(ckpt, options)?;
        let len = plan.archive_len(&stem, options.alignment)?;
        let io_tmp = |e| Error::Io {
            path: tmp.to_owned(),
            source: e,
        };
        let file = File::create(tmp).map_err(io_tmp)?;
        output::preallocate(&file, len).map_err(io_tmp)?;
        let out = output::Output::new(file, options.sync);
        let out = plan
            .write(
                BufWriter::with_capacity(1 << 22, out),
                &stem,
                options.alignment,
            )?
            .into_inner()
            .map_err(|e| io_tmp(e.into_error()))?;
        // `len` is exact, so this cuts nothing unless the layout and the writer disagree.
        out.finish(len).map_err(io_tmp)
    })
}

/// The root folder PyTorch names an archive written to `path`: the file name up to its last `.`.
pub fn archive_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = match name.rfind('.') {
        Some(i) => &name[..i],
        None => &name,
    };
    if stem.is_empty() || !stem.is_ascii() {
        "archive".to_owned()
    } else {
        stem.to_owned()
    }
}

/// Has `write` create a temporary sibling of `path` (at the path it is given), syncs
/// it, and renames it to `path`; on failure the temporary file is removed and any
/// earlier file at `path` is untouched.
pub(crate) fn write_atomically(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    write_atomically_with(path, true, write)
}

/// Removes the temporary files of saves to `dir/name` that a process which no
/// longer exists left behind (killed in the middle of a save). Temporaries of
/// live processes, this one included, may belong to saves in progress and stay.
fn remove_stale_temporaries(dir: &Path, name: &str) {
    let prefix = format!(".{name}.stowage-tmp-");
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(rest) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        if pid != std::process::id() as i32 && !process_exists(pid) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Whether a process with this id exists (`kill(pid, 0)`; a process we may not
/// signal exists too).
fn process_exists(pid: i32) -> bool {
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks that the process exists and may be signalled;
    // nothing is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// [`write_atomically`], syncing the file and the folder only when `sync` is set.
fn write_atomically_with(
    path: &Path,
    sync: bool,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    let in_file = |e: Error| Error::InFile {
        path: path.to_owned(),
        source: Box::new(e),
    };
    let io_at = |p: &Path| {
        let p = p.to_owned();
        move |e| Error::Io { path: p, source: e }
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Unique per save (two threads saving one path must not share a temporary file);
    // the process id lets a later save recognise what a killed process left.
    static SAVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let serial = SAVES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{name}.stowage-tmp-{}-{serial}",
        std::process::id()
    ));
    let result = (|| {
        write(&tmp)?;
        if sync {
            File::open(&tmp)
                .and_then(|f| f.sync_all())
                .map_err(io_at(&tmp))?;
        }
        // The file being replaced is closed on another thread, which is where the
        // kernel then frees its pages and blocks (tenths of a second per GiB).
        let replaced = output::open_replaced(path);
        fs::rename(&tmp, path).map_err(io_at(path))?;
        output::release_in_background(replaced);
        remove_stale_temporaries(&dir, &name);
        if sync {
            if let Ok(d) = File::open(&dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(in_file)
}
