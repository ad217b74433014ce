//! The leaves of a checkpoint's value graph: the PyTorch objects a pickle
//! builds ([`Object`]), tensors with what PyTorch records beside their data
//! ([`TensorObject`]), storages as a pickle names them ([`StorageRef`]) and
//! objects of classes stowage does not know, recorded instead of built
//! ([`InertObject`]).

use std::sync::Arc;

use num_complex::Complex64;

use crate::checkpoint::globals::allowlist::Global;
use crate::checkpoint::pickle::Value;
use crate::checkpoint::value::data::{ClassRef, NdArray, NumpyDType, NumpyScalar, PyData};
use crate::checkpoint::value::kind::{Quantization, TensorKind};
use crate::checkpoint::value::record_key::RecordKey;
use crate::error::{FormatError, TensorError};
use crate::{DType, Device, Error, Result, Tensor, UntypedStorage};

/// A PyTorch object inside a checkpoint's value graph.
///
/// Every variant's data is at most 16 bytes (larger ones are boxed), so an
/// object is 24 bytes and so is a [`Value`] holding one: a state dict's
/// entry, a key and a value, is 48 bytes.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Object {
    /// A tensor or `nn.Parameter`, shared: one tensor the pickle reached
    /// twice (memoized, as in `{"a": x, "b": x}`) is one `Arc` at both
    /// places, so its identity survives (`a is b` in Python, one tensor
    /// written once by a save). Behind a pointer, values of the object
    /// graph stay small, which matters for checkpoints of many tensors.
    Tensor(Arc<TensorObject>),
    /// A storage reference (a `TypedStorage` with its dtype, or an `UntypedStorage`).
    Storage(Box<StorageRef>),
    /// A dtype object (`torch.float16`).
    DType(DType),
    /// A `torch.device`.
    Device(Device),
    /// A `torch.Size`.
    Size(Box<[usize]>),
    /// A Python complex number.
    Complex(Complex64),
    /// A quantization scheme (`torch.per_tensor_affine`).
    QScheme(&'static str),
    /// A tensor layout object (`torch.strided`), by name.
    Layout(Box<str>),
    /// An allowed class or function, before it is called.
    Global(Box<Global>),
    /// A numpy array, decoded into a tensor of its own (not a checkpoint storage).
    NdArray(Box<NdArray>),
    /// A numpy scalar.
    NumpyScalar(Box<NumpyScalar>),
    /// A numpy dtype object.
    NumpyDType(Box<NumpyDType>),
    /// A `datetime`, `pathlib`, `slice`, `range` … value, decoded.
    Data(Box<PyData>),
    /// A global outside the allowlist named as a value, never imported (inert loading).
    Class(Arc<ClassRef>),
}

// The size the type's documentation promises, held where it is decided.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Value<Object>>() == 24);

impl Object {
    /// Whether `torch.load(weights_only=True)` refuses this value, so that a
    /// checkpoint holding it cannot be saved back as PyTorch's loader reads it.
    pub(crate) fn weights_only_refuses(&self) -> bool {
        matches!(
            self,
            Object::NdArray(_)
                | Object::NumpyScalar(_)
                | Object::NumpyDType(_)
                | Object::Data(_)
                | Object::Class(_)
        )
    }

    /// `module.name` of the class of a value that
    /// [`weights_only_refuses`](Self::weights_only_refuses), as errors name it.
    pub(crate) fn class_name(&self) -> Option<String> {
        Some(match self {
            Object::NdArray(_) => "numpy.ndarray".into(),
            Object::NumpyScalar(s) => format!("numpy.{}", s.dtype.name()),
            Object::NumpyDType(_) => "numpy.dtype".into(),
            Object::Data(d) => match &**d {
                PyData::Path { class, .. } => format!("pathlib.{class}"),
                PyData::Slice(_) | PyData::Range(_) | PyData::Type(_) => {
                    format!("builtins.{}", d.kind())
                }
                _ => format!("datetime.{}", d.kind()),
            },
            Object::Class(c) => format!("{}.{}", c.module, c.name),
            _ => return None,
        })
    }
}

/// How an inert object was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Construct {
    /// `REDUCE` (or `INST`/`OBJ`): the global called with `args`.
    Call,
    /// `NEWOBJ` / `NEWOBJ_EX`: `cls.__new__(cls, *args)`.
    New,
}

/// An object of a class stowage does not know, recorded instead of built
/// (never imported, never called): what the pickle said to do with it.
///
/// In the checkpoint's graph the object is a dict node whose entries are what
/// it holds, so paths, lookups and the tensor walk go through it: the keys of
/// a dict `BUILD` state (of both dicts of a `(dict, slots)` state), `"state"`
/// for any other state, the keys of items set on it (`SETITEMS`) and the
/// indices of items appended to it (`APPENDS`), and `"args"` for the
/// constructor arguments when there is no state or they are not empty (and no
/// state key is named `"args"`).
#[derive(Clone, Debug)]
pub struct InertObject {
    /// The global's module (`torch.nn.modules.linear`).
    pub module: String,
    /// The global's name (`Linear`).
    pub name: String,
    /// How the object was made.
    pub construct: Construct,
    /// The constructor arguments (a tuple).
    pub args: Value<Object>,
    /// The `BUILD` state, if one was set (the last one, if several were).
    pub state: Option<Value<Object>>,
}

/// Edits of the tensor objects of a value graph that keep what the pickle
/// shared shared: a tensor reached at several places (one `Arc`) is edited
/// once, and the one edited object replaces it at every place.
#[derive(Default)]
pub(crate) struct SharedEdits {
    /// Each edited object, by the address of the one it replaced (held, so
    /// that the address is not reused while the edits go on).
    done: std::collections::HashMap<*const TensorObject, (Arc<TensorObject>, Arc<TensorObject>)>,
}

impl SharedEdits {
    /// Edits `t` with `edit`, or gives it the object an earlier edit of the
    /// same tensor made. A tensor held at one place only is edited in place.
    pub(crate) fn apply(
        &mut self,
        t: &mut Arc<TensorObject>,
        edit: impl FnOnce(&mut TensorObject) -> Result<()>,
    ) -> Result<()> {
        if let Some(object) = Arc::get_mut(t) {
            return edit(object);
        }
        let key = Arc::as_ptr(t);
        if let Some((_, edited)) = self.done.get(&key) {
            *t = edited.clone();
            return Ok(());
        }
        let mut object = TensorObject::clone(t);
        edit(&mut object)?;
        let edited = Arc::new(object);
        let old = std::mem::replace(t, edited.clone());
        self.done.insert(key, (old, edited));
        Ok(())
    }
}

/// A tensor in a checkpoint, with what PyTorch records beside the data.
///
/// What few tensors have (a quantization, a sparse or nested kind, a
/// subclass, Python state) is kept out of line and read through methods: a
/// checkpoint holds one object a tensor, and most are plain.
#[derive(Clone)]
pub struct TensorObject {
    /// The tensor: a view on one of the checkpoint's storages (a meta tensor
    /// saved without storage: on a storage of its own without data). For a
    /// sparse or nested tensor, a placeholder without data holding its dtype
    /// and logical shape; its data is in [`kind`](Self::kind)'s components.
    pub tensor: Tensor,
    /// True for a `torch.nn.Parameter`.
    pub parameter: bool,
    /// PyTorch's lazy conjugation bit: the logical values are the conjugates of the stored ones.
    pub conj: bool,
    /// PyTorch's lazy negation bit: the logical values are the negatives of the stored ones.
    pub neg: bool,
    /// The rare parts; `None` while all are their defaults.
    rare: Option<Box<Rare>>,
}

// A checkpoint holds one a tensor, in an `Arc`: 120 bytes, an allocation
// of 144 with the counts and the allocator's header (glibc's size classes
// step by 16).
#[cfg(all(target_pointer_width = "64", not(loom)))]
const _: () = assert!(std::mem::size_of::<TensorObject>() <= 120);

/// A [`TensorObject`]'s rare parts.
#[derive(Clone, Default)]
struct Rare {
    quantization: Option<Quantization>,
    kind: TensorKind,
    subclass: Option<Value<Object>>,
    state: Option<Value<Object>>,
}

/// The kind of every tensor object without rare parts.
static STRIDED: TensorKind = TensorKind::Strided;

impl std::fmt::Debug for TensorObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorObject")
            .field("tensor", &self.tensor)
            .field("parameter", &self.parameter)
            .field("quantization", &self.quantization())
            .field("conj", &self.conj)
            .field("neg", &self.neg)
            .field("kind", self.kind())
            .field("subclass", &self.subclass())
            .field("state", &self.state())
            .finish()
    }
}

impl TensorObject {
    /// A plain tensor object (not a Parameter, no quantization, no lazy bits).
    pub fn new(tensor: Tensor) -> TensorObject {
        TensorObject {
            tensor,
            parameter: false,
            conj: false,
            neg: false,
            rare: None,
        }
    }

    /// The quantization parameters of a quantized tensor (per tensor or per channel).
    pub fn quantization(&self) -> Option<&Quantization> {
        self.rare.as_ref()?.quantization.as_ref()
    }

    /// The layout and, for sparse and nested tensors, their component tensors
    /// (then [`tensor`](Self::tensor) is a placeholder without data: NOTE
    /// [tensor kinds] in `kind.rs`).
    pub fn kind(&self) -> &TensorKind {
        self.rare.as_ref().map_or(&STRIDED, |r| &r.kind)
    }

    /// The tensor's class when `_rebuild_from_type_v2` named one other than
    /// `torch.Tensor` and `Parameter` (a subclass), as the pickle resolved it.
    pub fn subclass(&self) -> Option<&Value<Object>> {
        self.rare.as_ref()?.subclass.as_ref()
    }

    /// The Python state `_rebuild_from_type_v2` restores on the tensor (its
    /// `__dict__`: attributes set on it), when not empty; a value of the
    /// checkpoint's graph.
    pub fn state(&self) -> Option<&Value<Object>> {
        self.rare.as_ref()?.state.as_ref()
    }

    /// Sets [`quantization`](Self::quantization).
    pub fn set_quantization(&mut self, quantization: Option<Quantization>) {
        if let Some(rare) = self.rare_for(quantization.is_some()) {
            rare.quantization = quantization;
        }
    }

    /// Sets [`subclass`](Self::subclass).
    pub fn set_subclass(&mut self, subclass: Option<Value<Object>>) {
        if let Some(rare) = self.rare_for(subclass.is_some()) {
            rare.subclass = subclass;
        }
    }

    /// Sets [`state`](Self::state).
    pub fn set_state(&mut self, state: Option<Value<Object>>) {
        if let Some(rare) = self.rare_for(state.is_some()) {
            rare.state = state;
        }
    }

    /// The graph values this object holds (its subclass and Python state),
    /// mutably: what an edit of the graph moves.
    pub(crate) fn graph_values_mut(&mut self) -> impl Iterator<Item = &mut Value<Object>> {
        self.rare.as_mut().into_iter().flat_map(|r| {
            [r.subclass.as_mut(), r.state.as_mut()]
                .into_iter()
                .flatten()
        })
    }

    /// The rare parts to set one in: made when `needed` (a value other than
    /// the default is set), else only those there are (setting a default
    /// where there are none allocates nothing).
    fn rare_for(&mut self, needed: bool) -> Option<&mut Rare> {
        if needed {
            Some(self.rare.get_or_insert_with(Box::default))
        } else {
            self.rare.as_deref_mut()
        }
    }

    /// A sparse or nested tensor object from its components and its logical
    /// shape (dense for sparse, padded for nested): `tensor` becomes a
    /// placeholder without data of that shape, with the dtype and device of
    /// the `values` (or `buffer`) component (NOTE [tensor kinds] in `kind.rs`).
    ///
    /// Like `torch.sparse_coo_tensor(..., check_invariants=False)`, this does
    /// not check the components against each other: loading the saved file
    /// does (stowage's loader and PyTorch's alike).
    ///
    /// # Errors
    /// [`FormatError::BadObject`] for [`TensorKind::Strided`] (use [`new`](Self::new));
    /// [`TensorError::SizeOverflow`] for a shape whose bytes overflow.
    pub fn with_kind(kind: TensorKind, shape: &[usize]) -> Result<TensorObject> {
        let data = match &kind {
            TensorKind::SparseCoo { values, .. } | TensorKind::SparseCompressed { values, .. } => {
                values
            }
            TensorKind::Nested { buffer, .. } => buffer,
            TensorKind::Strided => {
                return Err(Error::Format(FormatError::BadObject {
                    context: "TensorObject::with_kind",
                    expected: "a sparse or nested kind",
                    found: "strided".into(),
                }))
            }
        };
        let (dtype, device) = (data.dtype(), data.device());
        let nbytes = crate::layout::numel_of(shape)?
            .checked_mul(dtype.size())
            .ok_or_else(|| {
                Error::Tensor(TensorError::SizeOverflow {
                    what: "placeholder bytes",
                    detail: format!("{shape:?} of {}", dtype.name()),
                })
            })?;
        let tensor = Tensor::from_parts(
            UntypedStorage::new_fake(nbytes, device),
            dtype,
            crate::layout::Layout::contiguous(shape)?,
        )?;
        let mut object = TensorObject::new(tensor);
        object.rare = Some(Box::new(Rare {
            kind,
            ..Rare::default()
        }));
        Ok(object)
    }

    /// Every tensor holding this tensor's data: `tensor` itself when strided,
    /// else each component by its name ([`TensorKind::components`]); then the
    /// per-channel quantization's `scales` and `zero_points`.
    pub fn data_tensors(&self) -> Vec<(&'static str, &Tensor)> {
        let mut out = if self.kind().is_strided() {
            vec![("", &self.tensor)]
        } else {
            self.kind().components()
        };
        if let Some(Quantization::PerChannel {
            scales,
            zero_points,
            ..
        }) = self.quantization()
        {
            out.push(("scales", scales));
            out.push(("zero_points", zero_points));
        }
        out
    }

    /// Python's `a is b` for the objects: the same tensor object
    /// ([`Tensor::is_same`], NOTE [tensor identity]) with the same wrapping
    /// (Parameter or not, quantization, lazy bits) and the same components
    /// when sparse or nested. Saving writes such objects once and fetches the
    /// others from the pickle's memo. A tensor carrying Python state or a
    /// subclass is never the same as another (its state is not compared), so
    /// it is written once per reference.
    pub fn is_same(&self, other: &TensorObject) -> bool {
        // Destructured so that a new field must be considered here.
        let TensorObject {
            tensor,
            parameter,
            conj,
            neg,
            rare: _,
        } = self;
        let (quantization, kind) = (self.quantization(), self.kind());
        let quantization_same = match (quantization, other.quantization()) {
            (None, None) => true,
            (
                Some(Quantization::PerTensorAffine { scale, zero_point }),
                Some(Quantization::PerTensorAffine {
                    scale: s,
                    zero_point: z,
                }),
            ) => scale.to_bits() == s.to_bits() && zero_point == z,
            (
                Some(Quantization::PerChannel {
                    scales,
                    zero_points,
                    axis,
                }),
                Some(Quantization::PerChannel {
                    scales: s,
                    zero_points: z,
                    axis: a,
                }),
            ) => scales.is_same(s) && zero_points.is_same(z) && axis == a,
            _ => false,
        };
        let components_same = kind.layout_name() == other.kind().layout_name() && {
            let (mine, theirs) = (kind.components(), other.kind().components());
            mine.len() == theirs.len()
                && mine
                    .iter()
                    .zip(&theirs)
                    .all(|((n, a), (m, b))| n == m && a.is_same(b))
        };
        tensor.is_same(&other.tensor)
            && *parameter == other.parameter
            && quantization_same
            && *conj == other.conj
            && *neg == other.neg
            && components_same
            && self.subclass().is_none()
            && self.state().is_none()
            && other.subclass().is_none()
            && other.state().is_none()
    }

    /// The logical values as a tensor: `tensor` itself, or a copy with the lazy
    /// conjugation and negation applied (PyTorch's `resolve_conj().resolve_neg()`).
    ///
    /// # Errors
    /// [`StorageError::NoData`](crate::StorageError::NoData) on meta; allocation failure.
    pub fn resolved(&self) -> Result<Tensor> {
        if !self.conj && !self.neg {
            return Ok(self.tensor.clone());
        }
        let c = self.tensor.contiguous()?.deep_clone()?;
        if self.neg {
            c.mul_(-1.0)?;
        }
        if let (true, Some(part), true) = (self.conj, c.dtype().complex_part(), c.numel() > 0) {
            let flat = c.reshape(&[-1])?.view_dtype(part)?;
            flat.slice(0, Some(1), None, 2)?.mul_(-1.0)?;
        }
        Ok(c)
    }
}

/// A storage as a pickle names it.
#[derive(Clone, Debug)]
pub struct StorageRef {
    /// The bytes.
    pub storage: UntypedStorage,
    /// The legacy class's dtype, or `None` for `UntypedStorage`.
    pub dtype: Option<DType>,
    /// The checkpoint's key for it (`data/<key>`).
    pub key: RecordKey,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain tensor object keeps no rare parts, even when its defaults are
    /// set (a Parameter rebuilt without Python state sets `None`); a part
    /// set reads back, and setting it back to the default keeps the others.
    #[test]
    fn rare_parts_are_made_only_for_what_is_not_default() {
        let mut t = TensorObject::new(Tensor::from_slice(&[1.0f32]).unwrap());
        t.set_state(None);
        t.set_subclass(None);
        t.set_quantization(None);
        assert!(t.rare.is_none());
        assert!(t.kind().is_strided());
        t.set_state(Some(Value::Int(3)));
        t.set_quantization(Some(Quantization::PerTensorAffine {
            scale: 0.5,
            zero_point: 2,
        }));
        t.set_state(None);
        assert!(t.state().is_none());
        assert!(matches!(
            t.quantization(),
            Some(Quantization::PerTensorAffine { zero_point: 2, .. })
        ));
    }
}
