//! `stowage.save`: Python values, with torch tensors and numpy arrays, as a
//! `torch.save` file or a safetensors file.
//!
//! One walk over the object here; what a framework object is (a tensor's
//! storage, dtype and layout; a dtype, a `Size`, a device) the package's
//! encoder says (`python/stowage/_save.py`), numbering the storages as it
//! meets them, so tensors that shared one storage in Python share one in
//! the file.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use num_complex::Complex64;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyComplex, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use stowage::checkpoint::{PyValue, TensorObject};
use stowage::{Checkpoint, DType, Device, SaveOptions, Tensor, UntypedStorage};

use crate::errors;

struct Walk<'py> {
    encoder: Bound<'py, PyAny>,
    storages: Vec<UntypedStorage>,
    path: Vec<String>,
    /// Each container and object encoded so far, by its Python identity
    /// (the object held, so that its address is not reused meanwhile): one
    /// reached again is the same [`PyValue::Shared`], written once and
    /// referenced after, as pickle's memo does. The work is linear in the
    /// distinct objects, however many paths reach them.
    memo: HashMap<usize, (Bound<'py, PyAny>, Arc<PyValue>)>,
    /// The containers being walked (on the path from the root), by
    /// identity: one reached again from inside itself is a cycle.
    open: HashSet<usize>,
}

impl<'py> Walk<'py> {
    fn here(&self) -> String {
        if self.path.is_empty() {
            "the root".to_owned()
        } else {
            self.path.join(".")
        }
    }

    fn refuse(&self, obj: &Bound<'py, PyAny>, why: &str) -> PyErr {
        let ty = obj
            .get_type()
            .fully_qualified_name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        PyTypeError::new_err(format!("cannot save the {ty} at {}: {why}", self.here()))
    }

    fn items(&mut self, it: impl Iterator<Item = Bound<'py, PyAny>>) -> PyResult<Vec<PyValue>> {
        it.enumerate()
            .map(|(i, v)| {
                self.path.push(i.to_string());
                let out = self.value(&v);
                self.path.pop();
                out
            })
            .collect()
    }

    fn entries(&mut self, d: &Bound<'py, PyDict>) -> PyResult<Vec<(PyValue, PyValue)>> {
        let mut out = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = self.value(&k)?;
            self.path.push(k.str()?.to_string());
            let value = self.value(&v);
            self.path.pop();
            out.push((key, value?));
        }
        Ok(out)
    }

    fn value(&mut self, obj: &Bound<'py, PyAny>) -> PyResult<PyValue> {
        crate::depth::check(self.path.len(), || self.here())?;
        if obj.is_none() {
            return Ok(PyValue::None);
        }
        // Exact builtin types first: a subclass (torch.Size is a tuple,
        // OrderedDict a dict, bool an int) is the encoder's to name.
        if let Ok(b) = obj.cast_exact::<PyBool>() {
            return Ok(PyValue::Bool(b.is_true()));
        }
        if obj.is_exact_instance_of::<PyInt>() {
            if let Ok(i) = obj.extract::<i64>() {
                return Ok(PyValue::Int(i));
            }
            // Past 64 bits: from its bytes, little-endian two's complement
            // (Python's `str()` refuses past 4,300 digits, and its digits
            // take time quadratic in the length).
            let bits: u64 = obj.call_method0("bit_length")?.extract()?;
            let signed = PyDict::new(obj.py());
            signed.set_item("signed", true)?;
            let bytes = obj.call_method("to_bytes", (bits / 8 + 1, "little"), Some(&signed))?;
            let bytes = bytes.cast::<PyBytes>()?.as_bytes();
            return Ok(PyValue::BigInt(num_bigint::BigInt::from_signed_bytes_le(
                bytes,
            )));
        }
        if let Ok(f) = obj.cast_exact::<PyFloat>() {
            return Ok(PyValue::Float(f.value()));
        }
        if let Ok(c) = obj.cast_exact::<PyComplex>() {
            return Ok(PyValue::Complex(Complex64::new(c.real(), c.imag())));
        }
        if let Ok(s) = obj.cast_exact::<PyString>() {
            return Ok(PyValue::Str(s.to_str()?.to_owned()));
        }
        if let Ok(b) = obj.cast_exact::<PyBytes>() {
            return Ok(PyValue::Bytes(b.as_bytes().to_vec()));
        }
        let key = obj.as_ptr() as usize;
        if let Some((_, done)) = self.memo.get(&key) {
            return Ok(PyValue::Shared(done.clone()));
        }
        if !self.open.insert(key) {
            // `torch.save` writes a cycle (pickle's memo refers back to the
            // container being built); a value here is built bottom-up, so
            // one that holds itself has no value to refer to yet.
            let ty = obj.get_type().fully_qualified_name()?;
            return Err(PyValueError::new_err(format!(
                "cannot save the {ty} at {}: it holds itself (a reference cycle), which stowage.save does not write",
                self.here()
            )));
        }
        let made = self.object(obj);
        self.open.remove(&key);
        let made = Arc::new(made?);
        self.memo.insert(key, (obj.clone(), made.clone()));
        Ok(PyValue::Shared(made))
    }

    /// A container or an object the encoder names (a tensor, an
    /// `OrderedDict`, a dtype …), each of its items walked.
    fn object(&mut self, obj: &Bound<'py, PyAny>) -> PyResult<PyValue> {
        if let Ok(l) = obj.cast_exact::<PyList>() {
            return Ok(PyValue::List(self.items(l.iter())?));
        }
        if let Ok(t) = obj.cast_exact::<PyTuple>() {
            return Ok(PyValue::Tuple(self.items(t.iter())?));
        }
        if let Ok(d) = obj.cast_exact::<PyDict>() {
            return Ok(PyValue::Dict(self.entries(d)?));
        }
        let encoded = self.encoder.call_method1("encode", (obj,))?;
        if encoded.is_none() {
            return Err(self.refuse(
                obj,
                "stowage.save writes dicts, OrderedDicts, Counters, lists, tuples, tensors, numpy arrays, \
                 None, bools, ints, floats, complex numbers, str, bytes, torch dtypes, Sizes and devices",
            ));
        }
        let kind: String = encoded.get_item(0)?.extract()?;
        match kind.as_str() {
            "ordered_dict" => {
                let d = obj.cast::<PyDict>()?;
                let dict = PyValue::OrderedDict(self.entries(d)?);
                // `("ordered_dict", attributes or None)`.
                let state = encoded.get_item(1)?;
                if state.is_none() {
                    return Ok(dict);
                }
                let state = self.value(&state)?;
                Ok(PyValue::WithState(Box::new(dict), Box::new(state)))
            }
            "counter" => Ok(PyValue::Counter(self.entries(obj.cast::<PyDict>()?)?)),
            // A dict the encoder has made ready (a lazy load's, read).
            "dict" => Ok(PyValue::Dict(self.entries(obj.cast::<PyDict>()?)?)),
            "dtype" => Ok(PyValue::DType(self.dtype(&encoded.get_item(1)?)?)),
            "size" => Ok(PyValue::Size(encoded.get_item(1)?.extract()?)),
            "device" => {
                let name: String = encoded.get_item(1)?.extract()?;
                let device = Device::from_str(&name)
                    .map_err(|e| PyValueError::new_err(format!("device {name:?}: {e}")))?;
                Ok(PyValue::Device(device))
            }
            "tensor" => self.tensor(&encoded),
            other => Err(PyValueError::new_err(format!("encoder kind {other:?}"))),
        }
    }

    fn dtype(&self, name: &Bound<'py, PyAny>) -> PyResult<DType> {
        let name: String = name.extract()?;
        DType::from_str(&name).map_err(|e| PyValueError::new_err(format!("{}: {e}", self.here())))
    }

    /// `("tensor", storage index, bytes or None, dtype, shape, stride,
    /// offset, requires_grad, parameter, conj, neg, state or None)`; the
    /// bytes come with a storage's first tensor only, the state is the
    /// tensor's Python attributes.
    fn tensor(&mut self, e: &Bound<'py, PyAny>) -> PyResult<PyValue> {
        let index: usize = e.get_item(1)?.extract()?;
        let bytes = e.get_item(2)?;
        if index == self.storages.len() {
            let storage = storage_of(&bytes)?;
            self.storages.push(storage);
        }
        let Some(storage) = self.storages.get(index) else {
            return Err(PyValueError::new_err(format!(
                "storage {index} out of order"
            )));
        };
        let dtype = self.dtype(&e.get_item(3)?)?;
        let shape: Vec<usize> = e.get_item(4)?.extract()?;
        let stride: Vec<usize> = e.get_item(5)?.extract()?;
        let offset: usize = e.get_item(6)?.extract()?;
        let requires_grad: bool = e.get_item(7)?.extract()?;
        let parameter: bool = e.get_item(8)?.extract()?;
        let conj: bool = e.get_item(9)?.extract()?;
        let neg: bool = e.get_item(10)?.extract()?;
        let py = e.py();
        let mut t = Tensor::empty(&[0], dtype).map_err(|err| errors::to_py(py, err))?;
        t.set_(storage, offset, &shape, &stride)
            .map_err(|err| errors::to_py(py, err))?;
        if requires_grad {
            t.requires_grad_(true)
                .map_err(|err| errors::to_py(py, err))?;
        }
        let mut obj = TensorObject::new(t);
        obj.parameter = parameter;
        obj.conj = conj;
        obj.neg = neg;
        let tensor = PyValue::Tensor(Box::new(obj));
        let state = e.get_item(11)?;
        if state.is_none() {
            return Ok(tensor);
        }
        self.path.push("__dict__".to_owned());
        let walked = self.value(&state);
        self.path.pop();
        match walked {
            Ok(state) => Ok(PyValue::WithState(Box::new(tensor), Box::new(state))),
            // An attribute no checkpoint value holds (a function, a
            // module): the tensor is saved without its attributes, said
            // aloud (a safetensors file or a DCP holds none anyway).
            Err(e) if e.is_instance_of::<PyTypeError>(py) => {
                log::warn!("a tensor's attributes are not saved: {}", e.value(py));
                Ok(tensor)
            }
            Err(e) => Err(e),
        }
    }
}

/// A storage over a Python buffer's bytes: in place when the buffer is one
/// contiguous run (a torch storage's or a numpy array's memory), else a copy.
fn storage_of(obj: &Bound<'_, PyAny>) -> PyResult<UntypedStorage> {
    let py = obj.py();
    let buffer = PyBuffer::<u8>::get(obj)?;
    if !buffer.is_c_contiguous() {
        let data = buffer.to_vec(py)?;
        return UntypedStorage::from_bytes(&data).map_err(|e| errors::to_py(py, e));
    }
    let len = buffer.len_bytes();
    let Some(ptr) = std::ptr::NonNull::new(buffer.buf_ptr().cast::<u8>()) else {
        return UntypedStorage::from_bytes(&[]).map_err(|e| errors::to_py(py, e));
    };
    // SAFETY: a contiguous buffer's `len` bytes at `ptr` stay valid while
    // the `PyBuffer` (the owner handed over) holds the export. The storage
    // lives only for this save, which reads it (with the GIL released, as
    // torch.save reads a tensor's memory); nothing in it writes there.
    #[allow(unsafe_code)]
    let storage = unsafe { UntypedStorage::from_external(ptr, len, Box::new(buffer)) };
    Ok(storage)
}

/// The checkpoint of `obj`, its leaves encoded by `encoder`; errors name
/// the value's path under `path`.
pub(crate) fn checkpoint_of(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    encoder: Bound<'_, PyAny>,
    path: Vec<String>,
) -> PyResult<Checkpoint> {
    let value = Walk {
        encoder,
        storages: Vec::new(),
        path,
        memo: HashMap::new(),
        open: HashSet::new(),
    }
    .value(obj)?;
    // The walk and its memo are gone: an object reached once is held once,
    // and is built without a copy.
    let mut ckpt = Checkpoint::from_value(value).map_err(|e| errors::to_py(py, e))?;
    // Its walks (a save that flattens it) bounded as a load's are, by
    // `STOWAGE_LIMITS`'s `paths` where set.
    let paths = stowage::LoadOptions::from_env().limit(stowage::Limit::Paths);
    ckpt.set_max_paths(usize::try_from(paths).unwrap_or(usize::MAX));
    Ok(ckpt)
}

/// Saves `obj` to `dst` by the library's one rule from a destination to a
/// format (`stowage::checkpoint::Destination::resolve`, as the command
/// line's `convert`): a `.safetensors` name, safetensors; `.pt`, `.pth`,
/// `.bin`, `.ckpt`, `.tar`, `.pkl`, a torch zip; an `*.index.json` name, a
/// sharded set in its folder; with `to`, a folder: a sharded set
/// (`"safetensors"`, `"bin"`, shards of at most `max_shard_size`) or a
/// distributed checkpoint (`"dcp"`); any other name is refused. Files are
/// written crash-safely (a temporary renamed over `dst`; a folder's set
/// exchanged whole) with the GIL released.
#[pyfunction]
#[pyo3(signature = (obj, dst, encoder, *, sync = true, to = None, max_shard_size = None))]
#[allow(clippy::too_many_arguments)] // Python's keyword arguments, one each.
pub fn save(
    py: Python<'_>,
    obj: Bound<'_, PyAny>,
    dst: PathBuf,
    encoder: Bound<'_, PyAny>,
    sync: bool,
    to: Option<String>,
    max_shard_size: Option<String>,
) -> PyResult<()> {
    use stowage::checkpoint::sharded::parse_size;
    use stowage::checkpoint::{save_to, Destination, FolderFormat, SaveFormat};
    let folder = to
        .as_deref()
        .map(str::parse::<FolderFormat>)
        .transpose()
        .map_err(|e| PyValueError::new_err(format!("to: {e}")))?;
    let dest = Destination::resolve(&dst, folder).map_err(|e| errors::to_py(py, e))?;
    let mut options = SaveOptions::from_env().with_sync(sync);
    if let Some(size) = max_shard_size.as_deref() {
        if !matches!(dest.format(), SaveFormat::Sharded(_)) {
            return Err(PyValueError::new_err(
                "max_shard_size is for a sharded set (to=\"safetensors\" or \"bin\")",
            ));
        }
        let bytes =
            parse_size(size).map_err(|e| PyValueError::new_err(format!("max_shard_size: {e}")))?;
        options = options.with_max_shard_size(bytes);
    }
    let ckpt = checkpoint_of(py, &obj, encoder, Vec::new())?;
    py.detach(|| save_to(&ckpt, &dest, &options))
        .map_err(|e| errors::to_py(py, e))
}

/// `obj` saved in the torch zip format, as `torch.save` writes it into a
/// file object: the bytes, for the caller to write (an archive named
/// `archive`, as PyTorch names one written to a buffer).
#[pyfunction]
pub fn save_bytes(
    py: Python<'_>,
    obj: Bound<'_, PyAny>,
    encoder: Bound<'_, PyAny>,
) -> PyResult<Py<PyBytes>> {
    let ckpt = checkpoint_of(py, &obj, encoder, Vec::new())?;
    let options = SaveOptions::default();
    let bytes = py
        .detach(|| stowage::checkpoint::save_to_writer(Vec::new(), "archive", &ckpt, &options))
        .map_err(|e| errors::to_py(py, e))?;
    Ok(PyBytes::new(py, &bytes).unbind())
}

/// One data file's or one rank's items: each `bytes`, stored as they are,
/// or an object saved as `torch.save` saves it (a tensor chunk), made with
/// a fresh encoder from `new_encoder` (an archive numbers its own storages).
enum Owned<'a> {
    Archive(Box<Checkpoint>),
    // Borrowed from the `bytes` object in the items, which outlives the
    // write and, being immutable, cannot change under it.
    Bytes(&'a [u8]),
}

impl Owned<'_> {
    fn item(&self) -> stowage::checkpoint::dcp::DataItem<'_> {
        use stowage::checkpoint::dcp::DataItem;
        match self {
            Owned::Archive(c) => DataItem::Archive(c),
            Owned::Bytes(b) => DataItem::Bytes(b),
        }
    }
}

fn owned_items<'py, 'a>(
    py: Python<'py>,
    items: &'a [Bound<'py, PyAny>],
    new_encoder: &Bound<'py, PyAny>,
) -> PyResult<Vec<Owned<'a>>> {
    let mut owned = Vec::with_capacity(items.len());
    for (i, obj) in items.iter().enumerate() {
        if let Ok(bytes) = obj.cast::<PyBytes>() {
            owned.push(Owned::Bytes(bytes.as_bytes()));
            continue;
        }
        let ckpt = checkpoint_of(py, obj, new_encoder.call0()?, vec![format!("item {i}")])?;
        owned.push(Owned::Archive(Box::new(ckpt)));
    }
    Ok(owned)
}

/// Writes one data file of a distributed checkpoint (`stowage.dcp`'s
/// `StorageWriter.finish`, its `.metadata`) at `dst`, a path or URL, whole
/// or not at all: the items back to back, each compressed as one zstd frame
/// when `zstd`. Returns each item's `(offset, length, transforms)` in the
/// file.
#[pyfunction]
#[pyo3(signature = (dst, items, new_encoder, *, sync = true, zstd = false))]
pub fn write_items(
    py: Python<'_>,
    dst: PathBuf,
    items: Vec<Bound<'_, PyAny>>,
    new_encoder: Bound<'_, PyAny>,
    sync: bool,
    zstd: bool,
) -> PyResult<Vec<(u64, u64, Vec<String>)>> {
    use stowage::checkpoint::dcp::{self, DataItem, DcpSaveOptions};
    let owned = owned_items(py, &items, &new_encoder)?;
    let location = stowage::SaveOptions::from_env().location(&dst);
    let options = DcpSaveOptions::default().with_sync(sync).with_zstd(zstd);
    py.detach(|| {
        let items: Vec<DataItem<'_>> = owned.iter().map(Owned::item).collect();
        dcp::write_items(&location, &items, &options)
    })
    .map(|infos| {
        infos
            .into_iter()
            .map(|i| (i.offset, i.length, i.transforms))
            .collect()
    })
    .map_err(|e| errors::to_py(py, e))
}

/// Where an item was written: its file's name, offset, length and the
/// transforms applied (`.metadata`'s `_StorageInfo`).
type ItemSpan = (String, u64, u64, Vec<String>);

/// Writes one rank's items of a distributed checkpoint (`stowage.dcp`'s
/// `StorageWriter.write_data`) into the folder `dst` as at most `files`
/// data files named `{prefix}{n}.distcp`, split and written as the
/// library's `dcp::write_rank` does (as `FileSystemWriter` splits them),
/// with the GIL released. Returns each item's `(file, offset, length,
/// transforms)`, in the order of `items`.
#[pyfunction]
#[pyo3(signature = (dst, prefix, items, new_encoder, *, files = 1, sync = true, zstd = false))]
#[allow(clippy::too_many_arguments)] // The keyword arguments of StorageWriter's call.
pub fn write_rank(
    py: Python<'_>,
    dst: PathBuf,
    prefix: &str,
    items: Vec<Bound<'_, PyAny>>,
    new_encoder: Bound<'_, PyAny>,
    files: usize,
    sync: bool,
    zstd: bool,
) -> PyResult<Vec<ItemSpan>> {
    use stowage::checkpoint::dcp::{self, DataItem, DcpSaveOptions};
    let owned = owned_items(py, &items, &new_encoder)?;
    let folder = stowage::SaveOptions::from_env().location(&dst);
    let options = DcpSaveOptions::default().with_sync(sync).with_zstd(zstd);
    py.detach(|| {
        let items: Vec<DataItem<'_>> = owned.iter().map(Owned::item).collect();
        dcp::write_rank(&folder, prefix, &items, files, &options)
    })
    .map(|infos| {
        infos
            .into_iter()
            .map(|i| (i.relative_path, i.offset, i.length, i.transforms))
            .collect()
    })
    .map_err(|e| errors::to_py(py, e))
}
