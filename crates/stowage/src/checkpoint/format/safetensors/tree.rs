//! A checkpoint's structure kept in the safetensors files stowage writes, so
//! that `.pt` → `.safetensors` → `.pt` gives back what was saved: nested
//! dicts, lists and tuples, their key types and order, `OrderedDict`s, and
//! the values beside the tensors.
//!
//! A safetensors file holds a flat map of names to tensors and a flat map of
//! strings (`__metadata__`). A checkpoint that is not already such a map (a
//! dict of `str` keys to dense tensors) is saved with one more metadata
//! entry, [`TREE_KEY`], holding its structure as JSON:
//!
//! ```text
//! {"version": 1, "root": NODE}
//! NODE := {"tensor": NAME}                 a tensor, by its name in the file
//!       | {"dict": [[NODE, NODE], …], "ordered": true?}   keys, values, in order
//!       | {"list": [NODE, …]} | {"tuple": […]} | {"set": […]} | {"frozenset": […]}
//!       | null | true | false | INTEGER | FLOAT | STRING     None, bool, int, float, str
//!       | {"int": "DECIMAL" | "0xHEX"}      an int beyond 64 bits (hex past 4,300 digits)
//!       | {"float": "nan" | "inf" | "-inf"}
//!       | {"bytes": HEX} | {"bytearray": HEX}
//!       | {"complex": [RE, IM]}             each a FLOAT or one of the strings above
//!       | {"dtype": NAME} | {"device": TEXT} | {"size": [INTEGER, …]}
//!       | {"qscheme": …} | {"datetime": …} | {"ndarray": …} | …   the objects of `objects.rs`
//!       | {"lost": KIND}                    a value not recorded (a bare storage, a large array, a cycle)
//!       | {"ref": K}                        the container recorded with "id": K, again
//!
//! A container the checkpoint holds at several places (a pickle's memo: one
//! object, many paths) is recorded once, at its first place, with an
//! `"id": K` beside its tag, and is `{"ref": K}` everywhere after: the
//! structure's size is linear in its distinct objects, however often they
//! are shared, and a load rebuilds one object (`a is b`). Its tensors are
//! written once, under the names of that first place. A tree with ids says
//! `"version": 2`; one without says 1, as before.
//!
//! A tensor node may carry a view: {"tensor": NAME, "view": {"of": OWNER,
//! "offset": N, "stride": [N, …]}}. The file holds NAME as a copy of its own
//! (safetensors has no shared storage), but in the checkpoint it shared its
//! storage with OWNER, a tensor whose bytes are that whole storage (tied
//! weights: `lm_head.weight` and `embed.weight`, a transpose, a slice); a
//! load makes it that view of OWNER's storage again, at OWNER's dtype. (A
//! flat state dict has no tree, and its tied tensors stay copies.)
//! ```
//!
//! Loading a file that has it rebuilds that structure around the file's
//! tensors; a `lost` value is left out of its dict (`None` in a list or
//! tuple). Files from elsewhere have no such entry and stay flat, as every
//! reader reads them. A sparse or nested tensor, written as its components,
//! comes back as a dict of them (`{"indices": …, "values": …}`), and an
//! inert object (read with `inert`) as the dict of what it holds, the paths
//! its tensors were written under.

use crate::error::{CheckpointError, FormatError};
use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::Arc;

use num_bigint::BigInt;
use num_complex::Complex64;
use serde_json::{json, Value as Json};

use super::objects;
use crate::checkpoint::pickle::{Node, NodeId, Value, MAX_INT_DIGITS};
use crate::checkpoint::value::dict_key::DictKey;
use crate::checkpoint::value::graph::{dotted, Checkpoint, Object, PathKey};
use crate::checkpoint::value::int_text;
use crate::checkpoint::value::path_key::path_key;
use crate::{DType, Device, Error, Result};

/// The `__metadata__` entry holding the structure.
pub const TREE_KEY: &str = "stowage.tree";

/// The version of the JSON this module writes without refs, and reads.
const VERSION: u64 = 1;

/// The version of a tree that holds refs to shared containers.
const VERSION_REFS: u64 = 2;

/// The most bytes a tree may have: the `safetensors` crate refuses headers
/// past 100 MB, and the tree is in the header.
const MAX_TREE_BYTES: usize = crate::Limit::TreeBytes.default_value() as usize;

/// Whether `ckpt` is what a safetensors file holds without help: a dict of
/// `str` keys to dense tensors (an `OrderedDict` state dict among them).
fn is_flat(ckpt: &Checkpoint) -> bool {
    let Value::Node(id) = &ckpt.root else {
        return false;
    };
    match ckpt.graph.try_get(*id) {
        Some(Node::Dict(items)) => items.iter().all(|(k, v)| {
            matches!(k, Value::Str(_))
                && matches!(v, Value::Ext(Object::Tensor(t)) if t.kind().is_strided())
        }),
        _ => false,
    }
}

/// The JSON of `ckpt`'s structure for [`TREE_KEY`], naming each tensor as
/// the safetensors writer does (its dotted path); `None` for a checkpoint a
/// safetensors file holds as it is ([`is_flat`]).
///
/// # Errors
/// [`CheckpointError::LimitExceeded`] for a structure shared too often to write out
/// (the walk visits each path, as [`Checkpoint::tensors`] does).
pub(crate) fn record(ckpt: &Checkpoint) -> Result<Option<String>> {
    // A flat state dict stays what every reader reads, ties and all (as
    // `save_torch_state_dict` writes it, tied weights are re-tied by the
    // model that loads them).
    if is_flat(ckpt) {
        return Ok(None);
    }
    let ties = ties(ckpt)?;
    let mut walk = Record {
        ckpt,
        path: Vec::new(),
        on_path: Vec::new(),
        budget: ckpt.max_paths,
        ties,
        arrays: objects::MAX_ARRAYS_BYTES,
        shared: shared_containers(ckpt),
        ids: HashMap::new(),
    };
    let root = walk.node(&ckpt.root)?;
    // An id (a ref may follow it) is a member version 1 readers do not know.
    let version = if walk.ids.is_empty() {
        VERSION
    } else {
        VERSION_REFS
    };
    let text = object([("version", json!(version)), ("root", root)]).to_string();
    if text.len() > MAX_TREE_BYTES {
        return Err(Error::Checkpoint(CheckpointError::LimitExceeded {
            limit: crate::Limit::TreeBytes,
            value: text.len() as u64,
            max: MAX_TREE_BYTES as u64,
        }));
    }
    Ok(Some(text))
}

/// The containers the graph holds at more than one place.
fn shared_containers(ckpt: &Checkpoint) -> std::collections::HashSet<NodeId> {
    let mut seen = std::collections::HashSet::new();
    let mut shared = std::collections::HashSet::new();
    for (_, node) in ckpt.graph.iter() {
        for v in node.values() {
            if let Value::Node(c) = v {
                if !seen.insert(*c) {
                    shared.insert(*c);
                }
            }
        }
    }
    shared
}

/// A JSON object of these members (built directly: `json!` would
/// serialize each member's value again, which a deep tree pays per level).
fn object<const N: usize>(members: [(&str, Json); N]) -> Json {
    Json::Object(
        members
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
    )
}

/// Where a tied tensor lies in its owner's storage (see the module's docs).
struct Tie {
    of: String,
    offset: usize,
    stride: Vec<usize>,
}

/// The tensors, by the names they are written under, that share a storage
/// with another tensor whose bytes are that whole storage (the first such
/// in the file's order, of the same dtype): each a view of that owner.
fn ties(ckpt: &Checkpoint) -> Result<HashMap<String, Tie>> {
    let tensors = ckpt.tensors_once()?;
    let plain = |t: &crate::checkpoint::value::graph::TensorObject| {
        t.kind().is_strided()
            && !t.conj
            && !t.neg
            && t.quantization().is_none()
            && t.subclass().is_none()
    };
    let mut owners: HashMap<usize, (String, DType)> = HashMap::new();
    for (path, t) in &tensors {
        let x = &t.tensor;
        let storage = x.untyped_storage();
        let whole = x.is_contiguous() && x.storage_offset() == 0 && x.nbytes() == storage.nbytes();
        if plain(t) && whole {
            owners
                .entry(storage.id())
                .or_insert_with(|| (dotted(path), x.dtype()));
        }
    }
    let mut ties = HashMap::new();
    for (path, t) in &tensors {
        let x = &t.tensor;
        let Some((owner, dtype)) = owners.get(&x.untyped_storage().id()) else {
            continue;
        };
        let name = dotted(path);
        if *owner != name && *dtype == x.dtype() && plain(t) {
            let tie = Tie {
                of: owner.clone(),
                offset: x.storage_offset(),
                stride: x.stride().to_vec(),
            };
            ties.insert(name, tie);
        }
    }
    Ok(ties)
}

struct Record<'c> {
    ckpt: &'c Checkpoint,
    path: Vec<PathKey>,
    on_path: Vec<NodeId>,
    budget: usize,
    ties: HashMap<String, Tie>,
    /// Bytes of numpy arrays still to be kept inline (`objects.rs`).
    arrays: usize,
    /// The containers held at more than one place, and the ids of those
    /// recorded so far.
    shared: std::collections::HashSet<NodeId>,
    ids: HashMap<NodeId, u64>,
}

impl Record<'_> {
    fn node(&mut self, v: &Value<Object>) -> Result<Json> {
        self.budget = self
            .budget
            .checked_sub(1)
            .ok_or_else(|| self.ckpt.paths_exceeded())?;
        Ok(match v {
            Value::None => Json::Null,
            Value::Bool(b) => json!(b),
            Value::Int(i) => json!(i),
            Value::BigInt(b) => json!({"int": int_text(b)}),
            Value::Float(f) => float(*f),
            Value::Str(s) => json!(&**s),
            Value::Bytes(b) => json!({"bytes": hex::encode(b)}),
            Value::Ext(x) => self.object(x),
            Value::Node(id) => return self.container(*id),
        })
    }

    fn object(&mut self, x: &Object) -> Json {
        match x {
            Object::Tensor(t) if t.kind().is_strided() => {
                let name = dotted(&self.path);
                match self.ties.get(&name) {
                    Some(tie) => json!({"tensor": name, "view": {
                        "of": tie.of, "offset": tie.offset, "stride": tie.stride,
                    }}),
                    None => json!({ "tensor": name }),
                }
            }
            // Written as its components, each under the tensor's name and the
            // component's: it comes back as a dict of them.
            Object::Tensor(t) => {
                let name = dotted(&self.path);
                let items: Vec<Json> = t
                    .kind()
                    .components()
                    .into_iter()
                    .map(|(c, _)| json!([c, {"tensor": format!("{name}.{c}")}]))
                    .collect();
                json!({ "dict": items })
            }
            Object::DType(d) => json!({"dtype": d.name()}),
            Object::Device(d) => json!({"device": d.to_string()}),
            Object::Size(s) => json!({ "size": s }),
            Object::Complex(c) => json!({"complex": [float(c.re), float(c.im)]}),
            other => objects::record(other, &mut self.arrays)
                .unwrap_or_else(|| json!({"lost": lost_kind(other)})),
        }
    }

    fn container(&mut self, id: NodeId) -> Result<Json> {
        // A container holding itself cannot be written out as a tree.
        if self.on_path.contains(&id) {
            return Ok(json!({"lost": "cycle"}));
        }
        if let Some(&k) = self.ids.get(&id) {
            return Ok(object([("ref", json!(k))]));
        }
        let Some(node) = self.ckpt.graph.try_get(id) else {
            return Ok(json!({"tuple": []}));
        };
        self.on_path.push(id);
        let json = match node {
            Node::Dict(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (k, v) in items {
                    let key = self.node(k)?;
                    self.path.push(path_key(&self.ckpt.graph, k));
                    let value = self.node(v);
                    self.path.pop();
                    out.push(Json::Array(vec![key, value?]));
                }
                if self.ckpt.ordered.contains(&id) {
                    object([("dict", Json::Array(out)), ("ordered", Json::Bool(true))])
                } else {
                    object([("dict", Json::Array(out))])
                }
            }
            Node::List(items) | Node::Tuple(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, v) in items.iter().enumerate() {
                    self.path.push(PathKey::Index(i as i64));
                    let value = self.node(v);
                    self.path.pop();
                    out.push(value?);
                }
                object([(node.kind(), Json::Array(out))])
            }
            Node::Set(items) | Node::FrozenSet(items) => {
                // Tensors are never looked for in sets (the writer does not
                // write them): only values.
                let mut out = Vec::with_capacity(items.len());
                for v in items {
                    out.push(self.node(v)?);
                }
                object([(node.kind(), Json::Array(out))])
            }
            Node::ByteArray(b) => json!({"bytearray": hex::encode(b)}),
        };
        self.on_path.pop();
        let mut json = json;
        if self.shared.contains(&id) {
            let k = self.ids.len() as u64;
            self.ids.insert(id, k);
            if let Json::Object(o) = &mut json {
                o.insert("id".to_owned(), json!(k));
            }
        }
        Ok(json)
    }
}

/// What a value JSON cannot hold here is, in the contract's `type` words.
fn lost_kind(x: &Object) -> &'static str {
    match x {
        Object::Tensor(_) => "tensor",
        Object::Storage(_) => "storage",
        Object::NdArray(_) => "ndarray",
        Object::NumpyScalar(_) => "numpy_scalar",
        Object::NumpyDType(_) => "numpy_dtype",
        Object::Data(d) => d.kind(),
        Object::QScheme(_) => "qscheme",
        Object::Layout(_) => "layout",
        Object::Global(_) | Object::Class(_) => "type",
        _ => "value",
    }
}

pub(super) fn float(f: f64) -> Json {
    if f.is_nan() {
        json!({"float": "nan"})
    } else if f.is_infinite() {
        json!({"float": if f > 0.0 { "inf" } else { "-inf" }})
    } else {
        json!(f)
    }
}

/// Rebuilds the structure [`TREE_KEY`] records around the tensors of `ckpt`,
/// a safetensors file just read (its root the flat dict of its tensors), and
/// takes the entry out of its metadata. Nothing changes when the entry is
/// absent.
///
/// # Errors
/// [`FormatError::BadObject`] naming [`TREE_KEY`]: the entry is not this JSON, or
/// names a tensor the file does not hold, or leaves one of the file's
/// tensors out (the file was changed after stowage wrote it).
pub(crate) fn restore(ckpt: &mut Checkpoint) -> Result<()> {
    let Some(text) = ckpt
        .safetensors_metadata
        .as_mut()
        .and_then(|m| m.remove(TREE_KEY))
    else {
        return Ok(());
    };
    if ckpt
        .safetensors_metadata
        .as_ref()
        .is_some_and(|m| m.is_empty())
    {
        ckpt.safetensors_metadata = None;
    }
    let bad = |expected: &'static str, found: String| {
        Error::Format(FormatError::BadObject {
            context: "safetensors metadata entry stowage.tree",
            expected,
            found,
        })
    };
    let tree: Json = serde_json::from_str(&text).map_err(|e| bad("JSON", e.to_string()))?;
    match tree.get("version").and_then(Json::as_u64) {
        Some(VERSION | VERSION_REFS) => {}
        other => return Err(bad("version 1 or 2", format!("{other:?}"))),
    }
    let root = tree
        .get("root")
        .ok_or_else(|| bad("a root", "none".into()))?;
    // The file's tensors, by name, each to be placed once.
    let mut tensors: HashMap<Arc<str>, Value<Object>> = HashMap::new();
    if let Value::Node(id) = &ckpt.root {
        if let Some(Node::Dict(items)) = ckpt.graph.try_get(*id) {
            for (k, v) in items {
                if let Value::Str(name) = k {
                    tensors.insert(name.clone(), v.clone());
                }
            }
        }
    }
    let owners = tensors
        .iter()
        .filter_map(|(name, v)| match v {
            Value::Ext(Object::Tensor(t)) => Some((name.clone(), t.tensor.clone())),
            _ => None,
        })
        .collect();
    let mut build = Build {
        ckpt,
        tensors,
        owners,
        depth: 0,
        ids: HashMap::new(),
    };
    let root = build
        .node(root)
        .map_err(|e| bad("the structure stowage writes", e))?
        .unwrap_or(Value::None);
    if let Some(name) = build.tensors.keys().next() {
        return Err(bad(
            "every tensor of the file placed",
            format!("{name:?} is not"),
        ));
    }
    ckpt.root = root;
    ckpt.compact();
    Ok(())
}

/// Deepest nesting rebuilt (as the unpickler bounds its stack).
const MAX_DEPTH: usize = 10_000;

struct Build<'c> {
    ckpt: &'c mut Checkpoint,
    tensors: HashMap<Arc<str>, Value<Object>>,
    /// Every tensor of the file, by name, for the views tied to one.
    owners: HashMap<Arc<str>, crate::Tensor>,
    depth: usize,
    /// The containers rebuilt with an `"id"`, for the refs to them.
    ids: HashMap<u64, Value<Object>>,
}

/// What went wrong rebuilding, for [`FormatError::BadObject`]'s `found`.
type Found = String;

impl Build<'_> {
    /// The value `j` records; `None` for a value recorded as `lost`.
    fn node(&mut self, j: &Json) -> std::result::Result<Option<Value<Object>>, Found> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!("nesting deeper than {MAX_DEPTH}"));
        }
        let v = self.value(j);
        self.depth -= 1;
        v
    }

    fn value(&mut self, j: &Json) -> std::result::Result<Option<Value<Object>>, Found> {
        Ok(Some(match j {
            Json::Null => Value::None,
            Json::Bool(b) => Value::Bool(*b),
            Json::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) if !n.is_f64() => Value::Int(i),
                (_, Some(f)) if n.is_f64() => Value::Float(f),
                _ => Value::int(BigInt::from_str(&n.to_string()).map_err(|e| e.to_string())?),
            },
            Json::String(s) => Value::str(s),
            Json::Array(_) => return Err("an array where a node was expected".into()),
            Json::Object(o) => {
                let (kind, body) = tag(o).ok_or_else(|| format!("the node {}", brief(j)))?;
                if kind == "lost" {
                    return Ok(None);
                }
                if kind == "ref" {
                    let k = body
                        .as_u64()
                        .ok_or_else(|| format!("the ref {}", brief(body)))?;
                    let shared = self.ids.get(&k).cloned();
                    return shared
                        .map(Some)
                        .ok_or_else(|| format!("a ref to {k}, which nothing before records"));
                }
                let v = self.tagged(kind, body, o.get("ordered") == Some(&Json::Bool(true)))?;
                if let Some(k) = o.get("id") {
                    let k = k.as_u64().ok_or_else(|| format!("the id {}", brief(k)))?;
                    if !matches!(v, Value::Node(_)) || self.ids.insert(k, v.clone()).is_some() {
                        return Err(format!("the id {k} on a {kind}, or given twice"));
                    }
                }
                match o.get("view") {
                    Some(view) if kind == "tensor" => self.tied(v, view)?,
                    Some(_) => return Err(format!("a view on a {kind}")),
                    None => v,
                }
            }
        }))
    }

    /// The tensor `v` (the file's copy) as the view `view` records: of its
    /// owner's storage, at the offset and strides it had there.
    fn tied(&self, v: Value<Object>, view: &Json) -> std::result::Result<Value<Object>, Found> {
        let bad = || format!("the view {}", brief(view));
        let Value::Ext(Object::Tensor(t)) = &v else {
            return Err(bad());
        };
        let of = view.get("of").and_then(Json::as_str).ok_or_else(bad)?;
        let offset = view.get("offset").and_then(Json::as_u64).ok_or_else(bad)?;
        let stride = view
            .get("stride")
            .and_then(Json::as_array)
            .and_then(|s| {
                s.iter()
                    .map(|n| n.as_u64().map(|n| n as usize))
                    .collect::<Option<Vec<_>>>()
            })
            .ok_or_else(bad)?;
        let owner = self.owners.get(of).ok_or_else(|| {
            format!("the tensor {of:?} a view is tied to, which the file does not hold")
        })?;
        if owner.dtype() != t.tensor.dtype() {
            return Err(format!(
                "a {} view of {of:?}, a {}",
                t.tensor.dtype().name(),
                owner.dtype().name()
            ));
        }
        let mut tied = crate::Tensor::empty(&[0], owner.dtype()).map_err(|e| e.to_string())?;
        tied.set_(
            owner.untyped_storage(),
            offset as usize,
            t.tensor.shape(),
            &stride,
        )
        .map_err(|e| format!("the view of {of:?}: {e}"))?;
        Ok(Value::Ext(Object::Tensor(std::sync::Arc::new(
            crate::checkpoint::value::graph::TensorObject::new(tied),
        ))))
    }

    fn tagged(
        &mut self,
        kind: &str,
        body: &Json,
        ordered: bool,
    ) -> std::result::Result<Value<Object>, Found> {
        let text = || {
            body.as_str()
                .ok_or_else(|| format!("{kind}: {}", brief(body)))
        };
        let items = || {
            body.as_array()
                .ok_or_else(|| format!("{kind}: {}", brief(body)))
        };
        Ok(match kind {
            "tensor" => {
                let name = text()?;
                self.tensors.remove(name).ok_or_else(|| {
                    format!("the tensor {name:?}, which the file does not hold (or names twice)")
                })?
            }
            "dict" => {
                let mut out = Vec::new();
                // Python's dict holds a key once: a tree naming one twice
                // was changed after stowage wrote it, and reading it as
                // Python would (the last value wins) loses a tensor that a
                // listing of the tree would still name.
                let mut keys = HashSet::new();
                for pair in items()? {
                    let Some([kj, v]) = pair.as_array().map(Vec::as_slice) else {
                        return Err(format!("a dict item {}", brief(pair)));
                    };
                    // An item whose key or value was lost is left out.
                    if let (Some(k), Some(v)) = (self.node(kj)?, self.node(v)?) {
                        if DictKey::of(&k).is_some_and(|key| !keys.insert(key)) {
                            return Err(format!("a dict with the key {} twice", brief(kj)));
                        }
                        out.push((k, v));
                    }
                }
                let id = self.ckpt.graph.dict(out);
                if ordered {
                    self.ckpt.ordered.insert(id);
                }
                Value::Node(id)
            }
            "list" | "tuple" | "set" | "frozenset" => {
                let mut out = Vec::new();
                for x in items()? {
                    // A value recorded as lost holds its place in a sequence.
                    out.push(self.node(x)?.unwrap_or(Value::None));
                }
                let node = match kind {
                    "list" => Node::List(out),
                    "tuple" => Node::Tuple(out),
                    "set" => Node::Set(out),
                    _ => Node::FrozenSet(out),
                };
                Value::Node(self.ckpt.graph.add(node))
            }
            "int" => Value::int(parse_int(text()?)?),
            "float" => Value::Float(match text()? {
                "nan" => f64::NAN,
                "inf" => f64::INFINITY,
                "-inf" => f64::NEG_INFINITY,
                other => return Err(format!("float: {other:?}")),
            }),
            "bytes" => Value::bytes(&unhex(text()?)?),
            "bytearray" => Value::Node(self.ckpt.graph.add(Node::ByteArray(unhex(text()?)?))),
            "complex" => {
                let part = |j: &Json| match float_of(j) {
                    Some(f) => Ok(f),
                    None => Err(format!("complex: {}", brief(body))),
                };
                match items()?.as_slice() {
                    [re, im] => Value::Ext(Object::Complex(Complex64::new(part(re)?, part(im)?))),
                    _ => return Err(format!("complex: {}", brief(body))),
                }
            }
            "dtype" => Value::Ext(Object::DType(
                DType::from_str(text()?).map_err(|e| e.to_string())?,
            )),
            "device" => Value::Ext(Object::Device(
                Device::from_str(text()?).map_err(|e| e.to_string())?,
            )),
            "size" => {
                let dims: Option<Vec<usize>> = items()?
                    .iter()
                    .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
                    .collect();
                Value::Ext(Object::Size(
                    dims.ok_or_else(|| format!("size: {}", brief(body)))?.into(),
                ))
            }
            other => match objects::restore(other, body) {
                Some(object) => Value::Ext(object?),
                None => return Err(format!("a node of kind {other:?}")),
            },
        })
    }
}

/// A node's one tag and its body (`{"dict": […], "ordered": true}` has the
/// tag `dict`, `{"tensor": …, "view": …}` the tag `tensor`); `None` for an
/// object with no tag or more than one.
fn tag(o: &serde_json::Map<String, Json>) -> Option<(&str, &Json)> {
    let mut it = o
        .iter()
        .filter(|(k, _)| *k != "ordered" && *k != "view" && *k != "id");
    let (k, v) = it.next()?;
    it.next().is_none().then_some((k.as_str(), v))
}

/// At most 80 characters of `j`'s JSON, for an error (a node can hold a
/// whole checkpoint's structure).
pub(super) fn brief(j: &Json) -> String {
    let text = j.to_string();
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// A float as [`float`] writes it.
pub(super) fn float_of(j: &Json) -> Option<f64> {
    match j {
        Json::Number(n) => n.as_f64(),
        Json::Object(o) => match o.get("float")?.as_str()? {
            "nan" => Some(f64::NAN),
            "inf" => Some(f64::INFINITY),
            "-inf" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

/// An int beyond 64 bits as `int_text` writes it: decimal of at most 4,300
/// digits (Python's own limit for `int()` of text: decimal digits take
/// time quadratic in their number), or hex (`0x…`, `-0x…`) of any length.
fn parse_int(text: &str) -> std::result::Result<BigInt, Found> {
    let (negative, digits) = text.strip_prefix('-').map_or((false, text), |t| (true, t));
    let value = match digits.strip_prefix("0x") {
        // One sign, before the digits.
        _ if digits.starts_with(['+', '-']) => None,
        Some(hex) if hex.starts_with(['+', '-']) => None,
        Some(hex) => BigInt::parse_bytes(hex.as_bytes(), 16),
        None if digits.len() > MAX_INT_DIGITS => {
            return Err(format!(
                "int: {} decimal digits, more than {MAX_INT_DIGITS} (past them an int is written in hex)",
                digits.len()
            ))
        }
        None => BigInt::parse_bytes(digits.as_bytes(), 10),
    };
    let value = value.ok_or_else(|| {
        let start: String = text.chars().take(32).collect();
        format!("int: {start:?} is not a decimal or 0x hex number")
    })?;
    Ok(if negative { -value } else { value })
}

/// The bytes of lowercase or uppercase hex, or what is wrong with it (an
/// array's hex may be MiBs: the error quotes its start).
pub(super) fn unhex(text: &str) -> std::result::Result<Vec<u8>, Found> {
    hex::decode(text).map_err(|e| {
        let start: String = text.chars().take(32).collect();
        let more = if start.len() < text.len() { "…" } else { "" };
        format!("hex ({e}) of {} characters: {start:?}{more}", text.len())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::value::graph::TensorObject;
    use crate::Tensor;

    fn tensor(v: f32) -> Value<Object> {
        let t = Tensor::from_vec(vec![v], &[1]).unwrap();
        Value::Ext(Object::Tensor(std::sync::Arc::new(TensorObject::new(t))))
    }

    /// What a safetensors load of a file whose tensors are `names` gives: a
    /// flat dict, with `tree` as the metadata entry.
    fn loaded(names: &[&str], tree: &str) -> Checkpoint {
        let mut c = Checkpoint::new();
        let items = names
            .iter()
            .map(|n| (Value::str(n), tensor(1.0)))
            .collect::<Vec<_>>();
        c.root = Value::Node(c.graph.dict(items));
        c.safetensors_metadata = Some([(TREE_KEY.to_owned(), tree.to_owned())].into());
        c
    }

    #[test]
    fn a_flat_state_dict_needs_no_tree() {
        let c = Checkpoint::from_state_dict([("a.b", Tensor::from_vec(vec![1f32], &[1]).unwrap())]);
        assert_eq!(record(&c).unwrap(), None);
    }

    /// A value not recorded (a bare storage) is left out of its dict and
    /// holds its place in a list as `None`; a container holding itself is
    /// cut where it repeats.
    #[test]
    fn lost_values_and_cycles() {
        let mut c = Checkpoint::new();
        let lost = Value::Ext(Object::Storage(Box::new(
            crate::checkpoint::value::graph::StorageRef {
                storage: crate::UntypedStorage::from_bytes(&[1, 2]).unwrap(),
                dtype: None,
                key: "0".into(),
            },
        )));
        let list = c.graph.list(vec![lost.clone(), Value::Int(3)]);
        let looped = c.graph.list(Vec::new());
        if let Some(Node::List(items)) = c.graph.try_get_mut(looped) {
            items.push(Value::Node(looped));
        }
        let root = c.graph.dict(vec![
            (Value::str("when"), lost),
            (Value::str("seq"), Value::Node(list)),
            (Value::str("loop"), Value::Node(looped)),
            (Value::str("w"), tensor(2.0)),
        ]);
        c.root = Value::Node(root);
        let tree = record(&c).unwrap().unwrap();
        assert!(tree.contains(r#"{"lost":"storage"}"#), "{tree}");
        let mut back = loaded(&["w"], &tree);
        restore(&mut back).unwrap();
        let root = back.root_value();
        let keys: Vec<&str> = root
            .as_dict()
            .unwrap()
            .map(|(k, _)| k.as_str().unwrap())
            .collect();
        assert_eq!(keys, ["seq", "loop", "w"]);
        let seq = back.get("seq").unwrap();
        assert!(seq.get("0").unwrap().is_none());
        assert_eq!(seq.get("1").unwrap().as_i64().unwrap(), 3);
        assert_eq!(back.get("loop").unwrap().len().unwrap(), 1);
    }

    /// Ints beyond 64 bits: decimal up to 4,300 digits, hex past them, both
    /// read back exactly; decimal past 4,300 digits (quadratic to parse)
    /// and a second sign are refused.
    #[test]
    fn big_ints_are_decimal_then_hex() {
        let small: BigInt = BigInt::from(2u32).pow(100u32) + 7;
        let huge: BigInt = -BigInt::from(7u32).pow(300_000u32);
        let mut c = Checkpoint::new();
        let root = c.graph.dict(vec![
            (Value::str("small"), Value::int(small.clone())),
            (Value::str("huge"), Value::int(huge.clone())),
            (Value::str("w"), tensor(2.0)),
        ]);
        c.root = Value::Node(root);
        let tree = record(&c).unwrap().unwrap();
        assert!(
            tree.contains(&format!(r#"{{"int":"{small}"}}"#)),
            "{}",
            &tree[..80]
        );
        assert!(tree.contains(r#"{"int":"-0x"#));
        let mut back = loaded(&["w"], &tree);
        restore(&mut back).unwrap();
        for (name, want) in [("small", &small), ("huge", &huge)] {
            match back.get(name).unwrap().raw() {
                Value::BigInt(b) => assert_eq!(&**b, want, "{name}"),
                other => panic!("{name}: {other:?}"),
            }
        }
        assert_eq!(parse_int("-0x1f").unwrap(), BigInt::from(-31));
        for bad in ["--5", "-0x-5", "0x+5", "12a"] {
            assert!(parse_int(bad).is_err(), "{bad}");
        }
        let long = "7".repeat(4301);
        assert!(parse_int(&long)
            .unwrap_err()
            .contains("4301 decimal digits"));
        assert!(parse_int(&long[1..]).is_ok());
    }

    /// A tree that is not stowage's, or does not match the file's tensors,
    /// is refused naming the entry.
    #[test]
    fn a_tree_that_does_not_fit_is_refused() {
        for (names, tree, found) in [
            (&["w"][..], "not json", "JSON"),
            (&["w"][..], r#"{"version":3,"root":null}"#, "version"),
            (
                &["w"][..],
                r#"{"version":2,"root":{"list":[{"ref":0},{"tensor":"w"}]}}"#,
                "a ref to 0, which nothing before records",
            ),
            (
                &["w"][..],
                r#"{"version":2,"root":{"list":[{"list":[],"id":0},{"tuple":[],"id":0},{"tensor":"w"}]}}"#,
                "given twice",
            ),
            (
                &["w"][..],
                r#"{"version":1,"root":{"tensor":"x"}}"#,
                "\"x\"",
            ),
            (
                &["w", "v"][..],
                r#"{"version":1,"root":{"tensor":"w"}}"#,
                "\"v\" is not",
            ),
            (
                &["w"][..],
                r#"{"version":1,"root":{"list":[{"tensor":"w"},{"tensor":"w"}]}}"#,
                "names twice",
            ),
            (&["w"][..], r#"{"version":1,"root":{"what":1}}"#, "\"what\""),
            // A key twice, which Python's dict would hold once, losing a
            // tensor (found by the `convert_manifest` fuzz target); `True`
            // is the key `1` in Python.
            (
                &["a.w1", "a.w2"][..],
                r#"{"version":1,"root":{"dict":[["a",{"dict":[["w2",{"tensor":"a.w1"}],["w2",{"tensor":"a.w2"}]]}]]}}"#,
                "a dict with the key \"w2\" twice",
            ),
            (
                &["w", "v"][..],
                r#"{"version":1,"root":{"dict":[[1,{"tensor":"w"}],[true,{"tensor":"v"}]]}}"#,
                "a dict with the key true twice",
            ),
        ] {
            let mut c = loaded(names, tree);
            let err = restore(&mut c).unwrap_err().to_string();
            assert!(
                err.contains(TREE_KEY) && err.contains(found),
                "{tree}: {err}"
            );
        }
    }
}
