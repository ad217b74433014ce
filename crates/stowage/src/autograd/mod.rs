//! Gradients: reverse-mode automatic differentiation over stowage tensors.
//!
//! A tensor with a gradient holds two blocks of data: its own storage, and
//! its gradient's. `t.untyped_storage()` is always the data's; the gradient
//! is a tensor of its own, on a storage of its own, reached through
//! [`Tensor::grad`]. PyTorch's documented example:
//!
//! ```
//! use stowage::{DType, Tensor};
//! # fn main() -> stowage::Result<()> {
//! let t = Tensor::zeros(&[3], DType::Float32)?.with_requires_grad(true)?;
//! t.sum()?.backward()?;
//! let grad = t.grad().expect("a leaf that took part gets a gradient");
//! assert!(t.untyped_storage().tolist()?.iter().all(|&b| b == 0));
//! assert_eq!(grad.to_vec::<f32>()?, [1.0, 1.0, 1.0]);
//! assert_ne!(grad.data_ptr(), t.data_ptr());
//! # Ok(()) }
//! ```
//!
//! # The model
//! - A **leaf** is a tensor made by a constructor (or loaded) on which
//!   `requires_grad` was set. Gradients accumulate into leaves, across
//!   `backward` calls, until [`Tensor::set_grad`]`(None)` or
//!   [`Tensor::zero_grad`].
//! - Every differentiable operation on a tensor that requires grad records a
//!   node (its `grad_fn`, named as PyTorch names it: `MulBackward0`, …) that
//!   holds what its backward formula needs. Views record one too, so a
//!   view's gradient is scattered back into the right elements of its base.
//! - [`no_grad`] stops recording on the current thread (grad mode is
//!   thread-local, as in PyTorch); optimisers update leaves under it.
//! - Cloning a `Tensor` (Rust's `Clone`) makes another handle to the same
//!   tensor, as Python's `b = a` does: both see the same gradient.
//!   [`Tensor::detach`] shares the data and drops the history.
//!
//! # Differences from PyTorch
//! - The graph is kept after `backward` (PyTorch's `retain_graph=True`), so
//!   calling `backward` twice accumulates twice instead of failing.
//! - In-place writes (`add_`, `mul_`, `copy_`, `fill_`, `zero_`) to a
//!   computed tensor are recorded as PyTorch records them: the tensor's
//!   history becomes the operation's node (`AddBackward0`, `CopyBackwards`,
//!   …) on top of what it was, so backward differentiates through the write;
//!   through a view of a computed tensor the base's history becomes a
//!   `CopySlices` node (module `inplace`). Writes to leaves and views of
//!   leaves are refused, as in PyTorch. stowage also refuses, while
//!   recording, element writes (`set`, `write`, `as_array_view_mut`) to a
//!   tensor that requires grad, and a recorded write through an
//!   `as_strided` view. Like PyTorch, it refuses a recorded write through
//!   one of several views one call made (`split`, `chunk`, `unbind`) and
//!   through a view made under [`no_grad`]; a view made under `no_grad`
//!   whose base is written with history since is refused when backward
//!   reaches it ([`TensorError::NoGradViewOfModifiedBase`]; PyTorch refuses
//!   it when it is used). Once `requires_grad_(true)` makes a tensor a leaf,
//!   writes that would be recorded through its older handles and the views
//!   made before are refused as writes to a leaf, as PyTorch refuses them.
//! - A tensor that does not require grad, written in place with one that
//!   does (`acc.add_(x)`), starts requiring grad, as in PyTorch: its history
//!   becomes the operation's node, seen by every handle of it (NOTE [tensor
//!   identity]); through a view, its base's history becomes a `CopySlices`
//!   node as above, and every other view of the base follows.
//! - Every storage counts the in-place writes made through tensors (its
//!   *version*, [`Tensor::version`]; PyTorch counts per tensor and its views,
//!   stowage per storage). A recorded operation notes the version of each
//!   tensor it saves, and backward refuses one written since, naming it, as
//!   PyTorch does: writing to a saved tensor never falsifies a gradient.
//! - Arithmetic is implemented for floating-point dtypes (`float64` and
//!   `float32` natively; half and 8-bit floats are computed in `float32`).
//!   Higher-order gradients are not recorded.

mod backward;
mod engine;
mod inplace;

use crate::error::TensorError;
use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use once_cell::race::OnceBox;

pub(crate) use backward::{Backward, ViewFn};

use crate::layout::Layout;
use crate::{DType, Error, Kind, Result, Tensor};

thread_local! {
    static GRAD_ENABLED: Cell<bool> = const { Cell::new(true) };
}

/// Whether operations on this thread record gradients (`torch.is_grad_enabled()`).
pub fn is_grad_enabled() -> bool {
    GRAD_ENABLED.with(Cell::get)
}

/// Turns recording on or off on this thread until the guard drops
/// (`torch.set_grad_enabled(mode)`).
pub fn set_grad_enabled(enabled: bool) -> GradModeGuard {
    let previous = GRAD_ENABLED.with(|g| g.replace(enabled));
    GradModeGuard {
        previous,
        _not_send: PhantomData,
    }
}

/// Stops recording on this thread until the guard drops (`with torch.no_grad():`).
///
/// ```
/// use stowage::{autograd, DType, Tensor};
/// # fn main() -> stowage::Result<()> {
/// let w = Tensor::ones(&[2], DType::Float64)?.with_requires_grad(true)?;
/// {
///     let _guard = autograd::no_grad();
///     w.add_(1.0)?; // an optimiser step: allowed without recording
///     assert!(!w.mul(2.0)?.requires_grad());
/// }
/// assert!(w.add_(1.0).is_err()); // refused again once recording
/// # Ok(()) }
/// ```
pub fn no_grad() -> GradModeGuard {
    set_grad_enabled(false)
}

/// Restores the previous grad mode of its thread when dropped.
#[must_use = "grad mode is restored as soon as the guard drops"]
pub struct GradModeGuard {
    previous: bool,
    // Grad mode is per thread: the guard must drop on the thread that made it.
    _not_send: PhantomData<*const ()>,
}

impl Drop for GradModeGuard {
    fn drop(&mut self) {
        GRAD_ENABLED.with(|g| g.set(self.previous));
    }
}

/// What a tensor refused an in-place write is, in the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GradRole {
    /// A leaf that requires grad.
    Leaf,
    /// A view of a leaf that requires grad.
    ViewOfLeaf,
    /// A tensor computed from others, for a write stowage does not record
    /// in place (element writes: `set`, `write`, `as_array_view_mut`, and
    /// `set_`; it records `add_`, `mul_`, `copy_`, `fill_` and `zero_`).
    Computed,
    /// A view of a tensor computed from others, for a write stowage does not
    /// record through a view (the element writes `Computed` names).
    ViewOfComputed,
    /// A view made by `as_strided`, for a write that would be recorded
    /// (stowage records writes through views made by view operations).
    StridedView,
    /// One of several views one call returned (`split`, `chunk`,
    /// `unbind`), for a write that would be recorded: PyTorch refuses it.
    MultiOutputView,
    /// A view made under [`no_grad`], for a write that would be recorded:
    /// PyTorch refuses it as ambiguous.
    NoGradView,
}

impl std::fmt::Display for GradRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Each a whole sentence after the operation's name, PyTorch's words
        // where PyTorch refuses the same write.
        f.write_str(match self {
            GradRole::Leaf => {
                "a leaf Variable that requires grad is being used in an in-place operation"
            }
            GradRole::ViewOfLeaf => {
                "a view of a leaf Variable that requires grad is being used in an in-place operation"
            }
            GradRole::Computed => {
                "a tensor with history that requires grad is being used in an in-place operation stowage does not record (it records add_, mul_, copy_, fill_ and zero_)"
            }
            GradRole::ViewOfComputed => {
                "a view of a tensor with history that requires grad is being used in an in-place operation stowage does not record through a view (it records add_, mul_, copy_, fill_ and zero_)"
            }
            GradRole::StridedView => {
                "a view made by as_strided is being modified in place where the write would be recorded; stowage records writes through views made by view operations only (use the out-of-place operation)"
            }
            GradRole::MultiOutputView => {
                "this view is the output of a function that returns multiple views (split, chunk, unbind); such views may not be modified in place where the write would be recorded, as in PyTorch (use the out-of-place operation)"
            }
            GradRole::NoGradView => {
                "a view was created in no_grad mode and is being modified in place with grad mode enabled, which PyTorch forbids too (make the view and the write both inside no_grad, or both outside)"
            }
        })
    }
}

/// The autograd state of one tensor object, shared by its handles (NOTE
/// [tensor identity]): a tensor with a second handle has one (see
/// [`Autograd`]), so that an in-place operation, which takes `&self`, can
/// make a tensor start requiring grad for all its handles at once, as
/// Python's one object does.
pub(crate) struct AutogradMeta {
    /// A leaf that requires grad (`requires_grad_(true)` gives the handle a
    /// new state with this set).
    leaf: bool,
    /// Set on the state `requires_grad_(true)` replaced: the object is a leaf
    /// now, so a write that would be recorded through an older handle, or
    /// through a view made before, is refused as one to a leaf.
    became_leaf: AtomicBool,
    /// The accumulated gradient of a leaf (never set on computed tensors).
    /// Boxed: every loaded tensor has a state, few have a gradient.
    grad: Mutex<Option<Box<Tensor>>>,
    /// How this tensor was computed; `None` on leaves. An in-place operation
    /// replaces it with its own node, whose input is the node it replaced.
    grad_fn: Mutex<Option<Arc<Node>>>,
    /// For a view: its base, which an in-place write through the view
    /// rebases, and which the view follows when the base's history changes.
    /// (Boxed: most tensors are not views.)
    view_of: Option<Box<inplace::ViewOf>>,
}

/// A tensor handle's [`AutogradMeta`], made on first need. Most tensors never
/// need one of their own: a loaded tensor that is not cloned, trained or
/// compared by identity holds none (a state is 80 bytes with the
/// allocator's; 300,000 loaded tensors held 24 MB of them). A clone makes it
/// first, so the handles of one object share one state (NOTE [tensor
/// identity]); a handle without one is the object's only handle, and no
/// view of it exists (a view keeps its base's state).
///
/// One word (`OnceBox`, a pointer set once; `OnceLock` is two): a loaded
/// tensor's object is then an allocation of 144 bytes, not 160. The state,
/// where made, is behind one more small box.
pub(crate) struct Autograd(OnceBox<Arc<AutogradMeta>>);

impl Autograd {
    /// The state of a tensor that does not require grad, made when needed.
    pub(crate) fn none() -> Autograd {
        Autograd(OnceBox::new())
    }

    fn of(meta: Arc<AutogradMeta>) -> Autograd {
        Autograd(OnceBox::with_value(Box::new(meta)))
    }

    /// The state, made now where this handle had none. Two threads making
    /// it at once each make one, and all keep the first set (`OnceBox`):
    /// a fresh state has no other owner, so the other is simply dropped.
    fn get(&self) -> &Arc<AutogradMeta> {
        self.0.get_or_init(|| Box::new(AutogradMeta::none()))
    }

    /// The object's identity (NOTE [tensor identity]): the address of its
    /// state, made now where this handle had none. It names the object
    /// while any of its handles lives.
    pub(crate) fn identity(&self) -> usize {
        Arc::as_ptr(self.get()) as usize
    }

    /// The state, where one was made: `None` is a tensor that does not
    /// require grad, has no history and views no base.
    fn made(&self) -> Option<&Arc<AutogradMeta>> {
        self.0.get()
    }

    /// Whether the two handles share one state (making each's first).
    pub(crate) fn same(&self, other: &Autograd) -> bool {
        Arc::ptr_eq(self.get(), other.get())
    }
}

impl Clone for Autograd {
    /// Another handle to the same state: a clone shares what either handle
    /// changes later (a history an in-place write starts, a gradient).
    fn clone(&self) -> Autograd {
        Autograd::of(Arc::clone(self.get()))
    }
}

/// Where a recorded operation sends an input's gradient: the node that
/// computed the input, as it was when the operation was recorded (a later
/// in-place write does not change what an earlier operation used), or the
/// leaf that accumulates it.
#[derive(Clone)]
pub(crate) enum Edge {
    /// Weak: a leaf's gradient may itself be written in place with the
    /// leaf (`t.grad().add_(&t)`), and a strong edge would then be a cycle
    /// that is never freed. A leaf that is gone has no gradient to receive.
    Leaf(Weak<AutogradMeta>),
    Node(Arc<Node>),
}

/// One recorded operation: its backward formula, the inputs it sends
/// gradients to (`None` for inputs that do not require grad), and the
/// version of each tensor it saved when it saved it.
pub(crate) struct Node {
    pub(crate) name: &'static str,
    pub(crate) backward: Backward,
    pub(crate) inputs: Vec<Option<Edge>>,
    saved_versions: Vec<u64>,
}

impl Node {
    fn new(name: &'static str, backward: Backward, inputs: &[&Tensor]) -> Node {
        Node::on(name, backward, inputs.iter().map(|t| t.edge()).collect())
    }

    /// A node sending its inputs' gradients along `inputs`.
    fn on(name: &'static str, backward: Backward, inputs: Vec<Option<Edge>>) -> Node {
        let saved_versions = backward
            .saved(&needs(&inputs))
            .iter()
            .map(|t| t.version())
            .collect();
        Node {
            name,
            backward,
            inputs,
            saved_versions,
        }
    }

    /// Which inputs require grad.
    pub(crate) fn needs(&self) -> Vec<bool> {
        needs(&self.inputs)
    }

    /// Refuses a backward through this node when a tensor it saved has been
    /// written in place since (PyTorch's check of a saved variable's version).
    pub(crate) fn check_saved(&self) -> Result<()> {
        for (t, &expected) in self
            .backward
            .saved(&self.needs())
            .iter()
            .zip(&self.saved_versions)
        {
            let version = t.version();
            if version != expected {
                return Err(Error::Tensor(TensorError::SavedTensorModified {
                    op: self.name,
                    dtype: t.dtype(),
                    shape: t.shape().to_vec(),
                    version,
                    expected,
                }));
            }
        }
        Ok(())
    }
}

impl AutogradMeta {
    fn new(
        leaf: bool,
        node: Option<Arc<Node>>,
        view_of: Option<Box<inplace::ViewOf>>,
    ) -> Arc<Self> {
        Arc::new(AutogradMeta {
            leaf,
            became_leaf: AtomicBool::new(false),
            grad: Mutex::new(None),
            grad_fn: Mutex::new(node),
            view_of,
        })
    }

    /// The state of a new tensor that does not require grad.
    pub(crate) fn none() -> Arc<AutogradMeta> {
        AutogradMeta::new(false, None, None)
    }

    fn leaf() -> Arc<AutogradMeta> {
        AutogradMeta::new(true, None, None)
    }

    /// A leaf that requires grad, or a tensor with history.
    fn requires_grad(&self) -> bool {
        self.leaf || self.grad_fn().is_some()
    }

    fn set_grad_fn(&self, node: Arc<Node>) {
        *self.grad_fn.lock().unwrap_or_else(|e| e.into_inner()) = Some(node);
    }

    fn grad_slot(&self) -> MutexGuard<'_, Option<Box<Tensor>>> {
        // A panic elsewhere while holding the lock leaves a valid `Option`.
        self.grad.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node that computed the tensor now; `None` on leaves. A view of a
    /// computed tensor whose base was written in place since gets a node on
    /// the base's new history first.
    pub(crate) fn grad_fn(&self) -> Option<Arc<Node>> {
        if let Some(view) = &self.view_of {
            view.refresh(self);
        }
        self.grad_fn
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Attaches `backward` to `out` when this thread records and any of `inputs`
/// requires grad; otherwise returns `out` as it is. Outputs of dtypes without
/// gradients (integers, bool) never require grad.
pub(crate) fn record(
    mut out: Tensor,
    name: &'static str,
    inputs: &[&Tensor],
    backward: impl FnOnce() -> Backward,
) -> Tensor {
    if !is_grad_enabled()
        || !inputs.iter().any(|t| t.requires_grad())
        || !can_require_grad(out.dtype)
    {
        return out;
    }
    let node = Arc::new(Node::new(name, backward(), inputs));
    out.autograd = Autograd::of(AutogradMeta::new(false, Some(node), None));
    out
}

/// The view of `input` at `layout`, made by a view operation (`view`: its
/// layout from `input`'s) or by `as_strided` (`view`: `None`), with its link
/// to its base and, when this thread records and `input` requires grad, the
/// view's node `name` (`backward`). `multi_output`: one of several views
/// one call returns.
pub(crate) fn record_view(
    input: &Tensor,
    layout: Layout,
    name: &'static str,
    view: Option<ViewFn>,
    multi_output: bool,
    backward: impl FnOnce() -> Backward,
) -> Tensor {
    let link = inplace::ViewOf::link(input, &layout, view, multi_output);
    let node = (is_grad_enabled() && input.requires_grad() && can_require_grad(input.dtype))
        .then(|| Arc::new(Node::new(name, backward(), &[input])));
    Tensor {
        storage: input.storage.clone(),
        dtype: input.dtype,
        layout,
        autograd: Autograd::of(AutogradMeta::new(false, node, Some(Box::new(link)))),
    }
}

fn can_require_grad(dtype: DType) -> bool {
    matches!(dtype.kind(), Kind::Float | Kind::Complex)
}

impl Tensor {
    /// Whether gradients are recorded for this tensor: a leaf with
    /// `requires_grad` set, or a tensor computed from one.
    pub fn requires_grad(&self) -> bool {
        self.autograd.made().is_some_and(|m| m.requires_grad())
    }

    /// Sets `requires_grad` on a leaf (`t.requires_grad_()`).
    ///
    /// # Errors
    /// [`TensorError::GradNotFloat`] for dtypes without gradients; [`TensorError::NotALeaf`]
    /// when clearing it on a computed tensor (use [`detach`](Self::detach)).
    pub fn requires_grad_(&mut self, requires_grad: bool) -> Result<&mut Self> {
        let made = self.autograd.made();
        let leaf = made.is_some_and(|m| m.leaf);
        let computed = made.is_some_and(|m| m.grad_fn().is_some());
        match (requires_grad, leaf || computed) {
            (true, true) | (false, false) => {}
            (true, false) if !can_require_grad(self.dtype) => {
                return Err(Error::Tensor(TensorError::GradNotFloat {
                    dtype: self.dtype,
                }))
            }
            (true, false) => {
                // Older handles and views made before have this state (a
                // handle without one has neither).
                if let Some(old) = made {
                    old.became_leaf.store(true, Ordering::Relaxed);
                }
                self.autograd = Autograd::of(AutogradMeta::leaf());
            }
            (false, true) if computed => return Err(Error::Tensor(TensorError::NotALeaf)),
            (false, true) => self.autograd = Autograd::none(),
        }
        Ok(self)
    }

    /// This tensor with `requires_grad` set, for constructors
    /// (`torch.zeros(3, requires_grad=True)`).
    ///
    /// # Errors
    /// As [`requires_grad_`](Self::requires_grad_).
    pub fn with_requires_grad(mut self, requires_grad: bool) -> Result<Tensor> {
        self.requires_grad_(requires_grad)?;
        Ok(self)
    }

    /// True for tensors not computed by a recorded operation: those that do not
    /// require grad, and leaves that do.
    pub fn is_leaf(&self) -> bool {
        self.grad_fn_name().is_none()
    }

    /// The name of the operation that computed this tensor (`"MulBackward0"`),
    /// as PyTorch prints `grad_fn=<MulBackward0>`; `None` on leaves.
    pub fn grad_fn_name(&self) -> Option<&'static str> {
        self.autograd.made()?.grad_fn().map(|n| n.name)
    }

    /// How many in-place writes this tensor's storage has had (PyTorch's
    /// `t._version`, counted per storage; see [`crate::autograd`]).
    pub fn version(&self) -> u64 {
        self.storage.version()
    }

    /// Where a recorded operation sends this tensor's gradient; `None` when
    /// it does not require grad.
    pub(crate) fn edge(&self) -> Option<Edge> {
        let meta = self.autograd.made()?;
        match meta.grad_fn() {
            Some(node) => Some(Edge::Node(node)),
            None => meta.leaf.then(|| Edge::Leaf(Arc::downgrade(meta))),
        }
    }

    /// The accumulated gradient of a leaf (`t.grad`): a tensor on its own
    /// storage, never this tensor's. `None` before any backward reached it,
    /// after [`set_grad`](Self::set_grad)`(None)`, and on computed tensors.
    pub fn grad(&self) -> Option<Tensor> {
        self.autograd.made()?.grad_slot().as_deref().cloned()
    }

    /// Replaces a leaf's gradient (`t.grad = g`; `None` is PyTorch's
    /// `zero_grad(set_to_none=True)`).
    ///
    /// # Errors
    /// [`TensorError::GradMismatch`] when `grad`'s shape or dtype differs;
    /// [`TensorError::NotALeaf`] on a computed tensor; [`TensorError::NoGradFn`] on a
    /// tensor that does not require grad.
    pub fn set_grad(&self, grad: Option<Tensor>) -> Result<()> {
        let Some(meta) = self.autograd.made().filter(|m| m.requires_grad()) else {
            return Err(Error::Tensor(TensorError::NoGradFn));
        };
        if meta.grad_fn().is_some() {
            return Err(Error::Tensor(TensorError::NotALeaf));
        }
        if let Some(g) = &grad {
            self.check_grad("set_grad", g)?;
        }
        *meta.grad_slot() = grad.map(|g| Box::new(g.detach()));
        Ok(())
    }

    /// Sets a leaf's gradient to zeros in place, keeping its storage
    /// (`zero_grad(set_to_none=False)`); nothing when it has none.
    ///
    /// # Errors
    /// [`StorageError::NoData`](crate::StorageError::NoData) on meta.
    pub fn zero_grad(&self) -> Result<()> {
        if let Some(g) = self.grad() {
            g.zero_()?;
        }
        Ok(())
    }

    /// The same data, sharing the storage, without history or `requires_grad`.
    pub fn detach(&self) -> Tensor {
        Tensor {
            storage: self.storage.clone(),
            dtype: self.dtype,
            layout: self.layout.clone(),
            autograd: Autograd::none(),
        }
    }

    /// Computes the gradient of this one-element tensor with respect to every
    /// leaf it was computed from, and adds it to their [`grad`](Self::grad)s.
    ///
    /// # Errors
    /// [`TensorError::NoGradFn`] when it does not require grad;
    /// [`TensorError::BackwardNonScalar`] for more than one element (use
    /// [`backward_with`](Self::backward_with)); errors of the backward formulas.
    pub fn backward(&self) -> Result<()> {
        if !self.requires_grad() {
            return Err(Error::Tensor(TensorError::NoGradFn));
        }
        if self.numel() != 1 {
            return Err(Error::Tensor(TensorError::BackwardNonScalar {
                shape: self.shape().to_vec(),
            }));
        }
        let ones = Tensor::ones(self.shape(), self.dtype)?;
        engine::run(self, ones)
    }

    /// Backward from this tensor with `gradient` as its gradient (PyTorch's
    /// `t.backward(gradient)`, a vector-Jacobian product).
    ///
    /// # Errors
    /// As [`backward`](Self::backward), and [`TensorError::GradMismatch`] when
    /// `gradient`'s shape or dtype differs.
    pub fn backward_with(&self, gradient: &Tensor) -> Result<()> {
        if !self.requires_grad() {
            return Err(Error::Tensor(TensorError::NoGradFn));
        }
        self.check_grad("backward", gradient)?;
        engine::run(self, gradient.detach())
    }

    fn check_grad(&self, op: &'static str, g: &Tensor) -> Result<()> {
        if g.shape() != self.shape() || g.dtype != self.dtype {
            return Err(Error::Tensor(TensorError::GradMismatch {
                op,
                expected: self.shape().to_vec(),
                expected_dtype: self.dtype,
                found: g.shape().to_vec(),
                found_dtype: g.dtype,
            }));
        }
        Ok(())
    }

    /// A fresh leaf's autograd state when this tensor requires grad (for
    /// copies of metadata such as fake tensors).
    pub(crate) fn leaf_like(&self) -> Autograd {
        if self.requires_grad() {
            Autograd::of(AutogradMeta::leaf())
        } else {
            Autograd::none()
        }
    }
}

fn needs(inputs: &[Option<Edge>]) -> Vec<bool> {
    inputs.iter().map(Option::is_some).collect()
}

/// Whether `node` is a chain of views ending at a leaf.
fn view_of_leaf(node: &Arc<Node>) -> bool {
    let mut node = Arc::clone(node);
    loop {
        if !node.backward.is_view() {
            return false;
        }
        let next = match node.inputs.first() {
            Some(Some(Edge::Leaf(_))) => return true,
            Some(Some(Edge::Node(next))) => Arc::clone(next),
            _ => return false,
        };
        node = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tensor that is only read holds no state; a clone makes one its
    /// handles share, so a history a write starts shows through both, and
    /// `requires_grad_(true)` on one handle leaves the other an older
    /// handle of a leaf.
    #[test]
    fn a_state_is_made_when_a_second_handle_needs_it() {
        let t = Tensor::zeros(&[2], DType::Float64).unwrap();
        assert!(!t.requires_grad() && t.is_leaf() && t.grad().is_none());
        assert!(t.set_grad(None).is_err());
        assert!(t.autograd.made().is_none(), "reading makes no state");

        let other = t.clone();
        assert!(t.autograd.made().is_some() && t.autograd.same(&other.autograd));
        let x = Tensor::from_slice(&[1.0f64, 2.0])
            .unwrap()
            .with_requires_grad(true)
            .unwrap();
        t.add_(&x).unwrap();
        assert_eq!(other.grad_fn_name(), Some("AddBackward0"));

        let mut fresh = Tensor::zeros(&[2], DType::Float64).unwrap();
        let older = fresh.clone();
        fresh.requires_grad_(true).unwrap();
        assert!(!older.requires_grad());
        assert!(matches!(
            older.add_(&x),
            Err(Error::Tensor(TensorError::InPlaceRequiresGrad {
                role: GradRole::Leaf,
                ..
            }))
        ));
        // Without a second handle, nothing is older: the write starts history.
        let alone = Tensor::zeros(&[2], DType::Float64).unwrap();
        alone.add_(&x).unwrap();
        assert!(alone.requires_grad() && !alone.is_leaf());
    }
}
