//! The PyTorch meaning of a checkpoint's pickle, for writing, and the zip
//! records around it, in the order PyTorch 2.x writes them: `data.pkl`,
//! `.format_version`, `.storage_alignment`, `byteorder`, `data/0..N`,
//! `version`, `.data/serialization_id`.
//!
//! Tensors pickle as `_rebuild_tensor_v2` with a legacy storage class, or
//! `_rebuild_tensor_v3` with `UntypedStorage` for dtypes that have no class;
//! Parameters as `_rebuild_parameter`. Storage keys are assigned in order of
//! first appearance, keyed by storage identity, so tensors sharing a storage
//! share a key and its bytes are written once.

use std::collections::HashMap;

use super::allowlist::Global;
use super::object::{Checkpoint, Object, TensorObject};
use super::pickle::{Graph, Node, NodeId, Pickler, Value};
use crate::{DType, Error, Result, UntypedStorage};

/// Deepest container nesting written (the reader's default limit).
const MAX_DEPTH: usize = 1000;

struct Writer<'c> {
    p: Pickler<Vec<u8>>,
    graph: &'c Graph<Object>,
    ckpt: &'c Checkpoint,
    memo: HashMap<NodeId, u32>,
    in_progress: Vec<NodeId>,
    /// Storages in order of first appearance, with the dtype they were first saved as.
    storages: Vec<(UntypedStorage, Option<DType>)>,
    keys: HashMap<usize, usize>,
}

type IoR = std::io::Result<()>;

fn io(e: std::io::Error) -> Error {
    Error::Io(e)
}

impl Writer<'_> {
    fn global(&mut self, module: &str, name: &str) -> IoR {
        self.p.global_memoized(module, name)
    }

    fn value(&mut self, v: &Value<Object>, depth: usize) -> Result<()> {
        if depth > MAX_DEPTH {
            return Err(Error::LimitExceeded {
                limit: "nesting depth when saving",
                value: depth as u64,
                max: MAX_DEPTH as u64,
            });
        }
        match v {
            Value::None => self.p.none().map_err(io),
            Value::Bool(b) => self.p.bool(*b).map_err(io),
            Value::Int(i) => self.p.int(*i).map_err(io),
            Value::BigInt(b) => self.p.bigint(b).map_err(io),
            Value::Float(f) => self.p.float(*f).map_err(io),
            Value::Str(s) => self.p.str_memoized(s).map_err(io),
            // CPython pickles `b''` as `__builtin__.bytes()`, which PyTorch's weights_only
            // loader refuses (so PyTorch cannot load its own empty bytes); the allowed
            // `_codecs.encode('', 'latin1')` gives the same value.
            Value::Bytes(b) if b.is_empty() => {
                self.global("_codecs", "encode").map_err(io)?;
                self.p.str_memoized("").map_err(io)?;
                self.p.str_memoized("latin1").map_err(io)?;
                self.p.tuple(2).map_err(io)?;
                self.p.reduce().map_err(io)
            }
            Value::Bytes(b) => self.p.bytes(b).map_err(io),
            Value::Node(id) => self.node(*id, depth),
            Value::Ext(o) => self.object(o),
        }
    }

    fn node(&mut self, id: NodeId, depth: usize) -> Result<()> {
        if let Some(&m) = self.memo.get(&id) {
            return self.p.memo_get(m).map_err(io);
        }
        if self.in_progress.contains(&id) {
            return Err(Error::Unsupported {
                what: "a tuple that contains itself".into(),
            });
        }
        let graph = self.graph;
        let node = graph.try_get(id).ok_or_else(|| Error::BadObject {
            context: "saving",
            expected: "a node of the checkpoint's graph",
            found: format!("node {}", id.0),
        })?;
        match node {
            Node::Dict(items) => {
                if self.ckpt.ordered.contains(&id) {
                    self.global("collections", "OrderedDict").map_err(io)?;
                    self.p.tuple(0).map_err(io)?;
                    self.p.reduce().map_err(io)?;
                } else {
                    self.p.empty_dict().map_err(io)?;
                }
                let m = self.p.memo_put().map_err(io)?;
                self.memo.insert(id, m);
                for batch in items.chunks(1000) {
                    self.p.mark().map_err(io)?;
                    for (k, v) in batch {
                        self.value(k, depth + 1)?;
                        self.value(v, depth + 1)?;
                    }
                    self.p.setitems().map_err(io)?;
                }
                if let Some(state) = self.ckpt.state.get(&id) {
                    self.value(state, depth + 1)?;
                    self.p.build().map_err(io)?;
                }
            }
            Node::List(items) => {
                self.p.empty_list().map_err(io)?;
                let m = self.p.memo_put().map_err(io)?;
                self.memo.insert(id, m);
                for batch in items.chunks(1000) {
                    self.p.mark().map_err(io)?;
                    for v in batch {
                        self.value(v, depth + 1)?;
                    }
                    self.p.appends().map_err(io)?;
                }
            }
            Node::Tuple(items) => {
                self.in_progress.push(id);
                if items.len() > 3 {
                    self.p.mark().map_err(io)?;
                }
                for v in items {
                    self.value(v, depth + 1)?;
                }
                if items.len() > 3 {
                    self.p.tuple_from_mark().map_err(io)?;
                } else {
                    self.p.tuple(items.len()).map_err(io)?;
                }
                self.in_progress.pop();
                let m = self.p.memo_put().map_err(io)?;
                self.memo.insert(id, m);
            }
            Node::Set(items) => {
                self.global("__builtin__", "set").map_err(io)?;
                self.p.empty_list().map_err(io)?;
                self.p.mark().map_err(io)?;
                for v in items {
                    self.value(v, depth + 1)?;
                }
                self.p.appends().map_err(io)?;
                self.p.tuple(1).map_err(io)?;
                self.p.reduce().map_err(io)?;
                let m = self.p.memo_put().map_err(io)?;
                self.memo.insert(id, m);
            }
            Node::ByteArray(b) => {
                self.global("__builtin__", "bytearray").map_err(io)?;
                self.p.bytes(b).map_err(io)?;
                self.p.tuple(1).map_err(io)?;
                self.p.reduce().map_err(io)?;
                let m = self.p.memo_put().map_err(io)?;
                self.memo.insert(id, m);
            }
            other => {
                return Err(Error::Unsupported {
                    what: format!("saving a {} (PyTorch's loader refuses it)", other.kind()),
                })
            }
        }
        Ok(())
    }

    fn ints(&mut self, xs: &[usize]) -> Result<()> {
        if xs.len() > 3 {
            self.p.mark().map_err(io)?;
        }
        for &x in xs {
            let x = i64::try_from(x).map_err(|_| Error::SizeOverflow {
                what: "size when saving",
                detail: x.to_string(),
            })?;
            self.p.int(x).map_err(io)?;
        }
        if xs.len() > 3 {
            self.p.tuple_from_mark()
        } else {
            self.p.tuple(xs.len())
        }
        .map_err(io)
    }

    /// The persistent id of a storage viewed as `dtype` (`None`: untyped).
    fn persid(&mut self, storage: &UntypedStorage, dtype: Option<DType>) -> Result<()> {
        if !storage.has_data() {
            return Err(Error::NoData {
                op: "saving a storage",
                device: storage.device(),
            });
        }
        let index = match self.keys.get(&storage.id()) {
            Some(&i) => {
                // PyTorch: "Cannot save multiple tensors or storages that view the same data as different types".
                let first = self.storages[i].1.unwrap_or(DType::UInt8);
                let now = dtype.unwrap_or(DType::UInt8);
                if first != now {
                    return Err(Error::SaveConflict {
                        key: i.to_string(),
                        first,
                        second: now,
                    });
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
        let (module, class, numel) = match dtype {
            Some(d) => {
                if nbytes % d.size() != 0 {
                    return Err(Error::StorageSizeMismatch {
                        op: "saving a typed storage",
                        dst: nbytes - nbytes % d.size(),
                        src: nbytes,
                    });
                }
                (
                    "torch",
                    d.storage_class().unwrap_or("UntypedStorage"),
                    nbytes / d.size(),
                )
            }
            None => ("torch.storage", "UntypedStorage", nbytes),
        };
        self.p.mark().map_err(io)?;
        self.p.str_memoized("storage").map_err(io)?;
        self.global(module, class).map_err(io)?;
        self.p.str_memoized(&index.to_string()).map_err(io)?;
        self.p
            .str_memoized(&storage.device().to_string())
            .map_err(io)?;
        self.p.int(numel as i64).map_err(io)?;
        self.p.tuple_from_mark().map_err(io)?;
        self.p.binpersid().map_err(io)
    }

    fn empty_ordered_dict(&mut self) -> Result<()> {
        self.global("collections", "OrderedDict").map_err(io)?;
        self.p.tuple(0).map_err(io)?;
        self.p.reduce().map_err(io)
    }

    fn tensor(&mut self, t: &TensorObject, requires_grad: bool) -> Result<()> {
        let x = &t.tensor;
        let dtype = x.dtype();
        let v2 = dtype.storage_class().is_some();
        let func = match (t.quantization, v2) {
            (Some(_), _) => "_rebuild_qtensor",
            (None, true) => "_rebuild_tensor_v2",
            (None, false) => "_rebuild_tensor_v3",
        };
        self.global("torch._utils", func).map_err(io)?;
        self.p.mark().map_err(io)?;
        self.persid(x.untyped_storage(), v2.then_some(dtype))?;
        self.p.int(x.storage_offset() as i64).map_err(io)?;
        self.ints(x.shape())?;
        self.ints(x.stride())?;
        if let Some((scale, zero_point)) = t.quantization {
            self.global("torch", "per_tensor_affine").map_err(io)?;
            self.p.float(scale).map_err(io)?;
            self.p.int(zero_point).map_err(io)?;
            self.p.tuple(3).map_err(io)?;
        }
        self.p.bool(requires_grad).map_err(io)?;
        self.empty_ordered_dict()?;
        if !v2 {
            self.global("torch", dtype.name()).map_err(io)?;
        }
        if t.conj || t.neg {
            // PyTorch appends `{'conj': True}` / `{'neg': True}` only when set.
            self.p.empty_dict().map_err(io)?;
            self.p.memo_put().map_err(io)?;
            self.p.mark().map_err(io)?;
            for (name, on) in [("conj", t.conj), ("neg", t.neg)] {
                if on {
                    self.p.str_memoized(name).map_err(io)?;
                    self.p.bool(true).map_err(io)?;
                }
            }
            self.p.setitems().map_err(io)?;
        }
        self.p.tuple_from_mark().map_err(io)?;
        self.p.reduce().map_err(io)?;
        self.p.memo_put().map_err(io)?;
        Ok(())
    }

    fn object(&mut self, o: &Object) -> Result<()> {
        match o {
            Object::Tensor(t) if t.parameter => {
                self.global("torch._utils", "_rebuild_parameter")
                    .map_err(io)?;
                self.tensor(t, false)?;
                self.p.bool(t.tensor.requires_grad()).map_err(io)?;
                self.empty_ordered_dict()?;
                self.p.tuple(3).map_err(io)?;
                self.p.reduce().map_err(io)?;
                self.p.memo_put().map_err(io)?;
            }
            Object::Tensor(t) => self.tensor(t, t.tensor.requires_grad())?,
            Object::Storage(s) => self.persid(&s.storage, s.dtype)?,
            Object::DType(d) => self.global("torch", d.name()).map_err(io)?,
            Object::Device(d) => {
                self.global("torch", "device").map_err(io)?;
                self.p.str_memoized(&d.to_string()).map_err(io)?;
                self.p.tuple(1).map_err(io)?;
                self.p.reduce().map_err(io)?;
                self.p.memo_put().map_err(io)?;
            }
            Object::Size(dims) => {
                self.global("torch", "Size").map_err(io)?;
                self.ints(dims)?;
                self.p.tuple(1).map_err(io)?;
                self.p.reduce().map_err(io)?;
                self.p.memo_put().map_err(io)?;
            }
            Object::Complex(c) => {
                self.global("__builtin__", "complex").map_err(io)?;
                self.p.float(c.re).map_err(io)?;
                self.p.float(c.im).map_err(io)?;
                self.p.tuple(2).map_err(io)?;
                self.p.reduce().map_err(io)?;
            }
            Object::QScheme(q) => self.global("torch", q).map_err(io)?,
            Object::Layout(name) => {
                self.global("torch.serialization", "_get_layout")
                    .map_err(io)?;
                self.p.str_memoized(name).map_err(io)?;
                self.p.tuple(1).map_err(io)?;
                self.p.reduce().map_err(io)?;
            }
            Object::Global(g) => {
                let (m, n) = global_path(g);
                self.global(m, &n).map_err(io)?;
            }
        }
        Ok(())
    }
}

/// The `module`, `name` a global pickles as.
fn global_path(g: &Global) -> (&'static str, String) {
    let u = |m: &'static str, n: &str| (m, n.to_owned());
    match g {
        Global::RebuildTensor => u("torch._utils", "_rebuild_tensor"),
        Global::RebuildTensorV2 => u("torch._utils", "_rebuild_tensor_v2"),
        Global::RebuildTensorV3 => u("torch._utils", "_rebuild_tensor_v3"),
        Global::RebuildParameter => u("torch._utils", "_rebuild_parameter"),
        Global::RebuildParameterWithState => u("torch._utils", "_rebuild_parameter_with_state"),
        Global::RebuildQTensor => u("torch._utils", "_rebuild_qtensor"),
        Global::RebuildFromTypeV2 => u("torch._tensor", "_rebuild_from_type_v2"),
        Global::UnsupportedRebuild(n) => u("torch._utils", n),
        Global::OrderedDict => u("collections", "OrderedDict"),
        Global::Counter => u("collections", "Counter"),
        Global::Size => u("torch", "Size"),
        Global::Device => u("torch", "device"),
        Global::TensorClass => u("torch", "Tensor"),
        Global::ParameterClass => u("torch.nn.parameter", "Parameter"),
        Global::LegacyTensorClass(n) | Global::SubByteDType(n) => u("torch", n),
        Global::Storage(Some(d)) => u("torch", d.storage_class().unwrap_or("UntypedStorage")),
        Global::Storage(None) => u("torch.storage", "UntypedStorage"),
        Global::TypedStorage => u("torch.storage", "TypedStorage"),
        Global::CodecsEncode => u("_codecs", "encode"),
        Global::Set => u("__builtin__", "set"),
        Global::ByteArray => u("__builtin__", "bytearray"),
        Global::Complex => u("__builtin__", "complex"),
        Global::QScheme(q) => u("torch", q),
        Global::GetLayout => u("torch.serialization", "_get_layout"),
        Global::DType(d) => u("torch", d.name()),
    }
}

/// Pickles `ckpt` as PyTorch's `torch.save` does: the bytes of `data.pkl`, and
/// the storages in key order (key `i` is the `i`-th), each written once however
/// many tensors view it.
pub(crate) fn pickle_checkpoint(ckpt: &Checkpoint) -> Result<(Vec<u8>, Vec<UntypedStorage>)> {
    let mut writer = Writer {
        p: Pickler::new(Vec::new()).map_err(io)?,
        graph: &ckpt.graph,
        ckpt,
        memo: HashMap::new(),
        in_progress: Vec::new(),
        storages: Vec::new(),
        keys: HashMap::new(),
    };
    writer.value(&ckpt.root, 0)?;
    writer.p.stop().map_err(io)?;
    let storages = writer.storages.into_iter().map(|(s, _)| s).collect();
    Ok((writer.p.finish(), storages))
}
