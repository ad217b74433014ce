//! DCP's flattening of a state dict into the items a save writes, as
//! `_traverse.py`'s `traverse_state_dict` walks it: dicts are walked (keys
//! as `str(key)`), lists are walked when they hold tensors, dicts or such
//! lists (`_is_terminal`), and everything else is a leaf under its dotted
//! path.
//!
//! A pickle shares objects: one dict can sit at many paths, and a file of a
//! few hundred bytes can stand for 2^40 of them, which PyTorch's walk (and
//! `dcp.save`) never finishes. So the paths are counted first, in time
//! linear in the distinct objects. Within the walk limit ([`Limit::Paths`](crate::Limit::Paths)),
//! the items are exactly `dcp.save`'s, a shared container expanded at each
//! of its paths, so that PyTorch's planner matches every key. Past it, a
//! container that holds no tensor and is held by several containers is one
//! item wherever it is reached: its value, sharing and all, in one
//! `torch.save`, whose bytes the writer stores once for all its paths
//! ([`write`](super::write)), and which stowage's reader makes one object
//! again (PyTorch's reads a copy per path). A shared container holding a
//! tensor is expanded at each path, and stays refused when its paths are
//! too many.

use crate::checkpoint::pickle::{Node, NodeId, Value};
use crate::checkpoint::value::access::ValueRef;
use crate::checkpoint::value::graph::{dotted, Checkpoint, Object, PathKey, TensorObject};
use crate::error::FormatError;
use crate::{Error, Result};

/// A leaf of the flattened state dict.
pub(super) enum Leaf<'a> {
    Tensor(&'a TensorObject),
    Value(Value<Object>),
}

/// DCP's flattening of the root dict: each leaf with its path, in pickle
/// order (the module docs say what happens to shared containers).
///
/// # Errors
/// [`FormatError::BadObject`] when the root is not a dict or a key is
/// neither a string nor an integer; [`CheckpointError::LimitExceeded`](crate::CheckpointError::LimitExceeded) when
/// the paths to tensors alone exceed the checkpoint's walk limit
/// ([`Checkpoint::set_max_paths`]).
pub(super) fn flatten(ckpt: &Checkpoint) -> Result<Vec<(Vec<PathKey>, Leaf<'_>)>> {
    let Some(root) = ckpt
        .root
        .as_node()
        .filter(|&id| matches!(ckpt.graph.get(id), Node::Dict(_)))
    else {
        return Err(Error::Format(FormatError::BadObject {
            context: "DCP save",
            expected: "a dict at the root (a state dict)",
            found: "another object".into(),
        }));
    };
    let mut shape = Shape::of(ckpt, root);
    // Shared containers are items only where PyTorch's own walk is out of reach.
    if shape.cost(root) > ckpt.max_paths as u64 {
        shape.collapse(ckpt, &ckpt.nodes_holding_tensors());
    }
    let mut out = Vec::new();
    let mut stack = vec![(Vec::new(), &ckpt.root)];
    let mut budget = ckpt.max_paths;
    while let Some((path, v)) = stack.pop() {
        budget = budget
            .checked_sub(path.len() + 1)
            .ok_or_else(|| ckpt.paths_exceeded())?;
        let walked = v.as_node().filter(|id| shape.walked(*id));
        let Some(id) = walked else {
            match v {
                Value::Ext(Object::Tensor(t)) => out.push((path, Leaf::Tensor(t))),
                _ => out.push((path, Leaf::Value(v.clone()))),
            }
            continue;
        };
        match ckpt.graph.get(id) {
            Node::Dict(d) => {
                for (k, x) in d.iter().rev() {
                    let key = match k {
                        Value::Str(s) => s.to_string(),
                        Value::Int(i) => i.to_string(),
                        _ => {
                            return Err(Error::Format(FormatError::BadObject {
                                context: "DCP save",
                                expected: "string or integer dict keys",
                                found: format!(
                                    "a {} key under {}",
                                    ValueRef::new(ckpt, k).kind().name(),
                                    if path.is_empty() {
                                        "the root".to_owned()
                                    } else {
                                        dotted(&path)
                                    }
                                ),
                            }))
                        }
                    };
                    let mut p = path.clone();
                    p.push(PathKey::Key(key));
                    stack.push((p, x));
                }
            }
            Node::List(l) => {
                for (i, x) in l.iter().enumerate().rev() {
                    let mut p = path.clone();
                    p.push(PathKey::Index(i as i64));
                    stack.push((p, x));
                }
            }
            // `Shape` walks dicts and lists only.
            _ => {}
        }
    }
    Ok(out)
}

/// What the walk would do at each node reachable from the root through
/// dicts and lists, found in one pass in post-order
/// ([`Checkpoint::post_order`]): whether a
/// list is `_is_terminal`, how many walked containers hold a node, and the
/// cost of walking a node at every path below it, as the walk charges it (a
/// visit at depth `d` costs `d + 1`).
struct Shape {
    /// For each node: a dict, or a list that is not terminal.
    walked: Vec<bool>,
    /// For each node: the places in walked containers that hold it (at most 2 counted).
    held: Vec<u8>,
    /// The nodes, each after those it holds (but where one holds itself).
    order: Vec<NodeId>,
    /// For each walked node: the visits of walking it (itself included), and
    /// the sum of their depths below it; `u64::MAX` (saturated) when it
    /// reaches itself.
    visits: Vec<u64>,
    depths: Vec<u64>,
}

impl Shape {
    fn of(ckpt: &Checkpoint, root: NodeId) -> Shape {
        let n = ckpt.graph.len();
        let order = ckpt.post_order([root], |node, kids| {
            kids.extend(items(node).filter_map(Value::as_node));
        });
        let at = ckpt.positions(&order);
        let mut s = Shape {
            walked: vec![false; n],
            held: vec![0; n],
            order: Vec::new(),
            visits: vec![0; n],
            depths: vec![0; n],
        };
        for (i, &id) in order.iter().enumerate() {
            // A node after `id` in the order holds it: a cycle back.
            let open = |c: NodeId| at.get(c.index()).is_some_and(|&j| j > i);
            let node = ckpt.graph.get(id);
            // `_is_terminal`: no tensor, no dict, no list that is walked (a
            // list that holds itself adds nothing).
            let walked = match node {
                Node::Dict(_) => true,
                Node::List(l) => l.iter().any(|v| match v {
                    Value::Ext(Object::Tensor(_)) => true,
                    Value::Node(c) => match ckpt.graph.get(*c) {
                        Node::Dict(_) => true,
                        Node::List(_) => !open(*c) && s.walked[c.index()],
                        _ => false,
                    },
                    _ => false,
                }),
                _ => false,
            };
            s.walked[id.index()] = walked;
            if !walked {
                continue;
            }
            let (mut visits, mut depths) = (1u64, 0u64);
            for v in items(node) {
                if let Some(c) = v.as_node() {
                    s.held[c.index()] = s.held[c.index()].saturating_add(1).min(2);
                }
                let (cv, cd) = match v.as_node() {
                    Some(c) if open(c) => (u64::MAX, u64::MAX),
                    Some(c) if s.walked[c.index()] => (s.visits[c.index()], s.depths[c.index()]),
                    _ => (1, 0),
                };
                visits = visits.saturating_add(cv);
                depths = depths.saturating_add(cd).saturating_add(cv);
            }
            s.visits[id.index()] = visits;
            s.depths[id.index()] = depths;
        }
        s.order = order;
        s
    }

    /// Makes each container that holds no tensor (`holds`, by node) and is
    /// held in several places a leaf, and walks a list only when it holds a
    /// tensor, a dict or a list still walked: `_is_terminal` of the state
    /// dict PyTorch's planner rebuilds from the items, so that the keys it
    /// looks for are those written.
    fn collapse(&mut self, ckpt: &Checkpoint, holds: &[bool]) {
        let kept = |s: &Shape, c: NodeId| s.held[c.index()] <= 1 || holds[c.index()];
        for i in 0..self.order.len() {
            let id = self.order[i];
            let walked = kept(self, id)
                && match ckpt.graph.get(id) {
                    Node::Dict(_) => true,
                    Node::List(l) => l.iter().any(|v| match v {
                        Value::Ext(Object::Tensor(_)) => true,
                        Value::Node(c) => match ckpt.graph.get(*c) {
                            Node::Dict(_) => kept(self, *c),
                            Node::List(_) => self.walked[c.index()],
                            _ => false,
                        },
                        _ => false,
                    }),
                    _ => false,
                };
            self.walked[id.index()] = walked;
        }
    }

    fn walked(&self, id: NodeId) -> bool {
        self.walked.get(id.index()).copied().unwrap_or(false)
    }

    /// What walking `id` at every path costs, from depth 0.
    fn cost(&self, id: NodeId) -> u64 {
        self.visits[id.index()].saturating_add(self.depths[id.index()])
    }
}

/// What the walk goes through in a node: a dict's values, a list's items.
fn items(node: &Node<Object>) -> impl Iterator<Item = &Value<Object>> {
    let entries = match node {
        Node::Dict(d) => &d[..],
        _ => &[],
    };
    let list = match node {
        Node::List(l) => &l[..],
        _ => &[],
    };
    entries.iter().map(|(_, v)| v).chain(list)
}
