//! A DCP checkpoint's `.metadata`: a pickle of
//! `torch.distributed.checkpoint.metadata.Metadata`, read by the generic
//! pickle machine with hooks that know only the handful of plain data classes
//! it may name (the dataclasses of `metadata.py` and `filesystem.py`, their
//! older `torch.distributed._shard` spellings, `torch.Size`, dtypes, layouts,
//! memory formats and `pathlib` paths). Every class is data: an instance is a
//! dict of its attributes, filled by `BUILD`; nothing is imported or called,
//! and any other global is refused. (PyTorch itself reads this file with a
//! plain `pickle.load`.)

use crate::error::{CheckpointError, FormatError};
use std::collections::HashMap;

use crate::checkpoint::globals::allowlist::{self, Global};
use crate::checkpoint::pickle::{unpickle, Graph, Hooks, Limits, Node, NodeId, Value};
use crate::checkpoint::value::graph::PathKey;
use crate::{DType, Error, Result};

/// A data class the metadata may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Metadata,
    TensorStorageMetadata,
    BytesStorageMetadata,
    ChunkStorageMetadata,
    TensorProperties,
    MetadataIndex,
    StorageInfo,
    StorageMeta,
    MemoryFormat,
    Path,
}

/// Every global a `.metadata` pickle may name, besides `torch.Size`, dtypes
/// and `torch.serialization._get_layout` (from the checkpoint allowlist).
const CLASSES: &[(&str, &str, Class)] = &[
    (
        "torch.distributed.checkpoint.metadata",
        "Metadata",
        Class::Metadata,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "TensorStorageMetadata",
        Class::TensorStorageMetadata,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "BytesStorageMetadata",
        Class::BytesStorageMetadata,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "ChunkStorageMetadata",
        Class::ChunkStorageMetadata,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "TensorProperties",
        Class::TensorProperties,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "MetadataIndex",
        Class::MetadataIndex,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "StorageMeta",
        Class::StorageMeta,
    ),
    (
        "torch.distributed.checkpoint.metadata",
        "_MEM_FORMAT_ENCODING",
        Class::MemoryFormat,
    ),
    (
        "torch.distributed.checkpoint.filesystem",
        "_StorageInfo",
        Class::StorageInfo,
    ),
    (
        "torch.distributed._shard.sharded_tensor.metadata",
        "TensorProperties",
        Class::TensorProperties,
    ),
    (
        "torch.distributed._shard.sharded_tensor.metadata",
        "MEM_FORMAT_ENCODING",
        Class::MemoryFormat,
    ),
    ("pathlib", "PosixPath", Class::Path),
    ("pathlib", "PurePosixPath", Class::Path),
    ("pathlib", "Path", Class::Path),
];

/// Whether `module.name` is one of the data classes a `.metadata` pickle may
/// name (read as data by this reader; `stowage scan` judges a DCP
/// `.metadata` by them).
pub(crate) fn is_metadata_class(module: &str, name: &str) -> bool {
    CLASSES.iter().any(|(m, n, _)| *m == module && *n == name)
}

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
        if let Some((_, _, c)) = CLASSES.iter().find(|(m, n, _)| *m == module && *n == name) {
            return Ok(Value::Ext(Md::Class(*c)));
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

/// Where an item's bytes are: `_StorageInfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageInfo {
    /// The file, relative to the checkpoint's folder (a plain file name).
    pub relative_path: String,
    /// The item's first byte in the file.
    pub offset: u64,
    /// The item's length in bytes, as stored (after any transforms).
    pub length: u64,
    /// Stream transforms applied when saving, in order (`stream.zstd/1`).
    pub transforms: Vec<String>,
}

/// One stored chunk of a tensor: its region of the whole tensor and its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Where the chunk starts in each dimension.
    pub offsets: Vec<usize>,
    /// The chunk's extent in each dimension.
    pub sizes: Vec<usize>,
    /// Where its bytes are.
    pub storage: StorageInfo,
}

/// A tensor of a DCP checkpoint, stored as chunks.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorMeta {
    /// The element type.
    pub dtype: DType,
    /// The whole tensor's shape.
    pub size: Vec<usize>,
    /// As saved.
    pub requires_grad: bool,
    /// The stored chunks (from every rank), in metadata order.
    pub chunks: Vec<Chunk>,
}

/// What an entry of the state dict is.
#[derive(Clone, Debug, PartialEq)]
pub enum ItemKind {
    /// A tensor, in chunks.
    Tensor(TensorMeta),
    /// Any other value, stored as one `torch.save` archive.
    Bytes(StorageInfo),
}

/// One entry of the flattened state dict.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// The flattened name (`model.layers.0.weight`).
    pub fqn: String,
    /// The keys from the root of the original state dict (`planner_data`),
    /// or the name split at dots when the metadata has none.
    pub path: Vec<PathKey>,
    /// Tensor or value.
    pub kind: ItemKind,
}

/// A parsed `.metadata`.
#[derive(Clone, Debug, PartialEq)]
pub struct DcpMetadata {
    /// Every entry, in the metadata's order.
    pub items: Vec<Item>,
    /// The checkpoint format version (`"1.0.0"`), when recorded.
    pub version: Option<String>,
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

fn storage_info(graph: &Graph<Md>, v: &V) -> Result<StorageInfo> {
    if class_of(v) != Some(Class::StorageInfo) {
        return Err(bad("DCP storage_data", "a _StorageInfo", "another value"));
    }
    let relative_path = attr(graph, v, "relative_path")
        .and_then(|p| p.as_str())
        .ok_or_else(|| bad("_StorageInfo", "a relative_path string", "none"))?;
    let plain = !relative_path.is_empty()
        && relative_path != "."
        && relative_path != ".."
        && !relative_path.contains(['/', '\\', '\0']);
    if !plain {
        return Err(bad(
            "_StorageInfo",
            "a file name in the checkpoint's folder",
            format!("{relative_path:?}"),
        ));
    }
    let number = |name: &'static str| -> Result<u64> {
        match attr(graph, v, name).and_then(|x| x.as_i64()) {
            Some(n) if n >= 0 => Ok(n as u64),
            _ => Err(bad(
                "_StorageInfo",
                "a non-negative offset and length",
                name,
            )),
        }
    };
    let transforms = match attr(graph, v, "transform_descriptors") {
        None | Some(Value::None) => Vec::new(),
        Some(Value::Node(id)) => match graph.try_get(*id) {
            Some(Node::List(l) | Node::Tuple(l)) => l
                .iter()
                .map(|t| t.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    bad(
                        "_StorageInfo",
                        "transform descriptor strings",
                        "another value",
                    )
                })?,
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
    Ok(StorageInfo {
        relative_path: relative_path.to_owned(),
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

/// Parses a `.metadata` file's bytes.
///
/// # Errors
/// [`CheckpointError::GlobalNotAllowed`] for a global outside the DCP data classes;
/// [`FormatError::Pickle`] for a malformed pickle or one past `limits`;
/// [`FormatError::BadObject`] when the objects are not a DCP `Metadata` (a chunk
/// outside its tensor, a storage file outside the folder, a chunk without
/// storage …); [`TensorError::SizeOverflow`](crate::TensorError::SizeOverflow) for sizes past `usize`.
pub fn parse(bytes: &[u8], limits: &Limits) -> Result<DcpMetadata> {
    let p = unpickle(bytes, &mut MetadataHooks, limits)?;
    let (graph, root) = (&p.graph, &p.root);
    if class_of(root) != Some(Class::Metadata) {
        return Err(bad("DCP .metadata", "a Metadata object", "another value"));
    }
    let storage = storage_index(graph, root)?;
    let mut planner = planner_paths(graph, root)?;
    let mut items = Vec::new();
    for (k, v) in dict_entries(
        graph,
        attr(graph, root, "state_dict_metadata"),
        "a state_dict_metadata dict",
    )? {
        let fqn = k
            .as_str()
            .ok_or_else(|| bad("DCP state_dict_metadata", "string keys", "another value"))?
            .to_owned();
        let kind = item_kind(graph, v, &fqn, &storage)?;
        let path = planner
            .remove(&fqn)
            .unwrap_or_else(|| fqn.split('.').map(|s| PathKey::Key(s.to_owned())).collect());
        items.push(Item { fqn, path, kind });
    }
    let version = attr(graph, root, "version")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    Ok(DcpMetadata { items, version })
}

/// `storage_data`'s storages, by fqn and chunk offsets (`None` for bytes).
type StorageIndex = HashMap<(String, Option<Vec<usize>>), StorageInfo>;

/// The `storage_data` of the `Metadata` `root`: `MetadataIndex(fqn, offset,
/// index)` → `_StorageInfo`. As in PyTorch, an index is found by fqn and
/// offset (`index` is only a hint).
fn storage_index(graph: &Graph<Md>, root: &V) -> Result<StorageIndex> {
    let mut storage: StorageIndex = HashMap::new();
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
        storage.insert((fqn.to_owned(), offset), storage_info(graph, v)?);
    }
    Ok(storage)
}

/// The `planner_data` of the `Metadata` `root`, when it has one: each
/// fqn's path of keys in the state dict. Entries of another shape are
/// skipped.
fn planner_paths(graph: &Graph<Md>, root: &V) -> Result<HashMap<String, Vec<PathKey>>> {
    let mut planner: HashMap<String, Vec<PathKey>> = HashMap::new();
    if let Ok(entries) = dict_entries(graph, attr(graph, root, "planner_data"), "") {
        for (k, v) in entries {
            let (Some(fqn), Some(Node::Tuple(keys) | Node::List(keys))) =
                (k.as_str(), v.as_node().and_then(|n| graph.try_get(n)))
            else {
                continue;
            };
            planner.insert(
                fqn.to_owned(),
                keys.iter().map(path_key).collect::<Result<_>>()?,
            );
        }
    }
    Ok(planner)
}

/// The item `fqn` of `state_dict_metadata`, whose metadata is `v`: bytes or
/// a tensor, with its storage from `storage`.
fn item_kind(graph: &Graph<Md>, v: &V, fqn: &str, storage: &StorageIndex) -> Result<ItemKind> {
    match class_of(v) {
        Some(Class::BytesStorageMetadata) => Ok(ItemKind::Bytes(
            storage
                .get(&(fqn.to_owned(), None))
                .cloned()
                .ok_or_else(|| missing_storage(fqn))?,
        )),
        Some(Class::TensorStorageMetadata) => {
            tensor_meta(graph, v, fqn, storage).map(ItemKind::Tensor)
        }
        _ => Err(bad(
            "DCP state_dict_metadata",
            "tensor or bytes metadata",
            fqn,
        )),
    }
}

/// The error for an item `fqn` (or a chunk of it) without storage.
fn missing_storage(fqn: &str) -> Error {
    bad("DCP storage_data", "an entry for every item", fqn)
}

/// The tensor `fqn` from its `TensorStorageMetadata` `v`: its properties,
/// size, and chunks with their storage from `storage`.
fn tensor_meta(graph: &Graph<Md>, v: &V, fqn: &str, storage: &StorageIndex) -> Result<TensorMeta> {
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
        chunks.push(chunk(graph, c, fqn, &size, storage)?);
    }
    Ok(TensorMeta {
        dtype,
        size,
        requires_grad,
        chunks,
    })
}

/// The `ChunkStorageMetadata` `c` of the tensor `fqn` of size `size`: a
/// region inside the tensor, with its storage from `storage`.
fn chunk(
    graph: &Graph<Md>,
    c: &V,
    fqn: &str,
    size: &[usize],
    storage: &StorageIndex,
) -> Result<Chunk> {
    let offsets = size_of(graph, attr(graph, c, "offsets"), "chunk offsets")?;
    let sizes = size_of(graph, attr(graph, c, "sizes"), "chunk sizes")?;
    let inside = offsets.len() == size.len()
        && sizes.len() == size.len()
        && offsets
            .iter()
            .zip(&sizes)
            .zip(size)
            .all(|((o, s), n)| o.checked_add(*s).is_some_and(|end| end <= *n));
    if !inside {
        return Err(bad(
            "DCP chunk",
            "a region inside its tensor",
            format!("{fqn}: offsets {offsets:?} sizes {sizes:?} of a tensor of size {size:?}"),
        ));
    }
    let storage = storage
        .get(&(fqn.to_owned(), Some(offsets.clone())))
        .cloned()
        .ok_or_else(|| missing_storage(fqn))?;
    Ok(Chunk {
        offsets,
        sizes,
        storage,
    })
}
