//! Tuples as dict keys and set items, compared by their items as Python
//! compares them: `{(1, 'a'): 2, (1, 'a'): 3}` (two tuple objects) is one
//! key, and `(True,) == (1.0,)`.
//!
//! A dict's entries keep the key objects the pickle gave (Python keeps the
//! first of equal keys in a dict, and a key equal to one in another dict is
//! its own object): only the key *index* sees a tuple as its canonical
//! node, the first tuple of equal contents used as a key.
//!
//! Only tuples the machine built itself (`TUPLE`, `TUPLE1`-`TUPLE3`,
//! `EMPTY_TUPLE`) compare by their items: a hook's node may be a stand-in
//! for an object built later (an empty tuple that becomes a numpy dtype at
//! its `BUILD`), so it compares by identity, as lists, sets and objects do
//! (Python compares a frozenset within a tuple by its items, and any item
//! first by identity: `(x,) == (x,)` for the same `NaN` or object, which
//! here, having no identity, equal nothing). A tuple of tuples nested
//! deeper than [`MAX_DEPTH`] (its height, fixed when it is built, whatever
//! the key it is used in) and one holding a value that equals nothing here
//! also compare by identity.
//!
//! A key is registered before it is indexed: the machine registers the keys
//! it inserts, and the keys a hook added to a dict or set before the index
//! takes them in (when its count disagrees with the entries', at the
//! machine's next insert), so a key's canonical node does not change once
//! indexed. (A hook that replaced an entry's key, keeping the count, would
//! have it indexed as itself; no hook of this project does.)
//!
//! Each tuple's contents are read once: its canonical node is kept by its
//! id, and its items' long strings, bytes and big ints go through the
//! interner (compared by address), so a huge tuple used as a key again and
//! again costs its length once. The tuples so kept, and the nodes they hold,
//! are marked shared: no release frees them, so their ids never name
//! another node.

use std::sync::Arc;

use super::super::value::{Graph, Interner, Key, Node, NodeId, Value};
use super::super::Map;

/// The highest tuple (tuples in tuples; other nodes within count as
/// items) that compares by its items.
pub(super) const MAX_DEPTH: u8 = 16;

/// What the machine knows of its tuples as keys.
#[derive(Default)]
pub(super) struct Tuples {
    /// One byte per node id: the height of each tuple the machine built
    /// itself (1 and up: a tuple holding no tuple the machine built is 1;
    /// saturating), 0 for any other node. Cleared when an id is released
    /// ([`Tuples::forget`]).
    heights: Vec<u8>,
    /// Each tuple used as a key (or within one), with its canonical node
    /// (itself where it compares by identity).
    canonical: Map<NodeId, NodeId>,
    /// The canonical nodes by their contents.
    by_contents: Map<Vec<Item>, NodeId>,
}

/// An item of a tuple compared by its items, as [`Key`] compares values,
/// owned; a tuple within by its canonical node.
#[derive(PartialEq, Eq, Hash)]
enum Item {
    None,
    Int(i64),
    FloatBits(u64),
    Str(Arc<str>),
    Bytes(Arc<[u8]>),
    Interned(usize),
    Node(NodeId),
}

impl Tuples {
    /// The height a tuple of `items` the machine builds has.
    pub(super) fn height_of<X>(&self, items: &[Value<X>]) -> u8 {
        let below = items
            .iter()
            .filter_map(Value::as_node)
            .map(|inner| self.height(inner))
            .max()
            .unwrap_or(0);
        below.saturating_add(1)
    }

    /// Notes that the machine built the tuple `id`, of `height`
    /// ([`Tuples::height_of`] its items).
    pub(super) fn built(&mut self, id: NodeId, height: u8) {
        if self.heights.len() <= id.index() {
            self.heights.resize(id.index() + 1, 0);
        }
        self.heights[id.index()] = height;
    }

    /// The height of the tuple the machine built at `id`, 0 for another
    /// node.
    fn height(&self, id: NodeId) -> u8 {
        self.heights.get(id.index()).copied().unwrap_or(0)
    }

    /// Forgets the nodes from `from` up to `before`, released (their ids
    /// may name new nodes). None of them is in `canonical`: those are shared.
    pub(super) fn forget(&mut self, from: usize, before: usize) {
        let end = before.min(self.heights.len());
        if from < end {
            self.heights[from..end].fill(0);
        }
    }

    /// `v`'s key for a dict's or set's index: [`Key::of`], with a tuple
    /// registered by [`Tuples::register`] as its canonical node.
    pub(super) fn key<'v, X>(&self, v: &'v Value<X>) -> Option<Key<'v>> {
        match Key::of(v)? {
            Key::Node(id) => Some(Key::Node(self.canonical.get(&id).copied().unwrap_or(id))),
            key => Some(key),
        }
    }

    /// Registers `v`, about to be a dict key or set item: a tuple gets its
    /// canonical node, which [`Tuples::key`] then gives.
    pub(super) fn register<X: Clone>(
        &mut self,
        graph: &mut Graph<X>,
        interner: &mut Interner,
        v: &Value<X>,
    ) {
        if let Value::Node(id) = *v {
            self.canonical_of(graph, interner, id);
        }
    }

    /// The canonical node of `id`: the first built tuple of equal contents
    /// registered, `id` itself where it compares by identity. Recurses at
    /// most [`MAX_DEPTH`] deep: it descends only into the tuples the machine
    /// built, each lower than the one holding it.
    fn canonical_of<X: Clone>(
        &mut self,
        graph: &mut Graph<X>,
        interner: &mut Interner,
        id: NodeId,
    ) -> NodeId {
        if let Some(&canonical) = self.canonical.get(&id) {
            return canonical;
        }
        if !(1..=MAX_DEPTH).contains(&self.height(id)) {
            return id;
        }
        let Some(Node::Tuple(items)) = graph.try_get(id) else {
            return id;
        };
        // `None` at the first item that equals nothing.
        let contents: Option<Vec<Item>> = items
            .clone()
            .into_iter()
            .map(|item| match item {
                Value::Node(inner) => {
                    let inner = self.canonical_of(graph, interner, inner);
                    graph.mark_shared(&Value::Node(inner));
                    Some(Item::Node(inner))
                }
                other => Item::of(&interner.intern(other)),
            })
            .collect();
        let canonical = match contents {
            Some(contents) => *self.by_contents.entry(contents).or_insert(id),
            None => id,
        };
        graph.mark_shared(&Value::Node(id));
        graph.mark_shared(&Value::Node(canonical));
        self.canonical.insert(id, canonical);
        canonical
    }
}

impl Item {
    /// The item an interned value other than a node is, or `None` if it
    /// equals nothing.
    fn of<X>(v: &Value<X>) -> Option<Item> {
        Some(match (Key::of(v)?, v) {
            (Key::None, _) => Item::None,
            (Key::Int(i), _) => Item::Int(i),
            (Key::FloatBits(f), _) => Item::FloatBits(f),
            (Key::Interned(a), _) => Item::Interned(a),
            (Key::Str(_), Value::Str(s)) => Item::Str(s.clone()),
            (Key::Bytes(_), Value::Bytes(b)) => Item::Bytes(b.clone()),
            _ => return None,
        })
    }
}
