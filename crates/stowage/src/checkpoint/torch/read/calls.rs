//! What each callable global builds when a pickle calls it (`REDUCE`,
//! `NEWOBJ`): one function per global, as PyTorch has one `_rebuild_*` each
//! in `torch/_utils.py`. [`TorchHooks::call`] dispatches to them.

use num_complex::Complex64;

use super::{
    as_bool, as_dims, as_str, as_tensor, bad, counter, kinds, lazy_bits, python_state, sparse,
    tuple_items, StorageSource, TorchHooks, V,
};
use crate::checkpoint::globals::allowlist::Global;
use crate::checkpoint::pickle::{Graph, Node, Value};
use crate::checkpoint::value::graph::{Object, TensorObject, COUNTER};
use crate::checkpoint::value::kind::Quantization;
use crate::error::{CheckpointError, FormatError};
use crate::{Error, Result, Tensor};

/// An error unless `args` has from `lo` to `hi` items.
fn arity(args: &[V], lo: usize, hi: usize, name: &'static str) -> Result<()> {
    let n = args.len();
    if n < lo || n > hi {
        return Err(Error::Format(FormatError::BadObject {
            context: name,
            expected: "the documented arguments",
            found: format!("{n} arguments"),
        }));
    }
    Ok(())
}

/// `t` as a value, with the lazy conjugate and negative bits of `meta`.
fn tensor(graph: &Graph<Object>, t: Tensor, meta: Option<&V>) -> Result<V> {
    let mut obj = TensorObject::new(t);
    (obj.conj, obj.neg) = lazy_bits(graph, meta)?;
    Ok(Value::Ext(Object::Tensor(std::sync::Arc::new(obj))))
}

impl<S: StorageSource> TorchHooks<'_, S> {
    /// What calling `f` with `args` builds.
    pub(super) fn call(&mut self, graph: &mut Graph<Object>, f: &Global, args: &[V]) -> Result<V> {
        match f {
            Global::RebuildTensor => self.rebuild_tensor(graph, args),
            Global::RebuildTensorV2 => self.rebuild_tensor_v2(graph, args),
            Global::RebuildTensorV3 => self.rebuild_tensor_v3(graph, args),
            Global::RebuildQTensor => self.rebuild_qtensor(graph, args),
            Global::RebuildParameter => rebuild_parameter(graph, args, false),
            Global::RebuildParameterWithState => rebuild_parameter(graph, args, true),
            Global::RebuildFromTypeV2 => self.rebuild_from_type_v2(graph, args),
            Global::Counter => {
                let id = counter::counter(graph, args)?;
                self.classes.insert(id, COUNTER);
                Ok(Value::Node(id))
            }
            Global::OrderedDict => self.ordered_dict(graph, args),
            Global::Size => size(graph, args),
            Global::Device => device(graph, args),
            Global::CodecsEncode => codecs_encode(graph, args),
            Global::Set => set(graph, args),
            Global::ByteArray => bytearray(graph, args),
            Global::Complex => Ok(complex(args)),
            Global::GetLayout => {
                arity(args, 1, 1, "_get_layout")?;
                let name = as_str(graph, &args[0], "_get_layout")?;
                Ok(Value::Ext(Object::Layout(name.into())))
            }
            Global::UnsupportedRebuild("_rebuild_sparse_tensor") => sparse::sparse(graph, args),
            Global::UnsupportedRebuild("_rebuild_nested_tensor") => kinds::nested(graph, args),
            Global::UnsupportedRebuild("_rebuild_meta_tensor_no_storage") => {
                kinds::meta_no_storage(graph, args)
            }
            Global::UnsupportedRebuild("_rebuild_wrapper_subclass") => {
                kinds::wrapper_subclass(graph, args)
            }
            Global::UnsupportedRebuild(name) => {
                Err(Error::Checkpoint(CheckpointError::Unsupported {
                    what: format!(
                        "torch._utils.{name} (sparse, nested, meta-only or subclass tensors)"
                    ),
                }))
            }
            other => Err(Error::Format(FormatError::BadObject {
                context: "REDUCE",
                expected: "a callable",
                found: format!("{other:?}"),
            })),
        }
    }

    /// `torch._utils._rebuild_tensor(storage, offset, size, stride)`.
    fn rebuild_tensor(&mut self, graph: &mut Graph<Object>, args: &[V]) -> Result<V> {
        arity(args, 4, 4, "_rebuild_tensor")?;
        let t = self.rebuild(graph, &args[..4], None, None)?;
        tensor(graph, t, None)
    }

    /// `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
    /// backward_hooks[, metadata])`.
    fn rebuild_tensor_v2(&mut self, graph: &mut Graph<Object>, args: &[V]) -> Result<V> {
        arity(args, 6, 7, "_rebuild_tensor_v2")?;
        let t = self.rebuild(graph, &args[..4], Some(&args[4]), None)?;
        tensor(graph, t, args.get(6))
    }

    /// `_rebuild_tensor_v3(…, requires_grad, backward_hooks, dtype[,
    /// metadata])`: v2 with the dtype given (the storage is untyped).
    fn rebuild_tensor_v3(&mut self, graph: &mut Graph<Object>, args: &[V]) -> Result<V> {
        arity(args, 7, 8, "_rebuild_tensor_v3")?;
        let dtype = match &args[6] {
            Value::Ext(Object::DType(d)) => *d,
            other => return Err(bad("_rebuild_tensor_v3 dtype", "a dtype", other, graph)),
        };
        let t = self.rebuild(graph, &args[..4], Some(&args[4]), Some(dtype))?;
        tensor(graph, t, args.get(7))
    }

    /// `_rebuild_qtensor(storage, offset, size, stride, quantizer_params,
    /// requires_grad, backward_hooks)`: a quantized tensor, per tensor or
    /// per channel.
    fn rebuild_qtensor(&mut self, graph: &mut Graph<Object>, args: &[V]) -> Result<V> {
        arity(args, 7, 7, "_rebuild_qtensor")?;
        let params = tuple_items(graph, &args[4], "quantizer params")?;
        let scheme = match params.first() {
            Some(Value::Ext(Object::QScheme(q))) => *q,
            other => {
                let found = other.unwrap_or(&Value::None);
                return Err(bad("quantizer params", "a qscheme", found, graph));
            }
        };
        let mut t = self.rebuild(graph, &args[..4], Some(&args[5]), None)?;
        t.requires_grad_(false)?;
        let quantization = match (scheme, params.len()) {
            ("per_tensor_affine", 3) => {
                let scale = params[1]
                    .as_f64()
                    .ok_or_else(|| bad("quantizer scale", "a float", &params[1], graph))?;
                let zero_point = params[2]
                    .as_i64()
                    .ok_or_else(|| bad("quantizer zero point", "an int", &params[2], graph))?;
                Quantization::PerTensorAffine { scale, zero_point }
            }
            ("per_channel_affine" | "per_channel_affine_float_qparams", _) => {
                let float = scheme == "per_channel_affine_float_qparams";
                kinds::per_channel(graph, params, t.shape(), float)?
            }
            _ => {
                return Err(Error::Checkpoint(CheckpointError::UnsupportedQScheme {
                    qscheme: scheme.to_string(),
                }))
            }
        };
        let mut obj = TensorObject::new(t);
        obj.set_quantization(Some(quantization));
        Ok(Value::Ext(Object::Tensor(std::sync::Arc::new(obj))))
    }

    /// `_rebuild_from_type_v2(func, new_type, args, state)`: what `func(*args)`
    /// builds, as a `Parameter` or a tensor subclass, with its Python state.
    fn rebuild_from_type_v2(&mut self, graph: &mut Graph<Object>, args: &[V]) -> Result<V> {
        arity(args, 4, 4, "_rebuild_from_type_v2")?;
        // A subclass resolves only where the options let its global in
        // (inert loading, allowed globals); stowage keeps it as it resolved.
        let (is_param, subclass) = match &args[1] {
            Value::Ext(Object::Global(g)) if **g == Global::TensorClass => (false, None),
            Value::Ext(Object::Global(g)) if **g == Global::ParameterClass => (true, None),
            other @ Value::Ext(Object::Global(_)) => {
                return Err(bad(
                    "_rebuild_from_type_v2 type",
                    "torch.Tensor, Parameter or a tensor subclass",
                    other,
                    graph,
                ))
            }
            other => (false, Some(other.clone())),
        };
        let inner = match &args[0] {
            Value::Ext(Object::Global(g)) => (**g).clone(),
            other => {
                let expected = "a rebuild function";
                return Err(bad(
                    "_rebuild_from_type_v2 function",
                    expected,
                    other,
                    graph,
                ));
            }
        };
        let inner_args = tuple_items(graph, &args[2], "_rebuild_from_type_v2 args")?.to_vec();
        let mut v = self.call(graph, &inner, &inner_args)?;
        if let Value::Ext(Object::Tensor(t)) = &mut v {
            // A new object (a Parameter made of the tensor is not the tensor).
            let t = std::sync::Arc::make_mut(t);
            t.parameter |= is_param;
            t.set_subclass(subclass);
            let state = python_state(graph, args.get(3))?.or_else(|| t.state().cloned());
            t.set_state(state);
        }
        Ok(v)
    }

    /// `collections.OrderedDict([pairs])`: a dict that keeps its order
    /// (`Checkpoint` remembers it was ordered).
    fn ordered_dict(&mut self, graph: &mut Graph<Object>, args: &[V]) -> Result<V> {
        let id = graph.dict(Vec::new());
        self.ordered.insert(id);
        let Some(init) = args.first() else {
            return Ok(Value::Node(id));
        };
        let pairs = match init {
            Value::Node(l) => graph
                .try_get(*l)
                .map(|n| n.values().cloned().collect::<Vec<_>>()),
            _ => None,
        }
        .ok_or_else(|| bad("OrderedDict argument", "a list of pairs", init, graph))?;
        let mut items = Vec::new();
        for p in &pairs {
            // Python 3 pickles each item as a tuple; Python 2's
            // `OrderedDict.__reduce__` gave two-item lists (`[[k, v], …]`),
            // which `OrderedDict(...)` accepts alike.
            let kv = match p {
                Value::Node(id) => match graph.try_get(*id) {
                    Some(Node::Tuple(kv) | Node::List(kv)) if kv.len() == 2 => {
                        Some((kv[0].clone(), kv[1].clone()))
                    }
                    _ => None,
                },
                _ => None,
            };
            items.push(
                kv.ok_or_else(|| bad("OrderedDict item", "a pair (tuple or list)", p, graph))?,
            );
        }
        if let Node::Dict(d) = graph.get_mut(id) {
            *d = items;
        }
        Ok(Value::Node(id))
    }
}

/// `_rebuild_parameter(data, requires_grad, backward_hooks)`, and
/// `_rebuild_parameter_with_state(…, state)` (`with_state`).
fn rebuild_parameter(graph: &Graph<Object>, args: &[V], with_state: bool) -> Result<V> {
    arity(args, 3, 4, "_rebuild_parameter")?;
    let mut p = as_tensor(graph, &args[0], "parameter data")?;
    p.tensor
        .requires_grad_(as_bool(graph, &args[1], "parameter requires_grad")?)?;
    p.parameter = true;
    if with_state {
        p.set_state(python_state(graph, args.get(3))?);
    }
    Ok(Value::Ext(Object::Tensor(std::sync::Arc::new(p))))
}

/// `torch.Size([dims])`.
fn size(graph: &Graph<Object>, args: &[V]) -> Result<V> {
    arity(args, 0, 1, "torch.Size")?;
    let dims = match args.first() {
        Some(v) => as_dims(graph, v, "torch.Size")?,
        None => Vec::new(),
    };
    Ok(Value::Ext(Object::Size(dims.into())))
}

/// `torch.device(type[, index])`.
fn device(graph: &Graph<Object>, args: &[V]) -> Result<V> {
    arity(args, 1, 2, "torch.device")?;
    let text = match (&args[0], args.get(1)) {
        (Value::Str(s), Some(Value::Int(i))) => format!("{s}:{i}"),
        (Value::Str(s), _) => s.to_string(),
        (other, _) => return Err(bad("torch.device", "a device string", other, graph)),
    };
    Ok(Value::Ext(Object::Device(text.parse()?)))
}

/// `_codecs.encode(text, encoding)`: how protocol 2 pickles `bytes`, in
/// latin-1 or UTF-8.
fn codecs_encode(graph: &Graph<Object>, args: &[V]) -> Result<V> {
    arity(args, 2, 2, "_codecs.encode")?;
    let s = as_str(graph, &args[0], "_codecs.encode text")?;
    let enc = as_str(graph, &args[1], "_codecs.encode encoding")?;
    let bytes: Vec<u8> = match enc {
        "latin1" | "latin-1" | "iso-8859-1" => s
            .chars()
            .map(|c| u8::try_from(c as u32))
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| {
                Error::Format(FormatError::BadObject {
                    context: "_codecs.encode",
                    expected: "latin-1 text",
                    found: "a wider character".into(),
                })
            })?,
        "utf-8" | "utf8" => s.as_bytes().to_vec(),
        other => {
            return Err(Error::Checkpoint(CheckpointError::Unsupported {
                what: format!("_codecs.encode with encoding {other:?}"),
            }))
        }
    };
    Ok(Value::Bytes(bytes.into()))
}

/// The items of the list (or other container) a `set` or `bytearray` is
/// built from; none without an argument.
fn items_of(graph: &Graph<Object>, args: &[V], context: &'static str) -> Result<Vec<V>> {
    match args.first() {
        Some(Value::Node(id)) => Ok(graph
            .try_get(*id)
            .map(|n| n.values().cloned().collect())
            .unwrap_or_default()),
        Some(other) => Err(bad(context, "a list", other, graph)),
        None => Ok(Vec::new()),
    }
}

/// `builtins.set([items])`.
fn set(graph: &mut Graph<Object>, args: &[V]) -> Result<V> {
    let items = items_of(graph, args, "set/bytearray argument")?;
    Ok(Value::Node(graph.add(Node::Set(items))))
}

/// `builtins.bytearray(bytes)` or `bytearray([ints])`.
fn bytearray(graph: &mut Graph<Object>, args: &[V]) -> Result<V> {
    if let Some(Value::Bytes(b)) = args.first() {
        return Ok(Value::Node(graph.add(Node::ByteArray(b.to_vec()))));
    }
    let items = items_of(graph, args, "set/bytearray argument")?;
    let bytes = items
        .iter()
        .map(|v| v.as_i64().and_then(|i| u8::try_from(i).ok()))
        .collect::<Option<Vec<u8>>>()
        .ok_or(Error::Format(FormatError::BadObject {
            context: "bytearray",
            expected: "bytes",
            found: "other values".into(),
        }))?;
    Ok(Value::Node(graph.add(Node::ByteArray(bytes))))
}

/// `builtins.complex(re, im)`.
fn complex(args: &[V]) -> V {
    let re = args.first().and_then(Value::as_f64).unwrap_or(0.0);
    let im = args.get(1).and_then(Value::as_f64).unwrap_or(0.0);
    Value::Ext(Object::Complex(Complex64::new(re, im)))
}
