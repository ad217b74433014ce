//! The generic reader of `.metadata`: the pickle machine builds its node
//! graph, with hooks that know only the data classes it may name, and the
//! graph is walked into [`Parts`]. Every class is data: an instance is a
//! dict of its attributes, filled by `BUILD`. It reads every stream the
//! compact decoder does not take, and its errors are the errors users see.

use super::parts::{ChunkRec, IndexRec, InfoRec, ItemRec, Parts, TensorRec, NO_HINT};
use super::Class;
use crate::checkpoint::globals::allowlist::{self, Global};
use crate::checkpoint::pickle::{unpickle, Graph, Hooks, Limits, Node, NodeId, Value};
use crate::checkpoint::value::graph::PathKey;
use crate::error::{CheckpointError, FormatError};
use crate::{DType, Error, Result};

/// A value of the metadata pickle that is not a plain Python value.
#[derive(Clone, Debug)]
enum Md {
    /// A class, before `NEWOBJ`/`REDUCE`.
    Class(Class),
    /// `torch.Size` or `torch.serialization._get_layout`, before the call.
    Global(Global),
    /// An instance: its class and the dict node of its attributes.
    Obj(Class, NodeId),
    DType(DType),
    Size(Vec<usize>),
    /// A layout or memory format: recorded, not needed to read the data.
    Tag,
}

type V = Value<Md>;

fn bad(context: &'static str, expected: &'static str, found: impl Into<String>) -> Error {
    Error::Format(FormatError::BadObject {
        context,
        expected,
        found: found.into(),
    })
}

struct MetadataHooks;

impl MetadataHooks {
    fn ints(graph: &Graph<Md>, v: &V, context: &'static str) -> Result<Vec<usize>> {
        let items = match v {
            Value::Node(id) => match graph.try_get(*id) {
                Some(Node::Tuple(items) | Node::List(items)) => items,
                _ => return Err(bad(context, "a tuple of sizes", "another container")),
            },
            Value::Ext(Md::Size(s)) => return Ok(s.clone()),
            _ => return Err(bad(context, "a tuple of sizes", "a scalar")),
        };
        items
            .iter()
            .map(|i| match i.as_i64() {
                Some(n) if n >= 0 => Ok(n as usize),
                _ => Err(bad(context, "a size (an int >= 0)", format!("{i:?}"))),
            })
            .collect()
    }

    fn args<'g>(graph: &'g Graph<Md>, v: &V) -> Result<&'g [V]> {
        match v {
            Value::Node(id) => match graph.try_get(*id) {
                Some(Node::Tuple(items)) => Ok(items),
                _ => Err(bad("REDUCE", "an argument tuple", "another value")),
            },
            _ => Err(bad("REDUCE", "an argument tuple", "another value")),
        }
    }
}

impl Hooks for MetadataHooks {
    type Ext = Md;
    type Error = Error;

    fn find_class(&mut self, module: &str, name: &str) -> Result<V> {
        if let Some(c) = super::class(module, name) {
            return Ok(Value::Ext(Md::Class(c)));
        }
        match allowlist::resolve(module, name) {
            Ok(Global::DType(d)) => Ok(Value::Ext(Md::DType(d))),
            Ok(g @ (Global::Size | Global::GetLayout)) => Ok(Value::Ext(Md::Global(g))),
            _ => Err(Error::Checkpoint(CheckpointError::GlobalNotAllowed {
                module: module.to_owned(),
                name: name.to_owned(),
            })),
        }
    }

    fn persistent_load(&mut self, _: &mut Graph<Md>, _: V) -> Result<V> {
        Err(bad("DCP metadata", "no persistent ids", "a persistent id"))
    }

    fn reduce(&mut self, graph: &mut Graph<Md>, callable: V, args: V) -> Result<V> {
        let args = Self::args(graph, &args)?;
        Ok(match callable {
            Value::Ext(Md::Global(Global::Size)) => match args {
                [] => Value::Ext(Md::Size(Vec::new())),
                [dims] => Value::Ext(Md::Size(Self::ints(graph, dims, "torch.Size")?)),
                _ => return Err(bad("torch.Size", "one argument", format!("{}", args.len()))),
            },
            Value::Ext(Md::Global(Global::GetLayout) | Md::Class(Class::MemoryFormat)) => {
                Value::Ext(Md::Tag)
            }
            Value::Ext(Md::Class(Class::Path)) => {
                let parts: Option<Vec<&str>> = args.iter().map(|a| a.as_str()).collect();
                let parts = parts.ok_or_else(|| bad("pathlib path", "strings", "another value"))?;
                Value::str(&parts.join("/"))
            }
            _ => {
                return Err(bad(
                    "DCP metadata REDUCE",
                    "torch.Size, a layout, a memory format or a path",
                    "another callable",
                ))
            }
        })
    }

    fn build(&mut self, graph: &mut Graph<Md>, obj: V, state: V) -> Result<V> {
        let Value::Ext(Md::Obj(class, node)) = obj else {
            return Err(bad("BUILD", "a DCP metadata object", "another value"));
        };
        let entries: Vec<(V, V)> = match &state {
            Value::Node(id) => match graph.try_get(*id) {
                Some(Node::Dict(d)) => d.clone(),
                // `TensorProperties.__getstate__`.
                Some(Node::Tuple(t)) if class == Class::TensorProperties => {
                    const FIELDS: [&str; 5] = [
                        "dtype",
                        "layout",
                        "requires_grad",
                        "memory_format",
                        "pin_memory",
                    ];
                    FIELDS
                        .iter()
                        .map(|f| Value::str(f))
                        .zip(t.iter().cloned())
                        .collect()
                }
                // `(None, slots)` or `(dict, slots)` of a class with `__slots__`.
                Some(Node::Tuple(t)) if t.len() == 2 => {
                    let mut all = Vec::new();
                    for part in t {
                        if let Some(Node::Dict(d)) = part.as_node().and_then(|n| graph.try_get(n)) {
                            all.extend(d.iter().cloned());
                        }
                    }
                    all
                }
                _ => {
                    return Err(bad(
                        "BUILD state",
                        "a dict of attributes",
                        "another container",
                    ))
                }
            },
            Value::None => Vec::new(),
            _ => return Err(bad("BUILD state", "a dict of attributes", "a scalar")),
        };
        if let Some(Node::Dict(d)) = graph.try_get_mut(node) {
            d.extend(entries);
        }
        Ok(Value::Ext(Md::Obj(class, node)))
    }

    fn new_obj(&mut self, graph: &mut Graph<Md>, cls: V, _args: V) -> Result<V> {
        match cls {
            Value::Ext(Md::Class(c)) if !matches!(c, Class::MemoryFormat | Class::Path) => {
                let node = graph.dict(Vec::new());
                Ok(Value::Ext(Md::Obj(c, node)))
            }
            _ => Err(bad("NEWOBJ", "a DCP metadata class", "another value")),
        }
    }
}

/// An attribute of an instance.
fn attr<'g>(graph: &'g Graph<Md>, obj: &V, name: &str) -> Option<&'g V> {
    let Value::Ext(Md::Obj(_, node)) = obj else {
        return None;
    };
    match graph.try_get(*node)? {
        Node::Dict(d) => d
            .iter()
            .find(|(k, _)| k.as_str() == Some(name))
            .map(|(_, v)| v),
        _ => None,
    }
}

fn class_of(obj: &V) -> Option<Class> {
    match obj {
        Value::Ext(Md::Obj(c, _)) => Some(*c),
        _ => None,
    }
}

fn dict_entries<'g>(
    graph: &'g Graph<Md>,
    v: Option<&V>,
    what: &'static str,
) -> Result<&'g [(V, V)]> {
    match v.and_then(|v| v.as_node()).and_then(|n| graph.try_get(n)) {
        Some(Node::Dict(d)) => Ok(d),
        _ => Err(bad("DCP metadata", what, "none")),
    }
}

fn size_of(graph: &Graph<Md>, v: Option<&V>, what: &'static str) -> Result<Vec<usize>> {
    match v {
        Some(v) => MetadataHooks::ints(graph, v, what),
        None => Err(bad("DCP metadata", what, "none")),
    }
}

/// An `_StorageInfo`, into `parts`.
fn storage_info(graph: &Graph<Md>, v: &V, parts: &mut Parts) -> Result<InfoRec> {
    if class_of(v) != Some(Class::StorageInfo) {
        return Err(bad("DCP storage_data", "a _StorageInfo", "another value"));
    }
    let relative_path = attr(graph, v, "relative_path")
        .and_then(|p| p.as_str())
        .ok_or_else(|| bad("_StorageInfo", "a relative_path string", "none"))?;
    let number = |name: &'static str| -> Result<i64> {
        attr(graph, v, name)
            .and_then(|x| x.as_i64())
            .ok_or_else(|| bad("_StorageInfo", "a non-negative offset and length", name))
    };
    let transforms = match attr(graph, v, "transform_descriptors") {
        None | Some(Value::None) => 0,
        Some(Value::Node(id)) => match graph.try_get(*id) {
            Some(Node::List(l) | Node::Tuple(l)) => {
                let names = l
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        bad(
                            "_StorageInfo",
                            "transform descriptor strings",
                            "another value",
                        )
                    })?;
                let names = names.into_iter().map(|t| parts.intern(t)).collect();
                parts.transforms(names)
            }
            _ => {
                return Err(bad(
                    "_StorageInfo",
                    "a list of transforms",
                    "another container",
                ))
            }
        },
        Some(_) => return Err(bad("_StorageInfo", "a list of transforms", "a scalar")),
    };
    Ok(InfoRec {
        file: parts.intern(relative_path),
        offset: number("offset")?,
        length: number("length")?,
        transforms,
    })
}

fn path_key(v: &V) -> Result<PathKey> {
    match v {
        Value::Str(s) => Ok(PathKey::Key(s.to_string())),
        Value::Int(i) => Ok(PathKey::Index(*i)),
        _ => Err(bad("DCP planner_data", "str or int keys", "another value")),
    }
}

/// Reads a `.metadata` stream with the generic pickle machine.
///
/// # Errors
/// As [`super::parse`], for what the stream's objects are.
pub(super) fn read(bytes: &[u8], limits: &Limits) -> Result<Parts> {
    let p = unpickle(bytes, &mut MetadataHooks, limits)?;
    let (graph, root) = (&p.graph, &p.root);
    if class_of(root) != Some(Class::Metadata) {
        return Err(bad("DCP .metadata", "a Metadata object", "another value"));
    }
    let mut parts = Parts::for_stream(bytes.len());
    storage_index(graph, root, &mut parts)?;
    planner_paths(graph, root, &mut parts)?;
    for (k, v) in dict_entries(
        graph,
        attr(graph, root, "state_dict_metadata"),
        "a state_dict_metadata dict",
    )? {
        let fqn = k
            .as_str()
            .ok_or_else(|| bad("DCP state_dict_metadata", "string keys", "another value"))?;
        let item = item_kind(graph, v, fqn, &mut parts)?;
        let fqn = parts.intern(fqn);
        parts.items.push((fqn, item));
    }
    parts.version = attr(graph, root, "version")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    Ok(parts)
}

/// The `storage_data` of the `Metadata` `root`: `MetadataIndex(fqn, offset,
/// index)` → `_StorageInfo`.
fn storage_index(graph: &Graph<Md>, root: &V, parts: &mut Parts) -> Result<()> {
    for (k, v) in dict_entries(
        graph,
        attr(graph, root, "storage_data"),
        "a storage_data dict",
    )? {
        if class_of(k) != Some(Class::MetadataIndex) {
            return Err(bad(
                "DCP storage_data",
                "MetadataIndex keys",
                "another value",
            ));
        }
        let fqn = attr(graph, k, "fqn")
            .and_then(|f| f.as_str())
            .ok_or_else(|| bad("MetadataIndex", "an fqn string", "none"))?;
        let offset = match attr(graph, k, "offset") {
            None | Some(Value::None) => None,
            Some(o) => Some(MetadataHooks::ints(graph, o, "MetadataIndex offset")?),
        };
        let hint = attr(graph, k, "index")
            .and_then(|i| i.as_i64())
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(NO_HINT);
        let index = IndexRec {
            fqn: parts.intern(fqn),
            offset: offset.map(|o| parts.dims(o)).transpose()?,
            hint,
        };
        let info = storage_info(graph, v, parts)?;
        parts.indices.push(index);
        parts.infos.push(info);
        let n = parts.infos.len() as u32 - 1;
        parts.storage.push((n, n));
    }
    Ok(())
}

/// The `planner_data` of the `Metadata` `root`, when it has one: each
/// fqn's path of keys in the state dict. Entries of another shape are
/// skipped.
fn planner_paths(graph: &Graph<Md>, root: &V, parts: &mut Parts) -> Result<()> {
    if let Ok(entries) = dict_entries(graph, attr(graph, root, "planner_data"), "") {
        for (k, v) in entries {
            let (Some(fqn), Some(Node::Tuple(keys) | Node::List(keys))) =
                (k.as_str(), v.as_node().and_then(|n| graph.try_get(n)))
            else {
                continue;
            };
            parts.charge(keys.len())?;
            let path = keys.iter().map(path_key).collect::<Result<_>>()?;
            let fqn = parts.intern(fqn);
            parts.planner.push((fqn, path));
        }
    }
    Ok(())
}

/// The item `fqn` of `state_dict_metadata`, whose metadata is `v`: bytes or
/// a tensor.
fn item_kind(graph: &Graph<Md>, v: &V, fqn: &str, parts: &mut Parts) -> Result<ItemRec> {
    match class_of(v) {
        Some(Class::BytesStorageMetadata) => Ok(ItemRec::Bytes),
        Some(Class::TensorStorageMetadata) => {
            let t = tensor_meta(graph, v, fqn, parts)?;
            parts.tensors.push(t);
            Ok(ItemRec::Tensor(parts.tensors.len() as u32 - 1))
        }
        _ => Err(bad(
            "DCP state_dict_metadata",
            "tensor or bytes metadata",
            fqn,
        )),
    }
}

/// The tensor `fqn` from its `TensorStorageMetadata` `v`: its properties,
/// size, and chunks.
fn tensor_meta(graph: &Graph<Md>, v: &V, fqn: &str, parts: &mut Parts) -> Result<TensorRec> {
    let props = attr(graph, v, "properties");
    let dtype = match props.and_then(|p| attr(graph, p, "dtype")) {
        Some(Value::Ext(Md::DType(d))) => *d,
        _ => return Err(bad("TensorProperties", "a dtype", fqn)),
    };
    let requires_grad = props
        .and_then(|p| attr(graph, p, "requires_grad"))
        .and_then(|r| r.as_bool())
        .unwrap_or(false);
    let size = size_of(graph, attr(graph, v, "size"), "a tensor size")?;
    let chunk_list = match attr(graph, v, "chunks")
        .and_then(|c| c.as_node())
        .and_then(|n| graph.try_get(n))
    {
        Some(Node::List(l) | Node::Tuple(l)) => l,
        _ => return Err(bad("TensorStorageMetadata", "a list of chunks", fqn)),
    };
    let mut chunks = Vec::with_capacity(chunk_list.len());
    for c in chunk_list {
        let offsets = size_of(graph, attr(graph, c, "offsets"), "chunk offsets")?;
        let sizes = size_of(graph, attr(graph, c, "sizes"), "chunk sizes")?;
        let rec = ChunkRec {
            offsets: parts.dims(offsets)?,
            sizes: parts.dims(sizes)?,
        };
        parts.chunks.push(rec);
        chunks.push(parts.chunks.len() as u32 - 1);
    }
    Ok(TensorRec {
        dtype,
        requires_grad,
        size: parts.dims(size)?,
        chunks,
    })
}
