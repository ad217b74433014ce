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
//! its `BUILD`), so it compares by identity, as lists and objects do. A
//! tuple deeper than [`MAX_DEPTH`] (the graph's own depth of the node,
//! whatever the key it is used in) and one holding a value that equals
//! nothing here (a `NaN`, an object) also compare by identity.
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

/// The deepest tuple (its depth in the graph: nested tuples and other
/// containers within) that compares by its items.
pub(super) const MAX_DEPTH: usize = 16;

/// What the machine knows of its tuples as keys.
#[derive(Default)]
pub(super) struct Tuples {
    /// One bit per node id: the tuples the machine built itself. A bit is
    /// cleared when its id is released ([`Tuples::forget`]).
    built: Vec<u64>,
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
    /// Notes that the machine built the tuple `id`.
    pub(super) fn built(&mut self, id: NodeId) {
        let (word, bit) = (id.index() / 64, id.index() % 64);
        if self.built.len() <= word {
            self.built.resize(word + 1, 0);
        }
        self.built[word] |= 1 << bit;
    }

    fn is_built(&self, id: NodeId) -> bool {
        let (word, bit) = (id.index() / 64, id.index() % 64);
        self.built.get(word).is_some_and(|w| w & (1 << bit) != 0)
    }

    /// Forgets the nodes from `from` up to `before`, released (their ids
    /// may name new nodes). None of them is in `canonical`: those are shared.
    pub(super) fn forget(&mut self, from: usize, before: usize) {
        for i in from..before.min(self.built.len() * 64) {
            self.built[i / 64] &= !(1 << (i % 64));
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
    /// most [`MAX_DEPTH`] deep: a tuple's items are less deep than it.
    fn canonical_of<X: Clone>(
        &mut self,
        graph: &mut Graph<X>,
        interner: &mut Interner,
        id: NodeId,
    ) -> NodeId {
        if let Some(&canonical) = self.canonical.get(&id) {
            return canonical;
        }
        if !self.is_built(id) || graph.depth(id) > MAX_DEPTH {
            return id;
        }
        let Some(Node::Tuple(items)) = graph.try_get(id) else {
            return id;
        };
        let items = items.clone();
        let mut contents = Some(Vec::with_capacity(items.len()));
        for item in items {
            let item = match item {
                Value::Node(inner) => {
                    let inner = self.canonical_of(graph, interner, inner);
                    graph.mark_shared(&Value::Node(inner));
                    Some(Item::Node(inner))
                }
                other => Item::of(&interner.intern(other)),
            };
            match (item, contents.as_mut()) {
                (Some(item), Some(so_far)) => so_far.push(item),
                _ => {
                    contents = None;
                    break;
                }
            }
        }
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
