//! Building a checkpoint in a few lines: [`CheckpointBuilder`] puts state
//! dicts and plain values ([`PyValue`]) at dotted paths of a root dict, the
//! shape of a training checkpoint (`{"model": …, "optimizer": …, "epoch": 3,
//! "config": {…}}`), and [`build`](CheckpointBuilder::build) makes the
//! [`Checkpoint`] that [`save`](crate::save) writes as `torch.save` would.

use crate::error::CheckpointError;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use num_complex::Complex64;

use crate::checkpoint::pickle::Value;
use crate::checkpoint::value::graph::{
    Checkpoint, Object, PathKey, StorageRecord, TensorObject, COUNTER,
};
use crate::{DType, Device, Error, Result, Tensor};

/// A Python value to put in a checkpoint, owned. Most Rust values convert into
/// one with `into()`: integers, floats, `bool`, `&str`/`String`, `Vec`s,
/// maps with string keys, `Option` (`None`), [`DType`], [`Device`],
/// [`Tensor`], [`TensorObject`], [`Complex64`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum PyValue {
    /// `None`.
    None,
    /// A `bool`.
    Bool(bool),
    /// An `int`.
    Int(i64),
    /// An `int` of any size (a seed, a hash); one that fits `i64` is
    /// pickled as [`Int`](Self::Int) would be.
    BigInt(num_bigint::BigInt),
    /// A `float`.
    Float(f64),
    /// A `complex`.
    Complex(Complex64),
    /// A `str`.
    Str(String),
    /// A `bytes`.
    Bytes(Vec<u8>),
    /// A `list`.
    List(Vec<PyValue>),
    /// A `tuple`.
    Tuple(Vec<PyValue>),
    /// A `dict`, in insertion order.
    Dict(Vec<(PyValue, PyValue)>),
    /// A `collections.OrderedDict` (what `state_dict()` returns).
    OrderedDict(Vec<(PyValue, PyValue)>),
    /// A `collections.Counter` (a dict of counts), which
    /// `torch.load(weights_only=True)` reads.
    Counter(Vec<(PyValue, PyValue)>),
    /// A dtype object (`torch.float16`).
    DType(DType),
    /// A `torch.device`.
    Device(Device),
    /// A `torch.Size`.
    Size(Vec<usize>),
    /// A tensor, or an `nn.Parameter` (`TensorObject::parameter`).
    Tensor(Box<TensorObject>),
    /// A container with the state `BUILD` sets on it: an `OrderedDict`'s
    /// `__dict__` (a state dict's `{"_metadata": …}`, which
    /// `load_state_dict` reads for each module's version), as `torch.save`
    /// pickles it; or a tensor with its Python attributes (its `__dict__`,
    /// [`TensorObject::state`]), which `torch.save` pickles through
    /// `_rebuild_from_type_v2` (`_rebuild_parameter_with_state` for a
    /// parameter). The state of any other value is dropped.
    WithState(Box<PyValue>, Box<PyValue>),
    /// One value put at several places, kept one Python object (`a is b`
    /// after `torch.load`), as the pickle's memo keeps it: clones of one
    /// `Arc` are one container, however often they are put. Structures
    /// shared this way can reach a value along exponentially many paths,
    /// which the walks bound ([`MAX_PATHS`](crate::checkpoint::MAX_PATHS)).
    /// [`CheckpointBuilder::value`] does not change a value below one put at
    /// another place too (it refuses, naming the path): build it whole first.
    Shared(Arc<PyValue>),
}

impl PyValue {
    /// A `tuple` of the items.
    pub fn tuple<T: Into<PyValue>>(items: impl IntoIterator<Item = T>) -> PyValue {
        PyValue::Tuple(items.into_iter().map(Into::into).collect())
    }

    /// A `list` of the items.
    pub fn list<T: Into<PyValue>>(items: impl IntoIterator<Item = T>) -> PyValue {
        PyValue::List(items.into_iter().map(Into::into).collect())
    }

    /// A `dict` of the entries, in the order given.
    pub fn dict<K: Into<PyValue>, V: Into<PyValue>>(
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> PyValue {
        PyValue::Dict(
            entries
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    /// A `bytes` value.
    pub fn bytes(b: impl Into<Vec<u8>>) -> PyValue {
        PyValue::Bytes(b.into())
    }

    /// A `torch.Size`.
    pub fn size(dims: impl Into<Vec<usize>>) -> PyValue {
        PyValue::Size(dims.into())
    }

    /// An `OrderedDict` of `name → tensor`: a state dict.
    pub fn state_dict<S: Into<String>>(entries: impl IntoIterator<Item = (S, Tensor)>) -> PyValue {
        PyValue::OrderedDict(
            entries
                .into_iter()
                .map(|(k, t)| (PyValue::Str(k.into()), PyValue::from(t)))
                .collect(),
        )
    }

    /// The kind's name, as [`ValueKind::name`](crate::checkpoint::ValueKind::name) gives it.
    pub(crate) fn kind_name(&self) -> &'static str {
        match self {
            PyValue::None => "none",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) | PyValue::BigInt(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Complex(_) => "complex",
            PyValue::Str(_) => "str",
            PyValue::Bytes(_) => "bytes",
            PyValue::List(_) => "list",
            PyValue::Tuple(_) => "tuple",
            PyValue::Dict(_) | PyValue::OrderedDict(_) | PyValue::Counter(_) => "dict",
            PyValue::DType(_) => "dtype",
            PyValue::Device(_) => "device",
            PyValue::Size(_) => "size",
            PyValue::Tensor(_) => "tensor",
            PyValue::WithState(v, _) => v.kind_name(),
            PyValue::Shared(v) => v.kind_name(),
        }
    }

    fn matches(&self, key: &PathKey) -> bool {
        match (self, key) {
            (PyValue::Str(s), PathKey::Key(k)) => s == k,
            (PyValue::Int(i), PathKey::Index(j)) => i == j,
            _ => false,
        }
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for PyValue {
            fn from(v: $t) -> PyValue {
                PyValue::Int(i64::from(v))
            }
        }
    )*};
}
from_int!(i8, i16, i32, i64, u8, u16, u32);

impl From<f64> for PyValue {
    fn from(v: f64) -> PyValue {
        PyValue::Float(v)
    }
}

impl From<f32> for PyValue {
    fn from(v: f32) -> PyValue {
        PyValue::Float(f64::from(v))
    }
}

impl From<bool> for PyValue {
    fn from(v: bool) -> PyValue {
        PyValue::Bool(v)
    }
}

impl From<&str> for PyValue {
    fn from(v: &str) -> PyValue {
        PyValue::Str(v.to_owned())
    }
}

impl From<String> for PyValue {
    fn from(v: String) -> PyValue {
        PyValue::Str(v)
    }
}

impl From<Complex64> for PyValue {
    fn from(v: Complex64) -> PyValue {
        PyValue::Complex(v)
    }
}

impl From<DType> for PyValue {
    fn from(v: DType) -> PyValue {
        PyValue::DType(v)
    }
}

impl From<Device> for PyValue {
    fn from(v: Device) -> PyValue {
        PyValue::Device(v)
    }
}

impl From<Tensor> for PyValue {
    fn from(v: Tensor) -> PyValue {
        PyValue::Tensor(Box::new(TensorObject::new(v)))
    }
}

impl From<TensorObject> for PyValue {
    fn from(v: TensorObject) -> PyValue {
        PyValue::Tensor(Box::new(v))
    }
}

impl From<()> for PyValue {
    fn from((): ()) -> PyValue {
        PyValue::None
    }
}

impl<T: Into<PyValue>> From<Option<T>> for PyValue {
    fn from(v: Option<T>) -> PyValue {
        v.map_or(PyValue::None, Into::into)
    }
}

impl<T: Into<PyValue>> From<Vec<T>> for PyValue {
    fn from(v: Vec<T>) -> PyValue {
        PyValue::list(v)
    }
}

impl<T: Into<PyValue> + Clone> From<&[T]> for PyValue {
    fn from(v: &[T]) -> PyValue {
        PyValue::list(v.iter().cloned())
    }
}

impl<K: Into<PyValue>, V: Into<PyValue>> From<BTreeMap<K, V>> for PyValue {
    /// A `dict` in the map's (sorted) key order.
    fn from(v: BTreeMap<K, V>) -> PyValue {
        PyValue::dict(v)
    }
}

impl<V: Into<PyValue>> From<HashMap<String, V>> for PyValue {
    /// A `dict` with its keys sorted, so that the same map always saves the same bytes.
    fn from(v: HashMap<String, V>) -> PyValue {
        let mut entries: Vec<(String, V)> = v.into_iter().collect();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        PyValue::dict(entries)
    }
}

/// Builds a checkpoint whose root is a `dict`: values and state dicts put at
/// dotted paths, the dicts on the way made as needed.
///
/// ```
/// use stowage::{Checkpoint, Tensor};
/// let w = Tensor::from_slice(&[1.0f32, 2.0])?;
/// let ckpt = Checkpoint::builder()
///     .tensors("model", [("fc.weight", w)])
///     .value("epoch", 3)
///     .value("config.lr", 1e-3)
///     .value("config.name", "gpt")
///     .value("config.betas", stowage::checkpoint::PyValue::tuple([0.9, 0.999]))
///     .build()?;
/// assert_eq!(ckpt.get("config.name")?.as_str()?, "gpt");
/// assert_eq!(ckpt.get("model")?.state_dict()?[0].0, "fc.weight");
/// # Ok::<(), stowage::Error>(())
/// ```
#[derive(Debug, Default)]
#[must_use]
pub struct CheckpointBuilder {
    root: Vec<(PyValue, PyValue)>,
    error: Option<Error>,
}

impl CheckpointBuilder {
    /// Puts `value` at a dotted path of string keys (`"config.lr"`), making
    /// the dicts on the way; a value already there is replaced, keeping its
    /// place, as Python's `d[k] = v` does.
    pub fn value(self, path: &str, value: impl Into<PyValue>) -> CheckpointBuilder {
        let keys: Vec<PathKey> = path.split('.').map(|k| PathKey::Key(k.into())).collect();
        self.value_at(&keys, value)
    }

    /// Puts `value` at the given keys: [`PathKey::Key`] a string key,
    /// [`PathKey::Index`] an integer key (or an existing list's index).
    pub fn value_at(mut self, path: &[PathKey], value: impl Into<PyValue>) -> CheckpointBuilder {
        if self.error.is_none() {
            if let Err(e) = insert(&mut self.root, path, 0, value.into()) {
                self.error = Some(e);
            }
        }
        self
    }

    /// Puts a state dict (an `OrderedDict` of `name → tensor`, names kept
    /// whole, dots and all, as `module.state_dict()` has them) at a dotted path.
    pub fn tensors<S: Into<String>>(
        self,
        path: &str,
        entries: impl IntoIterator<Item = (S, Tensor)>,
    ) -> CheckpointBuilder {
        self.value(path, PyValue::state_dict(entries))
    }

    /// The checkpoint. Tensors that share a storage share it in the
    /// checkpoint (and in the file it is saved to); its storages are listed
    /// in the order their first tensors appear. One tensor put at several
    /// paths (clones of one [`Tensor`], [`Tensor::is_same`]) stays one object:
    /// saved once, it loads in PyTorch as one (`a is b`).
    ///
    /// # Errors
    /// The first error of the calls before: [`CheckpointError::ValueType`] when a path
    /// goes through a value that is not a dict (or a list, by index),
    /// [`CheckpointError::ValueNotFound`] for an empty key or a list index past the end.
    pub fn build(self) -> Result<Checkpoint> {
        if let Some(e) = self.error {
            return Err(e);
        }
        Checkpoint::from_value(PyValue::Dict(self.root))
    }
}

impl Checkpoint {
    /// A checkpoint whose saved object is `value`, of any kind (a dict, a
    /// list, one tensor, …). Tensors share storages and objects as
    /// [`CheckpointBuilder::build`] says; a [`PyValue::Shared`] is one
    /// object wherever it is put.
    ///
    /// # Errors
    /// None at present: the storages are listed by a walk that enters each
    /// container once, so no sharing is too deep for it. The `Result` is
    /// kept for the checks a value may need (the builder's own calls
    /// return theirs through [`CheckpointBuilder::build`]).
    pub fn from_value(value: PyValue) -> Result<Checkpoint> {
        let mut ckpt = Checkpoint::new();
        ckpt.root = Adder::default().add(&mut ckpt, value);
        let mut seen = HashSet::new();
        let mut storages = Vec::new();
        for t in ckpt.tensors_in_pickle_order() {
            let s = t.tensor.untyped_storage();
            if seen.insert(s.id()) {
                storages.push(StorageRecord {
                    key: storages.len().to_string().into(),
                    storage: s.clone(),
                    dtype: Some(t.tensor.dtype()),
                    location: s.device().to_string().into(),
                });
            }
        }
        ckpt.storages = storages;
        Ok(ckpt)
    }

    /// Each tensor object once, in the order a pickler first meets it:
    /// depth first from the root, each container entered once (the memo).
    /// Linear in the graph, however often its containers are shared.
    fn tensors_in_pickle_order(&self) -> Vec<&TensorObject> {
        let mut out = Vec::new();
        let mut entered = HashSet::new();
        let mut stack = vec![&self.root];
        while let Some(v) = stack.pop() {
            match v {
                Value::Ext(Object::Tensor(t)) => out.push(&**t),
                Value::Node(id) if entered.insert(*id) => {
                    if let Some(node) = self.graph.try_get(*id) {
                        let children: Vec<_> = node.values().collect();
                        stack.extend(children.into_iter().rev());
                    }
                }
                _ => {}
            }
        }
        out
    }
}

impl Checkpoint {
    /// A [`CheckpointBuilder`]: a checkpoint of values and state dicts in a few lines.
    pub fn builder() -> CheckpointBuilder {
        CheckpointBuilder::default()
    }
}

fn joined(path: &[PathKey]) -> String {
    path.iter()
        .map(|k| k.to_string())
        .collect::<Vec<_>>()
        .join(".")
}

/// Puts `value` at `full[depth..]` below the dict `entries` (`full[..depth]`
/// led there), so that errors name the path from the root.
fn insert(
    entries: &mut Vec<(PyValue, PyValue)>,
    full: &[PathKey],
    depth: usize,
    value: PyValue,
) -> Result<()> {
    let not_found = || {
        Error::Checkpoint(CheckpointError::ValueNotFound {
            path: joined(&full[..(depth + 1).min(full.len())]),
        })
    };
    let key = match full.get(depth) {
        Some(PathKey::Key(k)) if k.is_empty() => return Err(not_found()),
        Some(key) => key,
        None => return Err(not_found()),
    };
    let last = depth + 1 == full.len();
    let i = match entries.iter().position(|(k, _)| k.matches(key)) {
        Some(i) => i,
        None => {
            let k = match key {
                PathKey::Key(k) => PyValue::Str(k.clone()),
                PathKey::Index(i) => PyValue::Int(*i),
            };
            entries.push((k, PyValue::Dict(Vec::new())));
            entries.len() - 1
        }
    };
    let slot = &mut entries[i].1;
    if last {
        *slot = value;
        return Ok(());
    }
    descend(slot, full, depth + 1, value)
}

/// Puts `value` at `full[depth..]` below the container `slot` (at `full[..depth]`).
fn descend(slot: &mut PyValue, full: &[PathKey], depth: usize, value: PyValue) -> Result<()> {
    match (slot, &full[depth]) {
        (PyValue::Dict(entries) | PyValue::OrderedDict(entries) | PyValue::Counter(entries), _) => {
            insert(entries, full, depth, value)
        }
        (PyValue::WithState(inner, _), _) => descend(inner, full, depth, value),
        // Changing a value put at other places too would have to change it
        // there as well, as Python's one object would; a copy made here
        // would silently stop sharing it, so that is refused.
        (PyValue::Shared(inner), _) => match Arc::get_mut(inner) {
            Some(inner) => descend(inner, full, depth, value),
            None => Err(Error::Checkpoint(CheckpointError::ValueType {
                path: joined(&full[..depth]),
                expected: "a value put at one place (build a shared value whole before putting it)",
                found: "a value shared with another place",
            })),
        },
        (PyValue::List(items), PathKey::Index(i)) => {
            let Some(item) = usize::try_from(*i).ok().and_then(|at| items.get_mut(at)) else {
                return Err(Error::Checkpoint(CheckpointError::ValueNotFound {
                    path: joined(&full[..=depth]),
                }));
            };
            if depth + 1 == full.len() {
                *item = value;
                Ok(())
            } else {
                descend(item, full, depth + 1, value)
            }
        }
        (other, _) => Err(Error::Checkpoint(CheckpointError::ValueType {
            path: joined(&full[..depth]),
            expected: "dict",
            found: other.kind_name(),
        })),
    }
}

/// Puts [`PyValue`]s into a checkpoint's graph, each [`PyValue::Shared`]
/// once: its clones reuse the node the first made.
#[derive(Default)]
struct Adder {
    /// Keyed by the `Arc`'s address, which `alive` keeps from being reused.
    shared: HashMap<*const PyValue, Value<Object>>,
    alive: Vec<Arc<PyValue>>,
}

impl Adder {
    fn add(&mut self, ckpt: &mut Checkpoint, v: PyValue) -> Value<Object> {
        match v {
            PyValue::None => Value::None,
            PyValue::Bool(b) => Value::Bool(b),
            PyValue::Int(i) => Value::Int(i),
            PyValue::BigInt(i) => Value::int(i),
            PyValue::Float(f) => Value::Float(f),
            PyValue::Complex(c) => Value::Ext(Object::Complex(c)),
            PyValue::Str(s) => Value::str(&s),
            PyValue::Bytes(b) => Value::bytes(&b),
            PyValue::DType(d) => Value::Ext(Object::DType(d)),
            PyValue::Device(d) => Value::Ext(Object::Device(d)),
            PyValue::Size(s) => Value::Ext(Object::Size(s.into())),
            PyValue::Tensor(t) => Value::Ext(Object::Tensor(t.into())),
            PyValue::List(items) => {
                let items = self.add_all(ckpt, items);
                Value::Node(ckpt.graph.list(items))
            }
            PyValue::Tuple(items) => {
                let items = self.add_all(ckpt, items);
                Value::Node(ckpt.graph.tuple(items))
            }
            PyValue::Dict(entries) => Value::Node(self.add_dict(ckpt, entries)),
            PyValue::OrderedDict(entries) => {
                let id = self.add_dict(ckpt, entries);
                ckpt.ordered.insert(id);
                Value::Node(id)
            }
            PyValue::Counter(entries) => {
                let id = self.add_dict(ckpt, entries);
                ckpt.classes.insert(id, COUNTER);
                Value::Node(id)
            }
            PyValue::WithState(value, state) => match self.add(ckpt, *value) {
                Value::Node(id) => {
                    let state = self.add(ckpt, *state);
                    ckpt.state.insert(id, state);
                    Value::Node(id)
                }
                Value::Ext(Object::Tensor(t)) => {
                    let state = self.add(ckpt, *state);
                    let mut t = Arc::unwrap_or_clone(t);
                    t.set_state(Some(state));
                    Value::Ext(Object::Tensor(Arc::new(t)))
                }
                other => other,
            },
            PyValue::Shared(value) => {
                let key = Arc::as_ptr(&value);
                if let Some(done) = self.shared.get(&key) {
                    return done.clone();
                }
                match Arc::try_unwrap(value) {
                    // Held here only: no other place can reach it, so it is
                    // built as it is, without a copy or a memo entry.
                    Ok(alone) => self.add(ckpt, alone),
                    Err(value) => {
                        // Shared: its own level copied once (what it holds
                        // that is shared is an `Arc`, not copied).
                        let made = self.add(ckpt, (*value).clone());
                        self.alive.push(value);
                        self.shared.insert(key, made.clone());
                        made
                    }
                }
            }
        }
    }

    fn add_all(&mut self, ckpt: &mut Checkpoint, items: Vec<PyValue>) -> Vec<Value<Object>> {
        items.into_iter().map(|x| self.add(ckpt, x)).collect()
    }

    fn add_dict(
        &mut self,
        ckpt: &mut Checkpoint,
        entries: Vec<(PyValue, PyValue)>,
    ) -> crate::checkpoint::pickle::NodeId {
        let items: Vec<_> = entries
            .into_iter()
            .map(|(k, v)| (self.add(ckpt, k), self.add(ckpt, v)))
            .collect();
        ckpt.graph.dict(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::ValueKind;
    use crate::error::CheckpointError;

    fn t(v: &[f32]) -> Tensor {
        Tensor::from_slice(v).unwrap()
    }

    /// A value shared with another place is not changed through one of
    /// them (the other would not see it, as Python's one object would).
    #[test]
    fn a_shared_value_is_not_changed_through_one_place() {
        let shared = PyValue::Shared(Arc::new(PyValue::dict([("lr", 1e-3)])));
        let e = Checkpoint::builder()
            .value("a", shared.clone())
            .value("b", shared)
            .value("a.lr", 2e-3)
            .build()
            .unwrap_err();
        assert!(
            matches!(&e, Error::Checkpoint(CheckpointError::ValueType { path, found, .. })
                if path == "a" && found.contains("shared")),
            "{e:?}"
        );
        // Put at one place only, it is changed there.
        let alone = PyValue::Shared(Arc::new(PyValue::dict([("lr", 1e-3)])));
        let ckpt = Checkpoint::builder()
            .value("a", alone)
            .value("a.lr", 2e-3)
            .build()
            .unwrap();
        assert_eq!(ckpt.get("a.lr").unwrap().as_f64().unwrap(), 2e-3);
    }

    #[test]
    fn a_training_checkpoint_in_a_few_lines() {
        let w = t(&[1.0, 2.0, 3.0, 4.0]);
        let ckpt = Checkpoint::builder()
            .tensors("model", [("fc.weight", w.clone()), ("fc.bias", t(&[0.5]))])
            .value("epoch", 3)
            .value("config.lr", 1e-3)
            .value("config.name", "gpt")
            .value("config.layers", vec![1, 2])
            .value("config.dtype", DType::BFloat16)
            .value("config.dropout", None::<f64>)
            .value("config.lr", 2e-3)
            .build()
            .unwrap();
        assert_eq!(ckpt.get("epoch").unwrap().as_i64().unwrap(), 3);
        assert_eq!(ckpt.get("config.lr").unwrap().as_f64().unwrap(), 2e-3);
        assert_eq!(ckpt.get("config.name").unwrap().as_str().unwrap(), "gpt");
        assert_eq!(ckpt.get("config.layers.1").unwrap().as_i64().unwrap(), 2);
        assert_eq!(ckpt.get("config.layers.-1").unwrap().as_i64().unwrap(), 2);
        assert_eq!(
            ckpt.get("config.dtype").unwrap().as_dtype().unwrap(),
            DType::BFloat16
        );
        assert!(ckpt.get("config.dropout").unwrap().is_none());
        let keys: Vec<String> = ckpt
            .get("config")
            .unwrap()
            .as_dict()
            .unwrap()
            .map(|(k, _)| k.as_str().unwrap().to_owned())
            .collect();
        // Replacing a value keeps its place.
        assert_eq!(keys, ["lr", "name", "layers", "dtype", "dropout"]);
        let fc = ckpt.get("model.fc.weight").unwrap().as_tensor().unwrap();
        assert!(fc.tensor.untyped_storage().is_same(w.untyped_storage()));
        let sd = ckpt.get("model").unwrap().state_dict().unwrap();
        let names: Vec<&str> = sd.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["fc.weight", "fc.bias"]);
        assert_eq!(ckpt.storages.len(), 2);
        assert_eq!(
            ckpt.get("model").unwrap().kind(),
            ValueKind::Dict,
            "a state dict is a dict"
        );
        let model = ckpt.get("model").unwrap();
        assert!(ckpt.ordered.contains(&model.raw().as_node().unwrap()));
    }

    #[test]
    fn a_state_dicts_metadata_is_saved_as_build_state() {
        // `module.state_dict()`: an OrderedDict with `_metadata` set on it.
        let metadata = PyValue::OrderedDict(vec![("".into(), PyValue::dict([("version", 1)]))]);
        let sd = PyValue::WithState(
            Box::new(PyValue::state_dict([("w", t(&[1.0]))])),
            Box::new(PyValue::dict([("_metadata", metadata)])),
        );
        let ckpt = Checkpoint::builder().value("model", sd).build().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.pt");
        crate::save(&path, &ckpt).unwrap();
        let back = crate::load(&path).unwrap();
        let model = back.get("model").unwrap().raw().as_node().unwrap();
        assert!(back.ordered.contains(&model));
        let state = back.state.get(&model).expect("the state is kept");
        let Value::Node(state) = state else {
            panic!("a dict state: {state:?}")
        };
        let version = back.graph.get(*state);
        assert!(format!("{version:?}").contains("_metadata"), "{version:?}");
    }

    #[test]
    fn paths_through_other_values_are_refused() {
        let e = Checkpoint::builder()
            .value("config", 3)
            .value("config.lr", 1e-3)
            .build()
            .unwrap_err();
        assert!(
            matches!(&e, Error::Checkpoint(CheckpointError::ValueType { path, expected: "dict", found: "int" }) if path == "config"),
            "{e:?}"
        );
        let e = Checkpoint::builder()
            .value("a.b", 1)
            .value("a.b.c.d", 1)
            .build()
            .unwrap_err();
        assert!(
            matches!(&e, Error::Checkpoint(CheckpointError::ValueType { path, found: "int", .. }) if path == "a.b"),
            "{e:?}"
        );
        let e = Checkpoint::builder().value("a..b", 1).build().unwrap_err();
        assert!(
            matches!(e, Error::Checkpoint(CheckpointError::ValueNotFound { .. })),
            "{e:?}"
        );
        let e = Checkpoint::builder()
            .value("l", vec![1, 2])
            .value_at(&[PathKey::Key("l".into()), PathKey::Index(5)], 0)
            .build()
            .unwrap_err();
        assert!(
            matches!(&e, Error::Checkpoint(CheckpointError::ValueNotFound { path }) if path == "l.5"),
            "{e:?}"
        );
    }

    #[test]
    fn list_items_and_int_keys_can_be_set() {
        let ckpt = Checkpoint::builder()
            .value("l", vec![1, 2])
            .value_at(&[PathKey::Key("l".into()), PathKey::Index(1)], "two")
            .value_at(&[PathKey::Key("by_id".into()), PathKey::Index(7)], 0.5)
            .build()
            .unwrap();
        assert_eq!(ckpt.get("l.1").unwrap().as_str().unwrap(), "two");
        assert_eq!(ckpt.get("by_id.7").unwrap().as_f64().unwrap(), 0.5);
        let e = ckpt.get("by_id.8").unwrap_err();
        assert!(
            matches!(&e, Error::Checkpoint(CheckpointError::ValueNotFound { path }) if path == "by_id.8"),
            "{e:?}"
        );
    }
}
