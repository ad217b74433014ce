//! The PyTorch meaning of a checkpoint's pickle, for writing (the records
//! around it are written by the format: `torch_zip/save.rs`).
//!
//! Tensors pickle as `_rebuild_tensor_v2` with a legacy storage class, or
//! `_rebuild_tensor_v3` with `UntypedStorage` for dtypes that have no class;
//! Parameters as `_rebuild_parameter`. Storage keys are assigned in order of
//! first appearance, keyed by storage identity, so tensors sharing a storage
//! share a key and its bytes are written once. A tensor object reached twice
//! (NOTE [tensor identity]: `{"a": t, "b": t}`) is written once, as
//! `torch.save` writes it, and fetched from the memo after that, so PyTorch
//! loads one object (`a is b`).
//!
//! The pickle is written by the one pickle writer,
//! [`write_value`](super::pickle::write_value), in
//! [`Layout::Checkpoint`](super::pickle::Layout::Checkpoint), with
//! `TorchHooks` for tensors, storages and PyTorch's other objects; every
//! global's name comes from the allowlist's table ([`Global::path`]).

use crate::error::{CheckpointError, FormatError, StorageError, TensorError};
use foldhash::HashMap;
use std::sync::Arc;

use crate::checkpoint::globals::allowlist::Global;
use crate::checkpoint::pickle::{
    write_value, Layout, Node, NodeId, Pickler, Value, WriteError, WriteHooks,
};
use crate::checkpoint::value::graph::{Checkpoint, Object, TensorObject, COUNTER};
use crate::checkpoint::value::kind::{Quantization, TensorKind};
use crate::tensor::TensorId;
use crate::{DType, Error, Result, Tensor, UntypedStorage};

/// Deepest value nesting written (the reader's default limit).
const MAX_DEPTH: usize = crate::Limit::SaveDepth.default_value() as usize;

/// The pickler's errors as saving reports them.
impl From<WriteError> for Error {
    fn from(e: WriteError) -> Error {
        match e {
            WriteError::Io(e) => Error::Io(e),
            WriteError::DanglingNode { id } => Error::Format(FormatError::BadObject {
                context: "saving",
                expected: "a node of the checkpoint's graph",
                found: format!("node {id}"),
            }),
            WriteError::Cycle { id } => Error::Checkpoint(CheckpointError::Unsupported {
                what: format!("a tuple or set that contains itself (node {id})"),
            }),
            WriteError::TooDeep { depth, max } => {
                Error::Checkpoint(CheckpointError::LimitExceeded {
                    limit: crate::Limit::SaveDepth,
                    value: depth as u64,
                    max: max as u64,
                })
            }
            WriteError::Refused { kind } => Error::Checkpoint(CheckpointError::Unsupported {
                what: format!("saving a {kind} (PyTorch's loader refuses it)"),
            }),
            e @ (WriteError::TooLong { .. }
            | WriteError::NewlineInGlobal { .. }
            | WriteError::MemoFull { .. }) => Error::Checkpoint(CheckpointError::PickleWrite(e)),
            // `WriteError` is non-exhaustive (another crate's).
            e => Error::Checkpoint(CheckpointError::PickleWrite(e)),
        }
    }
}

/// Storages in key order (order of first appearance), each with the dtype it
/// was first saved as (`None`: untyped).
pub(crate) type Storages = Vec<(UntypedStorage, Option<DType>)>;

/// A checkpoint's pickle (`data.pkl`), as PyTorch's `torch.save` writes it, and
/// the storages it names in key order (key `i` is the `i`-th), each once however
/// many tensors view it.
pub(crate) fn pickle_checkpoint(ckpt: &Checkpoint) -> Result<(Vec<u8>, Storages)> {
    if let Some((path, class)) = ckpt.unsaveable()?.into_iter().next() {
        return Err(Error::Checkpoint(CheckpointError::NotSaveable {
            path,
            class,
        }));
    }
    let mut p = Pickler::new(Vec::new())?;
    let mut hooks = TorchHooks {
        ckpt,
        storages: Vec::new(),
        keys: HashMap::default(),
        tensors: HashMap::default(),
    };
    write_value(&mut p, &ckpt.graph, &ckpt.root, &mut hooks)?;
    p.stop()?;
    Ok((p.finish(), hooks.storages))
}

type P = Pickler<Vec<u8>>;

/// The PyTorch side of writing a checkpoint's pickle: tensors, storages and
/// the other [`Object`]s, and which dicts are `OrderedDict`s with what state.
struct TorchHooks<'c> {
    ckpt: &'c Checkpoint,
    storages: Storages,
    /// Index into `storages` by storage identity.
    keys: HashMap<usize, usize>,
    /// The tensor objects written, by identity, each with its memo index.
    tensors: HashMap<TensorId, Vec<(u32, Arc<TensorObject>)>>,
}

impl<'c> WriteHooks<'c, Object, Vec<u8>> for TorchHooks<'c> {
    type Error = Error;
    const LAYOUT: Layout = Layout::Checkpoint;
    const MAX_DEPTH: usize = MAX_DEPTH;

    fn ext(&mut self, p: &mut P, o: &Object) -> Result<()> {
        self.object(p, o)
    }

    fn dict_class(&self, id: NodeId) -> Option<(&'static str, &'static str)> {
        if self.ckpt.ordered.contains(&id) {
            return Some(Global::OrderedDict.path());
        }
        // A `Counter` is written as `Counter()` and its items, as an
        // `OrderedDict` is: `torch.load(weights_only=True)` allows both.
        (self.ckpt.classes.get(&id) == Some(&COUNTER)).then(|| Global::Counter.path())
    }

    fn state(&self, id: NodeId) -> Option<&'c Value<Object>> {
        self.ckpt.state.get(&id)
    }
}

/// Writes `g` as CPython writes a class or function: memoized.
fn global(p: &mut P, g: &Global) -> Result<()> {
    let (module, name) = g.path();
    Ok(p.global_memoized(module, name)?)
}

/// A tuple of sizes or strides.
fn ints(p: &mut P, xs: &[usize]) -> Result<()> {
    if xs.len() > 3 {
        p.mark()?;
    }
    for &x in xs {
        let x = i64::try_from(x).map_err(|_| {
            Error::Tensor(TensorError::SizeOverflow {
                what: "size when saving",
                detail: x.to_string(),
            })
        })?;
        p.int(x)?;
    }
    // `tuple` writes `TUPLE` (to the mark above) past three items.
    p.tuple(xs.len())?;
    Ok(())
}

/// `collections.OrderedDict()`, as PyTorch passes for backward hooks.
fn empty_ordered_dict(p: &mut P) -> Result<()> {
    global(p, &Global::OrderedDict)?;
    p.tuple(0)?;
    Ok(p.reduce()?)
}

impl TorchHooks<'_> {
    /// The persistent id of a storage viewed as `dtype` (`None`: untyped).
    fn persid(&mut self, p: &mut P, storage: &UntypedStorage, dtype: Option<DType>) -> Result<()> {
        if !storage.has_data() {
            return Err(Error::Storage(StorageError::NoData {
                op: "saving a storage",
                device: storage.device(),
            }));
        }
        let index = match self.keys.get(&storage.id()) {
            Some(&i) => {
                // PyTorch: "Cannot save multiple tensors or storages that view the same data as different types".
                let first = self.storages[i].1.unwrap_or(DType::UInt8);
                let now = dtype.unwrap_or(DType::UInt8);
                if first != now {
                    return Err(Error::Checkpoint(CheckpointError::SaveConflict {
                        key: i.to_string(),
                        first,
                        second: now,
                    }));
                }
                i
            }
            None => {
                self.storages.push((storage.clone(), dtype));
                self.keys.insert(storage.id(), self.storages.len() - 1);
                self.storages.len() - 1
            }
        };
        let nbytes = storage.nbytes();
        let numel = match dtype {
            Some(d) if !nbytes.is_multiple_of(d.size()) => {
                return Err(Error::Storage(StorageError::StorageSizeMismatch {
                    op: "saving a typed storage",
                    dst: nbytes - nbytes % d.size(),
                    src: nbytes,
                }))
            }
            Some(d) => nbytes / d.size(),
            None => nbytes,
        };
        p.mark()?;
        p.str_memoized("storage")?;
        global(p, &Global::Storage(dtype))?;
        p.str_memoized(&index.to_string())?;
        p.str_memoized(&storage.device().to_string())?;
        p.int(numel as i64)?;
        p.tuple_from_mark()?;
        Ok(p.binpersid()?)
    }

    /// The rebuild function a tensor is pickled with.
    fn rebuild_func(t: &TensorObject) -> Global {
        match t.kind() {
            TensorKind::SparseCoo { .. } | TensorKind::SparseCompressed { .. } => {
                Global::UnsupportedRebuild("_rebuild_sparse_tensor")
            }
            TensorKind::Nested { .. } => Global::UnsupportedRebuild("_rebuild_nested_tensor"),
            _ if t.tensor.is_meta() => {
                Global::UnsupportedRebuild("_rebuild_meta_tensor_no_storage")
            }
            _ if t.quantization().is_some() => Global::RebuildQTensor,
            _ if t.tensor.dtype().storage_class().is_some() => Global::RebuildTensorV2,
            _ => Global::RebuildTensorV3,
        }
    }

    /// A tensor as `torch.save` pickles it: its rebuild call, wrapped in
    /// `_rebuild_from_type_v2` when it carries Python state or a subclass.
    /// Returns the call's memo index.
    fn tensor(&mut self, p: &mut P, t: &TensorObject, requires_grad: bool) -> Result<u32> {
        let wrapped = (t.state().is_some() && !t.parameter) || t.subclass().is_some();
        if wrapped {
            global(p, &Global::RebuildFromTypeV2)?;
            p.mark()?;
        }
        global(p, &Self::rebuild_func(t))?;
        if wrapped {
            match t.subclass() {
                None => global(p, &Global::TensorClass)?,
                Some(Value::Ext(Object::Global(g))) => global(p, g)?,
                Some(_) => {
                    return Err(Error::Checkpoint(CheckpointError::Unsupported {
                        what: "saving a tensor subclass whose class is not an allowed global"
                            .into(),
                    }))
                }
            }
        }
        self.tensor_args(p, t, requires_grad)?;
        if wrapped {
            match t.state() {
                Some(state) => self.python_state(p, state)?,
                None => {
                    p.empty_dict()?;
                    p.memo_put()?;
                }
            }
            p.tuple_from_mark()?;
        }
        p.reduce()?;
        Ok(p.memo_put()?)
    }

    /// A plain component tensor (sparse indices and values, nested buffers, quantizer scales).
    fn component(&mut self, p: &mut P, t: &Tensor) -> Result<()> {
        self.tensor(p, &TensorObject::new(t.clone()), t.requires_grad())?;
        Ok(())
    }

    /// The rebuild function's argument tuple.
    fn tensor_args(&mut self, p: &mut P, t: &TensorObject, requires_grad: bool) -> Result<()> {
        let x = &t.tensor;
        match t.kind() {
            TensorKind::SparseCoo {
                indices,
                values,
                coalesced,
            } => {
                self.layout_object(p, "torch.sparse_coo")?;
                p.mark()?;
                self.component(p, indices)?;
                self.component(p, values)?;
                self.object(p, &Object::Size(x.shape().into()))?;
                if let Some(c) = coalesced {
                    p.bool(*c)?;
                }
                p.tuple_from_mark()?;
                p.tuple(2)?;
            }
            TensorKind::SparseCompressed {
                layout,
                compressed_indices,
                plain_indices,
                values,
            } => {
                self.layout_object(p, &format!("torch.{}", layout.name()))?;
                p.mark()?;
                self.component(p, compressed_indices)?;
                self.component(p, plain_indices)?;
                self.component(p, values)?;
                self.object(p, &Object::Size(x.shape().into()))?;
                p.tuple_from_mark()?;
                p.tuple(2)?;
            }
            TensorKind::Nested {
                buffer,
                sizes,
                strides,
                offsets,
            } => {
                p.mark()?;
                for c in [buffer, sizes, strides, offsets] {
                    self.component(p, c)?;
                }
                p.tuple_from_mark()?;
            }
            _ if x.is_meta() => {
                p.mark()?;
                global(p, &Global::DType(x.dtype()))?;
                ints(p, x.shape())?;
                ints(p, x.stride())?;
                p.bool(requires_grad)?;
                p.tuple(4)?;
            }
            _ => self.strided_args(p, t, requires_grad)?,
        }
        Ok(())
    }

    /// `torch.serialization._get_layout(name)`.
    fn layout_object(&mut self, p: &mut P, name: &str) -> Result<()> {
        self.object(p, &Object::Layout(name.into()))?;
        p.memo_put()?;
        Ok(())
    }

    /// A tensor's Python state (`__dict__`), when it holds what can be written
    /// without a general value writer: a dict of names to scalars, strings,
    /// dtypes, devices and sizes.
    fn python_state(&mut self, p: &mut P, state: &Value<Object>) -> Result<()> {
        let unsupported = || {
            Error::Checkpoint(CheckpointError::Unsupported {
                what:
                    "saving a tensor attribute other than a scalar, string, dtype, device or size"
                        .into(),
            })
        };
        let items = match state {
            Value::Node(id) => match self.ckpt.graph.try_get(*id) {
                Some(Node::Dict(items)) => items,
                _ => return Err(unsupported()),
            },
            _ => return Err(unsupported()),
        };
        p.empty_dict()?;
        p.memo_put()?;
        if items.is_empty() {
            return Ok(());
        }
        p.mark()?;
        for (k, v) in items {
            let key = k.as_str().ok_or_else(unsupported)?;
            p.str_memoized(key)?;
            match v {
                Value::None => p.none()?,
                Value::Bool(b) => p.bool(*b)?,
                Value::Int(i) => p.int(*i)?,
                Value::BigInt(i) => p.bigint(i)?,
                Value::Float(f) => p.float(*f)?,
                Value::Str(s) => p.str_memoized(s)?,
                Value::Ext(o @ (Object::DType(_) | Object::Device(_) | Object::Size(_))) => {
                    self.object(p, o)?
                }
                _ => return Err(unsupported()),
            }
        }
        p.setitems()?;
        Ok(())
    }

    fn strided_args(&mut self, p: &mut P, t: &TensorObject, requires_grad: bool) -> Result<()> {
        let x = &t.tensor;
        let dtype = x.dtype();
        let v2 = dtype.storage_class().is_some();
        p.mark()?;
        self.persid(p, x.untyped_storage(), v2.then_some(dtype))?;
        p.int(x.storage_offset() as i64)?;
        ints(p, x.shape())?;
        ints(p, x.stride())?;
        match t.quantization() {
            Some(Quantization::PerTensorAffine { scale, zero_point }) => {
                global(p, &Global::QScheme("per_tensor_affine"))?;
                p.float(*scale)?;
                p.int(*zero_point)?;
                p.tuple(3)?;
            }
            Some(Quantization::PerChannel {
                scales,
                zero_points,
                axis,
            }) => {
                // PyTorch writes both per-channel schemes as `per_channel_affine`.
                p.mark()?;
                global(p, &Global::QScheme("per_channel_affine"))?;
                self.component(p, scales)?;
                self.component(p, zero_points)?;
                p.int(*axis as i64)?;
                p.tuple(4)?;
            }
            None => {}
        }
        p.bool(requires_grad)?;
        empty_ordered_dict(p)?;
        if !v2 && t.quantization().is_none() {
            global(p, &Global::DType(dtype))?;
        }
        if t.conj || t.neg {
            // PyTorch appends `{'conj': True}` / `{'neg': True}` only when set.
            p.empty_dict()?;
            p.memo_put()?;
            p.mark()?;
            for (name, on) in [("conj", t.conj), ("neg", t.neg)] {
                if on {
                    p.str_memoized(name)?;
                    p.bool(true)?;
                }
            }
            p.setitems()?;
        }
        p.tuple_from_mark()?;
        Ok(())
    }

    fn object(&mut self, p: &mut P, o: &Object) -> Result<()> {
        match o {
            Object::Tensor(t) => {
                let written = self.tensors.get(&t.tensor.id());
                if let Some((i, _)) = written.and_then(|w| w.iter().find(|(_, o)| o.is_same(t))) {
                    p.memo_get(*i)?;
                    return Ok(());
                }
                let i = if t.parameter {
                    let with_state = t.state().is_some();
                    global(
                        p,
                        &if with_state {
                            Global::RebuildParameterWithState
                        } else {
                            Global::RebuildParameter
                        },
                    )?;
                    if with_state {
                        p.mark()?;
                    }
                    self.tensor(p, t, false)?;
                    p.bool(t.tensor.requires_grad())?;
                    empty_ordered_dict(p)?;
                    match t.state() {
                        Some(state) => {
                            self.python_state(p, state)?;
                            p.tuple_from_mark()?;
                        }
                        None => p.tuple(3)?,
                    }
                    p.reduce()?;
                    p.memo_put()?
                } else {
                    self.tensor(p, t, t.tensor.requires_grad())?
                };
                let id = t.tensor.id();
                self.tensors.entry(id).or_default().push((i, t.clone()));
            }
            Object::Storage(s) => self.persid(p, &s.storage, s.dtype)?,
            Object::DType(d) => global(p, &Global::DType(*d))?,
            Object::Device(d) => {
                global(p, &Global::Device)?;
                p.str_memoized(&d.to_string())?;
                p.tuple(1)?;
                p.reduce()?;
                p.memo_put()?;
            }
            Object::Size(dims) => {
                global(p, &Global::Size)?;
                ints(p, dims)?;
                p.tuple(1)?;
                p.reduce()?;
                p.memo_put()?;
            }
            Object::Complex(c) => {
                global(p, &Global::Complex)?;
                p.float(c.re)?;
                p.float(c.im)?;
                p.tuple(2)?;
                p.reduce()?;
            }
            Object::QScheme(q) => global(p, &Global::QScheme(q))?,
            Object::Layout(name) => {
                global(p, &Global::GetLayout)?;
                p.str_memoized(name)?;
                p.tuple(1)?;
                p.reduce()?;
            }
            Object::Global(g) => global(p, g)?,
            other => {
                return Err(Error::Checkpoint(CheckpointError::NotSaveable {
                    path: String::new(),
                    class: other.class_name().unwrap_or_default(),
                }))
            }
        }
        Ok(())
    }
}
