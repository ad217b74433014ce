//! A loaded checkpoint as Python objects, built by a framework adapter.
//!
//! The walk is here, in one pass over the object graph; what each leaf
//! becomes is the adapter's (`stowage/_torch.py`, `stowage/_numpy.py`):
//! the walk calls its methods (`storage`, `tensor`, `dtype`, …) and keeps
//! Python's identities, so a container the pickle reaches twice is one
//! Python object, and every tensor on one storage is built on one
//! framework storage, made once from that storage's bytes.
//!
//! An adapter may make a storage's first tensor straight on its bytes
//! (`tensor_on_buffer`; or, for one that needs no grad, `buffer_view`, the
//! framework's own call with no Python frame between, or `dlpack_view` on
//! a DLPack capsule of the bytes, then the tensor's own method named by
//! `buffer_restride` where it views them otherwise),
//! and give that tensor's storage to the later views (`storage_of`): one
//! framework call per tensor where a storage and a tensor on it took four.

use std::collections::HashMap;
use std::sync::Arc;
use stowage::ErrorContext;

use pyo3::call::PyCallArgs;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyComplex, PyDict, PyFrozenSet, PyList, PySet, PyString, PyTuple};
use stowage::checkpoint::pickle::Value;
use stowage::checkpoint::{
    Object, PyData, Quantization, TensorKind, TensorObject, TimeZone, ValueKind, ValueRef,
};
use stowage::{Checkpoint, Scalar, UntypedStorage};

use crate::errors::{self, StowageError};
use crate::storage::{dlpack_type, PendingStorage, StorageBuffer};

/// The walk's tables, keyed by addresses and ids: hashed with `foldhash`
/// (a few instructions a key where SipHash took a hundred, several times a
/// tensor); nothing in them comes from the file.
type ByKey<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// What the walk made of each storage, by the storage's id.
pub type Storages = ByKey<usize, Made>;

pub struct Converter<'py, 'c> {
    py: Python<'py>,
    ckpt: &'c Checkpoint,
    adapter: Bound<'py, PyAny>,
    nodes: ByKey<usize, Py<PyAny>>,
    /// Each storage made, and the tensors made while the file was read
    /// (`premade.rs`), not taken yet: one table, so that a storage's first
    /// tensor finds either in one lookup.
    storages: Storages,
    /// The tensors made, by the tensor object's identity: what the pickle
    /// reached twice (`{"a": x, "b": x}`) is one Python object, as
    /// `torch.load` gives it. The checkpoint holds every object, so no
    /// address is reused while the walk goes on. A state dict's tensors
    /// are not kept (see [`placed_item`](Self::placed_item)).
    tensors: ByKey<*const TensorObject, Py<PyAny>>,
    /// Where the walk is, for errors: rendered only when one is raised.
    path: Vec<Step<'py>>,
    /// A lazy load: storages with bytes go to the adapter unread
    /// (`lazy_storage`), to be read on first use.
    lazy: bool,
    /// Where the file says each storage was saved (`cuda:0`), by storage,
    /// when the adapter places storages (`placed`: a function
    /// `map_location`, as `torch.load` calls it); `None` otherwise.
    locations: Option<ByKey<usize, &'c str>>,
    /// The adapter's `tensor_on_buffer`, where it has one: a storage's
    /// first tensor is made straight on its bytes, one framework call where
    /// a storage and then a tensor on it took four. Looked up once.
    on_buffer: Option<Bound<'py, PyAny>>,
    /// The adapter's `buffer_view(buffer, dtype=…)`, where it has one: the
    /// framework's own call (`torch.frombuffer`) for a first tensor that
    /// needs no grad, all of its storage in one dimension, with no Python
    /// frame between.
    buffer_view: Option<Bound<'py, PyAny>>,
    /// The adapter's `dlpack_view(capsule)`, where it has one (and it is not
    /// `None`): what `buffer_view` makes, for a dtype DLPack has, from a
    /// DLPack capsule of the storage (`torch._C._from_dlpack`: no argument
    /// parsing, no Python object for the storage; a quarter of torch's
    /// price of a tensor).
    dlpack_view: Option<Bound<'py, PyAny>>,
    /// The adapter's `buffer_restride`, where it has one: the name of the
    /// method (`as_strided_`) that gives a `buffer_view` tensor its saved
    /// shape, stride and offset in place. Without it, only tensors that
    /// are all of their storage in one dimension take `buffer_view`.
    buffer_restride: Option<Bound<'py, PyString>>,
    /// `{"dtype": …}` for `buffer_view`, by dtype, made once each.
    dtype_kwargs: ByKey<&'static str, Bound<'py, PyDict>>,
    /// No other thread holds the checkpoint's storages (a load made them
    /// for this walk): their locks never wait, so they are taken with the
    /// GIL held. Otherwise (`safe_open`, whose storages other Python
    /// threads read) they are taken, and lazy storages read, with it
    /// released.
    sole: bool,
}

/// A step of the walk's path: a dict's key (its `str()` names it), an
/// index, or a name.
enum Step<'py> {
    Key(Bound<'py, PyAny>),
    Index(usize),
    Name(String),
}

/// A storage made for Python: the framework's storage, or the first tensor
/// made on it, whose storage the framework gives when another value needs
/// it (`storage_of`); or a tensor made while the file was read
/// (`premade.rs`), all of the storage's bytes in one dimension of the dtype
/// its pickle declares, that no value has taken yet: taken for the
/// storage's first tensor where that is made on its bytes, or for the
/// storage itself.
pub enum Made {
    Storage(Py<PyAny>),
    Under(Py<PyAny>),
    Premade(stowage::DType, Py<PyAny>),
}

impl<'py, 'c> Converter<'py, 'c> {
    pub fn new(py: Python<'py>, ckpt: &'c Checkpoint, adapter: Bound<'py, PyAny>) -> Self {
        Converter {
            py,
            ckpt,
            nodes: ByKey::default(),
            storages: ByKey::default(),
            tensors: ByKey::default(),
            path: Vec::new(),
            lazy: false,
            locations: adapter.hasattr("placed").unwrap_or(false).then(|| {
                ckpt.storages()
                    .iter()
                    .map(|s| (s.storage.id(), &*s.location))
                    .collect()
            }),
            on_buffer: adapter.getattr("tensor_on_buffer").ok(),
            buffer_view: adapter.getattr("buffer_view").ok(),
            dlpack_view: adapter
                .getattr("dlpack_view")
                .ok()
                .filter(|view| !view.is_none()),
            buffer_restride: adapter
                .getattr("buffer_restride")
                .ok()
                .and_then(|name| name.cast_into::<PyString>().ok()),
            dtype_kwargs: ByKey::default(),
            sole: false,
            adapter,
        }
    }

    /// Says that no other thread holds the checkpoint's storages: a load
    /// made them for this walk and nothing else has them yet (see `sole`).
    pub fn sole(mut self) -> Self {
        self.sole = true;
        self
    }

    /// Names what it builds `path` in errors (a tensor asked for by name).
    pub fn at(mut self, path: &str) -> Self {
        self.path.push(Step::Name(path.to_owned()));
        self
    }

    /// Takes the storages' tensors made while the file was read
    /// ([`Made::Premade`] each).
    pub fn premade(mut self, premade: Storages) -> Self {
        self.storages = premade;
        self
    }

    /// Hands the adapter each storage unread, as a `PendingStorage`, to be
    /// read on first use (`stowage.load(lazy=True)`).
    pub fn lazy(mut self) -> Self {
        self.lazy = true;
        self
    }

    /// The checkpoint's saved object.
    pub fn root(&mut self) -> PyResult<Py<PyAny>> {
        // The whole walk makes every storage: its table sized once (the
        // premade hold a place each already). (Not in `new`: `safe_open`
        // makes a walker a tensor.)
        let more = self
            .ckpt
            .storages()
            .len()
            .saturating_sub(self.storages.len());
        self.storages.reserve(more);
        let root = self.ckpt.root_value();
        self.value(&root)
    }

    fn here(&self) -> String {
        if self.path.is_empty() {
            return "the root".to_owned();
        }
        let steps: Vec<String> = self
            .path
            .iter()
            .map(|step| match step {
                Step::Name(name) => name.clone(),
                Step::Index(i) => i.to_string(),
                Step::Key(key) => key
                    .str()
                    .map_or_else(|_| "<key>".to_owned(), |s| s.to_string()),
            })
            .collect();
        steps.join(".")
    }

    fn unsupported(&self, what: &str) -> PyErr {
        StowageError::new_err(format!(
            "{what} at {}: not yet converted to Python objects by stowage",
            self.here()
        ))
    }

    fn call(&self, method: &str, args: impl PyCallArgs<'py>) -> PyResult<Py<PyAny>> {
        Ok(self.adapter.call_method1(method, args)?.unbind())
    }

    fn value(&mut self, v: &ValueRef<'c>) -> PyResult<Py<PyAny>> {
        let py = self.py;
        Ok(match v.raw() {
            Value::None => py.None(),
            Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
            Value::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
            // Exact at any size, in time linear in it: from its bytes, as
            // the pickle held it (not from decimal digits, which Python
            // refuses past 4,300 and takes quadratic time to parse).
            Value::BigInt(i) => {
                let signed = pyo3::types::PyDict::new(py);
                signed.set_item("signed", true)?;
                py.get_type::<pyo3::types::PyInt>()
                    .call_method(
                        "from_bytes",
                        (PyBytes::new(py, &i.to_signed_bytes_le()), "little"),
                        Some(&signed),
                    )?
                    .unbind()
            }
            Value::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
            Value::Str(s) => s.as_ref().into_pyobject(py)?.into_any().unbind(),
            Value::Bytes(b) => PyBytes::new(py, b).into_any().unbind(),
            Value::Node(_) => self.container(v)?,
            Value::Ext(o) => self.object(v, o)?,
        })
    }

    /// `value` for an item reached by `key`, which errors name.
    fn item(&mut self, key: Step<'py>, v: &ValueRef<'c>) -> PyResult<Py<PyAny>> {
        self.below(key, |walk| walk.value(v))
    }

    /// `make` with `key` on the path, which errors name.
    fn below<T>(&mut self, key: Step<'py>, make: impl FnOnce(&mut Self) -> T) -> T {
        self.path.push(key);
        let made = make(self);
        self.path.pop();
        made
    }

    /// `item` for a value of a dict or an item of a list. Such a container
    /// is remembered before its items are made, so it is walked once: a
    /// tensor whose one handle is this place (a memo's repeat clones the
    /// handle) is reached here once, and is not kept in `tensors`.
    fn placed_item(&mut self, key: Step<'py>, v: &ValueRef<'c>) -> PyResult<Py<PyAny>> {
        match v.raw() {
            Value::Ext(Object::Tensor(t)) if Arc::strong_count(t) == 1 => {
                self.below(key, |walk| walk.tensor_at(v, t))
            }
            _ => self.item(key, v),
        }
    }

    fn library_error(&self, e: stowage::Error) -> PyErr {
        errors::to_py(self.py, e.at_path(self.here()))
    }

    /// A container (or an inert object), made once per identity, so that
    /// what the pickle reached twice is one Python object.
    fn container(&mut self, v: &ValueRef<'c>) -> PyResult<Py<PyAny>> {
        let id = v.id();
        if let Some(done) = id.and_then(|id| self.nodes.get(&id)) {
            return Ok(done.clone_ref(self.py));
        }
        crate::depth::check(self.path.len(), || self.here())?;
        let py = self.py;
        let remember = |nodes: &mut ByKey<usize, Py<PyAny>>, made: &Py<PyAny>| {
            if let Some(id) = id {
                nodes.insert(id, made.clone_ref(py));
            }
        };
        if let (Some(obj), Some(args)) = (v.as_object(), v.args()) {
            let args = self.value(&args)?;
            let state = match v.state() {
                Some(s) => self.value(&s)?,
                None => py.None(),
            };
            let made = self.call(
                "inert",
                (obj.module.as_str(), obj.name.as_str(), args, state),
            )?;
            remember(&mut self.nodes, &made);
            return Ok(made);
        }
        match v.kind() {
            ValueKind::Dict => {
                let dict: Bound<'py, PyAny> = if v.is_ordered() {
                    self.adapter.call_method0("ordered_dict")?
                } else if v.container_class() == Some("collections.Counter") {
                    // As torch.load(weights_only=True) gives it back.
                    py.import("collections")?.getattr("Counter")?.call0()?
                } else {
                    PyDict::new(py).into_any()
                };
                // Entered before its items, so an item may be the dict itself.
                remember(&mut self.nodes, &dict.clone().unbind());
                let items = v.as_dict().map_err(|e| self.library_error(e))?;
                for (k, item) in items {
                    let key = self.value(&k)?.into_bound(py);
                    let value = self.placed_item(Step::Key(key.clone()), &item)?;
                    dict.set_item(key, value)?;
                }
                if let Some(state) = v.state() {
                    let state = self.item(Step::Name("__dict__".into()), &state)?;
                    self.adapter.call_method1("set_state", (&dict, state))?;
                }
                Ok(dict.unbind())
            }
            ValueKind::List => {
                let list = PyList::empty(py);
                remember(&mut self.nodes, &list.clone().into_any().unbind());
                let items = v.as_list().map_err(|e| self.library_error(e))?;
                for (i, item) in items.enumerate() {
                    list.append(self.placed_item(Step::Index(i), &item)?)?;
                }
                Ok(list.into_any().unbind())
            }
            ValueKind::Set => {
                let set = PySet::empty(py)?;
                remember(&mut self.nodes, &set.clone().into_any().unbind());
                let items = v.as_list().map_err(|e| self.library_error(e))?;
                for item in items {
                    set.add(self.value(&item)?)?;
                }
                Ok(set.into_any().unbind())
            }
            kind @ (ValueKind::Tuple | ValueKind::FrozenSet) => {
                let items = v.as_list().map_err(|e| self.library_error(e))?;
                let mut made = Vec::with_capacity(items.len());
                for (i, item) in items.enumerate() {
                    made.push(self.item(Step::Index(i), &item)?);
                }
                let obj = if kind == ValueKind::Tuple {
                    PyTuple::new(py, made)?.into_any().unbind()
                } else {
                    PyFrozenSet::new(py, made)?.into_any().unbind()
                };
                remember(&mut self.nodes, &obj);
                Ok(obj)
            }
            ValueKind::ByteArray => {
                let bytes = v.as_bytes().map_err(|e| self.library_error(e))?;
                let obj = pyo3::types::PyByteArray::new(py, bytes).into_any().unbind();
                remember(&mut self.nodes, &obj);
                Ok(obj)
            }
            other => Err(self.unsupported(&format!("a container of kind {other}"))),
        }
    }

    /// The tensor `t` that `v` holds, with its Python attributes.
    fn tensor_at(&mut self, v: &ValueRef<'c>, t: &TensorObject) -> PyResult<Py<PyAny>> {
        let made = self.tensor(t)?;
        match v.state() {
            Some(state) => {
                // A level of the walk as any container's (the library takes
                // only a dict or a pair of them here): tensors chained
                // through their states are bounded as nesting is.
                let state = self.item(Step::Name("__dict__".into()), &state)?;
                self.call("tensor_state", (made, state))
            }
            None => Ok(made),
        }
    }

    fn object(&mut self, v: &ValueRef<'c>, o: &Object) -> PyResult<Py<PyAny>> {
        let py = self.py;
        match o {
            Object::Tensor(t) => {
                let key = Arc::as_ptr(t);
                if let Some(done) = self.tensors.get(&key) {
                    return Ok(done.clone_ref(py));
                }
                let made = self.tensor_at(v, t)?;
                self.tensors.insert(key, made.clone_ref(py));
                Ok(made)
            }
            Object::Storage(r) => {
                let s = self.storage(&r.storage)?;
                self.call("storage_value", (s, r.dtype.map(|d| d.name())))
            }
            Object::DType(d) => self.call("dtype", (d.name(),)),
            Object::Device(d) => self.call("device", (d.to_string(),)),
            Object::Size(s) => self.call("size", (PyTuple::new(py, s)?,)),
            Object::Complex(c) => Ok(PyComplex::from_doubles(py, c.re, c.im).into_any().unbind()),
            Object::QScheme(name) => self.call("qscheme", (*name,)),
            Object::Layout(name) => self.call("layout", (&**name,)),
            Object::Class(c) => self.call("global_ref", (c.module.as_str(), c.name.as_str())),
            Object::NdArray(a) => {
                let t = &a.tensor;
                let storage = self.storage(t.untyped_storage())?;
                self.call(
                    "ndarray",
                    (
                        storage,
                        a.dtype.code.as_str(),
                        PyTuple::new(py, t.shape())?,
                        PyTuple::new(py, t.stride())?,
                        t.storage_offset(),
                        t.dtype().size(),
                    ),
                )
            }
            Object::NumpyScalar(s) => {
                let value = match s.value {
                    Scalar::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
                    Scalar::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
                    Scalar::UInt(u) => u.into_pyobject(py)?.into_any().unbind(),
                    Scalar::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
                    Scalar::Complex(c) => {
                        PyComplex::from_doubles(py, c.re, c.im).into_any().unbind()
                    }
                };
                self.call("numpy_scalar", (s.dtype.code.as_str(), value))
            }
            Object::NumpyDType(d) => self.call("numpy_dtype", (d.code.as_str(),)),
            Object::Global(g) => Err(self.unsupported(&format!("the global {g:?} as a value"))),
            Object::Data(d) => self.data(d),
            other => Err(self.unsupported(&format!("the value {other:?}"))),
        }
    }

    /// Python's own data types (`datetime`, `pathlib`, …), made by the adapter.
    fn data(&self, d: &PyData) -> PyResult<Py<PyAny>> {
        match d {
            PyData::DateTime(date, t) => {
                let tz = self.timezone(t.tz.as_ref())?;
                self.call(
                    "datetime",
                    (
                        (date.year, date.month, date.day),
                        (t.hour, t.minute, t.second, t.microsecond),
                        t.fold,
                        tz,
                    ),
                )
            }
            PyData::Date(date) => self.call("date", (date.year, date.month, date.day)),
            PyData::Time(t) => {
                let tz = self.timezone(t.tz.as_ref())?;
                self.call(
                    "time",
                    ((t.hour, t.minute, t.second, t.microsecond), t.fold, tz),
                )
            }
            PyData::TimeDelta(td) => self.call("timedelta", (td.days, td.seconds, td.microseconds)),
            PyData::TimeZone(tz) => self.timezone(Some(tz)),
            PyData::Path { class, path } => self.call("path", (*class, path.as_str())),
            PyData::Slice([start, stop, step]) => self.call("slice", (*start, *stop, *step)),
            PyData::Range([start, stop, step]) => self.call("range", (*start, *stop, *step)),
            PyData::Type(name) => self.call("builtin_type", (*name,)),
            other => Err(self.unsupported(&format!("the value {other:?}"))),
        }
    }

    fn timezone(&self, tz: Option<&TimeZone>) -> PyResult<Py<PyAny>> {
        match tz {
            None => Ok(self.py.None()),
            Some(z) => self.call(
                "timezone",
                (
                    z.offset.days,
                    z.offset.seconds,
                    z.offset.microseconds,
                    z.name.as_deref(),
                ),
            ),
        }
    }

    /// Runs `f`, which takes storages' locks (and reads a lazy storage),
    /// with the GIL released, unless no other thread holds the storages
    /// (`sole`): a lock another thread holds while it reads is waited for
    /// without holding up Python's other threads.
    fn unlocked<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        if self.sole {
            f()
        } else {
            self.py.detach(f)
        }
    }

    /// The framework storage for `storage`, made once per storage.
    fn storage(&mut self, storage: &UntypedStorage) -> PyResult<Py<PyAny>> {
        match self.storages.get(&storage.id()) {
            Some(Made::Storage(done)) => return Ok(done.clone_ref(self.py)),
            Some(Made::Under(tensor) | Made::Premade(_, tensor)) => {
                let made = self.call("storage_of", (tensor.clone_ref(self.py),))?;
                self.storages
                    .insert(storage.id(), Made::Storage(made.clone_ref(self.py)));
                return Ok(made);
            }
            None => {}
        }
        let device = storage.device().to_string();
        // The size and whether there are bytes take the storage's lock,
        // which another thread holds while it reads a lazy storage: taken
        // as the read is (`unlocked`).
        let (has_data, nbytes) = self.unlocked(|| (storage.has_data(), storage.nbytes()));
        let made = if has_data && self.lazy {
            let pending = PendingStorage::new(storage.clone(), nbytes, self.here());
            let pending = Bound::new(self.py, pending)?;
            self.call("lazy_storage", (pending, nbytes, device))?
        } else if has_data {
            let buffer = self
                .unlocked(|| StorageBuffer::new(storage.clone()))
                .map_err(|e| errors::to_py(self.py, e.at_path(self.here())))?;
            let buffer = Bound::new(self.py, buffer)?;
            self.call("storage", (buffer, nbytes, device))?
        } else {
            self.call("storage", (self.py.None(), nbytes, device))?
        };
        // Handed to the caller's `map_location(storage, location)` with the
        // location the file gives it, as `torch.load` does; a storage
        // without bytes (a meta tensor's, which the file records no storage
        // for) is not, as `torch.load` never sees one.
        let made = match self.locations.as_ref() {
            Some(at) if has_data => {
                let location = at.get(&storage.id()).copied().unwrap_or("cpu");
                self.call("placed", (made, location))?
            }
            _ => made,
        };
        self.storages
            .insert(storage.id(), Made::Storage(made.clone_ref(self.py)));
        Ok(made)
    }

    /// A plain tensor made straight on its storage's bytes, where that
    /// storage is not made yet and has bytes in memory, whole elements of
    /// them: `None` where the tensor is made on a storage
    /// ([`on_storage`](Self::on_storage)).
    fn on_buffer(
        &mut self,
        tensor: &stowage::Tensor,
        parameter: bool,
    ) -> PyResult<Option<Py<PyAny>>> {
        let storage = tensor.untyped_storage();
        let Some(make) = &self.on_buffer else {
            return Ok(None);
        };
        if self.lazy || self.locations.is_some() {
            return Ok(None);
        }
        let dtype = tensor.dtype();
        let size = dtype.size();
        let plain = !parameter && !tensor.requires_grad();
        let py = self.py;
        if let Some(slot) = self.storages.get_mut(&storage.id()) {
            // Made already (its tensors are made on it), or premade: made
            // while the file was read, as `dlpack_view` makes it here, and
            // taken in place (the storage's one lookup).
            let Made::Premade(premade_dtype, premade) = slot else {
                return Ok(None);
            };
            // A premade tensor's storage is a load's own (`sole`): its
            // lock never waits.
            let whole_row = Self::whole_row(tensor, storage.nbytes());
            if *premade_dtype == dtype
                && plain
                && self.buffer_view.is_some()
                && (whole_row || self.buffer_restride.is_some())
            {
                let made = premade.clone_ref(py);
                *slot = Made::Under(made.clone_ref(py));
                if !whole_row {
                    self.restride(made.bind(py), tensor)?;
                }
                return Ok(Some(made));
            }
            // Made below as without it.
            self.storages.remove(&storage.id());
        }
        // Whole elements only (`frombuffer` takes no others); the lock the
        // size takes is taken as the read's is (`unlocked`).
        let buffer = self.unlocked(|| {
            let nbytes = storage.nbytes();
            let whole = storage.has_data() && nbytes > 0 && size > 0 && nbytes.is_multiple_of(size);
            whole
                .then(|| StorageBuffer::new(storage.clone()).map(|b| (b, nbytes)))
                .transpose()
        });
        let Some((buffer, nbytes)) =
            buffer.map_err(|e| errors::to_py(self.py, e.at_path(self.here())))?
        else {
            return Ok(None);
        };
        let whole_row = Self::whole_row(tensor, nbytes);
        let view = self
            .buffer_view
            .as_ref()
            .filter(|_| whole_row || self.buffer_restride.is_some())
            .filter(|_| plain);
        let made = match view {
            Some(view) => {
                let made = match (&self.dlpack_view, dlpack_type(dtype)) {
                    (Some(from_dlpack), Some(element)) => {
                        from_dlpack.call1((buffer.into_dlpack(py, element)?,))?
                    }
                    _ => {
                        let kwargs = match self.dtype_kwargs.get(dtype.name()) {
                            Some(kwargs) => kwargs,
                            None => {
                                let kwargs = PyDict::new(py);
                                kwargs.set_item("dtype", self.call("dtype", (dtype.name(),))?)?;
                                self.dtype_kwargs.entry(dtype.name()).or_insert(kwargs)
                            }
                        };
                        view.call((Bound::new(py, buffer)?,), Some(kwargs))?
                    }
                };
                if !whole_row {
                    self.restride(&made, tensor)?;
                }
                made
            }
            None => make.call1((
                Bound::new(py, buffer)?,
                dtype.name(),
                PyTuple::new(py, tensor.shape())?,
                PyTuple::new(py, tensor.stride())?,
                tensor.storage_offset(),
                tensor.requires_grad(),
                parameter,
            ))?,
        }
        .unbind();
        self.storages
            .insert(storage.id(), Made::Under(made.clone_ref(py)));
        Ok(Some(made))
    }

    /// Whether `tensor` is all of its storage's `nbytes` in one dimension,
    /// as `buffer_view` makes a storage's tensor.
    fn whole_row(tensor: &stowage::Tensor, nbytes: usize) -> bool {
        tensor.shape().len() == 1
            && tensor.shape()[0].checked_mul(tensor.dtype().size()) == Some(nbytes)
            && tensor.stride() == [1]
            && tensor.storage_offset() == 0
    }

    /// Gives `made`, all of its storage in one dimension, `tensor`'s shape,
    /// stride and offset, in place (the adapter's `buffer_restride`).
    fn restride(&self, made: &Bound<'py, PyAny>, tensor: &stowage::Tensor) -> PyResult<()> {
        if let Some(restride) = &self.buffer_restride {
            made.call_method1(
                restride,
                (
                    PyTuple::new(self.py, tensor.shape())?,
                    PyTuple::new(self.py, tensor.stride())?,
                    tensor.storage_offset(),
                ),
            )?;
        }
        Ok(())
    }

    /// A quantized tensor, as `torch._utils._rebuild_qtensor` makes it: its
    /// storage, and the quantizer's parameters in torch's order,
    /// `(qscheme, scale, zero_point)` or `(qscheme, scales, zero_points,
    /// axis)`, the per-channel ones tensors.
    fn quantized(&mut self, t: &TensorObject, q: &Quantization) -> PyResult<Py<PyAny>> {
        let py = self.py;
        let params = match q {
            Quantization::PerTensorAffine { scale, zero_point } => {
                (q.qscheme(), *scale, *zero_point)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
            Quantization::PerChannel {
                scales,
                zero_points,
                axis,
            } => {
                let scales = self.tensor(&TensorObject::new((**scales).clone()))?;
                let zero_points = self.tensor(&TensorObject::new((**zero_points).clone()))?;
                (q.qscheme(), scales, zero_points, *axis)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
            _ => return Err(self.unsupported("a quantization scheme")),
        };
        self.on_storage("quantized", &t.tensor, params)
    }

    /// Calls the adapter's `method` with a tensor's view of its storage,
    /// `(storage, dtype, shape, stride, offset, requires_grad, last)`.
    fn on_storage(
        &mut self,
        method: &str,
        tensor: &stowage::Tensor,
        last: impl IntoPyObject<'py>,
    ) -> PyResult<Py<PyAny>> {
        let storage = self.storage(tensor.untyped_storage())?;
        let py = self.py;
        self.call(
            method,
            (
                storage,
                tensor.dtype().name(),
                PyTuple::new(py, tensor.shape())?,
                PyTuple::new(py, tensor.stride())?,
                tensor.storage_offset(),
                tensor.requires_grad(),
                last,
            ),
        )
    }

    /// A sparse or nested tensor, from its components, as
    /// `torch._utils._rebuild_sparse_tensor` and `_rebuild_nested_tensor`
    /// make it: `sparse_coo(indices, values, size, coalesced)`,
    /// `sparse_compressed(layout, compressed_indices, plain_indices, values,
    /// size)`, `nested(buffer, sizes, strides, offsets)`.
    fn of_kind(&mut self, t: &TensorObject) -> PyResult<Py<PyAny>> {
        let py = self.py;
        let mut part = |x: &stowage::Tensor| self.tensor(&TensorObject::new(x.clone()));
        let size = t.tensor.shape().to_vec();
        let (method, args) = match t.kind() {
            TensorKind::SparseCoo {
                indices,
                values,
                coalesced,
            } => {
                let args = (part(indices)?, part(values)?, size, *coalesced);
                ("sparse_coo", args.into_pyobject(py)?.into_any())
            }
            TensorKind::SparseCompressed {
                layout,
                compressed_indices,
                plain_indices,
                values,
            } => {
                let args = (
                    layout.name(),
                    part(compressed_indices)?,
                    part(plain_indices)?,
                    part(values)?,
                    size,
                );
                ("sparse_compressed", args.into_pyobject(py)?.into_any())
            }
            TensorKind::Nested {
                buffer,
                sizes,
                strides,
                offsets,
            } => {
                let args = (part(buffer)?, part(sizes)?, part(strides)?, part(offsets)?);
                ("nested", args.into_pyobject(py)?.into_any())
            }
            _ => return Err(self.unsupported("a tensor of this layout")),
        };
        let made = self
            .adapter
            .call_method1(method, args.cast_into::<PyTuple>()?)?;
        if t.tensor.requires_grad() {
            made.call_method1("requires_grad_", (true,))?;
        }
        Ok(made.unbind())
    }

    /// One tensor, on its framework storage.
    pub fn tensor(&mut self, t: &TensorObject) -> PyResult<Py<PyAny>> {
        if !matches!(t.kind(), TensorKind::Strided) {
            return self.of_kind(t);
        }
        if t.subclass().is_some() {
            return Err(self.unsupported("a tensor subclass"));
        }
        if let Some(q) = t.quantization() {
            return self.quantized(t, q);
        }
        let made = match self.on_buffer(&t.tensor, t.parameter)? {
            Some(made) => made,
            None => self.on_storage("tensor", &t.tensor, t.parameter)?,
        };
        if t.conj || t.neg {
            return self.call("lazy_bits", (made, t.conj, t.neg));
        }
        Ok(made)
    }
}
