//! The PyTorch meaning of a checkpoint's pickle, for reading: the hooks that
//! resolve allowed globals, turn persistent ids into storages (each key read
//! once, so sharing is exactly PyTorch's), and rebuild tensors, Parameters,
//! `OrderedDict`s, `torch.Size`, dtypes and devices.

mod calls;
mod counter;
mod kinds;
mod sparse;

pub(crate) use kinds::finish as finish_kinds;

use crate::error::{CheckpointError, ErrorContext, FormatError, TensorError};
use hashbrown::HashTable;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;

use crate::checkpoint::globals::allowlist::{self, Global};
use crate::checkpoint::options::{LoadMode, LoadOptions};
use crate::checkpoint::pickle::{Graph, Hooks, Node, Value};
use crate::checkpoint::value::graph::{
    ByteOrder, Construct, LocationTag, NodeMap, NodeSet, Object, RecordKey, StorageRecord,
    StorageRef, TensorObject,
};
use crate::layout::Layout;
use crate::{DType, Device, Error, Result, Tensor, UntypedStorage};

mod decode;

pub(crate) use decode::Foreign;

/// Where storage bytes come from while a pickle is read.
pub(crate) trait StorageSource {
    /// How many records the source numbers ([`slot`](Self::slot)); 0 for a
    /// source that knows its records by key only.
    fn slots(&self) -> usize {
        0
    }

    /// The number below [`slots`](Self::slots) of record `key`, one number
    /// a record: `None` where the source numbers no records or has no
    /// record `key` (its [`load`](Self::load) then says which).
    fn slot(&mut self, key: &str) -> Option<usize> {
        let _ = key;
        None
    }

    /// A storage of `nbytes` for record `key`, on `device` (meta: no bytes
    /// read); `slot` is the record's [`slot`](Self::slot), where it has one.
    fn load(
        &mut self,
        key: &str,
        slot: Option<usize>,
        nbytes: usize,
        device: Device,
    ) -> Result<UntypedStorage>;

    /// Whether [`load`](Self::load) makes a fake load's storages itself:
    /// fake, on the device asked for, the record checked and never read. A
    /// source that does not is asked for a meta storage (which checks the
    /// record), and the load makes the fake one.
    fn makes_fakes(&self) -> bool {
        false
    }
}

/// Each storage a pickle made, as its index in the hooks' records, by the
/// record it was read from: PyTorch reads a record once, and every later
/// reference shares its storage.
enum Cache {
    /// By the source's record numbers ([`StorageSource::slot`]: a zip
    /// archive's directory entries), `u32::MAX` for a record not read yet:
    /// 4 bytes a record, and no hashing of keys (a checkpoint of many small
    /// tensors spent a twentieth of its load in a table by key).
    BySlot(Vec<u32>),
    /// By record key (the record's own: the table holds no copy), for a
    /// source that numbers no records.
    ByKey(HashTable<u32>),
}

impl Cache {
    /// The index in `records` of the storage made for record `key` (at
    /// `slot`, where the source numbers its records).
    fn get(
        &self,
        key: &str,
        slot: Option<usize>,
        records: &[StorageRecord],
        hasher: &foldhash::fast::RandomState,
    ) -> Option<u32> {
        match self {
            Cache::BySlot(slots) => slot
                .and_then(|s| slots.get(s).copied())
                .filter(|&i| i != u32::MAX),
            Cache::ByKey(table) => table
                .find(hasher.hash_one(key), |&i| *records[i as usize].key == *key)
                .copied(),
        }
    }

    /// Notes that `records[index]` is record `key`'s storage (`key` not
    /// cached yet).
    fn insert(
        &mut self,
        key: &str,
        slot: Option<usize>,
        index: u32,
        records: &[StorageRecord],
        hasher: &foldhash::fast::RandomState,
    ) {
        match self {
            // A storage is made only for a record the source has: its slot is below `slots`.
            Cache::BySlot(slots) => {
                if let Some(at) = slot.and_then(|s| slots.get_mut(s)) {
                    *at = index;
                }
            }
            Cache::ByKey(table) => {
                table.insert_unique(hasher.hash_one(key), index, |&i| {
                    hasher.hash_one(&*records[i as usize].key)
                });
            }
        }
    }
}

/// What [`TorchHooks::into_tables`] keeps of a read pickle for its checkpoint.
pub(crate) struct Tables {
    pub records: Vec<StorageRecord>,
    pub ordered: NodeSet,
    pub classes: NodeMap<&'static str>,
    pub state: NodeMap<Value<Object>>,
}

/// PyTorch's `torch.load` semantics as pickle hooks.
pub(crate) struct TorchHooks<'s, S: StorageSource> {
    pub source: &'s mut S,
    pub options: &'s LoadOptions,
    pub byteorder: ByteOrder,
    /// Element count is in the pid's 5th field; legacy pids have 6 fields.
    pub legacy: bool,
    /// Each storage made, as its index in `records`. A `u32`: 4 bytes a
    /// storage, and no pickle makes 4 billion storages within its limits.
    cache: Cache,
    /// The hasher of a cache by key (`foldhash`: a key per tensor).
    hasher: foldhash::fast::RandomState,
    pub records: Vec<StorageRecord>,
    /// The location tags made so far (a few): the records that name one
    /// share it.
    tags: Vec<LocationTag>,
    /// Bytes declared by the storages read so far.
    pub declared_bytes: u64,
    pub ordered: NodeSet,
    /// Containers of a Python type the model lacks, by `Checkpoint::classes`' names.
    pub classes: NodeMap<&'static str>,
    pub state: NodeMap<Value<Object>>,
    /// Globals outside the allowlist: inert objects and decoded data.
    pub foreign: Foreign,
    /// Legacy storage views by view key: (offset, size) in elements of the
    /// root storage. See [`TorchHooks::view`].
    pub views: HashMap<RecordKey, (usize, usize)>,
}

impl<'s, S: StorageSource> TorchHooks<'s, S> {
    /// Room for `n` storages, as many as the archive has records: a
    /// checkpoint of many tensors then grows no table by doubling (which
    /// peaks at twice the room needed).
    pub(crate) fn reserve(&mut self, n: usize) {
        let (records, hasher) = (&self.records, &self.hasher);
        if let Cache::ByKey(table) = &mut self.cache {
            table.reserve(n, |&i| hasher.hash_one(&*records[i as usize].key));
        }
        self.records.reserve(n);
    }

    /// What a read pickle leaves its checkpoint: the storage records, the
    /// `OrderedDict`s, the containers' class names and the tensors' Python
    /// state. The rest (the storage cache by key, the views, the foreign
    /// globals' notes) is freed here, before the load reads its records:
    /// a table a storage, which would otherwise stay to the load's end.
    pub(crate) fn into_tables(self) -> Tables {
        Tables {
            records: self.records,
            ordered: self.ordered,
            classes: self.classes,
            state: self.state,
        }
    }

    /// Releases the arguments a call consumed (`Graph::release`) and
    /// forgets what was noted of the nodes freed: their ids may name the
    /// next nodes.
    fn release(&mut self, graph: &mut Graph<Object>, args: &V) {
        let TorchHooks {
            ordered,
            classes,
            state,
            foreign,
            ..
        } = self;
        graph.release_with(args, |id| {
            // Most are empty; a state dict's every tensor holds an
            // OrderedDict of hooks.
            if !ordered.is_empty() {
                ordered.remove(&id);
            }
            if !classes.is_empty() {
                classes.remove(&id);
            }
            if !state.is_empty() {
                state.remove(&id);
            }
            foreign.forget(id);
        });
    }

    pub fn new(
        source: &'s mut S,
        options: &'s LoadOptions,
        byteorder: ByteOrder,
        legacy: bool,
    ) -> Self {
        let cache = match source.slots() {
            0 => Cache::ByKey(HashTable::new()),
            n => Cache::BySlot(vec![u32::MAX; n]),
        };
        TorchHooks {
            source,
            options,
            byteorder,
            legacy,
            cache,
            hasher: foldhash::fast::RandomState::default(),
            records: Vec::new(),
            tags: Vec::new(),
            declared_bytes: 0,
            ordered: NodeSet::default(),
            classes: NodeMap::default(),
            state: NodeMap::default(),
            foreign: Foreign::default(),
            views: HashMap::new(),
        }
    }
}

type V = Value<Object>;

pub(super) fn bad(
    context: &'static str,
    expected: &'static str,
    found: &V,
    graph: &Graph<Object>,
) -> Error {
    let found = match found {
        Value::Node(id) => graph.try_get(*id).map_or("node", |n| n.kind()).to_string(),
        Value::Ext(o) => object_kind(o).to_string(),
        Value::Str(s) => format!("str {s:?}"),
        Value::Int(i) => format!("int {i}"),
        other => format!("{other:?}").chars().take(40).collect(),
    };
    Error::Format(FormatError::BadObject {
        context,
        expected,
        found,
    })
}

fn object_kind(o: &Object) -> &'static str {
    match o {
        Object::Tensor(_) => "tensor",
        Object::Storage(_) => "storage",
        Object::DType(_) => "dtype",
        Object::Device(_) => "device",
        Object::Size(_) => "torch.Size",
        Object::Complex(_) => "complex",
        Object::QScheme(_) => "qscheme",
        Object::Layout(_) => "layout",
        Object::Global(_) => "class or function",
        Object::NdArray(_) => "numpy array",
        Object::NumpyScalar(_) => "numpy scalar",
        Object::NumpyDType(_) => "numpy dtype",
        Object::Data(d) => d.kind(),
        Object::Class(_) => "class outside the allowlist",
    }
}

/// The items of a tuple argument.
pub(super) fn tuple_items<'g>(
    graph: &'g Graph<Object>,
    v: &V,
    context: &'static str,
) -> Result<&'g [V]> {
    match v {
        Value::Node(id) => match graph.try_get(*id) {
            Some(Node::Tuple(items)) => Ok(items),
            _ => Err(bad(context, "a tuple", v, graph)),
        },
        _ => Err(bad(context, "a tuple", v, graph)),
    }
}

fn as_usize(graph: &Graph<Object>, v: &V, context: &'static str) -> Result<usize> {
    match v {
        Value::Int(i) if *i >= 0 => Ok(*i as usize),
        _ => Err(bad(context, "a non-negative int", v, graph)),
    }
}

/// A size or stride: a tuple of ints or a `torch.Size`.
fn as_dims(graph: &Graph<Object>, v: &V, context: &'static str) -> Result<Vec<usize>> {
    match v {
        Value::Ext(Object::Size(s)) => Ok(s.to_vec()),
        _ => tuple_items(graph, v, context)?
            .iter()
            .map(|x| as_usize(graph, x, context))
            .collect(),
    }
}

fn as_bool(graph: &Graph<Object>, v: &V, context: &'static str) -> Result<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::Int(i) => Ok(*i != 0),
        _ => Err(bad(context, "a bool", v, graph)),
    }
}

fn as_str<'v>(graph: &Graph<Object>, v: &'v V, context: &'static str) -> Result<&'v str> {
    match v {
        Value::Str(s) => Ok(s),
        _ => Err(bad(context, "a str", v, graph)),
    }
}

fn as_tensor(graph: &Graph<Object>, v: &V, context: &'static str) -> Result<TensorObject> {
    match v {
        Value::Ext(Object::Tensor(t)) => Ok((**t).clone()),
        _ => Err(bad(context, "a tensor", v, graph)),
    }
}

/// Swaps each element's bytes in place (complex: each half), as PyTorch's `byteswap`.
pub(crate) fn byteswap(bytes: &mut [u8], dtype: DType) {
    let unit = dtype.complex_part().unwrap_or(dtype).size();
    if unit > 1 {
        for chunk in bytes.chunks_exact_mut(unit) {
            chunk.reverse();
        }
    }
}

impl<S: StorageSource> TorchHooks<'_, S> {
    fn storage(&mut self, graph: &Graph<Object>, pid: &V) -> Result<StorageRef> {
        let items = tuple_items(graph, pid, "persistent id")?;
        let want = if self.legacy { 6 } else { 5 };
        if items.len() != want && !(self.legacy && items.len() == 5) {
            return Err(Error::Format(FormatError::BadObject {
                context: "persistent id",
                expected: "('storage', class, key, location, numel)",
                found: format!("a {}-tuple", items.len()),
            }));
        }
        if as_str(graph, &items[0], "persistent id tag")? != "storage" {
            return Err(bad("persistent id tag", "'storage'", &items[0], graph));
        }
        let dtype = match &items[1] {
            Value::Ext(Object::Global(g)) => match **g {
                Global::Storage(d) => Some(d),
                _ => None,
            },
            _ => None,
        };
        let Some(dtype) = dtype else {
            return Err(bad(
                "persistent id storage class",
                "a storage class",
                &items[1],
                graph,
            ));
        };
        let key = match &items[2] {
            Value::Str(s) => RecordKey::from(&**s),
            Value::Int(i) => RecordKey::from(i.to_string()),
            other => return Err(bad("persistent id key", "a str", other, graph)),
        };
        let location = match &items[3] {
            Value::Str(s) => s.clone(),
            other => return Err(bad("persistent id location", "a str", other, graph)),
        };
        let numel = as_usize(graph, &items[4], "persistent id numel")?;
        let root = self.root_storage(key, dtype, location, numel)?;
        match items.get(5) {
            Some(view) if self.legacy && !view.is_none() => self.view(graph, view, root, numel),
            _ => Ok(root),
        }
    }

    /// A legacy storage view, `view_metadata = (view_key, offset, size)` in
    /// elements of its root storage (what PyTorch ≤ 1.x wrote for a storage
    /// whose `_root_storage()` was another). PyTorch loads it as a slice of
    /// the root; here it is the root storage under the view's key, and
    /// tensors on it are shifted by `offset` and held within `size`
    /// ([`TorchHooks::rebuild`]). The first reference to a view key wins, as
    /// in PyTorch.
    fn view(
        &mut self,
        graph: &Graph<Object>,
        view: &V,
        root: StorageRef,
        numel: usize,
    ) -> Result<StorageRef> {
        let items = tuple_items(graph, view, "storage view")?;
        let [view_key, offset, size] = items else {
            return Err(Error::Format(FormatError::BadObject {
                context: "storage view",
                expected: "(view_key, offset, size)",
                found: format!("a {}-tuple", items.len()),
            }));
        };
        let view_key = RecordKey::from(as_str(graph, view_key, "storage view key")?);
        let offset = as_usize(graph, offset, "storage view offset")?;
        let size = as_usize(graph, size, "storage view size")?;
        if offset.checked_add(size).is_none_or(|end| end > numel) {
            return Err(Error::Format(FormatError::BadObject {
                context: "storage view",
                expected: "a range inside its root storage",
                found: format!("{size} elements from {offset} of {numel}"),
            }));
        }
        self.views.entry(view_key.clone()).or_insert((offset, size));
        Ok(StorageRef {
            key: view_key,
            ..root
        })
    }

    /// The storage of record `key`, read once (later references share it).
    fn root_storage(
        &mut self,
        key: RecordKey,
        dtype: Option<DType>,
        location: Arc<str>,
        numel: usize,
    ) -> Result<StorageRef> {
        let slot = self.source.slot(&key);
        let records = &self.records;
        if let Some(i) = self.cache.get(&key, slot, records, &self.hasher) {
            // PyTorch caches by key; a later reference's class is ignored (the first dtype wins).
            let r = &records[i as usize];
            return Ok(StorageRef {
                storage: r.storage.clone(),
                dtype: r.dtype,
                key,
            });
        }
        let Ok(index) = u32::try_from(records.len()) else {
            return Err(Error::Checkpoint(CheckpointError::LimitExceeded {
                limit: crate::Limit::Records,
                value: records.len() as u64 + 1,
                max: u64::from(u32::MAX),
            }));
        };
        let elem = dtype.map_or(1, DType::size);
        let nbytes = numel.checked_mul(elem).ok_or_else(|| {
            Error::Tensor(TensorError::SizeOverflow {
                what: "storage bytes",
                detail: format!("{numel} elements of {elem} bytes in storage {key}"),
            })
        })?;
        self.declared_bytes = self.declared_bytes.saturating_add(nbytes as u64);
        if self.declared_bytes > self.options.max_storage_bytes {
            return Err(Error::Checkpoint(CheckpointError::LimitExceeded {
                limit: crate::Limit::StorageBytes,
                value: self.declared_bytes,
                max: self.options.max_storage_bytes,
            }));
        }
        let device = match (
            self.options.map_location,
            self.options.location_map.get(&*location),
        ) {
            (Some(d), _) | (None, Some(&d)) => d,
            (None, None) => location.parse::<Device>().map_err(|_| {
                Error::Format(FormatError::BadObject {
                    context: "storage location",
                    expected: "a device string",
                    found: location.to_string(),
                })
            })?,
        };
        let storage = if self.options.mode() == LoadMode::Fake
            && !device.is_meta()
            && !self.source.makes_fakes()
        {
            // A fake storage: the record is checked like a meta load (present, with the
            // declared size) and never read; the storage reports `device`.
            self.source
                .load(&key, slot, nbytes, Device::META)
                .in_storage(&*key)?;
            UntypedStorage::new_fake(nbytes, device)
        } else {
            self.source
                .load(&key, slot, nbytes, device)
                .in_storage(&*key)?
        };
        if self.byteorder == ByteOrder::Big && storage.has_data() {
            // PyTorch swaps typed (v2) storages by their dtype; untyped (v3) ones load as
            // uint8 and are never swapped. stowage does the same (see docs/format.md).
            if let Some(d) = dtype {
                storage.with_bytes_mut("byteswap", |b| byteswap(b, d))?;
            }
        }
        let r = StorageRef {
            storage: storage.clone(),
            dtype,
            key: key.clone(),
        };
        // A legacy file's storage may yet move (a mapped load points it at
        // its record once found), so only an archive's is shown as made.
        if let (Some(on_storage), Some(dtype), false) =
            (&self.options.on_storage, dtype, self.legacy)
        {
            (on_storage.0)(&storage, dtype);
        }
        self.cache
            .insert(&key, slot, index, &self.records, &self.hasher);
        let location = self.tag(&location);
        self.records.push(StorageRecord {
            key: r.key.clone(),
            storage,
            dtype,
            location,
        });
        Ok(r)
    }

    /// The tag `location`, shared with the records that named it before
    /// (among the first few tags: a file naming many has a tag a record).
    fn tag(&mut self, location: &str) -> LocationTag {
        const SHARED: usize = 16;
        if let Some(tag) = self.tags.iter().find(|t| t.as_str() == location) {
            return tag.clone();
        }
        let tag = LocationTag::from(location);
        if self.tags.len() < SHARED {
            self.tags.push(tag.clone());
        }
        tag
    }

    #[allow(clippy::too_many_arguments)]
    /// A tensor from `(storage, storage_offset, size, stride)`, the first four
    /// arguments of every rebuild function.
    fn rebuild(
        &self,
        graph: &Graph<Object>,
        layout_args: &[V],
        requires_grad: Option<&V>,
        dtype: Option<DType>,
    ) -> Result<Tensor> {
        let [storage, offset, size, stride] = layout_args else {
            return Err(Error::Format(FormatError::BadObject {
                context: "tensor rebuild",
                expected: "(storage, storage_offset, size, stride)",
                found: format!("{} arguments", layout_args.len()),
            }));
        };
        let s = match storage {
            Value::Ext(Object::Storage(s)) => s,
            other => return Err(bad("tensor storage", "a storage", other, graph)),
        };
        let dtype = dtype.or(s.dtype).unwrap_or(DType::UInt8);
        let layout = Layout::new(
            &as_dims(graph, size, "tensor size")?,
            &as_dims(graph, stride, "tensor stride")?,
            as_usize(graph, offset, "tensor storage offset")?,
        )?;
        let layout = match self.views.get(&s.key) {
            // On a legacy storage view: within the view, shifted to its start.
            Some(&(start, size)) => {
                layout.check_fits(1, size)?;
                let offset = layout.offset().checked_add(start).ok_or(Error::Tensor(
                    TensorError::SizeOverflow {
                        what: "storage offset",
                        detail: format!("{} + {start}", layout.offset()),
                    },
                ))?;
                Layout::new(layout.shape(), layout.stride(), offset)?
            }
            None => layout,
        };
        // Checked against the storage by `check_views` once the graph is complete.
        let mut t = Tensor::from_parts_unchecked(s.storage.clone(), dtype, layout);
        if let Some(rg) = requires_grad {
            t.requires_grad_(as_bool(graph, rg, "requires_grad")?)?;
        }
        Ok(t)
    }
}

/// The Python state `_rebuild_from_type_v2` and `_rebuild_parameter_with_state`
/// set on a tensor, `None` when absent or an empty dict (`None` in Python too).
/// It is what `torch._utils._get_obj_state` gives, the only state
/// `torch.save` writes: the `__dict__`, or a pair of it and the slots' dict
/// (either may be `None`). Anything else is refused: `_set_obj_state` raises
/// on it, and a state that is itself a tensor could chain tensors to any
/// depth outside the nesting the pickle's depth limit counts.
fn python_state(graph: &Graph<Object>, state: Option<&V>) -> Result<Option<V>> {
    let dict = |v: &V| match v {
        Value::Node(id) => match graph.try_get(*id) {
            Some(Node::Dict(d)) => Some(d.is_empty()),
            _ => None,
        },
        _ => None,
    };
    let Some(state) = state else {
        return Ok(None);
    };
    match state {
        Value::None => Ok(None),
        v if dict(v) == Some(true) => Ok(None),
        v if dict(v).is_some() => Ok(Some(v.clone())),
        Value::Node(id)
            if matches!(graph.try_get(*id), Some(Node::Tuple(pair)) if pair.len() == 2
                && pair.iter().all(|p| matches!(p, Value::None) || dict(p).is_some())) =>
        {
            Ok(Some(state.clone()))
        }
        _ => Err(bad(
            "a tensor's Python state",
            "a dict, or a pair of dicts (its __dict__ and slots)",
            state,
            graph,
        )),
    }
}

/// The optional metadata dict of `_rebuild_tensor_v2/_v3`: PyTorch's lazy
/// `conj` and `neg` bits (`torch._C._get_tensor_metadata`). Other keys (custom
/// backends' metadata) are refused rather than silently dropped.
fn lazy_bits(graph: &Graph<Object>, meta: Option<&V>) -> Result<(bool, bool)> {
    let (mut conj, mut neg) = (false, false);
    let Some(meta) = meta else {
        return Ok((conj, neg));
    };
    let items = match meta {
        Value::Node(id) => match graph.try_get(*id) {
            Some(Node::Dict(items)) => items,
            _ => return Err(bad("tensor metadata", "a dict", meta, graph)),
        },
        _ => return Err(bad("tensor metadata", "a dict", meta, graph)),
    };
    for (k, v) in items {
        match (k.as_str(), v.as_bool()) {
            (Some("conj"), Some(b)) => conj = b,
            (Some("neg"), Some(b)) => neg = b,
            _ => {
                return Err(Error::Checkpoint(CheckpointError::Unsupported {
                    what: format!("tensor metadata entry {k:?}"),
                }))
            }
        }
    }
    Ok((conj, neg))
}

impl<S: StorageSource> Hooks for TorchHooks<'_, S> {
    type Ext = Object;
    type Error = Error;

    fn find_class(&mut self, module: &str, name: &str) -> Result<V> {
        let global = match allowlist::resolve(module, name) {
            Ok(g) => g,
            Err(refused) => return self.foreign_class(module, name, refused),
        };
        Ok(match global {
            Global::DType(d) => Value::Ext(Object::DType(d)),
            Global::QScheme(q) => Value::Ext(Object::QScheme(q)),
            g => Value::Ext(Object::Global(Box::new(g))),
        })
    }

    fn persistent_load(&mut self, graph: &mut Graph<Object>, pid: V) -> Result<V> {
        // Legacy files name a module's class as `('module', cls, source_file,
        // source)`; PyTorch returns `cls`, its source only compared. Here the
        // class was resolved like any global (inert loading or allowed by name).
        if let Some(cls) = decode::legacy_module_class(graph, &pid) {
            return Ok(cls);
        }
        let storage = self.storage(graph, &pid)?;
        // The id tuple is read into the storage reference and kept nowhere.
        self.release(graph, &pid);
        Ok(Value::Ext(Object::Storage(Box::new(storage))))
    }

    fn reduce(&mut self, graph: &mut Graph<Object>, callable: V, args: V) -> Result<V> {
        let f = match &callable {
            Value::Ext(Object::Global(g)) => (**g).clone(),
            Value::Ext(Object::Class(c)) => {
                return self.call_foreign(graph, &c.clone(), args, Construct::Call)
            }
            other => return Err(bad("REDUCE", "an allowed callable", other, graph)),
        };
        let items = tuple_items(graph, &args, "REDUCE arguments")?.to_vec();
        let out = self.call(graph, &f, &items)?;
        // Tensor rebuilds read their arguments (the storage, size and stride
        // tuples, the hooks dict) into the tensor and keep none of them
        // (`_rebuild_parameter_with_state` keeps its state: not released).
        // `OrderedDict()` (every tensor's hooks) keeps nothing of its empty
        // arguments either; its pairs, when it has some, are in the dict.
        if matches!(
            f,
            Global::RebuildTensor
                | Global::RebuildTensorV2
                | Global::RebuildTensorV3
                | Global::RebuildQTensor
                | Global::RebuildParameter
        ) || f == Global::OrderedDict && items.is_empty()
        {
            drop(items);
            self.release(graph, &args);
        }
        Ok(out)
    }

    fn build(&mut self, graph: &mut Graph<Object>, obj: V, state: V) -> Result<V> {
        if let Some(v) = self.build_foreign(graph, &obj, state.clone())? {
            return Ok(v);
        }
        match &obj {
            Value::Node(id) if self.ordered.contains(id) => {
                self.state.insert(*id, state);
            }
            // PyTorch sets Python attributes on tensors and Parameters; stowage has none to set.
            Value::Ext(Object::Tensor(_)) => {}
            other => {
                return Err(bad(
                    "BUILD",
                    "an OrderedDict, tensor or Parameter",
                    other,
                    graph,
                ))
            }
        }
        Ok(obj)
    }

    fn new_obj(&mut self, graph: &mut Graph<Object>, cls: V, args: V) -> Result<V> {
        match &cls {
            Value::Ext(Object::Class(c)) => {
                self.call_foreign(graph, &c.clone(), args, Construct::New)
            }
            _ => Err(bad("NEWOBJ", "an allowed class", &cls, graph)),
        }
    }

    fn extend(&mut self, graph: &mut Graph<Object>, target: &V, items: Vec<V>) -> Result<bool> {
        Ok(self.extend_foreign(graph, target, items))
    }
}
