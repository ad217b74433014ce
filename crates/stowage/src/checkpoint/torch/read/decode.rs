//! Globals outside PyTorch's allowlist, read without running them: the data
//! types of [`decoded`](crate::checkpoint::globals::decoded) rebuilt from their pickled
//! arguments and state, and inert objects ([`InertObject`]) for the rest.
//!
//! A value whose meaning depends on a later `BUILD` (a numpy array, a numpy
//! dtype) is first a placeholder node; the pickle's memo may copy it before
//! `BUILD` runs, so once the pickle is read every reference to a placeholder
//! is replaced by the value it became ([`TorchHooks::finish`]).
//!
//! numpy's arrays, dtypes and scalars are in `numpy.rs`.

mod numpy;
#[cfg(test)]
mod tests;

use crate::error::{CheckpointError, FormatError};
use std::collections::HashMap;
use std::sync::Arc;

use self::numpy::{numpy_dtype, scalar};
use super::{bad, tuple_items, StorageSource, TorchHooks, V};
use crate::checkpoint::globals::allowlist;
use crate::checkpoint::globals::decoded::{self, Decoded};
use crate::checkpoint::pickle::{Graph, Node, NodeId, Pickled, Value};
use crate::checkpoint::value::data::{
    ClassRef, Date, NumpyDType, NumpyScalar, PyData, TimeDelta, TimeOfDay, TimeZone,
};
use crate::checkpoint::value::graph::{Construct, InertObject, Object};
use crate::{Error, Result};

/// A placeholder awaiting its `BUILD`.
#[derive(Clone, Debug)]
pub(crate) struct Pending {
    class: Arc<ClassRef>,
    kind: Decoded,
    args: V,
}

/// The read-side bookkeeping of foreign globals.
#[derive(Debug, Default)]
pub(crate) struct Foreign {
    pub objects: HashMap<NodeId, InertObject>,
    pending: HashMap<NodeId, Pending>,
    resolved: HashMap<NodeId, V>,
    /// Reading a TorchScript archive: its `__torch__` classes (TorchScript
    /// types, never Python code) are inert objects whatever the options.
    pub torchscript: bool,
    /// Values copied into new nodes so far (state entries, a deque's or a
    /// frozenset's items): a pickle could otherwise copy one large memoized
    /// dict or list into every object it builds.
    copied: usize,
}

impl Foreign {
    /// Forgets node `id`, which was released (`Graph::release`).
    pub(crate) fn forget(&mut self, id: NodeId) {
        // Most loads have none: no hashing then.
        if !self.objects.is_empty() {
            self.objects.remove(&id);
        }
        if !self.pending.is_empty() {
            self.pending.remove(&id);
        }
        if !self.resolved.is_empty() {
            self.resolved.remove(&id);
        }
    }
}

fn data(d: PyData) -> V {
    Value::Ext(Object::Data(Box::new(d)))
}

fn unsupported(what: String) -> Error {
    Error::Checkpoint(CheckpointError::Unsupported { what })
}

/// The bytes of a `bytes` value, or of a Python 2 `str` the machine read as text.
fn raw_bytes<'v>(graph: &Graph<Object>, v: &'v V, context: &'static str) -> Result<&'v [u8]> {
    match v {
        Value::Bytes(b) => Ok(b),
        Value::Str(s) => Ok(s.as_bytes()),
        _ => Err(bad(context, "bytes", v, graph)),
    }
}

fn int(graph: &Graph<Object>, v: &V, context: &'static str) -> Result<i64> {
    v.as_i64().ok_or_else(|| bad(context, "an int", v, graph))
}

fn opt_int(graph: &Graph<Object>, v: Option<&V>, context: &'static str) -> Result<Option<i64>> {
    match v {
        None | Some(Value::None) => Ok(None),
        Some(v) => int(graph, v, context).map(Some),
    }
}

/// The items of a list, tuple, set or frozenset node.
fn items(graph: &Graph<Object>, v: &V, context: &'static str) -> Result<Vec<V>> {
    match v.as_node().and_then(|id| graph.try_get(id)) {
        Some(Node::List(x) | Node::Tuple(x) | Node::Set(x) | Node::FrozenSet(x)) => Ok(x.clone()),
        _ => Err(bad(context, "a sequence", v, graph)),
    }
}

fn timedelta(graph: &Graph<Object>, v: &V) -> Result<TimeDelta> {
    match v {
        Value::Ext(Object::Data(d)) => match &**d {
            PyData::TimeDelta(t) => Ok(*t),
            _ => Err(bad("timezone offset", "a timedelta", v, graph)),
        },
        _ => Err(bad("timezone offset", "a timedelta", v, graph)),
    }
}

fn tzinfo(graph: &Graph<Object>, v: Option<&V>) -> Result<Option<TimeZone>> {
    match v {
        None | Some(Value::None) => Ok(None),
        Some(Value::Ext(Object::Data(d))) if matches!(**d, PyData::TimeZone(_)) => match &**d {
            PyData::TimeZone(tz) => Ok(Some(tz.clone())),
            _ => Ok(None),
        },
        Some(other) => Err(bad("tzinfo", "a datetime.timezone", other, graph)),
    }
}

/// `(hour | fold << 7, minute, second, us >> 16, us >> 8 & 255, us & 255)` as
/// CPython packs a time.
fn time_of_day(b: &[u8], tz: Option<TimeZone>) -> TimeOfDay {
    TimeOfDay {
        hour: b[0] & 0x7f,
        minute: b[1],
        second: b[2],
        microsecond: u32::from(b[3]) << 16 | u32::from(b[4]) << 8 | u32::from(b[5]),
        fold: b[0] & 0x80 != 0,
        tz,
    }
}

/// A path's parts joined as `PurePath(*parts)` joins them.
fn join_path(class: &str, parts: &[&str]) -> String {
    let sep = if class.contains("Windows") { '\\' } else { '/' };
    let mut out = String::new();
    for p in parts {
        if p.starts_with(sep) || out.is_empty() {
            out = (*p).to_owned();
        } else {
            if !out.ends_with(sep) {
                out.push(sep);
            }
            out.push_str(p);
        }
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}

/// The class of a legacy file's `('module', cls, source_file, source)`
/// persistent id, when `pid` is one.
pub(super) fn legacy_module_class(graph: &Graph<Object>, pid: &V) -> Option<V> {
    match pid.as_node().and_then(|id| graph.try_get(id)) {
        Some(Node::Tuple(items)) if items.len() == 4 && items[0].as_str() == Some("module") => {
            Some(items[1].clone())
        }
        _ => None,
    }
}

/// A numpy scalar (`numpy.core.multiarray.scalar(dtype, bytes)`): its value
/// read from the bytes in its dtype.
fn numpy_scalar(graph: &Graph<Object>, a: &[V]) -> Result<V> {
    let dtype = numpy_dtype(graph, a.first().unwrap_or(&Value::None), "numpy scalar")?;
    let bytes = raw_bytes(graph, a.get(1).unwrap_or(&Value::None), "numpy scalar")?;
    let value = scalar(&dtype, bytes)
        .ok_or_else(|| unsupported(format!("numpy scalars of dtype {}", dtype.name())))?;
    Ok(Value::Ext(Object::NumpyScalar(Box::new(NumpyScalar {
        dtype,
        value,
    }))))
}

/// `datetime`'s `datetime`, `date` and `time` (from the bytes CPython packs
/// them in, and a tzinfo), `timedelta` (days, seconds, microseconds) and
/// `timezone` (an offset and a name).
fn datetime_value(graph: &Graph<Object>, kind: Decoded, a: &[V]) -> Result<V> {
    Ok(match kind {
        Decoded::TimeDelta => {
            let part = |i: usize| opt_int(graph, a.get(i), "timedelta").map(|x| x.unwrap_or(0));
            data(PyData::TimeDelta(TimeDelta {
                days: part(0)?,
                seconds: part(1)?,
                microseconds: part(2)?,
            }))
        }
        Decoded::TimeZone => {
            let offset = timedelta(graph, a.first().unwrap_or(&Value::None))?;
            let name = match a.get(1) {
                Some(Value::Str(s)) => Some(s.to_string()),
                None | Some(Value::None) => None,
                Some(other) => return Err(bad("timezone name", "a str", other, graph)),
            };
            data(PyData::TimeZone(TimeZone { offset, name }))
        }
        // `datetime`, `date`, `time`.
        _ => {
            let b = raw_bytes(
                graph,
                a.first().unwrap_or(&Value::None),
                "decoded constructor",
            )?;
            let want = match kind {
                Decoded::DateTime => 10,
                Decoded::Date => 4,
                _ => 6,
            };
            if b.len() != want {
                return Err(Error::Format(FormatError::BadObject {
                    context: "packed date or time",
                    expected: "the bytes CPython packs",
                    found: format!("{} bytes", b.len()),
                }));
            }
            let date = Date {
                year: u16::from(b[0]) << 8 | u16::from(b[1]),
                month: b[2] & 0x7f,
                day: b[3],
            };
            match kind {
                Decoded::Date => data(PyData::Date(date)),
                Decoded::Time => data(PyData::Time(time_of_day(b, tzinfo(graph, a.get(1))?))),
                _ => {
                    let mut t = time_of_day(&b[4..], tzinfo(graph, a.get(1))?);
                    t.fold = b[2] & 0x80 != 0;
                    data(PyData::DateTime(date, t))
                }
            }
        }
    })
}

/// A `pathlib` path of class `class`: its string parts joined.
fn pathlib_path(graph: &Graph<Object>, class: &'static str, a: &[V]) -> Result<V> {
    let parts = a
        .iter()
        .map(|v| {
            v.as_str()
                .ok_or_else(|| bad("path part", "a str", v, graph))
        })
        .collect::<Result<Vec<_>>>()?;
    let path = join_path(class, &parts);
    Ok(data(PyData::Path { class, path }))
}

/// The builtins `slice`, `range` (`xrange`) and `bytes` (from bytes, or
/// from a sequence of byte values).
fn builtin_value(graph: &Graph<Object>, kind: Decoded, a: &[V]) -> Result<V> {
    Ok(match kind {
        Decoded::Slice => {
            let p = |i| opt_int(graph, a.get(i), "slice");
            let (start, stop, step) = match a.len() {
                1 => (None, p(0)?, None),
                2 | 3 => (p(0)?, p(1)?, p(2)?),
                n => {
                    return Err(bad(
                        "slice",
                        "1 to 3 arguments",
                        &Value::Int(n as i64),
                        graph,
                    ))
                }
            };
            data(PyData::Slice([start, stop, step]))
        }
        Decoded::Range => {
            let p = |i| int(graph, &a[i], "range");
            let r = match a.len() {
                1 => [0, p(0)?, 1],
                2 => [p(0)?, p(1)?, 1],
                3 => [p(0)?, p(1)?, p(2)?],
                n => {
                    return Err(bad(
                        "range",
                        "1 to 3 arguments",
                        &Value::Int(n as i64),
                        graph,
                    ))
                }
            };
            data(PyData::Range(r))
        }
        // `bytes`.
        _ => match a.first() {
            None => Value::bytes(&[]),
            Some(v @ Value::Bytes(_)) => v.clone(),
            Some(v) => Value::bytes(
                &items(graph, v, "bytes")?
                    .iter()
                    .map(|b| b.as_i64().and_then(|i| u8::try_from(i).ok()))
                    .collect::<Option<Vec<u8>>>()
                    .ok_or_else(|| bad("bytes", "byte values", v, graph))?,
            ),
        },
    })
}

/// TorchScript's pickler markers in `torch.jit._pickle`: a typed list
/// (`build_intlist` …) is its one list argument, `restore_type_tag` its
/// value.
fn script_marker(graph: &Graph<Object>, kind: Decoded, args: &V, a: &[V]) -> Result<V> {
    match kind {
        Decoded::ScriptList => match a {
            [list]
                if matches!(
                    list.as_node().and_then(|id| graph.try_get(id)),
                    Some(Node::List(_))
                ) =>
            {
                Ok(list.clone())
            }
            _ => Err(bad("torch.jit._pickle list", "one list", args, graph)),
        },
        // `restore_type_tag`.
        _ => match a {
            [value, Value::Str(_)] => Ok(value.clone()),
            _ => Err(bad(
                "torch.jit._pickle.restore_type_tag",
                "a value and a type name",
                args,
                graph,
            )),
        },
    }
}

impl<S: StorageSource> TorchHooks<'_, S> {
    /// A global outside the allowlist, as `find_class` returns it: a decoded
    /// global or an inert class reference when the options allow it, else
    /// the allowlist's refusal `refused`.
    pub(super) fn foreign_class(&self, module: &str, name: &str, refused: Error) -> Result<V> {
        // Module names compared as the allowlist compares them (`builtins` and
        // Python 2's `__builtin__` alike), as PyTorch maps them before matching.
        let canon = |m: &str| -> String {
            allowlist::MODULE_ALIASES
                .iter()
                .find(|(alias, _)| *alias == m)
                .map_or(m, |(_, c)| c)
                .to_owned()
        };
        let allowed = self.options.allow_globals.iter().any(|g| {
            g.rsplit_once('.')
                .is_some_and(|(m, n)| n == name && canon(m) == canon(module))
        });
        // In a TorchScript archive, its own classes (`__torch__.…`) are
        // inert objects and its pickler's list and type markers are data,
        // as `torch.jit.load` reads them; the code is never read.
        let script_class = self.foreign.torchscript
            && (module == "__torch__"
                || module.starts_with("__torch__.")
                || module == "torch.jit._pickle");
        if !self.options.inert && !allowed && !script_class {
            return Err(refused);
        }
        if let Some(Decoded::BuiltinType(t)) = decoded::lookup(module, name) {
            return Ok(data(PyData::Type(t)));
        }
        Ok(Value::Ext(Object::Class(Arc::new(ClassRef {
            module: module.to_owned(),
            name: name.to_owned(),
        }))))
    }

    /// Counts `n` more values copied, against the pickle's node limit.
    fn charge(&mut self, n: usize) -> Result<()> {
        self.foreign.copied = self.foreign.copied.saturating_add(n);
        let max = self.options.pickle_limits.max_nodes;
        if self.foreign.copied > max {
            return Err(Error::Checkpoint(CheckpointError::LimitExceeded {
                limit: crate::Limit::PickleNodes,
                value: self.foreign.copied as u64,
                max: max as u64,
            }));
        }
        Ok(())
    }

    /// The value a placeholder became, or `v` itself.
    fn resolved(&self, v: &V) -> V {
        match v {
            Value::Node(id) => self.foreign.resolved.get(id).cloned().unwrap_or(v.clone()),
            _ => v.clone(),
        }
    }

    /// `REDUCE` or `NEWOBJ` of a global outside the allowlist: decoded when
    /// [`decoded`] lists it (an inert object under `inert` when its arguments
    /// are not what stowage decodes), else an inert object.
    pub(super) fn call_foreign(
        &mut self,
        graph: &mut Graph<Object>,
        class: &Arc<ClassRef>,
        args: V,
        construct: Construct,
    ) -> Result<V> {
        let (class, args) = match (class.module.as_str(), class.name.as_str()) {
            // Protocols 0 and 1 spell `cls.__new__` + state as `_reconstructor(cls, base, state)`.
            ("copyreg" | "copy_reg", "_reconstructor") => {
                match tuple_items(graph, &args, "_reconstructor")?.first() {
                    Some(Value::Ext(Object::Class(c))) => (c.clone(), args),
                    _ => (class.clone(), args),
                }
            }
            _ => (class.clone(), args),
        };
        let Some(kind) = decoded::lookup(&class.module, &class.name) else {
            return Ok(self.inert(graph, class, args, construct));
        };
        match self.decode(graph, &class, kind, &args) {
            Ok(v) => Ok(v),
            Err(_) if self.options.inert => Ok(self.inert(graph, class, args, construct)),
            Err(e) => Err(e),
        }
    }

    fn inert(
        &mut self,
        graph: &mut Graph<Object>,
        class: Arc<ClassRef>,
        args: V,
        construct: Construct,
    ) -> V {
        let id = graph.dict(Vec::new());
        self.foreign.objects.insert(
            id,
            InertObject {
                module: class.module.clone(),
                name: class.name.clone(),
                construct,
                args,
                state: None,
            },
        );
        Value::Node(id)
    }

    /// Rebuilds the decoded global `kind` (of class `class`) from its
    /// constructor arguments `args`, by the family of globals it belongs to.
    fn decode(
        &mut self,
        graph: &mut Graph<Object>,
        class: &Arc<ClassRef>,
        kind: Decoded,
        args: &V,
    ) -> Result<V> {
        let n = tuple_items(graph, args, "constructor arguments")?.len();
        self.charge(n)?;
        let a: Vec<V> = tuple_items(graph, args, "constructor arguments")?
            .iter()
            .map(|v| self.resolved(v))
            .collect();
        match kind {
            Decoded::NdArrayReconstruct | Decoded::NdArrayClass | Decoded::NumpyDType => {
                self.numpy_placeholder(graph, class, kind, args, &a)
            }
            Decoded::NumpyScalar => numpy_scalar(graph, &a),
            Decoded::Namespace | Decoded::DefaultDict | Decoded::Deque | Decoded::FrozenSet => {
                self.collection(graph, class, kind, args, &a)
            }
            Decoded::DateTime
            | Decoded::Date
            | Decoded::Time
            | Decoded::TimeDelta
            | Decoded::TimeZone => datetime_value(graph, kind, &a),
            Decoded::Path(class) => pathlib_path(graph, class, &a),
            Decoded::Slice | Decoded::Range | Decoded::Bytes => builtin_value(graph, kind, &a),
            Decoded::ScriptList | Decoded::ScriptTypeTag => script_marker(graph, kind, args, &a),
            Decoded::BuiltinType(_) => Err(bad(
                "decoded constructor",
                "a constructor",
                &Value::None,
                graph,
            )),
        }
    }

    /// A numpy array (`_reconstruct`, `ndarray`) or dtype: a placeholder
    /// node, whose value its `BUILD` gives. A dtype's type code is checked
    /// here.
    fn numpy_placeholder(
        &mut self,
        graph: &mut Graph<Object>,
        class: &Arc<ClassRef>,
        kind: Decoded,
        args: &V,
        a: &[V],
    ) -> Result<V> {
        if kind == Decoded::NumpyDType {
            let code = a.first().and_then(Value::as_str);
            code.ok_or_else(|| bad("numpy.dtype", "a type code", args, graph))?;
        }
        let id = graph.tuple(Vec::new());
        self.foreign.pending.insert(
            id,
            Pending {
                class: class.clone(),
                kind,
                args: args.clone(),
            },
        );
        Ok(Value::Node(id))
    }

    /// `argparse.Namespace` and `collections.defaultdict` (a dict node of
    /// that class, a Namespace's attributes awaiting its `BUILD`),
    /// `collections.deque` (a list node of that class) and `frozenset`, each
    /// item counted against the copy budget.
    fn collection(
        &mut self,
        graph: &mut Graph<Object>,
        class: &Arc<ClassRef>,
        kind: Decoded,
        args: &V,
        a: &[V],
    ) -> Result<V> {
        Ok(match kind {
            Decoded::Namespace | Decoded::DefaultDict => {
                let id = graph.dict(Vec::new());
                let name = match kind {
                    Decoded::Namespace => "argparse.Namespace",
                    _ => "collections.defaultdict",
                };
                self.classes.insert(id, name);
                if kind == Decoded::Namespace {
                    self.foreign.pending.insert(
                        id,
                        Pending {
                            class: class.clone(),
                            kind,
                            args: args.clone(),
                        },
                    );
                }
                Value::Node(id)
            }
            Decoded::Deque => {
                let init = match a.first() {
                    Some(v) => items(graph, v, "deque")?,
                    None => Vec::new(),
                };
                self.charge(init.len())?;
                let id = graph.list(init);
                self.classes.insert(id, "collections.deque");
                Value::Node(id)
            }
            // `frozenset`.
            _ => {
                let init = match a.first() {
                    Some(v) => items(graph, v, "frozenset")?,
                    None => Vec::new(),
                };
                self.charge(init.len())?;
                Value::Node(graph.add(Node::FrozenSet(init)))
            }
        })
    }

    /// `BUILD` on an inert object, a placeholder or a Namespace: `Ok(None)`
    /// when `obj` is none of them.
    pub(super) fn build_foreign(
        &mut self,
        graph: &mut Graph<Object>,
        obj: &V,
        state: V,
    ) -> Result<Option<V>> {
        let Some(id) = obj.as_node() else {
            return Ok(None);
        };
        if let Some(p) = self.foreign.pending.get(&id).cloned() {
            let state = self.resolved(&state);
            return match self.build_pending(graph, id, &p, &state) {
                Ok(Some(v)) => {
                    self.foreign.pending.remove(&id);
                    self.foreign.resolved.insert(id, v.clone());
                    Ok(Some(v))
                }
                Ok(None) => Ok(Some(obj.clone())),
                Err(_) if self.options.inert => {
                    self.foreign.pending.remove(&id);
                    *graph.get_mut(id) = Node::Dict(Vec::new());
                    let construct = Construct::Call;
                    self.foreign.objects.insert(
                        id,
                        InertObject {
                            module: p.class.module.clone(),
                            name: p.class.name.clone(),
                            construct,
                            args: p.args,
                            state: None,
                        },
                    );
                    self.build_inert(graph, id, state)?;
                    Ok(Some(obj.clone()))
                }
                Err(e) => Err(e),
            };
        }
        if self.foreign.objects.contains_key(&id) {
            self.build_inert(graph, id, state)?;
            return Ok(Some(obj.clone()));
        }
        Ok(None)
    }

    /// `Ok(Some(v))`: the placeholder became `v`; `Ok(None)`: built in place.
    fn build_pending(
        &mut self,
        graph: &mut Graph<Object>,
        id: NodeId,
        p: &Pending,
        state: &V,
    ) -> Result<Option<V>> {
        match p.kind {
            Decoded::NumpyDType => {
                let a = tuple_items(graph, &p.args, "numpy.dtype")?;
                let code = a.first().and_then(Value::as_str).unwrap_or("");
                let s = tuple_items(graph, state, "numpy dtype state")?;
                let mut d = NumpyDType::from_code(code);
                if let Some(Value::Str(order)) = s.get(1) {
                    if let Some(c @ ('<' | '>' | '|')) = order.chars().next() {
                        d.byteorder = c;
                    }
                }
                // Structured dtypes (field names) and subarrays hold no one element type.
                if s.get(2).is_some_and(|v| !v.is_none()) || s.get(3).is_some_and(|v| !v.is_none())
                {
                    d.torch = None;
                }
                Ok(Some(Value::Ext(Object::NumpyDType(Box::new(d)))))
            }
            Decoded::NdArrayReconstruct | Decoded::NdArrayClass => {
                self.ndarray(graph, state).map(Some)
            }
            _ => {
                // A Namespace: its attributes, as the entries of its dict.
                let entries = match state.as_node().and_then(|s| graph.try_get(s)) {
                    Some(Node::Dict(d)) => d.clone(),
                    _ => return Err(bad("Namespace state", "a dict", state, graph)),
                };
                self.fill(graph, id, entries)?;
                Ok(None)
            }
        }
    }

    /// Adds `entries` to the dict node `id` (a Namespace or an inert
    /// object), counted against the copy budget and noted as its children.
    fn fill(&mut self, graph: &mut Graph<Object>, id: NodeId, entries: Vec<(V, V)>) -> Result<()> {
        self.charge(entries.len())?;
        let children: Vec<V> = entries
            .iter()
            .flat_map(|(k, v)| [k.clone(), v.clone()])
            .collect();
        if let Some(Node::Dict(d)) = graph.try_get_mut(id) {
            d.extend(entries);
        }
        graph.note_children(id, &children);
        Ok(())
    }

    fn build_inert(&mut self, graph: &mut Graph<Object>, id: NodeId, state: V) -> Result<()> {
        let dict = |v: &V| match v.as_node().and_then(|n| graph.try_get(n)) {
            Some(Node::Dict(d)) => Some(&d[..]),
            _ => None,
        };
        let mut entries: Vec<(V, V)> = Vec::new();
        if let Some(d) = dict(&state) {
            entries.extend_from_slice(d);
        } else if let Some(Node::Tuple(pair)) = state.as_node().and_then(|n| graph.try_get(n)) {
            match &pair[..] {
                // `(dict_state, slots_state)`, as `copyreg` pickles classes with `__slots__`.
                [a, b]
                    if (a.is_none() || dict(a).is_some()) && (b.is_none() || dict(b).is_some()) =>
                {
                    entries.extend_from_slice(dict(a).unwrap_or_default());
                    entries.extend_from_slice(dict(b).unwrap_or_default());
                }
                _ => entries.push((Value::str("state"), state.clone())),
            }
        } else if !state.is_none() {
            entries.push((Value::str("state"), state.clone()));
        }
        self.fill(graph, id, entries)?;
        if let Some(o) = self.foreign.objects.get_mut(&id) {
            o.state = Some(state);
        }
        Ok(())
    }

    /// `APPEND(S)` on an inert object: its items, by index.
    pub(super) fn extend_foreign(
        &mut self,
        graph: &mut Graph<Object>,
        target: &V,
        items: Vec<V>,
    ) -> bool {
        let Some(id) = target
            .as_node()
            .filter(|id| self.foreign.objects.contains_key(id))
        else {
            return false;
        };
        let Some(Node::Dict(d)) = graph.try_get_mut(id) else {
            return false;
        };
        let first = d.iter().filter(|(k, _)| matches!(k, Value::Int(_))).count() as i64;
        d.extend(
            (first..)
                .zip(&items)
                .map(|(i, v)| (Value::Int(i), v.clone())),
        );
        graph.note_children(id, &items);
        true
    }

    /// Completes a read pickle: each placeholder never built becomes its
    /// value without state (a numpy dtype from its code); every reference to
    /// a placeholder is replaced by its value; inert objects without state or
    /// with constructor arguments list them under `"args"`. Returns the inert
    /// objects.
    ///
    /// # Errors
    /// A placeholder that cannot stand without its state (an array never built).
    pub(crate) fn finish(
        &mut self,
        p: &mut Pickled<Object>,
    ) -> Result<HashMap<NodeId, InertObject>> {
        let graph = &mut p.graph;
        for (id, pending) in std::mem::take(&mut self.foreign.pending) {
            let v = match pending.kind {
                Decoded::NumpyDType => {
                    let a = tuple_items(graph, &pending.args, "numpy.dtype")?;
                    let code = a.first().and_then(Value::as_str).unwrap_or("");
                    Value::Ext(Object::NumpyDType(Box::new(NumpyDType::from_code(code))))
                }
                Decoded::Namespace => continue,
                _ if self.options.inert => {
                    *graph.get_mut(id) = Node::Dict(Vec::new());
                    self.foreign.objects.insert(
                        id,
                        InertObject {
                            module: pending.class.module.clone(),
                            name: pending.class.name.clone(),
                            construct: Construct::Call,
                            args: pending.args.clone(),
                            state: None,
                        },
                    );
                    continue;
                }
                _ => {
                    return Err(Error::Format(FormatError::BadObject {
                        context: "numpy array",
                        expected: "a BUILD state",
                        found: "none".into(),
                    }))
                }
            };
            self.foreign.resolved.insert(id, v);
        }
        let resolved = std::mem::take(&mut self.foreign.resolved);
        if !resolved.is_empty() {
            let fix = |v: &mut V| {
                if let Some(new) = v.as_node().and_then(|id| resolved.get(&id)) {
                    *v = new.clone();
                }
            };
            for i in 0..graph.len() {
                let id = NodeId(i as u32);
                graph.get_mut(id).values_mut().for_each(fix);
            }
            fix(&mut p.root);
            self.state.values_mut().for_each(fix);
            for o in self.foreign.objects.values_mut() {
                fix(&mut o.args);
                if let Some(s) = &mut o.state {
                    fix(s);
                }
            }
        }
        for (id, o) in &self.foreign.objects {
            let empty_args = matches!(
                o.args.as_node().and_then(|a| graph.try_get(a)),
                Some(Node::Tuple(t)) if t.is_empty()
            );
            if empty_args {
                continue;
            }
            if let Some(Node::Dict(d)) = graph.try_get_mut(*id) {
                if !d.iter().any(|(k, _)| k.as_str() == Some("args")) {
                    d.push((Value::str("args"), o.args.clone()));
                }
            }
        }
        Ok(std::mem::take(&mut self.foreign.objects))
    }
}
