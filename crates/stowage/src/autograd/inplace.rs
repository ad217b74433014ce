//! In-place writes under autograd, as PyTorch records them.
//!
//! - A write to a leaf that requires grad, or to a view of one, is refused
//!   while recording.
//! - In-place arithmetic (`add_`, `mul_`, `copy_`, `fill_`) on a computed
//!   tensor replaces the tensor's history with the operation's node, whose
//!   first input is the history it had. On a tensor that does not require
//!   grad, with an operand that does, the node's first input is nothing: the
//!   tensor starts requiring grad (`acc.add_(x)`).
//! - Through a view, the *base* is rebased: its history becomes a
//!   `CopySlices` node, which sends the base's gradient on with the view's
//!   region passed through the operation's formula, and the view becomes a
//!   view of that new history (`AsStridedBackward0`). Every other view of
//!   the base notices, the next time it is used, that its base has a new
//!   history, and gets a node on it too (PyTorch does this by the views'
//!   version counter). So every view knows its base ([`ViewOf`]), whether
//!   or not anything requires grad when it is made.

use crate::error::TensorError;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::backward::{Backward, ViewFn};
use super::{can_require_grad, is_grad_enabled, view_of_leaf, AutogradMeta, Edge, GradRole, Node};
use crate::layout::Layout;
use crate::{Error, Result, Tensor};

/// Where a view lies in its base.
enum Geometry {
    /// Made by view operations: the view's layout as a function of the
    /// base's.
    Op(ViewFn),
    /// Made by `as_strided` (or a view of such a view): fixed places in the
    /// storage, `view`, over the base's places.
    Strided { view: Layout },
}

/// What a view knows of its base (PyTorch's `_base` and creation meta).
pub(crate) struct ViewOf {
    /// The tensor this is a view of (the first up the chain of views that
    /// is not itself a view).
    base: Arc<AutogradMeta>,
    /// The base's layout when the view was made.
    base_layout: Layout,
    geometry: Geometry,
    /// One of several views one call made (or a view of one).
    multi_output: bool,
    /// Made under `no_grad` (or a view of such a view).
    no_grad: bool,
    /// The base's node this view's node stands on (`None`: the base had no
    /// history).
    built_on: Mutex<Option<Arc<Node>>>,
}

impl ViewOf {
    /// The link of a view of `input` at `layout`, made by a view operation
    /// (`view`: its layout from `input`'s) or by `as_strided` (`None`).
    pub(super) fn link(
        input: &Tensor,
        layout: &Layout,
        view: Option<ViewFn>,
        multi_output: bool,
    ) -> ViewOf {
        let no_grad = !is_grad_enabled();
        let strided = || Geometry::Strided {
            view: layout.clone(),
        };
        let meta = input.autograd.get();
        if let Some(parent) = &meta.view_of {
            // A view of a view: of the same base, the layouts composed.
            let geometry = match (&parent.geometry, view) {
                (Geometry::Op(outer), Some(inner)) => {
                    let outer = Arc::clone(outer);
                    Geometry::Op(Arc::new(move |l: &Layout| inner(&outer(l)?)))
                }
                _ => strided(),
            };
            return ViewOf {
                base: Arc::clone(&parent.base),
                base_layout: parent.base_layout.clone(),
                geometry,
                multi_output: parent.multi_output || multi_output,
                no_grad: parent.no_grad || no_grad,
                built_on: Mutex::new(parent.base.grad_fn()),
            };
        }
        ViewOf {
            base: Arc::clone(meta),
            base_layout: input.layout.clone(),
            geometry: view.map_or_else(strided, Geometry::Op),
            multi_output,
            no_grad,
            built_on: Mutex::new(meta.grad_fn()),
        }
    }

    /// Gives the view (`meta`) a node on its base's history when the base
    /// was written in place since the view's node was made. A view made
    /// under `no_grad` gets a node that refuses backward, as PyTorch refuses
    /// to use such a view.
    pub(super) fn refresh(&self, meta: &AutogradMeta) {
        // Locked first, so a rebase on another thread is seen whole.
        let mut built = self.built_on.lock().unwrap_or_else(|e| e.into_inner());
        let Some(current) = self.base.grad_fn() else {
            return;
        };
        if !built.as_ref().is_some_and(|b| Arc::ptr_eq(b, &current)) {
            meta.set_grad_fn(self.view_node(&current));
            *built = Some(current);
        }
    }

    /// The view's node on the base's history `base`.
    fn view_node(&self, base: &Arc<Node>) -> Arc<Node> {
        let backward = match &self.geometry {
            _ if self.no_grad => Backward::NoGradView,
            Geometry::Op(view) => Backward::View {
                input: self.base_layout.clone(),
                view: Arc::clone(view),
            },
            Geometry::Strided { view } => Backward::AsStrided {
                input: self.base_layout.clone(),
                output: view.clone(),
            },
        };
        Arc::new(Node::on(
            "AsStridedBackward0",
            backward,
            vec![Some(Edge::Node(Arc::clone(base)))],
        ))
    }

    /// Why a write through this view that would be recorded is refused, if
    /// it is.
    fn refusal(&self) -> Option<GradRole> {
        if self.base.became_leaf.load(Ordering::Relaxed) {
            Some(GradRole::ViewOfLeaf)
        } else if self.multi_output {
            Some(GradRole::MultiOutputView)
        } else if self.no_grad {
            Some(GradRole::NoGradView)
        } else if let Geometry::Strided { .. } = self.geometry {
            Some(GradRole::StridedView)
        } else {
            None
        }
    }

    /// Records the in-place operation `backward` made through the view
    /// `meta` with `operand`: the base's history becomes a `CopySlices` node
    /// over the history it had (none, for a base that did not require grad),
    /// and the view a view of that.
    fn rebase(&self, meta: &AutogradMeta, backward: Backward, operand: Option<&Tensor>) {
        let Geometry::Op(view) = &self.geometry else {
            return; // refused before the write (`refusal`)
        };
        // The operand's edge before the lock: the operand may be this view.
        let operand = operand.and_then(Tensor::edge);
        let mut built = self.built_on.lock().unwrap_or_else(|e| e.into_inner());
        let inputs = vec![self.base.grad_fn().map(Edge::Node), operand];
        let copy = Arc::new(Node::on(
            "CopySlices",
            Backward::CopySlices {
                base: self.base_layout.clone(),
                view: Arc::clone(view),
                inner: Box::new(backward),
            },
            inputs,
        ));
        self.base.set_grad_fn(Arc::clone(&copy));
        meta.set_grad_fn(self.view_node(&copy));
        *built = Some(copy);
    }
}

/// What a tensor that requires grad is in the graph, for a write to it;
/// `None` for a computed tensor that is not a view (whose arithmetic is
/// recorded).
fn role(meta: &AutogradMeta) -> Option<GradRole> {
    match meta.grad_fn() {
        None => Some(GradRole::Leaf),
        // Recorded as a view but a fresh result (`matmul`'s, `reshape`'s
        // copy): computed, as in ATen.
        Some(_) if meta.view_of.is_none() => None,
        Some(node) if view_of_leaf(&node) => Some(GradRole::ViewOfLeaf),
        Some(node) if node.backward.is_view() => Some(GradRole::ViewOfComputed),
        Some(_) => None,
    }
}

impl Tensor {
    /// Refuses an in-place write while recording to a tensor that requires
    /// grad, for an operation stowage does not record in place.
    pub(crate) fn check_inplace(&self, op: &'static str) -> Result<()> {
        if !is_grad_enabled() || !self.requires_grad() {
            return Ok(());
        }
        let role = role(self.autograd.get()).unwrap_or(GradRole::Computed);
        Err(Error::Tensor(TensorError::InPlaceRequiresGrad { op, role }))
    }

    /// Whether in-place arithmetic on this tensor with `operand` is to be
    /// recorded ([`record_inplace`](Self::record_inplace) after the write):
    /// while recording, on a computed tensor or a view of one, or on a
    /// tensor that does not require grad with an operand that does. Refuses
    /// the writes PyTorch refuses (to a leaf or a view of one, through one
    /// of several views, through a view made under `no_grad`) and those
    /// stowage does not record ([`GradRole`]).
    pub(crate) fn check_inplace_arith(
        &self,
        op: &'static str,
        operand: Option<&Tensor>,
    ) -> Result<bool> {
        if !is_grad_enabled() {
            return Ok(false);
        }
        let refuse = |role| Err(Error::Tensor(TensorError::InPlaceRequiresGrad { op, role }));
        // A handle without a state is a tensor's only one, of no base.
        let Some(meta) = self.autograd.made() else {
            let starts = operand.is_some_and(Tensor::requires_grad) && can_require_grad(self.dtype);
            return Ok(starts);
        };
        if !meta.requires_grad() {
            // It starts requiring grad when the operand does.
            if !operand.is_some_and(Tensor::requires_grad) || !can_require_grad(self.dtype) {
                return Ok(false);
            }
            if meta.became_leaf.load(Ordering::Relaxed) {
                return refuse(GradRole::Leaf); // an older handle of a leaf
            }
            return meta
                .view_of
                .as_deref()
                .and_then(ViewOf::refusal)
                .map_or(Ok(true), refuse);
        }
        match (role(meta), &meta.view_of) {
            (None, _) => Ok(true),
            (Some(GradRole::ViewOfComputed), Some(view)) => view.refusal().map_or(Ok(true), refuse),
            (Some(role), _) => refuse(role),
        }
    }

    /// Records an in-place operation on this tensor, or through this view,
    /// once it has written ([`check_inplace_arith`](Self::check_inplace_arith)
    /// said it records): its history (a view's: its base's) becomes
    /// `backward`'s node over the history it had. Operations recorded
    /// earlier keep the node they used.
    pub(crate) fn record_inplace(
        &self,
        name: &'static str,
        backward: Backward,
        operand: Option<&Tensor>,
    ) {
        let meta = self.autograd.get();
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
