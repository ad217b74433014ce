//! The backward pass: walks the recorded graph from an output to its leaves.
//!
//! Each tensor's gradient is complete once every node that used it has sent
//! its share, so the walk first counts, for every tensor in the graph, how many
//! recorded uses it has, then processes a tensor when that count reaches zero
//! (Kahn's topological order). Shares arriving from several uses are summed.
//! Leaves add the total to their `grad`, on a storage of the gradient's own.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{no_grad, AutogradMeta};
use crate::{Result, Tensor};

type Key = *const AutogradMeta;

fn key(meta: &Arc<AutogradMeta>) -> Key {
    Arc::as_ptr(meta)
}

/// Backward from `root` (which requires grad) with `grad` as its gradient.
pub(super) fn run(root: &Tensor, grad: Tensor) -> Result<()> {
    let Some(root_meta) = &root.autograd else {
        return Err(crate::Error::NoGradFn);
    };
    let _no_grad = no_grad();

    // Uses of each tensor by the nodes reachable from the root.
    let mut uses: HashMap<Key, usize> = HashMap::new();
    let mut seen: HashSet<Key> = HashSet::from([key(root_meta)]);
    let mut stack = vec![Arc::clone(root_meta)];
    while let Some(meta) = stack.pop() {
        let Some(node) = &meta.grad_fn else { continue };
        for input in node.inputs.iter().flatten() {
            *uses.entry(key(input)).or_default() += 1;
            if seen.insert(key(input)) {
                stack.push(Arc::clone(input));
            }
        }
    }

    let mut pending: HashMap<Key, Tensor> = HashMap::from([(key(root_meta), grad)]);
    let mut ready = vec![Arc::clone(root_meta)];
    while let Some(meta) = ready.pop() {
        // A tensor none of whose uses sent a gradient (an integer path, say).
        let Some(grad) = pending.remove(&key(&meta)) else {
            continue;
        };
        let Some(node) = &meta.grad_fn else {
            accumulate(&meta, grad)?;
            continue;
        };
        let needs: Vec<bool> = node.inputs.iter().map(Option::is_some).collect();
        let grads = node.backward.apply(&grad, &needs)?;
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
                    ready.push(Arc::clone(input));
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
        None => *slot = Some(grad.deep_clone()?),
    }
    Ok(())
}
