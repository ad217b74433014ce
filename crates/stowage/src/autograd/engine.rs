//! The backward pass: walks the recorded graph from an output to its leaves.
//!
//! The graph's vertices are the recorded nodes and the leaves; an edge runs
//! from a node to the node (or leaf) each input came from, as it was when the
//! node was recorded. Each vertex's gradient is complete once every node that
//! used it has sent its share, so the walk first counts, for every vertex,
//! how many recorded uses it has, then processes a vertex when that count
//! reaches zero (Kahn's topological order). Shares arriving from several uses
//! are summed. Leaves add the total to their `grad`, on a storage of the
//! gradient's own. Before a node's formula runs, the tensors it saved are
//! checked to be unwritten since ([`Node::check_saved`]).

use crate::error::TensorError;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{no_grad, AutogradMeta, Edge, Node};
use crate::{Result, Tensor};

/// A vertex's identity: the address of its node or leaf state.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Leaf(*const AutogradMeta),
    Node(*const Node),
}

fn key(edge: &Edge) -> Key {
    match edge {
        Edge::Leaf(meta) => Key::Leaf(meta.as_ptr()),
        Edge::Node(node) => Key::Node(Arc::as_ptr(node)),
    }
}

/// Backward from `root` (which requires grad) with `grad` as its gradient.
pub(super) fn run(root: &Tensor, grad: Tensor) -> Result<()> {
    let Some(root) = root.edge() else {
        return Err(crate::Error::Tensor(TensorError::NoGradFn));
    };
    let _no_grad = no_grad();

    // Uses of each vertex by the nodes reachable from the root.
    let mut uses: HashMap<Key, usize> = HashMap::new();
    let mut seen: HashSet<Key> = HashSet::from([key(&root)]);
    let mut stack = vec![root.clone()];
    while let Some(edge) = stack.pop() {
        let Edge::Node(node) = &edge else { continue };
        for input in node.inputs.iter().flatten() {
            *uses.entry(key(input)).or_default() += 1;
            if seen.insert(key(input)) {
                stack.push(input.clone());
            }
        }
    }

    let mut pending: HashMap<Key, Tensor> = HashMap::from([(key(&root), grad)]);
    let mut ready = vec![root];
    while let Some(edge) = ready.pop() {
        // A vertex none of whose uses sent a gradient (an integer path, say).
        let Some(grad) = pending.remove(&key(&edge)) else {
            continue;
        };
        let node = match &edge {
            Edge::Leaf(meta) => {
                if let Some(meta) = meta.upgrade() {
                    accumulate(&meta, grad)?;
                }
                continue;
            }
            Edge::Node(node) => node,
        };
        node.check_saved()?;
        let grads = node.backward.apply(&grad, &node.needs())?;
        for (input, g) in node.inputs.iter().zip(grads) {
            let Some(input) = input else { continue };
            let k = key(input);
            if let Some(g) = g {
                let total = match pending.remove(&k) {
                    Some(sum) => sum.add(&g)?,
                    None => g,
                };
                pending.insert(k, total);
            }
            if let Some(n) = uses.get_mut(&k) {
                *n -= 1;
                if *n == 0 {
                    ready.push(input.clone());
                }
            }
        }
    }
    Ok(())
}

/// Adds `grad` to a leaf's gradient; the first gradient is copied onto a new
/// storage, so it never aliases the data, the output, or another leaf's grad.
fn accumulate(meta: &AutogradMeta, grad: Tensor) -> Result<()> {
    let mut slot = meta.grad_slot();
    match &*slot {
        // In place, so a handle taken from `grad()` sees the new total.
        Some(existing) => {
            existing.add_(&grad)?;
        }
        // Under the engine's `no_grad`, so the copy records nothing.
        None => *slot = Some(Box::new(grad.deep_clone()?)),
    }
    Ok(())
}
