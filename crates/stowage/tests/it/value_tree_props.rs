//! Property test: random value trees (nested containers, scalars, tensors that
//! are views sharing a few storages) survive save → load unchanged: the same
//! object graph, the same tensors, values and sharing.

use std::collections::BTreeMap;

use crate::common::{describe, manifest, Hash};
use num_bigint::BigInt;
use proptest::prelude::*;
use stowage::checkpoint::{load_bytes, save_to_writer, PyValue, TensorObject};
use stowage::{Checkpoint, DType, Device, Kind, Tensor};
use stowage::{LoadOptions, SaveOptions};

#[derive(Clone, Debug)]
enum Key {
    Str(String),
    Int(i64),
}

#[derive(Clone, Debug)]
enum Tree {
    None,
    Bool(bool),
    Int(i64),
    Big(i64, u32),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    DType(usize),
    Size(Vec<usize>),
    Device(u32),
    Tensor {
        base: usize,
        view: usize,
        parameter: bool,
        requires_grad: bool,
    },
    List(Vec<Tree>),
    Tuple(Vec<Tree>),
    Dict(Vec<(Key, Tree)>),
    Ordered(Vec<(Key, Tree)>),
}

fn key() -> impl Strategy<Value = Key> {
    prop_oneof![
        "[a-z_.]{0,6}".prop_map(Key::Str),
        any::<i64>().prop_map(Key::Int)
    ]
}

fn leaf() -> impl Strategy<Value = Tree> {
    prop_oneof![
        Just(Tree::None),
        any::<bool>().prop_map(Tree::Bool),
        any::<i64>().prop_map(Tree::Int),
        (any::<i64>(), 1..3u32).prop_map(|(a, b)| Tree::Big(a, b)),
        any::<f64>().prop_map(Tree::Float),
        "\\PC{0,8}".prop_map(Tree::Str),
        proptest::collection::vec(any::<u8>(), 0..8).prop_map(Tree::Bytes),
        (0..4usize).prop_map(Tree::DType),
        proptest::collection::vec(0..5usize, 0..3).prop_map(Tree::Size),
        (0..3u32).prop_map(Tree::Device),
        (0..4usize, 0..4usize, any::<bool>(), any::<bool>()).prop_map(
            |(base, view, parameter, requires_grad)| Tree::Tensor {
                base,
                view,
                parameter,
                requires_grad
            }
        ),
    ]
}

fn tree() -> impl Strategy<Value = Tree> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Tree::List),
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Tree::Tuple),
            proptest::collection::vec((key(), inner.clone()), 0..6).prop_map(Tree::Dict),
            proptest::collection::vec((key(), inner), 0..6).prop_map(Tree::Ordered),
        ]
    })
}

/// Four storages, each viewed with one dtype (PyTorch refuses two legacy dtypes on one storage).
fn bases() -> Vec<Tensor> {
    vec![
        Tensor::arange(0.0, 24.0, 1.0, DType::Float32)
            .unwrap()
            .view(&[4, 6])
            .unwrap(),
        Tensor::arange(-5.0, 5.0, 1.0, DType::Int64).unwrap(),
        Tensor::arange(0.0, 12.0, 1.0, DType::UInt16)
            .unwrap()
            .view(&[3, 4])
            .unwrap(),
        Tensor::arange(0.0, 5.0, 0.5, DType::Float8E4M3Fn).unwrap(),
    ]
}

fn view(base: &Tensor, v: usize) -> Tensor {
    match v {
        0 => base.clone(),
        1 => base.narrow(0, 1, 2).unwrap(),
        2 => base.t().unwrap(),
        _ => base.select(0, -1).unwrap(),
    }
}

struct Builder {
    bases: Vec<Tensor>,
}

impl Builder {
    fn key(&self, k: &Key) -> PyValue {
        match k {
            Key::Str(s) => PyValue::from(s.as_str()),
            Key::Int(i) => PyValue::Int(*i),
        }
    }

    fn pairs(&mut self, kv: &[(Key, Tree)]) -> Vec<(PyValue, PyValue)> {
        // Python dict keys are unique (a repeated key replaces the value).
        let mut seen = BTreeMap::new();
        let mut out = Vec::new();
        for (k, v) in kv {
            let id = match k {
                Key::Str(s) => format!("s{s}"),
                Key::Int(i) => format!("i{i}"),
            };
            if seen.insert(id, ()).is_none() {
                let value = self.value(v);
                out.push((self.key(k), value));
            }
        }
        out
    }

    fn value(&mut self, t: &Tree) -> PyValue {
        match t {
            Tree::None => PyValue::None,
            Tree::Bool(b) => PyValue::Bool(*b),
            Tree::Int(i) => PyValue::Int(*i),
            Tree::Big(a, b) => {
                // Beyond i64, where pickles use LONG1/LONG4 and stowage a BigInt.
                let big = BigInt::from(*a) * (BigInt::from(1u64) << (64 * *b));
                PyValue::BigInt(big)
            }
            Tree::Float(f) => PyValue::Float(*f),
            Tree::Str(s) => PyValue::from(s.as_str()),
            Tree::Bytes(b) => PyValue::bytes(b.clone()),
            Tree::DType(i) => PyValue::DType(
                [
                    DType::Float16,
                    DType::Int8,
                    DType::UInt32,
                    DType::Float8E5M2,
                ][*i],
            ),
            Tree::Size(s) => PyValue::size(s.clone()),
            Tree::Device(i) => PyValue::Device(match i {
                0 => Device::CPU,
                1 => Device::cuda(1),
                _ => "mps".parse().unwrap(),
            }),
            Tree::Tensor {
                base,
                view: v,
                parameter,
                requires_grad,
            } => {
                let mut t = view(&self.bases[*base], *v);
                // PyTorch refuses requires_grad on integer dtypes.
                t.requires_grad_(*requires_grad && t.dtype().kind() == Kind::Float)
                    .unwrap();
                let mut obj = TensorObject::new(t);
                obj.parameter = *parameter;
                PyValue::from(obj)
            }
            Tree::List(xs) => PyValue::List(xs.iter().map(|x| self.value(x)).collect()),
            Tree::Tuple(xs) => PyValue::Tuple(xs.iter().map(|x| self.value(x)).collect()),
            Tree::Dict(kv) | Tree::Ordered(kv) => {
                let items = self.pairs(kv);
                if matches!(t, Tree::Ordered(_)) {
                    PyValue::OrderedDict(items)
                } else {
                    PyValue::Dict(items)
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_value_trees_survive_save_and_load(t in tree()) {
        let mut b = Builder { bases: bases() };
        let original = Checkpoint::from_value(b.value(&t)).unwrap();
        let bytes = save_to_writer(Vec::new(), "archive", &original, &SaveOptions::default()).unwrap();
        let loaded = load_bytes(&bytes, &LoadOptions::default()).unwrap();
        prop_assert_eq!(describe(&loaded), describe(&original));
        prop_assert_eq!(manifest(&loaded, Hash::Values).unwrap(), manifest(&original, Hash::Values).unwrap());
        // Each storage is written once, whatever number of tensors view it.
        let distinct = {
            let ts = original.tensors().unwrap();
            let mut ids: Vec<usize> = ts.iter().map(|(_, t)| t.tensor.untyped_storage().id()).collect();
            ids.sort_unstable();
            ids.dedup();
            ids.len()
        };
        prop_assert_eq!(loaded.storages().len(), distinct);
    }
}
