//! The non-tensor values of a checkpoint, first-class: lookups by path
//! ([`Checkpoint::get`], [`ValueRef::get_path`]), a borrowed handle with
//! typed accessors ([`ValueRef`]), the tensors under one key as a state dict
//! ([`ValueRef::state_dict`]), and a walk over every non-tensor leaf
//! ([`ValueRef::leaves`], from [`Checkpoint::root_value`]).
//!
//! NOTE [dotted paths]: a dotted path (`"config.lr"`, `"model.layers.0.weight"`)
//! goes down dict string keys, integer dict keys and list/tuple indices. A
//! state dict's keys hold dots themselves (`"layers.0.weight"`), so at a dict
//! the longest string key that the rest of the path starts with (followed by
//! `.` or the end) wins; only when no string key matches is the next segment
//! read as an integer key. A list or tuple takes the next segment as an
//! index, negative ones counting from the end as in Python. The empty path is
//! the root. [`ValueRef::get_path`] takes the keys one by one instead, for
//! keys that a dotted path cannot spell.

use crate::error::CheckpointError;
use std::collections::HashSet;
use std::fmt;

use num_complex::Complex64;

use crate::checkpoint::pickle::{Node, NodeId, Value};
use crate::checkpoint::value::data::{NdArray, PyData};
use crate::checkpoint::value::graph::{Checkpoint, InertObject, Object, PathKey, TensorObject};
use crate::checkpoint::value::trail::{Key, Trail};
use crate::{DType, Device, Error, Result, Scalar, Tensor};

/// What a value is, named as `stowage inspect --json` names it (`"int"`, `"dict"`, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ValueKind {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool,
    /// An `int` of any size.
    Int,
    /// A `float`.
    Float,
    /// A `complex`.
    Complex,
    /// A `str`.
    Str,
    /// A `bytes`.
    Bytes,
    /// A `bytearray`.
    ByteArray,
    /// A dtype object (`torch.float16`).
    DType,
    /// A `torch.Size`.
    Size,
    /// A `torch.device`.
    Device,
    /// A `dict` or `OrderedDict`.
    Dict,
    /// A `list`.
    List,
    /// A `tuple`.
    Tuple,
    /// A `set`.
    Set,
    /// A `frozenset`.
    FrozenSet,
    /// A tensor or `nn.Parameter`.
    Tensor,
    /// A storage object.
    Storage,
    /// A quantization scheme (`torch.per_tensor_affine`).
    QScheme,
    /// A tensor layout object (`torch.strided`).
    Layout,
    /// An allowed class or function, not called.
    Global,
    /// A numpy array.
    NdArray,
    /// A numpy scalar.
    NumpyScalar,
    /// A numpy dtype.
    NumpyDType,
    /// A `datetime.datetime`.
    DateTime,
    /// A `datetime.date`.
    Date,
    /// A `datetime.time`.
    Time,
    /// A `datetime.timedelta`.
    TimeDelta,
    /// A `datetime.timezone`.
    TimeZone,
    /// A `pathlib` path.
    Path,
    /// A `slice`.
    Slice,
    /// A `range`.
    Range,
    /// A builtin type named as a value (`int`).
    Type,
    /// An inert object, or a global outside the allowlist named as a value.
    Object,
}

impl ValueKind {
    /// The kind's name: `none`, `bool`, `int`, `float`, `complex`, `str`,
    /// `bytes`, `bytearray`, `dtype`, `size`, `device`, `dict`, `list`,
    /// `tuple`, `set`, `frozenset`, `tensor`, `storage`, `qscheme`,
    /// `layout`, `global`, `ndarray`, `numpy_scalar`, `numpy_dtype`,
    /// `datetime`, `date`, `time`, `timedelta`, `timezone`, `path`, `slice`,
    /// `range`, `type`, `object` (the CLI contract's `type` names where it
    /// has them).
    pub fn name(self) -> &'static str {
        match self {
            ValueKind::None => "none",
            ValueKind::Bool => "bool",
            ValueKind::Int => "int",
            ValueKind::Float => "float",
            ValueKind::Complex => "complex",
            ValueKind::Str => "str",
            ValueKind::Bytes => "bytes",
            ValueKind::ByteArray => "bytearray",
            ValueKind::DType => "dtype",
            ValueKind::Size => "size",
            ValueKind::Device => "device",
            ValueKind::Dict => "dict",
            ValueKind::List => "list",
            ValueKind::Tuple => "tuple",
            ValueKind::Set => "set",
            ValueKind::FrozenSet => "frozenset",
            ValueKind::Tensor => "tensor",
            ValueKind::Storage => "storage",
            ValueKind::QScheme => "qscheme",
            ValueKind::Layout => "layout",
            ValueKind::Global => "global",
            ValueKind::NdArray => "ndarray",
            ValueKind::NumpyScalar => "numpy_scalar",
            ValueKind::NumpyDType => "numpy_dtype",
            ValueKind::DateTime => "datetime",
            ValueKind::Date => "date",
            ValueKind::Time => "time",
            ValueKind::TimeDelta => "timedelta",
            ValueKind::TimeZone => "timezone",
            ValueKind::Path => "path",
            ValueKind::Slice => "slice",
            ValueKind::Range => "range",
            ValueKind::Type => "type",
            ValueKind::Object => "object",
        }
    }

    /// True for the containers a path goes through (dict, list, tuple, set, frozenset).
    pub fn is_container(self) -> bool {
        matches!(
            self,
            ValueKind::Dict
                | ValueKind::List
                | ValueKind::Tuple
                | ValueKind::Set
                | ValueKind::FrozenSet
        )
    }
}

impl fmt::Display for ValueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A borrowed handle on one value of a checkpoint, with the path it was
/// reached by (which errors name).
#[derive(Clone, Debug)]
pub struct ValueRef<'c> {
    ckpt: &'c Checkpoint,
    value: &'c Value<Object>,
    /// How it was reached: its path, rendered when asked for.
    trail: Trail,
}

/// A path as errors name it: keys joined with `.`, the root as `""`.
fn joined(path: &[PathKey]) -> String {
    path.iter()
        .map(|k| k.to_string())
        .collect::<Vec<_>>()
        .join(".")
}

impl<'c> ValueRef<'c> {
    /// A handle on `value` as a root: its path is empty.
    pub(crate) fn new(ckpt: &'c Checkpoint, value: &'c Value<Object>) -> Self {
        ValueRef {
            ckpt,
            value,
            trail: Trail::default(),
        }
    }

    fn child(&self, value: &'c Value<Object>, key: Key) -> ValueRef<'c> {
        self.reached(value, self.trail.child(key))
    }

    /// A handle on `value` of this checkpoint, reached by `trail`.
    fn reached(&self, value: &'c Value<Object>, trail: Trail) -> ValueRef<'c> {
        ValueRef {
            ckpt: self.ckpt,
            value,
            trail,
        }
    }

    /// The keys from the root to this value.
    pub fn path(&self) -> &[PathKey] {
        self.trail.keys(self.ckpt)
    }

    /// The value as the pickle machine holds it.
    pub fn raw(&self) -> &'c Value<Object> {
        self.value
    }

    /// Python's identity of a container (a dict, list, tuple, set, bytearray
    /// or inert object): two handles with the same id are one object, which
    /// the pickle reached twice through its memo (tied entries, an object
    /// holding itself). `None` for any other value.
    pub fn id(&self) -> Option<usize> {
        self.value.as_node().map(NodeId::index)
    }

    /// True for a `collections.OrderedDict` (a state dict), false for a
    /// plain dict and any other value.
    pub fn is_ordered(&self) -> bool {
        self.value
            .as_node()
            .is_some_and(|id| self.ckpt.ordered.contains(&id))
    }

    /// The state `BUILD` set on the value: an inert object's state, a
    /// dict's `__dict__` (an `OrderedDict`'s `_metadata`), or the Python
    /// attributes of a tensor (a subclass's, `_rebuild_from_type_v2`);
    /// `None` when none was set.
    pub fn state(&self) -> Option<ValueRef<'c>> {
        let state = match self.value {
            Value::Ext(Object::Tensor(t)) => t.state()?,
            Value::Node(id) => match self.ckpt.objects.get(id) {
                Some(object) => object.state.as_ref()?,
                None => self.ckpt.state.get(id)?,
            },
            _ => return None,
        };
        Some(self.child(state, Key::Made(PathKey::Key("__dict__".into()))))
    }

    /// The arguments an inert object was constructed with (a tuple), as
    /// `args` of Python's `__reduce__`; `None` for any other value.
    pub fn args(&self) -> Option<ValueRef<'c>> {
        let object = self.as_object()?;
        Some(self.child(&object.args, Key::Made(PathKey::Key("args".into()))))
    }

    /// The container node, if the value is one this checkpoint holds.
    fn node(&self) -> Option<&'c Node<Object>> {
        self.value
            .as_node()
            .and_then(|id| self.ckpt.graph.try_get(id))
    }

    /// What the value is.
    pub fn kind(&self) -> ValueKind {
        match self.value {
            Value::None => ValueKind::None,
            Value::Bool(_) => ValueKind::Bool,
            Value::Int(_) | Value::BigInt(_) => ValueKind::Int,
            Value::Float(_) => ValueKind::Float,
            Value::Str(_) => ValueKind::Str,
            Value::Bytes(_) => ValueKind::Bytes,
            Value::Node(id) if self.ckpt.objects.contains_key(id) => ValueKind::Object,
            Value::Node(_) => match self.node() {
                Some(Node::Dict(_)) => ValueKind::Dict,
                Some(Node::List(_)) => ValueKind::List,
                Some(Node::Set(_)) => ValueKind::Set,
                Some(Node::FrozenSet(_)) => ValueKind::FrozenSet,
                Some(Node::ByteArray(_)) => ValueKind::ByteArray,
                // A dangling id reads as an empty tuple, as `compact` leaves dropped nodes.
                Some(Node::Tuple(_)) | None => ValueKind::Tuple,
            },
            Value::Ext(o) => match o {
                Object::Tensor(_) => ValueKind::Tensor,
                Object::Storage(_) => ValueKind::Storage,
                Object::DType(_) => ValueKind::DType,
                Object::Device(_) => ValueKind::Device,
                Object::Size(_) => ValueKind::Size,
                Object::Complex(_) => ValueKind::Complex,
                Object::QScheme(_) => ValueKind::QScheme,
                Object::Layout(_) => ValueKind::Layout,
                Object::Global(_) => ValueKind::Global,
                Object::NdArray(_) => ValueKind::NdArray,
                Object::NumpyScalar(_) => ValueKind::NumpyScalar,
                Object::NumpyDType(_) => ValueKind::NumpyDType,
                Object::Class(_) => ValueKind::Object,
                Object::Data(d) => match **d {
                    PyData::DateTime(..) => ValueKind::DateTime,
                    PyData::Date(_) => ValueKind::Date,
                    PyData::Time(_) => ValueKind::Time,
                    PyData::TimeDelta(_) => ValueKind::TimeDelta,
                    PyData::TimeZone(_) => ValueKind::TimeZone,
                    PyData::Path { .. } => ValueKind::Path,
                    PyData::Slice(_) => ValueKind::Slice,
                    PyData::Range(_) => ValueKind::Range,
                    PyData::Type(_) => ValueKind::Type,
                },
            },
        }
    }

    fn wrong(&self, expected: &'static str) -> Error {
        Error::Checkpoint(CheckpointError::ValueType {
            path: joined(self.path()),
            expected,
            found: self.kind().name(),
        })
    }

    /// True for `None`.
    pub(crate) fn is_none(&self) -> bool {
        self.value.is_none()
    }

    /// The boolean.
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when the value is not a `bool`.
    pub fn as_bool(&self) -> Result<bool> {
        self.value.as_bool().ok_or_else(|| self.wrong("bool"))
    }

    /// The integer (a `bool` is not one here), or the element of a
    /// one-element integer tensor (an optimizer's `step`), as `item()`.
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when the value is not an `int` or such a tensor,
    /// or one beyond 64 bits; a tensor's read error ([`StorageError::NoData`](crate::StorageError::NoData) for a
    /// meta or fake one).
    pub fn as_i64(&self) -> Result<i64> {
        match self.value {
            Value::Int(i) => Ok(*i),
            Value::BigInt(_) => Err(self.wrong("int that fits in 64 bits")),
            Value::Ext(Object::Tensor(_)) => match self.item()? {
                Scalar::Int(i) => Ok(i),
                Scalar::Bool(b) => Ok(i64::from(b)),
                Scalar::UInt(u) => {
                    i64::try_from(u).map_err(|_| self.wrong("int that fits in 64 bits"))
                }
                _ => Err(self.wrong("int")),
            },
            _ => Err(self.wrong("int")),
        }
    }

    /// The one element of a one-element tensor (an optimizer's `step`, a
    /// saved loss), as PyTorch's `item()`.
    fn item(&self) -> Result<Scalar> {
        let t = self.as_tensor()?;
        if t.tensor.numel() != 1 {
            return Err(self.wrong("one-element tensor"));
        }
        t.tensor.item()
    }

    /// The float; an `int` converts as Python's `float()` converts it
    /// (rounding to the nearest `f64`), so `lr = 1` reads as `1.0`; a
    /// one-element real tensor gives its element (`item()`).
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when the value is neither a `float`, an `int`
    /// that fits in 64 bits, nor such a tensor; a tensor's read error.
    pub fn as_f64(&self) -> Result<f64> {
        match self.value {
            Value::Float(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            Value::Ext(Object::Tensor(_)) => match self.item()? {
                Scalar::Complex(_) => Err(self.wrong("float")),
                s => Ok(s.to_f64()),
            },
            _ => Err(self.wrong("float")),
        }
    }

    /// The complex number.
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when the value is not a `complex`.
    pub fn as_complex(&self) -> Result<Complex64> {
        match self.value {
            Value::Ext(Object::Complex(c)) => Ok(*c),
            _ => Err(self.wrong("complex")),
        }
    }

    /// The string.
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when the value is not a `str`.
    pub fn as_str(&self) -> Result<&'c str> {
        self.value.as_str().ok_or_else(|| self.wrong("str"))
    }

    /// The bytes of a `bytes` or `bytearray`.
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] for any other value.
    pub fn as_bytes(&self) -> Result<&'c [u8]> {
        match (self.value, self.node()) {
            (Value::Bytes(b), _) => Ok(b),
            (_, Some(Node::ByteArray(b))) => Ok(b),
            _ => Err(self.wrong("bytes")),
        }
    }

    /// The dtype of a dtype object (`torch.float16`).
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when the value is not a dtype.
    pub fn as_dtype(&self) -> Result<DType> {
        match self.value {
            Value::Ext(Object::DType(d)) => Ok(*d),
            _ => Err(self.wrong("dtype")),
        }
    }

    /// The device of a `torch.device`.
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when the value is not a device.
    pub fn as_device(&self) -> Result<Device> {
        match self.value {
            Value::Ext(Object::Device(d)) => Ok(*d),
            _ => Err(self.wrong("device")),
        }
    }

    /// The sizes of a `torch.Size`.
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when the value is not a `torch.Size`.
    pub fn as_size(&self) -> Result<&'c [usize]> {
        match self.value {
            Value::Ext(Object::Size(s)) => Ok(s),
            _ => Err(self.wrong("size")),
        }
    }

    /// The tensor object (with its Parameter flag, quantization and lazy bits).
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when the value is not a tensor.
    pub fn as_tensor(&self) -> Result<&'c TensorObject> {
        match self.value {
            Value::Ext(Object::Tensor(t)) => Ok(t),
            _ => Err(self.wrong("tensor")),
        }
    }

    /// The numpy array (its elements as a tensor of the matching dtype).
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when the value is not a numpy array.
    pub fn as_ndarray(&self) -> Result<&'c NdArray> {
        match self.value {
            Value::Ext(Object::NdArray(a)) => Ok(a),
            _ => Err(self.wrong("ndarray")),
        }
    }

    /// A decoded `datetime`, `pathlib`, `slice`, `range` … value.
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] for any other value.
    pub fn as_data(&self) -> Result<&'c PyData> {
        match self.value {
            Value::Ext(Object::Data(d)) => Ok(d),
            _ => Err(self.wrong("decoded Python value")),
        }
    }

    /// The inert object's record (module, name, arguments, state), when the
    /// value is one; its contents are reached like a dict's
    /// ([`as_dict`](Self::as_dict), [`get`](Self::get)).
    pub fn as_object(&self) -> Option<&'c InertObject> {
        self.value
            .as_node()
            .and_then(|id| self.ckpt.objects.get(&id))
    }

    /// `(module, name)` of an inert object or of a global named as a value.
    pub fn class(&self) -> Option<(&'c str, &'c str)> {
        match self.value {
            Value::Ext(Object::Class(c)) => Some((&c.module, &c.name)),
            _ => self
                .as_object()
                .map(|o| (o.module.as_str(), o.name.as_str())),
        }
    }

    /// The Python type of a container the model holds as a plain dict or
    /// list, as Python writes the type: `collections.defaultdict`,
    /// `collections.Counter`, `argparse.Namespace`, `collections.deque`,
    /// and `set` or `frozenset`; `None` for any other value.
    pub fn container_class(&self) -> Option<&'static str> {
        let id = self.value.as_node()?;
        if let Some(class) = self.ckpt.classes.get(&id) {
            return Some(class);
        }
        match self.node()? {
            Node::Set(_) => Some("set"),
            Node::FrozenSet(_) => Some("frozenset"),
            _ => None,
        }
    }

    /// The items of a list or tuple (also a set or frozenset, in their
    /// order), each with its index as its last path key.
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] for any other value.
    pub fn as_list(&self) -> Result<impl ExactSizeIterator<Item = ValueRef<'c>> + '_> {
        let items: &'c [Value<Object>] = match (self.value, self.node()) {
            (_, Some(Node::List(v) | Node::Tuple(v) | Node::Set(v) | Node::FrozenSet(v))) => v,
            // A dangling id is an empty tuple (see `kind`).
            (Value::Node(_), None) => &[],
            _ => return Err(self.wrong("list")),
        };
        Ok(items
            .iter()
            .enumerate()
            .map(move |(i, v)| self.child(v, Key::Made(PathKey::Index(i as i64)))))
    }

    /// The entries of a dict (or `OrderedDict`), in order: each key and its
    /// value as handles, the value's path ending with the key.
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] for any other value.
    pub fn as_dict(
        &self,
    ) -> Result<impl ExactSizeIterator<Item = (ValueRef<'c>, ValueRef<'c>)> + '_> {
        let (Some(Node::Dict(items)), Value::Node(dict)) = (self.node(), self.value) else {
            return Err(self.wrong("dict"));
        };
        let parent = self.trail.parent();
        Ok(items.iter().enumerate().map(move |(at, (k, v))| {
            // The key's handle and the value's have one path.
            let trail = parent.child(Key::Entry { dict: *dict, at });
            (self.reached(k, trail.clone()), self.reached(v, trail))
        }))
    }

    /// The number of items of a container (dict entries, list items …).
    ///
    /// # Errors
    /// [`CheckpointError::ValueType`] when the value is not a container.
    pub fn len(&self) -> Result<usize> {
        match (self.value, self.node()) {
            (_, Some(Node::Dict(d))) => Ok(d.len()),
            (_, Some(Node::List(v) | Node::Tuple(v) | Node::Set(v) | Node::FrozenSet(v))) => {
                Ok(v.len())
            }
            // A dangling id is an empty tuple (see `kind`).
            (Value::Node(_), None) => Ok(0),
            _ => Err(self.wrong("container")),
        }
    }

    /// True for a container without items.
    ///
    /// # Errors
    /// As [`len`](Self::len).
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The value at a dotted path below this one (see NOTE [dotted paths]).
    ///
    /// # Errors
    /// [`CheckpointError::ValueNotFound`] naming the whole path when a step finds nothing.
    pub fn get(&self, path: &str) -> Result<ValueRef<'c>> {
        let mut here = self.clone();
        let mut rest = path;
        while !rest.is_empty() {
            let Some((next, after)) = here.step_dotted(rest) else {
                let mut full = here.path().to_vec();
                full.extend(rest.split('.').map(|k| PathKey::Key(k.to_owned())));
                return Err(Error::Checkpoint(CheckpointError::ValueNotFound {
                    path: joined(&full),
                }));
            };
            here = next;
            rest = after;
        }
        Ok(here)
    }

    /// The value at the given keys below this one: [`PathKey::Key`] a dict's
    /// string key, [`PathKey::Index`] a dict's integer key or a list/tuple
    /// index (negative from the end).
    ///
    /// # Errors
    /// [`CheckpointError::ValueNotFound`] naming the path up to the step that found nothing.
    pub fn get_path(&self, path: &[PathKey]) -> Result<ValueRef<'c>> {
        let mut here = self.clone();
        for key in path {
            here = here.step(key).ok_or_else(|| {
                let mut full = here.path().to_vec();
                full.push(key.clone());
                Error::Checkpoint(CheckpointError::ValueNotFound {
                    path: joined(&full),
                })
            })?;
        }
        Ok(here)
    }

    /// One step down by a key.
    fn step(&self, key: &PathKey) -> Option<ValueRef<'c>> {
        match (self.node()?, key) {
            (Node::Dict(items), PathKey::Key(k)) => items
                .iter()
                .find(|(key, _)| key.as_str() == Some(k))
                .map(|(_, v)| self.child(v, Key::Made(PathKey::Key(k.clone())))),
            (Node::Dict(items), PathKey::Index(i)) => items
                .iter()
                .find(|(key, _)| key.as_i64() == Some(*i))
                .map(|(_, v)| self.child(v, Key::Made(PathKey::Index(*i)))),
            (Node::List(v) | Node::Tuple(v), PathKey::Index(i)) => {
                let at = if *i < 0 {
                    v.len().checked_sub(i.unsigned_abs() as usize)?
                } else {
                    usize::try_from(*i).ok()?
                };
                v.get(at)
                    .map(|x| self.child(x, Key::Made(PathKey::Index(at as i64))))
            }
            _ => None,
        }
    }

    /// One step down a dotted path: the handle reached and the rest of the path.
    fn step_dotted<'p>(&self, rest: &'p str) -> Option<(ValueRef<'c>, &'p str)> {
        let node = self.node()?;
        if let Node::Dict(items) = node {
            // The longest string key that `rest` starts with, followed by `.` or the end.
            let best = items
                .iter()
                .filter_map(|(k, v)| {
                    let k = k.as_str()?;
                    let after = rest.strip_prefix(k)?;
                    (after.is_empty() || after.starts_with('.')).then_some((k, v))
                })
                .max_by_key(|(k, _)| k.len());
            if let Some((k, v)) = best {
                let after = &rest[k.len()..];
                return Some((
                    self.child(v, Key::Made(PathKey::Key(k.to_owned()))),
                    after.strip_prefix('.').unwrap_or(after),
                ));
            }
        }
        let (segment, after) = rest.split_once('.').unwrap_or((rest, ""));
        let index: i64 = segment.parse().ok()?;
        Some((self.step(&PathKey::Index(index))?, after))
    }

    /// Every tensor below this value, named by its dotted path relative to it,
    /// in pickle order (a tensor reachable twice is listed once per path; a
    /// tensor value itself is named `""`).
    ///
    /// # Errors
    /// [`CheckpointError::LimitExceeded`] past [`Checkpoint::set_max_paths`]'s bound.
    pub fn state_dict(&self) -> Result<Vec<(String, Tensor)>> {
        Ok(self
            .ckpt
            .tensors_from(self.value)?
            .into_iter()
            .map(|(p, t)| (joined(&p), t.tensor.clone()))
            .collect())
    }

    /// Every non-tensor leaf below this value with its path from the root,
    /// in pickle order: scalars, strings, bytes, dtypes, sizes, devices …,
    /// and empty dicts, lists and tuples. Non-empty containers are not
    /// listed themselves, only what they hold; tensors are left out. A value
    /// reachable by two paths is listed once per path; a container holding
    /// itself is walked once.
    ///
    /// # Errors
    /// [`CheckpointError::LimitExceeded`] past [`Checkpoint::set_max_paths`]'s bound (a structure shared exponentially often).
    pub fn leaves(&self) -> Result<Vec<ValueRef<'c>>> {
        let mut out = Vec::new();
        let mut on_path = HashSet::new();
        let mut budget = self.ckpt.max_paths;
        self.refuse_past_budget(budget)?;
        self.walk_leaves(&mut on_path, false, false, &mut budget, &mut out)?;
        Ok(out)
    }

    /// Refuses at once a walk at every path that would certainly pass
    /// `budget` ([`walk_cost_floor`]), rather than walking until it does: a
    /// structure shared exponentially often is found in the time its
    /// containers take to list once.
    fn refuse_past_budget(&self, budget: usize) -> Result<()> {
        let Value::Node(id) = self.value else {
            return Ok(());
        };
        if self.ckpt.objects.contains_key(id) {
            return Ok(());
        }
        let floor = walk_cost_floor(self.ckpt, *id, self.trail.depth() as u64);
        if floor > budget as u64 {
            return Err(self.ckpt.paths_exceeded());
        }
        Ok(())
    }

    /// Like [`leaves`](Self::leaves), but a container reachable by several
    /// paths is walked once, at the first: linear in the graph's size however
    /// often a structure is shared (a pickle can share one exponentially often,
    /// which [`leaves`](Self::leaves) refuses).
    ///
    /// # Errors
    /// [`CheckpointError::LimitExceeded`] past [`Checkpoint::set_max_paths`]'s bound (path steps counted).
    pub fn leaves_once(&self) -> Result<Vec<ValueRef<'c>>> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut budget = self.ckpt.max_paths;
        self.walk_leaves(&mut seen, true, false, &mut budget, &mut out)?;
        Ok(out)
    }

    /// Every inert object below this value (this one included), with its
    /// path, in pickle order; an object reachable by several paths (one the
    /// pickle reuses through its memo) is listed once per path, as tensors
    /// are, and an object holding itself is walked once. Globals outside the
    /// allowlist named as values are listed too. Where a structure is shared
    /// too often to list per path (past [`Checkpoint::set_max_paths`]'s bound: a pickle can
    /// share one exponentially often), each shared container is walked once,
    /// at its first path, as [`leaves_once`](Self::leaves_once) walks.
    ///
    /// # Errors
    /// [`CheckpointError::LimitExceeded`] when even that walk exceeds [`Checkpoint::set_max_paths`]'s bound.
    pub fn objects(&self) -> Result<Vec<ValueRef<'c>>> {
        let mut out = Vec::new();
        let mut on_path = HashSet::new();
        let mut budget = self.ckpt.max_paths;
        let walked = self
            .refuse_past_budget(budget)
            .and_then(|()| self.walk_leaves(&mut on_path, false, true, &mut budget, &mut out));
        if let Err(Error::Checkpoint(CheckpointError::LimitExceeded { .. })) = walked {
            out.clear();
            let mut seen = HashSet::new();
            let mut budget = self.ckpt.max_paths;
            self.walk_leaves(&mut seen, true, true, &mut budget, &mut out)?;
        } else {
            walked?;
        }
        out.retain(|v| v.kind() == ValueKind::Object);
        Ok(out)
    }

    /// Lists the leaves below this value. `seen` holds the containers on the
    /// path (`once`: every container walked so far).
    fn walk_leaves(
        &self,
        seen: &mut HashSet<NodeId>,
        once: bool,
        objects: bool,
        budget: &mut usize,
        out: &mut Vec<ValueRef<'c>>,
    ) -> Result<()> {
        *budget = budget
            .checked_sub(1 + self.trail.depth())
            .ok_or_else(|| self.ckpt.paths_exceeded())?;
        let kind = self.kind();
        if kind == ValueKind::Tensor {
            return Ok(());
        }
        let is_object = kind == ValueKind::Object && self.as_object().is_some();
        let id = match self.value {
            Value::Node(id) if (kind.is_container() || is_object) && self.len()? > 0 => *id,
            _ => {
                out.push(self.clone());
                return Ok(());
            }
        };
        if !seen.insert(id) {
            return Ok(());
        }
        if is_object && objects {
            out.push(self.clone());
        }
        // A tensor is charged as a visit and passed over before a handle
        // with its path is made for it (a state dict is mostly tensors).
        let mut visit = |v: &'c Value<Object>, key: Key| {
            if let Value::Ext(Object::Tensor(_)) = v {
                *budget = budget
                    .checked_sub(2 + self.trail.depth())
                    .ok_or_else(|| self.ckpt.paths_exceeded())?;
                return Ok(());
            }
            self.child(v, key)
                .walk_leaves(seen, once, objects, budget, out)
        };
        match self.node() {
            Some(Node::Dict(items)) if kind == ValueKind::Dict || is_object => {
                for (at, (_, v)) in items.iter().enumerate() {
                    visit(v, Key::Entry { dict: id, at })?;
                }
            }
            _ if kind == ValueKind::Dict || is_object => return Err(self.wrong("dict")),
            Some(Node::List(v) | Node::Tuple(v) | Node::Set(v) | Node::FrozenSet(v)) => {
                for (i, v) in v.iter().enumerate() {
                    visit(v, Key::Made(PathKey::Index(i as i64)))?;
                }
            }
            _ => {}
        }
        if !once {
            seen.remove(&id);
        }
        Ok(())
    }
}

impl Checkpoint {
    /// A handle on the saved object itself.
    pub fn root_value(&self) -> ValueRef<'_> {
        ValueRef::new(self, &self.root)
    }

    /// The value at a dotted path from the root (`"epoch"`, `"config.lr"`,
    /// `"model.layers.0.weight"`, `"optimizer.param_groups.0.lr"`); see
    /// NOTE [dotted paths] for how keys holding dots are found. `""` is the root.
    ///
    /// ```
    /// use stowage::Checkpoint;
    /// let ckpt = Checkpoint::builder()
    ///     .value("epoch", 3)
    ///     .value("config.lr", 1e-3)
    ///     .build()?;
    /// assert_eq!(ckpt.get("epoch")?.as_i64()?, 3);
    /// assert_eq!(ckpt.get("config.lr")?.as_f64()?, 1e-3);
    /// assert!(ckpt.get("config.name").is_err());
    /// # Ok::<(), stowage::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`CheckpointError::ValueNotFound`] naming the path when a step finds nothing.
    pub fn get(&self, path: &str) -> Result<ValueRef<'_>> {
        self.root_value().get(path)
    }

    /// The tensor at a dotted path (`"model.layers.0.weight"`), as
    /// `get(path)?.as_tensor()?.tensor`.
    ///
    /// # Errors
    /// [`CheckpointError::ValueNotFound`] naming the path up to the step that found
    /// nothing; [`CheckpointError::ValueType`] when the value there is not a tensor.
    pub fn tensor(&self, path: &str) -> Result<&Tensor> {
        let value = self.get(path)?;
        Ok(&value.as_tensor()?.tensor)
    }

    /// Each value that `torch.load(weights_only=True)` refuses (inert
    /// objects, numpy values, `datetime` …), as `(dotted path, module.name)`,
    /// each shared one once: what a torch checkpoint cannot hold.
    ///
    /// # Errors
    /// [`CheckpointError::LimitExceeded`] past [`Checkpoint::set_max_paths`]'s bound.
    pub fn unsaveable(&self) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        let mut budget = self.max_paths;
        let root = self.root_value();
        root.walk_leaves(&mut seen, true, true, &mut budget, &mut out)?;
        Ok(out
            .into_iter()
            .filter_map(|v| {
                let class = match (v.class(), v.raw()) {
                    (Some((m, n)), _) => format!("{m}.{n}"),
                    (None, Value::Ext(o)) => o.class_name()?,
                    _ => return None,
                };
                Some((joined(v.path()), class))
            })
            .collect())
    }

    /// Replaces every value that [`unsaveable`](Self::unsaveable) lists, so
    /// the checkpoint can be saved as a torch checkpoint: a dict entry holding
    /// one is removed, a list or tuple item becomes `None`, and so does the
    /// root. What an inert object held (its tensors too) goes with it. Returns
    /// how many references were dropped.
    pub fn drop_objects(&mut self) -> usize {
        let objects = std::mem::take(&mut self.objects);
        let gone = |v: &Value<Object>| match v {
            Value::Node(id) => objects.contains_key(id),
            Value::Ext(o) => o.weights_only_refuses(),
            _ => false,
        };
        let mut dropped = 0;
        for i in 0..self.graph.len() {
            match self.graph.get_mut(NodeId(i as u32)) {
                Node::Dict(items) => {
                    let before = items.len();
                    items.retain(|(k, v)| !gone(k) && !gone(v));
                    dropped += before - items.len();
                }
                node => {
                    for v in node.values_mut() {
                        if gone(v) {
                            *v = Value::None;
                            dropped += 1;
                        }
                    }
                }
            }
        }
        if gone(&self.root) {
            self.root = Value::None;
            dropped += 1;
        }
        self.compact();
        dropped
    }
}

/// The values a walk at every path ([`ValueRef::leaves`]) enters below a
/// container node: a dict's values, a list's, tuple's or set's items; none
/// for anything else (an object, whose walk it does not count).
fn walked_items(ckpt: &Checkpoint, id: NodeId) -> impl Iterator<Item = &Value<Object>> {
    let node = ckpt.graph.try_get(id);
    node.filter(|_| !ckpt.objects.contains_key(&id))
        .into_iter()
        .flat_map(walked_values)
}

/// The values a walk enters below `node`: a dict's values (not its keys),
/// a list's, tuple's or set's items; none for a bytearray.
fn walked_values(node: &Node<Object>) -> impl Iterator<Item = &Value<Object>> {
    let (seq, pairs) = match node {
        Node::Dict(items) => (&[][..], &items[..]),
        Node::List(v) | Node::Tuple(v) | Node::Set(v) | Node::FrozenSet(v) => (&v[..], &[][..]),
        Node::ByteArray(_) => (&[][..], &[][..]),
    };
    seq.iter().chain(pairs.iter().map(|(_, v)| v))
}

/// A lower bound of the path steps walking `root` at every path costs, the
/// walk starting at depth `depth`, as `walk_leaves` charges them (a visit at
/// depth `d` costs `d + 1`), computed once per container in post-order
/// ([`Checkpoint::post_order`]): for each container, its visits `V` (itself
/// and everything below it, at every path) and the sum `D` of their depths
/// below it; walking it at depth `d` costs `V (d + 1) + D`. An object
/// counts as one visit (the walk may charge more: a lower bound); a graph
/// with a cycle gives 0 (no bound). Without cycles the bound is the walk's
/// exact cost. Saturates.
fn walk_cost_floor(ckpt: &Checkpoint, root: NodeId, depth: u64) -> u64 {
    let order = ckpt.post_order([root], |node, kids| {
        let containers = walked_values(node).filter_map(Value::as_node);
        kids.extend(containers.filter(|c| !ckpt.objects.contains_key(c)));
    });
    let n = ckpt.graph.len();
    let mut cost: Vec<Option<(u64, u64)>> = vec![None; n];
    for id in order {
        let (mut visits, mut depths) = (1u64, 0u64);
        for v in walked_items(ckpt, id) {
            let (cv, cd) = match v.as_node() {
                Some(c) if !ckpt.objects.contains_key(&c) => match cost.get(c.index()) {
                    Some(Some(known)) => *known,
                    // Not done before its holder: a cycle. A walk cuts it
                    // wherever it meets the container again on its path,
                    // which depends on the path: no bound from here.
                    _ => return 0,
                },
                // A leaf, or an object (walked further: at least one visit).
                _ => (1, 0),
            };
            visits = visits.saturating_add(cv);
            depths = depths.saturating_add(cd).saturating_add(cv);
        }
        cost[id.index()] = Some((visits, depths));
    }
    let (visits, depths) = cost.get(root.index()).copied().flatten().unwrap_or((1, 0));
    visits.saturating_mul(depth + 1).saturating_add(depths)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::checkpoint::PyValue;

    /// The path steps `leaves` spends walking `ckpt` from its root.
    fn walked(ckpt: &Checkpoint) -> u64 {
        let root = ckpt.root_value();
        let (mut out, mut seen, start) = (Vec::new(), HashSet::new(), usize::MAX);
        let mut budget = start;
        root.walk_leaves(&mut seen, false, false, &mut budget, &mut out)
            .unwrap();
        (start - budget) as u64
    }

    fn floor(ckpt: &Checkpoint) -> u64 {
        match &ckpt.root {
            Value::Node(id) => walk_cost_floor(ckpt, *id, 0),
            _ => 0,
        }
    }

    /// `L0 = {"a": 1, "t": tensor}`, `Lk = [Lk-1, Lk-1, ()]`, shared.
    fn doubling(k: usize) -> PyValue {
        let t = Tensor::zeros(&[2], crate::DType::Float32).unwrap();
        let mut v = PyValue::Dict(vec![("a".into(), 1i64.into()), ("t".into(), t.into())]);
        for _ in 0..k {
            let shared = PyValue::Shared(Arc::new(v));
            v = PyValue::List(vec![shared.clone(), shared, PyValue::Tuple(vec![])]);
        }
        v
    }

    #[test]
    fn the_cost_floor_of_a_graph_without_cycles_is_the_walks_cost() {
        let nested = PyValue::Dict(vec![
            ("model".into(), doubling(3)),
            ("epoch".into(), 3i64.into()),
            (
                "set".into(),
                PyValue::Tuple(vec![doubling(2), PyValue::List(vec![])]),
            ),
        ]);
        for value in [doubling(0), doubling(1), doubling(6), nested] {
            let ckpt = Checkpoint::from_value(value).unwrap();
            assert_eq!(floor(&ckpt), walked(&ckpt));
        }
        // Exponentially shared: refused at once, the walk never started.
        let mut ckpt =
            Checkpoint::from_value(PyValue::Dict(vec![("root".into(), doubling(60))])).unwrap();
        assert_eq!(floor(&ckpt), u64::MAX);
        ckpt.set_max_paths(1000);
        assert!(matches!(
            ckpt.root_value().leaves(),
            Err(Error::Checkpoint(CheckpointError::LimitExceeded { .. }))
        ));
    }
}
