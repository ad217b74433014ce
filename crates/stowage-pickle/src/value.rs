//! The object graph an unpickler builds and a pickler writes.
//!
//! Scalars are [`Value`]s held inline; containers are [`Node`]s stored in a
//! [`Graph`] arena and referenced by [`NodeId`]. Two references to one Python
//! object are two copies of the same `Value::Node(id)`, so sharing, mutation
//! after memoization and cycles need no reference counting or interior
//! mutability, and a graph is `Send + Sync` whenever `X` is.

use std::hash::Hash;
use std::sync::Arc;

use num_bigint::BigInt;

use super::{Map, Set};

/// The index of a [`Node`] in its [`Graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The id as a `usize` index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One pickled object: a scalar, a reference to a container node, or an
/// extension object `X` made by the caller's hooks (a tensor, a class, ...).
#[derive(Clone, Debug, PartialEq)]
pub enum Value<X> {
    /// `None`.
    None,
    /// `True` or `False`.
    Bool(bool),
    /// An `int` that fits in 64 bits.
    Int(i64),
    /// An `int` that does not fit in 64 bits.
    BigInt(Arc<BigInt>),
    /// A `float`.
    Float(f64),
    /// A `str`.
    Str(Arc<str>),
    /// A `bytes`.
    Bytes(Arc<[u8]>),
    /// A container in the graph.
    Node(NodeId),
    /// An object made by the caller's hooks.
    Ext(X),
}

impl<X> Value<X> {
    /// A `str` value.
    pub fn str(s: &str) -> Self {
        Value::Str(Arc::from(s))
    }

    /// A `bytes` value.
    pub fn bytes(b: &[u8]) -> Self {
        Value::Bytes(Arc::from(b))
    }

    /// An `int`: `Int` when it fits in `i64`, else `BigInt`.
    pub fn int(i: BigInt) -> Self {
        match i64::try_from(&i) {
            Ok(small) => Value::Int(small),
            Err(_) => Value::BigInt(Arc::new(i)),
        }
    }

    /// The string, if this is a `Str`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The bytes, if this is a `Bytes`.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// The integer, if this is an `Int` (Python's `bool` is not included).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The boolean, if this is a `Bool`.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The float, if this is a `Float`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    /// The node id, if this is a `Node`.
    pub fn as_node(&self) -> Option<NodeId> {
        match self {
            Value::Node(id) => Some(*id),
            _ => None,
        }
    }

    /// The extension object, if this is an `Ext`.
    pub fn as_ext(&self) -> Option<&X> {
        match self {
            Value::Ext(x) => Some(x),
            _ => None,
        }
    }

    /// Whether this is `None`.
    pub fn is_none(&self) -> bool {
        matches!(self, Value::None)
    }
}

/// A container object.
#[derive(Clone, Debug, PartialEq)]
pub enum Node<X> {
    /// A `tuple`.
    Tuple(Vec<Value<X>>),
    /// A `list`.
    List(Vec<Value<X>>),
    /// A `dict` (or anything the hooks represent as one, e.g. an
    /// `OrderedDict`), in insertion order. The unpickler's `SETITEM` on a key
    /// equal to an existing one (by Python's equality, a tuple the pickle
    /// built by its items) replaces that entry's value in place.
    Dict(Vec<(Value<X>, Value<X>)>),
    /// A `set`, in insertion order, without duplicates as the unpickler
    /// judges them.
    Set(Vec<Value<X>>),
    /// A `frozenset`, like `Set`.
    FrozenSet(Vec<Value<X>>),
    /// A `bytearray`.
    ByteArray(Vec<u8>),
}

impl<X> Node<X> {
    /// Every value the node holds; a dict yields each key, then its value.
    pub fn values(&self) -> impl Iterator<Item = &Value<X>> {
        let (seq, pairs) = match self {
            Node::Tuple(v) | Node::List(v) | Node::Set(v) | Node::FrozenSet(v) => (&v[..], &[][..]),
            Node::Dict(d) => (&[][..], &d[..]),
            Node::ByteArray(_) => (&[][..], &[][..]),
        };
        seq.iter().chain(pairs.iter().flat_map(|(k, v)| [k, v]))
    }

    /// Every value the node holds, mutably (the order of [`values`](Self::values)).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Value<X>> {
        let mut seq: &mut [Value<X>] = &mut [];
        let mut pairs: &mut [(Value<X>, Value<X>)] = &mut [];
        match self {
            Node::Tuple(v) | Node::List(v) | Node::Set(v) | Node::FrozenSet(v) => seq = v,
            Node::Dict(d) => pairs = d,
            Node::ByteArray(_) => {}
        }
        seq.iter_mut()
            .chain(pairs.iter_mut().flat_map(|(k, v)| [k, v]))
    }

    /// The kind's Python name: `"tuple"`, `"list"`, `"dict"`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            Node::Tuple(_) => "tuple",
            Node::List(_) => "list",
            Node::Dict(_) => "dict",
            Node::Set(_) => "set",
            Node::FrozenSet(_) => "frozenset",
            Node::ByteArray(_) => "bytearray",
        }
    }
}

/// An arena of [`Node`]s.
///
/// Each node records its nesting depth when added: 1 + the deepest node it
/// holds. The unpickler raises a node's depth when it appends to it, but
/// depths are not propagated to nodes that already contain it, and a graph
/// may contain cycles, so code that walks a graph must still be iterative or
/// bounded and must track visited nodes.
#[derive(Clone, Debug)]
pub struct Graph<X> {
    nodes: Vec<Node<X>>,
    depths: Vec<u32>,
    /// Nodes the unpickler referenced more than once (memo, `DUP`), or
    /// keeps as dict keys (a tuple and what it holds): never
    /// [released](Self::release). Bookkeeping of the unpickle only.
    shared: Set<u32>,
    /// The fewest nodes the graph held after a release since the unpickler
    /// last asked ([`take_released_to`](Self::take_released_to)): ids from
    /// there on may have gone and be given to new nodes.
    released_to: usize,
    /// [`release_with`](Self::release_with)'s list of nodes to free, kept
    /// empty between calls (an unpickle releases after every call), and
    /// only while small.
    pending: Vec<NodeId>,
}

impl<X> Default for Graph<X> {
    fn default() -> Self {
        Graph {
            nodes: Vec::new(),
            depths: Vec::new(),
            shared: Set::default(),
            released_to: usize::MAX,
            pending: Vec::new(),
        }
    }
}

impl<X: PartialEq> PartialEq for Graph<X> {
    /// Equal nodes with equal depths (the unpickler's bookkeeping aside).
    fn eq(&self, other: &Self) -> bool {
        self.nodes == other.nodes && self.depths == other.depths
    }
}

impl<X> Graph<X> {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node and returns its id.
    ///
    /// # Panics
    ///
    /// If the graph already holds `u32::MAX` nodes. (The unpickler checks its
    /// node limit first and never gets there.)
    pub fn add(&mut self, node: Node<X>) -> NodeId {
        let id = u32::try_from(self.nodes.len())
            .ok()
            .filter(|&n| n < u32::MAX)
            .expect("graph holds at most u32::MAX nodes");
        let depth = node
            .values()
            .map(|v| self.value_depth(v))
            .max()
            .unwrap_or(0);
        self.nodes.push(node);
        self.depths.push(depth.saturating_add(1));
        NodeId(id)
    }

    /// Records that the unpickler copied a reference to `v`'s node (a memo
    /// entry, `DUP`, a tuple key's canonical node), so that
    /// [`release`](Self::release) leaves it alone.
    pub(crate) fn mark_shared(&mut self, v: &Value<X>) {
        if let Value::Node(id) = v {
            self.shared.insert(id.0);
        }
    }

    /// Frees the contents of `v`'s node and, recursively, of the nodes it
    /// holds, except those the unpickler referenced more than once (a memo
    /// entry, `DUP`, a tuple key) and what they hold: each freed node
    /// becomes an empty tuple of depth 0, which [`compact`](Self::compact)
    /// later drops, and the freed nodes at the end of the graph go at once,
    /// so that the next nodes added take their ids. This keeps a load's peak
    /// memory down: the argument tuples of a checkpoint's 100,000 tensor
    /// rebuilds are garbage as soon as each tensor is built, and are the
    /// newest nodes then.
    ///
    /// The caller must hold the only reference to `v` and must not have kept
    /// a copy of any reference inside it, nor an id of a node in it: such an
    /// id may name a later node. [`Hooks`] call it on the arguments they
    /// consume (the unpickler moved those values off the stack and copied
    /// nothing but what it marked shared), from `reduce`, `new_obj`,
    /// `build` or `persistent_load`, after which the unpickler forgets what
    /// it noted of the ids that went; hooks that note ids of their own
    /// forget them with [`release_with`](Self::release_with).
    ///
    /// [`Hooks`]: crate::Hooks
    pub fn release(&mut self, v: &Value<X>) {
        self.release_with(v, |_| {});
    }

    /// [`release`](Self::release), calling `freed` with the id of each node
    /// it frees.
    pub fn release_with(&mut self, v: &Value<X>, mut freed: impl FnMut(NodeId)) {
        let Value::Node(id) = v else { return };
        let mut pending = std::mem::take(&mut self.pending);
        pending.push(*id);
        while let Some(id) = pending.pop() {
            // Depth 0: freed already (a live node's depth is at least 1).
            if self.shared.contains(&id.0) || self.depth(id) == 0 {
                continue;
            }
            let old = std::mem::replace(&mut self.nodes[id.index()], Node::Tuple(Vec::new()));
            self.depths[id.index()] = 0;
            freed(id);
            pending.extend(old.values().filter_map(Value::as_node));
        }
        // Kept when small (a tensor's arguments are a handful of nodes): a
        // graph outlives its unpickle, and a vast release's room would stay.
        if pending.capacity() <= 64 {
            self.pending = pending;
        }
        while self.depths.last() == Some(&0) {
            self.depths.pop();
            self.nodes.pop();
        }
        self.released_to = self.released_to.min(self.nodes.len());
    }

    /// The fewest nodes the graph held after a [`release`](Self::release)
    /// since the last call (`usize::MAX` if none): every id that went, and
    /// may now name a new node, is at least this.
    pub(crate) fn take_released_to(&mut self) -> usize {
        std::mem::replace(&mut self.released_to, usize::MAX)
    }

    /// Adds a tuple of `items`.
    pub fn tuple(&mut self, items: impl Into<Vec<Value<X>>>) -> NodeId {
        self.add(Node::Tuple(items.into()))
    }

    /// Adds a list of `items`.
    pub fn list(&mut self, items: impl Into<Vec<Value<X>>>) -> NodeId {
        self.add(Node::List(items.into()))
    }

    /// Adds a dict of `items`, taken as given (no duplicate-key check).
    pub fn dict(&mut self, items: impl Into<Vec<(Value<X>, Value<X>)>>) -> NodeId {
        self.add(Node::Dict(items.into()))
    }

    /// The node `id`.
    ///
    /// # Panics
    ///
    /// If `id` is not in this graph; see [`Graph::try_get`].
    pub fn get(&self, id: NodeId) -> &Node<X> {
        &self.nodes[id.index()]
    }

    /// The node `id`, mutably. Changes made through it do not update depths.
    ///
    /// # Panics
    ///
    /// If `id` is not in this graph; see [`Graph::try_get_mut`].
    pub fn get_mut(&mut self, id: NodeId) -> &mut Node<X> {
        &mut self.nodes[id.index()]
    }

    /// The node `id`, or `None` if it is not in this graph.
    pub fn try_get(&self, id: NodeId) -> Option<&Node<X>> {
        self.nodes.get(id.index())
    }

    /// The node `id` mutably, or `None` if it is not in this graph.
    pub fn try_get_mut(&mut self, id: NodeId) -> Option<&mut Node<X>> {
        self.nodes.get_mut(id.index())
    }

    /// The recorded nesting depth of node `id` (0 for an id not in the
    /// graph, or a node [released](Self::release)).
    pub fn depth(&self, id: NodeId) -> usize {
        self.depths.get(id.index()).map_or(0, |&d| d as usize)
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node with its id, in the order added.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &Node<X>)> {
        // Ids fit in u32: `add` refuses more nodes.
        (0u32..).map(NodeId).zip(self.nodes.iter())
    }

    /// The depth a value contributes to a node holding it.
    /// Keeps only the nodes reachable from `roots`, in their old order, and
    /// returns where each old node went (`None`: dropped). Values inside the kept
    /// nodes are renumbered; values held elsewhere must be renumbered by the caller
    /// with [`remap`](Self::remap). Depths are kept. Linear in the graph's size.
    pub fn compact(&mut self, roots: impl IntoIterator<Item = NodeId>) -> Vec<Option<NodeId>> {
        let n = self.nodes.len();
        let mut reached = vec![false; n];
        let mut stack: Vec<NodeId> = roots.into_iter().filter(|id| id.index() < n).collect();
        while let Some(id) = stack.pop() {
            if std::mem::replace(&mut reached[id.index()], true) {
                continue;
            }
            for v in self.nodes[id.index()].values() {
                if let Value::Node(c) = v {
                    if c.index() < n && !reached[c.index()] {
                        stack.push(*c);
                    }
                }
            }
        }
        let mut map = vec![None; n];
        let mut next = 0u32;
        for (old, slot) in map.iter_mut().enumerate() {
            if reached[old] {
                *slot = Some(NodeId(next));
                next += 1;
            }
        }
        let nodes = std::mem::take(&mut self.nodes);
        let depths = std::mem::take(&mut self.depths);
        self.shared.clear();
        for ((mut node, depth), keep) in nodes.into_iter().zip(depths).zip(&reached) {
            if *keep {
                for v in node.values_mut() {
                    Self::remap(&map, v);
                }
                self.nodes.push(node);
                self.depths.push(depth);
            }
        }
        map
    }

    /// Renumbers a value held outside the graph after [`compact`](Self::compact);
    /// a reference to a dropped node becomes `None`.
    pub fn remap(map: &[Option<NodeId>], v: &mut Value<X>) {
        if let Value::Node(id) = v {
            match map.get(id.index()).copied().flatten() {
                Some(new) => *id = new,
                None => *v = Value::None,
            }
        }
    }

    fn value_depth(&self, v: &Value<X>) -> u32 {
        match v {
            Value::Node(id) => self.depths.get(id.index()).copied().unwrap_or(0),
            _ => 0,
        }
    }

    /// Raises the depth of `id` to account for `children` newly added to it
    /// through [`get_mut`](Self::get_mut) or [`try_get_mut`](Self::try_get_mut)
    /// (which do not track depth, unlike [`add`](Self::add)). A node holding
    /// itself does not count as deeper.
    pub fn note_children<'v>(
        &mut self,
        id: NodeId,
        children: impl IntoIterator<Item = &'v Value<X>>,
    ) where
        X: 'v,
    {
        let deepest = children
            .into_iter()
            .filter(|v| v.as_node() != Some(id))
            .map(|v| self.value_depth(v))
            .max()
            .unwrap_or(0);
        if let Some(slot) = self.depths.get_mut(id.index()) {
            *slot = (*slot).max(deepest.saturating_add(1));
        }
    }
}

/// Canonical copies of the long strings and bytes (see
/// [`HASHED_EACH_TIME`]) and the big ints an unpickler has used as dict keys
/// and set items (interned as they are inserted), so that equal contents
/// share one `Arc` and [`Key`] can compare them by address: hashing a long
/// string once per creation, not once per use as a key, keeps a pickle that
/// reuses one huge key from costing quadratic time. Shorter strings and
/// bytes are keys by their contents, and are not kept: a state dict's
/// 300,000 names would cost a table of 9 MB. Values never used as keys (a
/// tensor's storage key, its location) are not kept here either.
#[derive(Default)]
pub(super) struct Interner {
    strs: Set<Arc<str>>,
    bytes: Set<Arc<[u8]>>,
    bigs: Set<Arc<BigInt>>,
    /// Addresses of the canonical `Arc`s above (kept alive by them).
    canonical: Set<usize>,
    /// Copies found equal to a canonical one, by address: each kept alive
    /// (so no other takes its address) with its canonical copy, so that a
    /// copy used again (through the memo) is not hashed again.
    str_copies: Copies<str>,
    bytes_copies: Copies<[u8]>,
    big_copies: Copies<BigInt>,
}

/// Copies equal to a canonical `Arc`, by address: each copy with its
/// canonical one.
type Copies<T> = Map<usize, (Arc<T>, Arc<T>)>;

/// Strings and bytes up to this long are keys by their contents (hashing
/// them is as cheap as hashing an address); longer ones, and big ints, are
/// interned and known by address once canonical, so a pickle that reuses one
/// long key hashes it once.
const HASHED_EACH_TIME: usize = 64;

impl Interner {
    /// `v` with its long string, long bytes or big int replaced by the
    /// canonical copy; anything else as it is.
    pub(super) fn intern<X>(&mut self, v: Value<X>) -> Value<X> {
        let canonical = &mut self.canonical;
        match v {
            Value::Str(s) if s.len() > HASHED_EACH_TIME => {
                Value::Str(canon(&mut self.strs, canonical, &mut self.str_copies, s))
            }
            Value::Bytes(b) if b.len() > HASHED_EACH_TIME => {
                Value::Bytes(canon(&mut self.bytes, canonical, &mut self.bytes_copies, b))
            }
            Value::BigInt(i) => {
                Value::BigInt(canon(&mut self.bigs, canonical, &mut self.big_copies, i))
            }
            v => v,
        }
    }
}

fn addr<T: ?Sized>(a: &Arc<T>) -> usize {
    Arc::as_ptr(a).cast::<u8>() as usize
}

/// The canonical copy of `a`'s contents: `a` itself where it is one (known
/// by address among `canonical`), else the one a copy known by its address
/// (`copies`) or by its contents (`set`) has, else `a`, which becomes one.
/// Each `Arc` is hashed by its contents once, however often it is used.
fn canon<T: ?Sized + Hash + Eq>(
    set: &mut Set<Arc<T>>,
    canonical: &mut Set<usize>,
    copies: &mut Copies<T>,
    a: Arc<T>,
) -> Arc<T> {
    if canonical.contains(&addr(&a)) {
        return a;
    }
    if let Some((_, c)) = copies.get(&addr(&a)) {
        return c.clone();
    }
    if let Some(c) = set.get(&a) {
        let c = c.clone();
        copies.insert(addr(&a), (a, c.clone()));
        return c;
    }
    canonical.insert(addr(&a));
    set.insert(a.clone());
    a
}

/// A hashable stand-in for a [`Value`] used as a dict key or set item,
/// following Python's equality where it is cheap to: `True == 1 == 1.0`,
/// `-0.0 == 0`, containers by identity. Strings and bytes up to
/// [`HASHED_EACH_TIME`] long compare by content; longer ones and big ints by
/// address, which is equality of content once they went through one
/// [`Interner`]. `NaN` and extension objects have no key (they equal
/// nothing); nodes compare by identity, and the unpickler's key index sees
/// a tuple the pickle built as the first of equal contents used as a key
/// (`read/tuples.rs`), so tuples compare by their items there.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Key<'v> {
    None,
    Int(i64),
    FloatBits(u64),
    Str(&'v str),
    Bytes(&'v [u8]),
    Interned(usize),
    Node(NodeId),
}

/// 2^63, exactly.
const TWO_63: f64 = (1u64 << 63) as f64;

impl<'v> Key<'v> {
    /// The key for `v`, or `None` if `v` equals nothing else.
    pub(super) fn of<X>(v: &'v Value<X>) -> Option<Key<'v>> {
        Some(match v {
            Value::None => Key::None,
            Value::Bool(b) => Key::Int(i64::from(*b)),
            Value::Int(i) => Key::Int(*i),
            Value::Float(f) if f.is_nan() => return None,
            // Integral floats in i64's range equal the int.
            Value::Float(f) if f.fract() == 0.0 && (-TWO_63..TWO_63).contains(f) => {
                Key::Int(*f as i64)
            }
            Value::Float(f) => Key::FloatBits(f.to_bits()),
            Value::BigInt(b) => Key::Interned(addr(b)),
            Value::Str(s) if s.len() <= HASHED_EACH_TIME => Key::Str(s),
            Value::Bytes(b) if b.len() <= HASHED_EACH_TIME => Key::Bytes(b),
            Value::Str(s) => Key::Interned(addr(s)),
            Value::Bytes(b) => Key::Interned(addr(b)),
            Value::Node(id) => Key::Node(*id),
            Value::Ext(_) => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal long strings and bytes become one canonical `Arc`; short ones
    /// are left as they are (they are keys by content), and either way
    /// equal contents make equal keys and unequal ones unequal keys.
    #[test]
    fn long_contents_are_interned_and_every_key_follows_content() {
        let mut i = Interner::default();
        for len in [3, HASHED_EACH_TIME, HASHED_EACH_TIME + 1, 1000] {
            let long = len > HASHED_EACH_TIME;
            let text = "k".repeat(len);
            let first = i.intern::<()>(Value::str(&text));
            let again = i.intern::<()>(Value::str(&text));
            let (Value::Str(a), Value::Str(b)) = (&first, &again) else {
                panic!("strings stay strings")
            };
            assert_eq!(Arc::ptr_eq(a, b), long, "a string of {len}");
            assert_eq!(Key::of(&first), Key::of(&again), "a string of {len}");
            let other = i.intern::<()>(Value::str(&"j".repeat(len)));
            assert_ne!(Key::of(&first), Key::of(&other), "a string of {len}");
            // The canonical copy itself comes back as it is.
            let same = i.intern::<()>(first.clone());
            assert!(matches!(&same, Value::Str(c) if Arc::ptr_eq(a, c)));
            let bytes = vec![7u8; len];
            let (x, y) = (
                i.intern::<()>(Value::bytes(&bytes)),
                i.intern::<()>(Value::bytes(&bytes)),
            );
            let (Value::Bytes(xa), Value::Bytes(ya)) = (&x, &y) else {
                panic!("bytes stay bytes")
            };
            assert_eq!(Arc::ptr_eq(xa, ya), long, "bytes of {len}");
            assert_eq!(Key::of(&x), Key::of(&y), "bytes of {len}");
            assert_ne!(
                Key::of(&x),
                Key::of(&first),
                "bytes against a string of {len}"
            );
        }
        // The two long strings and the long bytes of each length above.
        assert_eq!((i.strs.len(), i.bytes.len()), (4, 2));
        assert_eq!(i.canonical.len(), 6);
    }

    #[test]
    fn depth_is_one_plus_deepest_child() {
        let mut g: Graph<()> = Graph::new();
        let a = g.tuple(&[Value::Int(1)]);
        let b = g.list(vec![Value::Node(a), Value::None]);
        let c = g.dict(vec![(Value::str("k"), Value::Node(b))]);
        assert_eq!((g.depth(a), g.depth(b), g.depth(c)), (1, 2, 3));
        let d = g.list(Vec::new());
        g.note_children(d, &[Value::Node(c), Value::Node(d)]);
        assert_eq!(g.depth(d), 4);
        g.note_children(d, &[Value::Node(d)]);
        assert_eq!(g.depth(d), 4);
        assert_eq!(g.depth(NodeId(99)), 0);
        assert_eq!(g.len(), 4);
        assert!(g.try_get(NodeId(4)).is_none());
    }

    #[test]
    fn release_frees_what_only_it_holds_and_gives_the_newest_ids_back() {
        let mut g: Graph<()> = Graph::new();
        let live = g.list(Vec::new());
        let shared = g.tuple(vec![Value::Int(1)]);
        g.mark_shared(&Value::Node(shared));
        let inner = g.tuple(vec![Value::Int(2)]);
        let args = g.tuple(vec![Value::Node(shared), Value::Node(inner)]);
        let mut freed = Vec::new();
        g.release_with(&Value::Node(args), |id| freed.push(id));
        freed.sort();
        assert_eq!(freed, [inner, args]);
        // They were the newest nodes: gone, and their ids taken again.
        assert_eq!((g.len(), g.take_released_to()), (2, 2));
        assert_eq!(g.get(shared), &Node::Tuple(vec![Value::Int(1)]));
        assert_eq!(g.list(Vec::new()), inner);
        // A node freed below a live one stays, empty and of depth 0, until
        // the nodes above it go.
        let below = g.tuple(vec![Value::Int(3)]);
        let above = g.tuple(vec![Value::Int(4)]);
        g.release(&Value::Node(below));
        assert_eq!((g.len(), g.depth(below)), (5, 0));
        assert_eq!(g.get(below), &Node::Tuple(Vec::new()));
        g.release(&Value::Node(below));
        g.release(&Value::Node(above));
        assert_eq!(g.len(), 3);
        assert_eq!(g.take_released_to(), 3);
        assert_eq!(g.take_released_to(), usize::MAX);
        assert_eq!(g.depth(live), 1);
    }

    #[test]
    fn int_normalizes_and_keys_follow_python_equality() {
        assert_eq!(Value::<()>::int(BigInt::from(5)), Value::Int(5));
        let big = BigInt::from(1u64 << 63);
        assert_eq!(Value::<()>::int(big.clone()), Value::BigInt(Arc::new(big)));
        let mut interner = Interner::default();
        // Whether `a` and `b`, inserted as keys, are the same key.
        let mut same = |a: Value<()>, b: Value<()>| {
            let (a, b) = (interner.intern(a), interner.intern(b));
            let (ka, kb) = (Key::of(&a), Key::of(&b));
            ka.is_some() && ka == kb
        };
        assert!(same(Value::Bool(true), Value::Int(1)));
        assert!(same(Value::Float(1.0), Value::Int(1)));
        assert!(same(Value::Float(-0.0), Value::Int(0)));
        assert!(!same(Value::Float(0.5), Value::Int(0)));
        assert!(same(Value::str("a"), Value::str("a")));
        assert!(!same(Value::str("a"), Value::bytes(b"a")));
        assert!(!same(Value::str("a"), Value::str("b")));
        let big = || Value::BigInt(Arc::new(BigInt::from(1u64 << 63)));
        assert!(same(big(), big()));
        assert_eq!(Key::of(&Value::<()>::Float(f64::NAN)), None);
        assert_eq!(Key::of(&Value::Ext(())), None);
    }

    #[test]
    fn graph_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Graph<String>>();
        check::<Value<String>>();
    }

    #[test]
    fn compact_keeps_what_the_roots_reach_in_order() {
        let mut g: Graph<()> = Graph::new();
        let garbage = g.tuple(vec![Value::Int(1)]);
        let list = g.list(Vec::new());
        let inner = g.tuple(vec![Value::Int(2), Value::Node(garbage)]);
        // A forward reference and a cycle: the list holds the tuple and itself.
        if let Node::List(items) = g.get_mut(list) {
            items.push(Value::Node(inner));
            items.push(Value::Node(list));
        }
        let unreached = g.tuple(vec![Value::Node(list)]);
        let depth_of_inner = g.depth(inner);
        let map = g.compact([list]);
        assert_eq!(g.len(), 3);
        assert_eq!(map[unreached.index()], None);
        let (l, t, gb) = (
            map[list.index()].unwrap(),
            map[inner.index()].unwrap(),
            map[garbage.index()].unwrap(),
        );
        assert!(gb < l && l < t, "old order kept");
        assert_eq!(g.get(l), &Node::List(vec![Value::Node(t), Value::Node(l)]));
        assert_eq!(g.get(t), &Node::Tuple(vec![Value::Int(2), Value::Node(gb)]));
        assert_eq!(g.depth(t), depth_of_inner);
        let mut outside: Value<()> = Value::Node(unreached);
        Graph::remap(&map, &mut outside);
        assert_eq!(outside, Value::None);
    }
}
