//! In-place writes under autograd, as PyTorch records them.
//!
//! - A write to a leaf that requires grad, or to a view of one, is refused
//!   while recording.
//! - In-place arithmetic (`add_`, `mul_`) on a computed tensor replaces the
//!   tensor's history with the operation's node, whose first input is the
//!   history it had.
//! - Through a view of a computed tensor, the *base* is rebased: its history
//!   becomes a `CopySlices` node, which sends the base's gradient on with the
//!   view's region passed through the operation's formula, and the view
//!   becomes a view of that new history (`AsStridedBackward0`). Every other
//!   view of the base notices, the next time it is used, that its base has a
//!   new history, and gets a node on it too (PyTorch does this by the views'
//!   version counter).

use crate::error::TensorError;
use std::sync::{Arc, Mutex};

use super::backward::{Backward, ViewFn};
use super::{is_grad_enabled, view_of_leaf, AutogradMeta, Edge, GradRole, Node};
use crate::{Error, Result, Tensor};

/// What a view of a computed tensor knows of its base.
pub(crate) struct ViewOf {
    /// The computed tensor this is a view of (the first up the chain of
    /// views that is not itself a view).
    base: Arc<AutogradMeta>,
    /// The base's shape.
    base_shape: Vec<usize>,
    /// This view's layout as a function of the base's (contiguous) layout.
    view: ViewFn,
    /// The base's node this view's node stands on.
    built_on: Mutex<Arc<Node>>,
}

impl ViewOf {
    /// The base of the view `node` just recorded on `inputs`, when its input
    /// is a computed tensor or a view of one (a view of a leaf needs none:
    /// writes through it are refused).
    pub(super) fn of(node: &Arc<Node>, inputs: &[&Tensor]) -> Option<ViewOf> {
        let Backward::View { shape, view } = &node.backward else {
            return None;
        };
        let [input] = inputs else { return None };
        let meta = input.autograd.as_ref()?;
        if let Some(parent) = &meta.view_of {
            // A view of a view: of the same base, the layout functions composed.
            let (outer, inner) = (Arc::clone(&parent.view), Arc::clone(view));
            let view: ViewFn = Arc::new(move |l| inner(&outer(l)?));
            return Some(ViewOf {
                base: Arc::clone(&parent.base),
                base_shape: parent.base_shape.clone(),
                view,
                built_on: Mutex::new(parent.base.grad_fn()?),
            });
        }
        let base_node = meta.grad_fn()?;
        if base_node.backward.is_view() {
            return None; // a view of a leaf, or an `as_strided` view
        }
        Some(ViewOf {
            base: Arc::clone(meta),
            base_shape: shape.clone(),
            view: Arc::clone(view),
            built_on: Mutex::new(base_node),
        })
    }

    /// Gives the view (`meta`) a node on its base's history when the base
    /// was written in place since its node was made.
    pub(super) fn refresh(&self, meta: &AutogradMeta) {
        let Some(current) = self.base.grad_fn() else {
            return;
        };
        let mut built = self.built_on.lock().unwrap_or_else(|e| e.into_inner());
        if !Arc::ptr_eq(&current, &built) {
            meta.set_grad_fn(self.view_node(&current));
            *built = current;
        }
    }

    /// The view's node on the base's history `base`.
    fn view_node(&self, base: &Arc<Node>) -> Arc<Node> {
        Arc::new(Node::on(
            "AsStridedBackward0",
            Backward::View {
                shape: self.base_shape.clone(),
                view: Arc::clone(&self.view),
            },
            vec![Some(Edge::Node(Arc::clone(base)))],
        ))
    }

    /// Records the in-place operation `backward` made through the view
    /// `meta` with `operand`: the base's history becomes a `CopySlices` node
    /// over it (PyTorch's name for it), and the view a view of that.
    fn rebase(&self, meta: &AutogradMeta, backward: Backward, operand: Option<&Tensor>) {
        let Some(current) = self.base.grad_fn() else {
            return;
        };
        let inputs = vec![Some(Edge::Node(current)), operand.and_then(Tensor::edge)];
        let copy = Arc::new(Node::on(
            "CopySlices",
            Backward::CopySlices {
                shape: self.base_shape.clone(),
                view: Arc::clone(&self.view),
                inner: Box::new(backward),
            },
            inputs,
        ));
        self.base.set_grad_fn(Arc::clone(&copy));
        meta.set_grad_fn(self.view_node(&copy));
        *self.built_on.lock().unwrap_or_else(|e| e.into_inner()) = copy;
    }
}

/// What `meta`'s tensor is in the graph, for a write to it; `None` for a
/// computed tensor that is not a view (whose arithmetic is recorded).
fn role(meta: &AutogradMeta) -> Option<GradRole> {
    match meta.grad_fn() {
        None => Some(GradRole::Leaf),
        Some(node) if view_of_leaf(&node) => Some(GradRole::ViewOfLeaf),
        Some(node) if node.backward.is_view() => Some(GradRole::ViewOfComputed),
        Some(_) => None,
    }
}

impl Tensor {
    /// Refuses an in-place write while recording to a tensor that requires
    /// grad, for an operation stowage does not record in place.
    pub(crate) fn check_inplace(&self, op: &'static str) -> Result<()> {
        let Some(meta) = &self.autograd else {
            return Ok(());
        };
        if !is_grad_enabled() {
            return Ok(());
        }
        let role = role(meta).unwrap_or(GradRole::Computed);
        Err(Error::Tensor(TensorError::InPlaceRequiresGrad { op, role }))
    }

    /// Whether in-place arithmetic on this tensor with `operand` is to be
    /// recorded ([`record_inplace`](Self::record_inplace) after the write):
    /// while recording, on a computed tensor or a view of one. Refuses the
    /// writes PyTorch refuses (to a leaf, or a view of one) and those stowage
    /// does not record ([`GradRole`]).
    pub(crate) fn check_inplace_arith(
        &self,
        op: &'static str,
        operand: Option<&Tensor>,
    ) -> Result<bool> {
        if !is_grad_enabled() {
            return Ok(false);
        }
        let Some(meta) = &self.autograd else {
            return match operand {
                Some(t) if t.requires_grad() => {
                    Err(Error::Tensor(TensorError::InPlaceRequiresGrad {
                        op,
                        role: GradRole::NoGrad,
                    }))
                }
                _ => Ok(false),
            };
        };
        match role(meta) {
            None => Ok(true),
            Some(GradRole::ViewOfComputed) if meta.view_of.is_some() => Ok(true),
            Some(role) => Err(Error::Tensor(TensorError::InPlaceRequiresGrad { op, role })),
        }
    }

    /// Records an in-place operation on this computed tensor, or view of
    /// one, once it has written ([`check_inplace_arith`](Self::check_inplace_arith)
    /// said it records): its history (a view's: its base's) becomes
    /// `backward`'s node over the history it had. Operations recorded
    /// earlier keep the node they used.
    pub(crate) fn record_inplace(
        &self,
        name: &'static str,
        backward: Backward,
        operand: Option<&Tensor>,
    ) {
        let Some(meta) = &self.autograd else { return };
        match &meta.view_of {
            Some(view) => view.rebase(meta, backward, operand),
            None => {
                let mut inputs = vec![self];
                inputs.extend(operand);
                meta.set_grad_fn(Arc::new(Node::new(name, backward, &inputs)));
            }
        }
    }
}
