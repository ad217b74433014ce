//! What a checkpoint holds: a value graph (the pickle machine's arena) whose
//! extension objects are PyTorch's ([`Object`]), plus the storages it views.
//!
//! The graph is kept as a graph, not copied into a tree, so sharing and even
//! cycles survive, and a pickle that "doubles" a structure stays small.
//! Walkers ([`Checkpoint::tensors`]) bound their work.

use crate::error::{CheckpointError, ErrorContext, StorageError};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use crate::checkpoint::pickle::{Graph, Node, NodeId, Value};
use crate::checkpoint::value::object::SharedEdits;
use crate::checkpoint::value::origin::{Layout, Origin};
use crate::checkpoint::value::path_key::path_key;
use crate::io::Location;
use crate::{DType, Error, Result, Tensor, UntypedStorage};

// The graph's leaves live in `object.rs`; they are named from here, as the
// rest of the crate has always named them.
pub use crate::checkpoint::value::location_tag::LocationTag;
pub use crate::checkpoint::value::object::{
    Construct, InertObject, Object, StorageRef, TensorObject,
};
pub use crate::checkpoint::value::record_key::RecordKey;

/// One storage of a checkpoint.
#[derive(Clone, Debug)]
pub struct StorageRecord {
    /// The record key (`"0"`, or a pointer string in old files).
    pub key: RecordKey,
    /// The bytes (shared with every tensor viewing them).
    pub storage: UntypedStorage,
    /// The legacy class's dtype, or `None` for `UntypedStorage`.
    pub dtype: Option<DType>,
    /// The location tag written in the file (`cpu`, `cuda:0`), shared by
    /// the records that name it.
    pub location: LocationTag,
}

// A checkpoint holds one a storage: 40 bytes, its key inline.
#[cfg(all(target_pointer_width = "64", not(loom)))]
const _: () = assert!(std::mem::size_of::<StorageRecord>() <= 40);

impl StorageRecord {
    /// The class name PyTorch wrote for the storage (`FloatStorage`, `UntypedStorage`).
    pub fn storage_type(&self) -> &'static str {
        self.dtype
            .and_then(DType::storage_class)
            .unwrap_or("UntypedStorage")
    }
}

/// The name [`Checkpoint`]'s container classes give a `collections.Counter`
/// (read from a pickle, or built), which the writer names again.
pub(crate) const COUNTER: &str = "collections.Counter";

/// Which container a checkpoint came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The zip format of `torch.save` since PyTorch 1.6.
    TorchZip,
    /// A TorchScript archive (`torch.jit.save`): a torch zip holding
    /// `constants.pkl` and code beside `data.pkl`. Its bytes begin as any
    /// torch zip's, so [`detect_format`](crate::checkpoint::detect_format)
    /// says [`TorchZip`](Format::TorchZip); a loaded checkpoint says which.
    TorchScript,
    /// The single-stream format (`_use_new_zipfile_serialization=False`, PyTorch < 1.6).
    TorchLegacy,
    /// A safetensors file.
    Safetensors,
}

impl Format {
    /// The name `inspect --json` reports.
    pub fn name(self) -> &'static str {
        match self {
            Format::TorchZip => "torch-zip",
            Format::TorchScript => "torchscript",
            Format::TorchLegacy => "torch-legacy",
            Format::Safetensors => "safetensors",
        }
    }
}

/// Byte order of the storages in a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByteOrder {
    /// Least significant byte first.
    Little,
    /// Most significant byte first.
    Big,
}

impl ByteOrder {
    /// `"little"` or `"big"`, as the `byteorder` record spells it.
    pub fn name(self) -> &'static str {
        match self {
            ByteOrder::Little => "little",
            ByteOrder::Big => "big",
        }
    }
}

/// One step of a path from the root object to a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PathKey {
    /// A string dict key.
    Key(String),
    /// An integer dict key, or a list/tuple index.
    Index(i64),
}

impl fmt::Display for PathKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathKey::Key(k) => f.write_str(k),
            PathKey::Index(i) => write!(f, "{i}"),
        }
    }
}

/// Joins a path with `.` (`model.layers.0.weight`); the empty path is `tensor`.
pub fn dotted(path: &[PathKey]) -> String {
    if path.is_empty() {
        return "tensor".into();
    }
    path.iter()
        .map(|k| k.to_string())
        .collect::<Vec<_>>()
        .join(".")
}

/// The state of a walk for tensors ([`Checkpoint::tensors`]).
struct Walk {
    path: Vec<PathKey>,
    /// The containers on the path (with `once`: every container entered).
    on_path: HashSet<NodeId>,
    budget: usize,
    /// For each node, whether a tensor is reachable from it.
    holds: Vec<bool>,
    once: bool,
}

/// A loaded (or to-be-saved) checkpoint: the object graph and its storages.
#[derive(Clone, Debug)]
pub struct Checkpoint {
    /// The container the checkpoint was read from.
    pub(crate) format: Format,
    /// The byte order the storages were stored in (they are native in memory).
    pub(crate) byteorder: ByteOrder,
    /// Every container node.
    pub(crate) graph: Graph<Object>,
    /// The saved object.
    pub(crate) root: Value<Object>,
    /// The storages, in the order the file lists them.
    pub(crate) storages: Vec<StorageRecord>,
    /// Dict nodes that are `collections.OrderedDict`s.
    pub(crate) ordered: NodeSet,
    /// Container nodes read from a Python type the model holds as a plain
    /// dict or list, by the type's name: `collections.defaultdict`,
    /// `collections.Counter`, `argparse.Namespace` (dicts) and
    /// `collections.deque` (lists). `inspect --json` names it as `class`.
    pub(crate) classes: NodeMap<&'static str>,
    /// State set on objects by `BUILD` (an `OrderedDict`'s `_metadata`), keyed by node.
    pub(crate) state: NodeMap<Value<Object>>,
    /// The safetensors `__metadata__` map, for safetensors files.
    pub(crate) safetensors_metadata: Option<BTreeMap<String, String>>,
    /// Inert objects ([`LoadOptions::with_inert`](crate::checkpoint::LoadOptions::with_inert)), keyed
    /// by their dict node, whose entries are what each holds.
    pub(crate) objects: HashMap<NodeId, InertObject>,
    /// Where a load found it ([`Source::load`](crate::checkpoint::Source::load)).
    pub(crate) origin: Option<Origin>,
    /// The most steps a walk by path takes ([`Checkpoint::set_max_paths`]).
    pub(crate) max_paths: usize,
}

/// A set of nodes, hashed with `foldhash`: a state dict's load notes and
/// forgets an `OrderedDict` a tensor (its hooks), where SipHash was a
/// twentieth of the pickle's time.
pub(crate) type NodeSet = HashSet<NodeId, foldhash::fast::RandomState>;

/// A map by node, hashed as [`NodeSet`].
pub(crate) type NodeMap<V> = HashMap<NodeId, V, foldhash::fast::RandomState>;

/// Most work a walk does before refusing, by default: each value visited
/// and each path step listed counts one (a shared structure can have
/// exponentially many paths, and each listed path is copied). A load sets
/// its checkpoint's from its options ([`Limit::Paths`](crate::Limit::Paths));
/// [`Checkpoint::set_max_paths`] sets it after.
pub const MAX_PATHS: usize = crate::Limit::Paths.default_value() as usize;

impl Checkpoint {
    /// An empty checkpoint whose root is `None`.
    pub(crate) fn new() -> Checkpoint {
        Checkpoint {
            format: Format::TorchZip,
            byteorder: ByteOrder::Little,
            graph: Graph::new(),
            root: Value::None,
            storages: Vec::new(),
            ordered: NodeSet::default(),
            classes: NodeMap::default(),
            state: NodeMap::default(),
            safetensors_metadata: None,
            objects: HashMap::new(),
            origin: None,
            max_paths: MAX_PATHS,
        }
    }

    /// Bounds the walks over this checkpoint's values by path (listing its
    /// tensors or leaves, saving it to a format that flattens it) to `max`
    /// steps ([`MAX_PATHS`] by default; a load sets it from its options'
    /// [`Limit::Paths`](crate::Limit::Paths)).
    pub fn set_max_paths(&mut self, max: usize) {
        self.max_paths = max;
    }

    /// The error of a walk past [`set_max_paths`](Self::set_max_paths)'s bound.
    pub(crate) fn paths_exceeded(&self) -> Error {
        Error::Checkpoint(CheckpointError::LimitExceeded {
            limit: crate::Limit::Paths,
            value: self.max_paths as u64 + 1,
            max: self.max_paths as u64,
        })
    }

    /// A checkpoint holding an `OrderedDict` of `name → tensor` (a state dict).
    pub fn from_state_dict<S: AsRef<str>>(
        entries: impl IntoIterator<Item = (S, Tensor)>,
    ) -> Checkpoint {
        let mut c = Checkpoint::new();
        let items: Vec<_> = entries
            .into_iter()
            .map(|(k, t)| {
                (
                    Value::str(k.as_ref()),
                    Value::Ext(Object::Tensor(std::sync::Arc::new(TensorObject::new(t)))),
                )
            })
            .collect();
        let id = c.graph.dict(items);
        c.ordered.insert(id);
        c.root = Value::Node(id);
        c
    }

    /// Every tensor with its path from the root, once per path, in pickle order.
    ///
    /// # Errors
    /// [`CheckpointError::LimitExceeded`] past [`MAX_PATHS`] visits (a structure shared exponentially often).
    pub fn tensors(&self) -> Result<Vec<(Vec<PathKey>, &TensorObject)>> {
        self.tensors_from(&self.root)
    }

    /// Every tensor reachable from `start` (a value of this checkpoint) with
    /// its path from `start`, as [`tensors`](Self::tensors) walks from the root.
    pub(crate) fn tensors_from<'a>(
        &'a self,
        start: &'a Value<Object>,
    ) -> Result<Vec<(Vec<PathKey>, &'a TensorObject)>> {
        self.tensors_walk(start, false)
    }

    /// Like [`tensors`](Self::tensors), but a container reachable by several
    /// paths is walked once, at its first path (in pickle order): linear in
    /// the graph's size however often a structure is shared (a pickle can
    /// share one exponentially often, which [`tensors`](Self::tensors)
    /// refuses). A tensor held directly at several paths is still listed at
    /// each.
    ///
    /// # Errors
    /// [`CheckpointError::LimitExceeded`] past [`MAX_PATHS`] visits.
    pub fn tensors_once(&self) -> Result<Vec<(Vec<PathKey>, &TensorObject)>> {
        self.tensors_walk(&self.root, true)
    }

    fn tensors_walk<'a>(
        &'a self,
        start: &'a Value<Object>,
        once: bool,
    ) -> Result<Vec<(Vec<PathKey>, &'a TensorObject)>> {
        let mut out = Vec::new();
        let mut walk = Walk {
            path: Vec::new(),
            on_path: HashSet::new(),
            budget: self.max_paths,
            holds: self.nodes_holding_tensors(),
            once,
        };
        self.walk(start, &mut walk, &mut out)?;
        Ok(out)
    }

    /// For each node, whether a tensor is reachable from it, so walks skip the
    /// rest (a memo-shared structure without tensors then costs nothing):
    /// linear in the graph's size, each node decided after those it holds
    /// ([`post_order`](Self::post_order)). A cycle back to a node holding
    /// this one adds nothing that node lacks.
    pub(crate) fn nodes_holding_tensors(&self) -> Vec<bool> {
        let order = self.post_order(self.graph.iter().map(|(id, _)| id), |node, kids| {
            kids.extend(node.values().filter_map(Value::as_node));
        });
        let at = self.positions(&order);
        let mut holds = vec![false; self.graph.len()];
        for (i, &id) in order.iter().enumerate() {
            holds[id.index()] = self.graph.get(id).values().any(|v| match v {
                Value::Ext(Object::Tensor(_)) => true,
                Value::Node(c) => at.get(c.index()).is_some_and(|&j| j < i) && holds[c.index()],
                _ => false,
            });
        }
        holds
    }

    /// Where each node stands in `order` (a [`post_order`](Self::post_order)),
    /// by node id: `usize::MAX` for a node not in it. A node whose holder
    /// comes before it reaches back to that holder (a cycle).
    pub(crate) fn positions(&self, order: &[NodeId]) -> Vec<usize> {
        let mut at = vec![usize::MAX; self.graph.len()];
        for (i, id) in order.iter().enumerate() {
            at[id.index()] = i;
        }
        at
    }

    /// The nodes reachable from `roots` through the children `kids` pushes
    /// for each node, each after every node it reaches, except a node that
    /// reaches back to one holding it (a cycle), which comes first: a
    /// post-order, found without recursion and without a vector per node
    /// (the children of the open nodes share one stack). Dangling ids are
    /// passed over.
    pub(crate) fn post_order(
        &self,
        roots: impl IntoIterator<Item = NodeId>,
        kids: impl Fn(&Node<Object>, &mut Vec<NodeId>),
    ) -> Vec<NodeId> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let n = self.graph.len();
        let mut state = vec![NEW; n];
        let mut order = Vec::new();
        // A frame's children are `stacked[at..end]`, the last region; its
        // region starts where its parent's ends.
        let mut stacked: Vec<NodeId> = Vec::new();
        let mut frames: Vec<(NodeId, usize, usize)> = Vec::new();
        for root in roots {
            if root.index() >= n || state[root.index()] != NEW {
                continue;
            }
            let mut next = Some(root);
            loop {
                if let Some(id) = next.take() {
                    state[id.index()] = OPEN;
                    let start = stacked.len();
                    kids(self.graph.get(id), &mut stacked);
                    frames.push((id, start, stacked.len()));
                }
                let Some((id, at, end)) = frames.last_mut() else {
                    break;
                };
                if *at < *end {
                    let c = stacked[*at];
                    *at += 1;
                    if state.get(c.index()) == Some(&NEW) {
                        next = Some(c);
                    }
                } else {
                    state[id.index()] = DONE;
                    order.push(*id);
                    frames.pop();
                    stacked.truncate(frames.last().map_or(0, |&(_, _, end)| end));
                }
            }
        }
        order
    }

    fn walk<'a>(
        &'a self,
        v: &'a Value<Object>,
        w: &mut Walk,
        out: &mut Vec<(Vec<PathKey>, &'a TensorObject)>,
    ) -> Result<()> {
        w.budget = w
            .budget
            .checked_sub(1)
            .ok_or_else(|| self.paths_exceeded())?;
        let id = match v {
            Value::Ext(Object::Tensor(t)) => {
                let steps = w.path.len();
                w.budget = w
                    .budget
                    .checked_sub(steps)
                    .ok_or_else(|| self.paths_exceeded())?;
                out.push((w.path.clone(), t));
                return Ok(());
            }
            Value::Node(id) if w.holds.get(id.index()).copied().unwrap_or(false) => *id,
            _ => return Ok(()),
        };
        // A cycle (a list containing itself) is walked once; with `once`,
        // every container is.
        if !w.on_path.insert(id) {
            return Ok(());
        }
        match self.graph.get(id) {
            Node::Dict(items) => {
                for (k, v) in items {
                    self.visit(v, || path_key(&self.graph, k), w, out)?;
                }
            }
            Node::List(items) | Node::Tuple(items) => {
                for (i, v) in items.iter().enumerate() {
                    self.visit(v, || PathKey::Index(i as i64), w, out)?;
                }
            }
            _ => {}
        }
        if !w.once {
            w.on_path.remove(&id);
        }
        Ok(())
    }

    /// [`walk`](Self::walk)s `v`, reached through `key`, charging the same;
    /// the key is made only for a value holding a tensor, and a tensor's
    /// path is made once (a state dict is mostly tensors, beside values
    /// that hold none).
    fn visit<'a>(
        &'a self,
        v: &'a Value<Object>,
        key: impl FnOnce() -> PathKey,
        w: &mut Walk,
        out: &mut Vec<(Vec<PathKey>, &'a TensorObject)>,
    ) -> Result<()> {
        match v {
            Value::Ext(Object::Tensor(t)) => {
                let steps = w.path.len() + 1;
                w.budget = w
                    .budget
                    .checked_sub(1 + steps)
                    .ok_or_else(|| self.paths_exceeded())?;
                let mut path = Vec::with_capacity(steps);
                path.extend_from_slice(&w.path);
                path.push(key());
                out.push((path, t));
                Ok(())
            }
            Value::Node(id) if w.holds.get(id.index()).copied().unwrap_or(false) => {
                w.path.push(key());
                let walked = self.walk(v, w, out);
                w.path.pop();
                walked
            }
            _ => {
                w.budget = w
                    .budget
                    .checked_sub(1)
                    .ok_or_else(|| self.paths_exceeded())?;
                Ok(())
            }
        }
    }

    /// Drops the nodes of the object graph that nothing reaches from the root or
    /// from the state kept on `OrderedDict`s (a loader's leftovers: the argument
    /// tuples of every rebuilt tensor), renumbering the rest. Loaders call this;
    /// it matters for checkpoints of many tensors.
    pub(crate) fn compact(&mut self) {
        let mut roots: Vec<NodeId> = self.root.as_node().into_iter().collect();
        roots.extend(self.state.keys().copied());
        roots.extend(self.state.values().filter_map(Value::as_node));
        for o in self.objects.values() {
            roots.extend(o.args.as_node());
            roots.extend(o.state.as_ref().and_then(Value::as_node));
        }
        // A tensor's Python state (`_rebuild_from_type_v2`) lives in the graph too.
        let tensor_state = |v: &Value<Object>| match v {
            Value::Ext(Object::Tensor(t)) => [t.state(), t.subclass()]
                .into_iter()
                .filter_map(|s| s.and_then(Value::as_node))
                .collect(),
            _ => Vec::new(),
        };
        roots.extend(tensor_state(&self.root));
        for (_, node) in self.graph.iter() {
            roots.extend(node.values().flat_map(tensor_state));
        }
        let map = self.graph.compact(roots);
        Graph::remap(&map, &mut self.root);
        let mut edits = SharedEdits::default();
        let mut remap_tensor = |v: &mut Value<Object>| {
            if let Value::Ext(Object::Tensor(t)) = v {
                if t.state().is_some() || t.subclass().is_some() {
                    // Remapping ids cannot fail.
                    let _ = edits.apply(t, |t| {
                        for s in t.graph_values_mut() {
                            Graph::remap(&map, s);
                        }
                        Ok(())
                    });
                }
            }
        };
        remap_tensor(&mut self.root);
        for i in 0..self.graph.len() {
            self.graph
                .get_mut(NodeId(i as u32))
                .values_mut()
                .for_each(&mut remap_tensor);
        }
        self.ordered = self
            .ordered
            .iter()
            .filter_map(|id| map.get(id.index()).copied().flatten())
            .collect();
        self.classes = self
            .classes
            .iter()
            .filter_map(|(id, c)| Some((map.get(id.index()).copied().flatten()?, *c)))
            .collect();
        self.state = std::mem::take(&mut self.state)
            .into_iter()
            .filter_map(|(id, mut v)| {
                let id = map.get(id.index()).copied().flatten()?;
                Graph::remap(&map, &mut v);
                Some((id, v))
            })
            .collect();
        self.objects = std::mem::take(&mut self.objects)
            .into_iter()
            .filter_map(|(id, mut o)| {
                let id = map.get(id.index()).copied().flatten()?;
                Graph::remap(&map, &mut o.args);
                if let Some(s) = &mut o.state {
                    Graph::remap(&map, s);
                }
                Some((id, o))
            })
            .collect();
    }

    /// The container the checkpoint was read from ([`Format::TorchZip`] for
    /// one built in memory).
    pub fn format(&self) -> Format {
        self.format
    }

    /// The layout it was loaded from: a single file's container, or a
    /// set's folder layout (`sharded-safetensors`, `dcp`, …). A checkpoint
    /// built in memory, or loaded from bytes, says its container.
    pub fn layout(&self) -> Layout {
        match &self.origin {
            Some(origin) => origin.layout,
            None => Layout::file(self.format),
        }
    }

    /// The files (or objects) it was loaded from, in the order read: the
    /// file; a sharded set's shards; a distributed checkpoint's `.metadata`
    /// and data files; the ranks' files. Empty for a checkpoint built in
    /// memory or loaded from bytes.
    pub fn files(&self) -> &[Location] {
        self.origin.as_ref().map_or(&[], |o| &o.files)
    }

    /// The byte order the storages were stored in; in memory they are native.
    pub fn byteorder(&self) -> ByteOrder {
        self.byteorder
    }

    /// The storages, in the order the file lists them (or, for a checkpoint
    /// built in memory, the order their first tensors appear).
    pub fn storages(&self) -> &[StorageRecord] {
        &self.storages
    }

    /// The safetensors `__metadata__` map, for a checkpoint read from (or to
    /// be written as) safetensors.
    pub fn safetensors_metadata(&self) -> Option<&BTreeMap<String, String>> {
        self.safetensors_metadata.as_ref()
    }

    /// Replaces the safetensors `__metadata__` map a safetensors save writes
    /// (`None`: none beyond what the save itself records).
    pub fn set_safetensors_metadata(&mut self, metadata: Option<BTreeMap<String, String>>) {
        self.safetensors_metadata = metadata;
    }

    /// The subtree at a dotted path as a checkpoint of its own (`"model"`,
    /// `"state_dict"`), paths relative to it, with only the storages its
    /// tensors view and the storage objects it holds: what `convert
    /// --select` keeps.
    ///
    /// ```
    /// use stowage::{Checkpoint, Tensor};
    /// let w = Tensor::from_slice(&[1.0f32, 2.0])?;
    /// let ckpt = Checkpoint::builder()
    ///     .tensors("model", [("fc.weight", w)])
    ///     .value("epoch", 3)
    ///     .build()?;
    /// let weights = ckpt.select("model")?;
    /// assert_eq!(weights.state_dict()?[0].0, "fc.weight");
    /// assert!(weights.get("epoch").is_err());
    /// assert_eq!(weights.storages().len(), 1);
    /// # Ok::<(), stowage::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`CheckpointError::ValueNotFound`] when nothing is at `path`, as
    /// [`get`](Self::get) says; [`CheckpointError::LimitExceeded`] as
    /// [`tensors`](Self::tensors).
    pub fn select(&self, path: &str) -> Result<Checkpoint> {
        let selected = self.get(path)?;
        // Storages saved as objects of their own (`torch.save(t.untyped_storage())`).
        let mut used: HashSet<usize> = selected
            .leaves_once()?
            .iter()
            .filter_map(|v| match v.raw() {
                Value::Ext(Object::Storage(s)) => Some(s.storage.id()),
                _ => None,
            })
            .collect();
        let mut out = self.clone();
        out.root = selected.raw().clone();
        used.extend(out.tensors()?.iter().flat_map(|(_, t)| {
            t.data_tensors()
                .into_iter()
                .map(|(_, x)| x.untyped_storage().id())
        }));
        out.storages.retain(|s| used.contains(&s.storage.id()));
        out.compact();
        Ok(out)
    }

    /// The record key of the storage a tensor views, if it is one of this checkpoint's.
    pub(crate) fn storage_key(&self, tensor: &Tensor) -> Option<&str> {
        self.storages
            .iter()
            .find(|s| s.storage.is_same(tensor.untyped_storage()))
            .map(|s| &*s.key)
    }

    /// The tensors as a flat state dict: `(dotted path, tensor)` in pickle order.
    ///
    /// # Errors
    /// As [`tensors`](Self::tensors).
    pub fn state_dict(&self) -> Result<Vec<(String, Tensor)>> {
        Ok(self
            .tensors()?
            .into_iter()
            .map(|(p, t)| (dotted(&p), t.tensor.clone()))
            .collect())
    }

    /// The tensors alone, kinds and all, in a flat dict under their dotted
    /// paths, as a safetensors file holds them: the values and the nesting
    /// are left out, the storages and the safetensors metadata kept
    /// (`convert --drop-values`).
    ///
    /// # Errors
    /// As [`tensors`](Self::tensors).
    pub fn tensors_only(&self) -> Result<Checkpoint> {
        let mut out = Checkpoint {
            format: self.format,
            byteorder: self.byteorder,
            storages: self.storages.clone(),
            safetensors_metadata: self.safetensors_metadata.clone(),
            ..Checkpoint::new()
        };
        let items: Vec<_> = self
            .tensors()?
            .into_iter()
            .map(|(p, t)| {
                let name = Value::str(&dotted(&p));
                (
                    name,
                    Value::Ext(Object::Tensor(std::sync::Arc::new(t.clone()))),
                )
            })
            .collect();
        out.root = Value::Node(out.graph.dict(items));
        Ok(out)
    }
}

impl Default for Checkpoint {
    fn default() -> Self {
        Checkpoint::new()
    }
}

/// Checks that every tensor of a freshly read checkpoint lies inside its storage,
/// naming the first that does not by its path (`AtPath`, then the storage key).
pub(crate) fn check_views(mut ckpt: Checkpoint) -> Result<Checkpoint> {
    match view_error(&ckpt) {
        None => {
            ckpt.compact();
            Ok(ckpt)
        }
        Some(e) => Err(e),
    }
}

/// Checks that `x` lies inside its storage; a packed dtype (`quint4x2`)
/// needs a byte per `elements_per_byte` elements it reaches, as PyTorch sizes them.
pub(crate) fn check_fits(x: &Tensor) -> Result<()> {
    let per_byte = x.dtype().elements_per_byte();
    if per_byte == 1 {
        return x
            .layout()
            .check_fits(x.element_size(), x.untyped_storage().nbytes());
    }
    let needed = x.layout().reach()?.div_ceil(per_byte as u128);
    let nbytes = x.untyped_storage().nbytes();
    if needed > nbytes as u128 {
        return Err(Error::Storage(StorageError::OutOfStorage {
            needed,
            nbytes,
            shape: x.shape().to_vec(),
            stride: x.stride().to_vec(),
            offset: x.storage_offset(),
            element_size: x.element_size(),
        }));
    }
    Ok(())
}

fn view_error(ckpt: &Checkpoint) -> Option<Error> {
    // The first tensor holding data outside its storage, as an `InStorage` error.
    let fits = |t: &TensorObject| -> Option<Error> {
        t.data_tensors().into_iter().find_map(|(_, x)| {
            check_fits(x)
                .err()
                .map(|e| e.in_storage(ckpt.storage_key(x).unwrap_or("?").to_owned()))
        })
    };
    let (bad, error) = ckpt
        .graph
        .iter()
        .flat_map(|(_, node)| node.values())
        .chain(std::iter::once(&ckpt.root))
        .filter_map(|v| match v {
            Value::Ext(Object::Tensor(t)) => Some(&**t),
            _ => None,
        })
        .find_map(|t| fits(t).map(|e| (t, e)))?;
    // The path, when a walk from the root reaches the tensor.
    let path = ckpt.tensors().ok().and_then(|ts| {
        ts.into_iter()
            .find(|(_, t)| std::ptr::eq(*t, bad))
            .map(|(p, _)| dotted(&p))
    });
    Some(match path {
        Some(path) => error.at_path(path),
        None => error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_values_stay_small() {
        // A checkpoint of many tensors holds several values per tensor (the rebuild
        // arguments stay in the arena); boxing tensors keeps each value small.
        let size = std::mem::size_of::<Value<Object>>();
        assert!(size <= 40, "Value<Object> is {size} bytes");
    }
}
