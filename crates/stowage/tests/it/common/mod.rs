//! Shared helpers for the checkpoint integration tests: the fixture list, the
//! manifest that `scripts/torch_manifest.py` computes with real PyTorch
//! (`NAME.pt.json`), computed here from a loaded [`Checkpoint`], and a
//! description of the whole object graph for round-trip comparisons.
//!
//! A manifest is a list of JSON objects, one per (path, tensor), with the keys
//! `path`, `dtype`, `shape`, `stride`, `storage_offset`, `storage_group`,
//! `storage_nbytes`, `requires_grad`, `parameter`, `sha256`: exactly the
//! fixtures' `.pt.json` form, so the two compare as JSON values.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value as J};
use sha2::{Digest, Sha256};
use stowage::checkpoint::pickle::Value;
use stowage::checkpoint::{Object, PathKey, TensorObject, ValueKind, ValueRef};
use stowage::Checkpoint;
use stowage::{Result, Tensor};

/// The folder of the PyTorch-made fixtures.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
}

/// The folder of the hostile fixtures.
pub fn hostile_dir() -> PathBuf {
    fixtures_dir().join("hostile")
}

/// The workspace's `scripts/` folder.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("..")
        .join("scripts")
}

/// `tests/fixtures/NAME.pt`.
pub fn fixture(name: &str) -> PathBuf {
    fixtures_dir().join(format!("{name}.pt"))
}

/// The stems of every `*.pt` fixture (not `hostile/`), sorted.
pub fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .expect("tests/fixtures is readable")
        .filter_map(|e| {
            let p = e.ok()?.path();
            let name = p.file_name()?.to_str()?.to_owned();
            (p.is_file() && name.ends_with(".pt")).then(|| name.trim_end_matches(".pt").to_owned())
        })
        .collect();
    names.sort();
    assert!(
        names.len() >= 20,
        "expected the fixture set, found only {names:?}"
    );
    names
}

/// Fixtures in the legacy (pre-zip) stream format.
pub const LEGACY_FIXTURES: &[&str] = &["legacy_format", "legacy_views"];

/// What real PyTorch reports for a fixture: `NAME.pt.json`.
pub fn expected_manifest(name: &str) -> Vec<J> {
    let p = fixtures_dir().join(format!("{name}.pt.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    match serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display())) {
        J::Array(items) => items,
        other => panic!("{}: not a list: {other}", p.display()),
    }
}

/// Loads a fixture, panicking with the error's full text.
pub fn load_fixture(name: &str) -> Checkpoint {
    stowage::load(fixture(name)).unwrap_or_else(|e| panic!("loading {name}.pt: {e}"))
}

/// A path as the manifest writes it: string keys as strings, ints as numbers.
pub fn path_json(path: &[PathKey]) -> J {
    J::Array(
        path.iter()
            .map(|k| match k {
                PathKey::Key(s) => J::String(s.clone()),
                PathKey::Index(i) => json!(i),
            })
            .collect(),
    )
}

/// The logical elements of a tensor, contiguous, row-major, little-endian
/// (lazy conj/neg applied; quantized: the integer representation).
pub fn logical_bytes(t: &TensorObject) -> Result<Vec<u8>> {
    let c = t.resolved()?.contiguous()?;
    let bytes = c.untyped_storage().bytes()?;
    let start = c.storage_offset() * c.element_size();
    Ok(bytes[start..start + c.nbytes()].to_vec())
}

/// Logical bytes of a plain tensor.
pub fn tensor_bytes(t: &Tensor) -> Result<Vec<u8>> {
    logical_bytes(&TensorObject::new(t.clone()))
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Storage groups as the PyTorch manifest numbers them: in order of first
/// appearance, two tensors in one group exactly when
/// [`Tensor::shares_storage_with`] holds. Like torch's `data_ptr()` (0 for every
/// empty storage), all empty storages fall into one group.
pub fn storage_groups(tensors: &[&Tensor]) -> Vec<usize> {
    let mut groups: Vec<usize> = Vec::with_capacity(tensors.len());
    let mut next = 0;
    for (i, t) in tensors.iter().enumerate() {
        let empty = t.untyped_storage().nbytes() == 0;
        let earlier = (0..i).find(|&j| {
            let u = tensors[j];
            t.shares_storage_with(u) || (empty && u.untyped_storage().nbytes() == 0)
        });
        groups.push(match earlier {
            Some(j) => groups[j],
            None => {
                next += 1;
                next - 1
            }
        });
    }
    groups
}

/// How much of a manifest to compute.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Hash {
    /// Hash every tensor's logical bytes.
    Values,
    /// No data (meta tensors): `sha256` is `null`.
    None,
}

/// Which tensor object each tensor of [`Checkpoint::tensors`] is (Python's `is`,
/// [`TensorObject::is_same`]): the index, in that list, of the first tensor that is
/// the same object. The Python side computes the same list from `id(obj)` over
/// `torch_manifest.walk`'s order.
pub fn object_groups(ckpt: &Checkpoint) -> Vec<usize> {
    let tensors = ckpt.tensors().expect("tensors");
    (0..tensors.len())
        .map(|i| {
            (0..=i)
                .find(|&j| tensors[j].1.is_same(tensors[i].1))
                .expect("a tensor is itself")
        })
        .collect()
}

/// The manifest of a loaded checkpoint, in the fixtures' `.pt.json` form.
pub fn manifest(ckpt: &Checkpoint, hash: Hash) -> Result<Vec<J>> {
    let tensors = ckpt.tensors()?;
    let plain: Vec<&Tensor> = tensors.iter().map(|(_, t)| &t.tensor).collect();
    let groups = storage_groups(&plain);
    tensors
        .iter()
        .zip(groups)
        .map(|((path, t), group)| {
            let x = &t.tensor;
            let sha = match hash {
                Hash::Values => J::String(sha256_hex(&logical_bytes(t)?)),
                Hash::None => J::Null,
            };
            Ok(json!({
                "path": path_json(path),
                "dtype": x.dtype().name(),
                "shape": x.shape(),
                "stride": x.stride(),
                "storage_offset": x.storage_offset(),
                "storage_group": group,
                "storage_nbytes": x.untyped_storage().nbytes(),
                "requires_grad": x.requires_grad(),
                "parameter": t.parameter,
                "sha256": sha,
            }))
        })
        .collect()
}

/// [`manifest`] plus, per tensor, its storage record's key-independent facts
/// (`storage_type`, `location`) and the lazy bits / quantization: what a
/// stowage → stowage round trip must keep.
pub fn full_manifest(ckpt: &Checkpoint) -> Result<Vec<J>> {
    let base = manifest(ckpt, Hash::Values)?;
    let tensors = ckpt.tensors()?;
    Ok(base
        .into_iter()
        .zip(&tensors)
        .map(|(mut m, (_, t))| {
            let rec = ckpt
                .storages()
                .iter()
                .find(|r| r.storage.is_same(t.tensor.untyped_storage()));
            let obj = m.as_object_mut().expect("manifest entries are objects");
            obj.insert("storage_type".into(), json!(rec.map(|r| r.storage_type())));
            obj.insert(
                "location".into(),
                json!(rec.map(|r| r.location.to_string())),
            );
            obj.insert("conj".into(), json!(t.conj));
            obj.insert("neg".into(), json!(t.neg));
            obj.insert("quantization".into(), quantization_json(t));
            m
        })
        .collect())
}

/// A tensor's quantization as JSON: per tensor `[scale bits, zero_point]`,
/// per channel the scheme, axis and hashes of the scales and zero points.
pub fn quantization_json(t: &TensorObject) -> J {
    let Some(q) = t.quantization() else {
        return J::Null;
    };
    if let Some((s, z)) = q.per_tensor() {
        return json!([s.to_bits(), z]);
    }
    let hash = |name: &str| {
        t.data_tensors()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, x)| sha256_hex(&logical_bytes(&TensorObject::new(x.clone())).unwrap()))
    };
    match q {
        stowage::checkpoint::Quantization::PerChannel { axis, .. } => json!({
            "qscheme": q.qscheme(),
            "axis": axis,
            "scales": hash("scales"),
            "zero_points": hash("zero_points"),
        }),
        _ => json!(q.qscheme()),
    }
}

/// Checks that the sharing structure is consistent: two tensors share a
/// storage exactly when [`Checkpoint::storage_key`] gives them the same key,
/// and every tensor's storage is one of the checkpoint's records.
/// The record key of the storage `tensor` views, if it is one of the checkpoint's.
pub fn storage_key<'c>(ckpt: &'c Checkpoint, tensor: &Tensor) -> Option<&'c str> {
    ckpt.storages()
        .iter()
        .find(|s| s.storage.is_same(tensor.untyped_storage()))
        .map(|s| &*s.key)
}

pub fn check_keys_match_sharing(name: &str, ckpt: &Checkpoint) {
    let tensors = ckpt.tensors().expect("tensors");
    let keys: Vec<&str> = tensors
        .iter()
        .map(|(p, t)| {
            storage_key(ckpt, &t.tensor).unwrap_or_else(|| {
                panic!("{name}: tensor {p:?} views no storage record of the checkpoint")
            })
        })
        .collect();
    for i in 0..tensors.len() {
        for j in 0..tensors.len() {
            let shares = tensors[i]
                .1
                .tensor
                .shares_storage_with(&tensors[j].1.tensor);
            assert_eq!(
                shares,
                keys[i] == keys[j],
                "{name}: {:?} and {:?}: shares_storage_with = {shares} but keys are {} and {}",
                tensors[i].0,
                tensors[j].0,
                keys[i],
                keys[j]
            );
        }
    }
}

/// Asserts two manifests are equal, listing each differing entry and field.
/// `ignore` names fields left out of the comparison.
pub fn assert_manifest_eq(what: &str, actual: &[J], expected: &[J], ignore: &[&str]) {
    let strip = |m: &J| -> J {
        let mut o: Map<String, J> = m.as_object().cloned().unwrap_or_default();
        for k in ignore {
            o.remove(*k);
        }
        J::Object(o)
    };
    let mut problems = Vec::new();
    if actual.len() != expected.len() {
        problems.push(format!(
            "{} tensors, expected {}",
            actual.len(),
            expected.len()
        ));
    }
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        let (a, e) = (strip(a), strip(e));
        if a == e {
            continue;
        }
        let keys: BTreeSet<&String> = a
            .as_object()
            .unwrap()
            .keys()
            .chain(e.as_object().unwrap().keys())
            .collect();
        for k in keys {
            let (av, ev) = (a.get(k.as_str()), e.get(k.as_str()));
            if av != ev {
                problems.push(format!(
                    "entry {i} (path {}): {k}: got {}, expected {}",
                    e.get("path").unwrap_or(&J::Null),
                    av.map_or("<absent>".into(), J::to_string),
                    ev.map_or("<absent>".into(), J::to_string)
                ));
            }
        }
    }
    if actual.len() != expected.len() {
        let paths = |m: &[J]| {
            m.iter()
                .map(|x| x.get("path").cloned().unwrap_or(J::Null).to_string())
                .collect::<Vec<_>>()
        };
        problems.push(format!(
            "got paths {:?}\nexpected paths {:?}",
            paths(actual),
            paths(expected)
        ));
    }
    assert!(
        problems.is_empty(),
        "{what}: manifest differs:\n  {}",
        problems.join("\n  ")
    );
}

/// The whole object graph as JSON, for comparing two checkpoints beyond their
/// tensors: container kinds (dict vs `OrderedDict`, list, tuple), the `BUILD`
/// state kept on `OrderedDict`s (`_metadata`), scalars (floats by bit
/// pattern), strings, dtypes, devices, `torch.Size`s; tensors by dtype, layout
/// and flags (values are compared by the manifests).
pub fn describe(ckpt: &Checkpoint) -> J {
    let mut on_path = Vec::new();
    describe_value(&ckpt.root_value(), &mut on_path, 0)
}

fn describe_value(v: &ValueRef<'_>, on_path: &mut Vec<usize>, depth: usize) -> J {
    assert!(depth < 500, "describe: nesting deeper than 500");
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    match v.raw() {
        Value::None => J::Null,
        Value::Bool(b) => json!(b),
        Value::Int(i) => json!({ "int": i }),
        Value::BigInt(b) => json!({ "bigint": b.to_string() }),
        Value::Float(f) => json!({ "float": format!("{:016x}", f.to_bits()) }),
        Value::Str(s) => json!({ "str": &**s }),
        Value::Bytes(b) => json!({ "bytes": hex(b) }),
        Value::Node(_) => {
            let id = v.id().expect("a container has an identity");
            if on_path.contains(&id) {
                return json!({ "cycle": true });
            }
            on_path.push(id);
            let mut items = || -> Vec<J> {
                v.as_list()
                    .unwrap()
                    .map(|x| describe_value(&x, on_path, depth + 1))
                    .collect()
            };
            let out = match v.kind() {
                ValueKind::Dict | ValueKind::Object => {
                    let pairs: Vec<J> = v
                        .as_dict()
                        .unwrap()
                        .map(|(k, x)| {
                            json!([
                                describe_value(&k, on_path, depth + 1),
                                describe_value(&x, on_path, depth + 1)
                            ])
                        })
                        .collect();
                    let kind = if v.is_ordered() {
                        "OrderedDict"
                    } else {
                        "dict"
                    };
                    let state = v.state().map(|s| describe_value(&s, on_path, depth + 1));
                    json!({ kind: pairs, "state": state })
                }
                ValueKind::List => json!({ "list": items() }),
                ValueKind::Tuple => json!({ "tuple": items() }),
                ValueKind::Set => json!({ "set": items() }),
                ValueKind::FrozenSet => json!({ "frozenset": items() }),
                ValueKind::ByteArray => json!({ "bytearray": hex(v.as_bytes().unwrap()) }),
                other => json!({ "node": other.name() }),
            };
            on_path.pop();
            out
        }
        Value::Ext(o) => describe_object(o),
    }
}

fn describe_object(o: &Object) -> J {
    match o {
        Object::Tensor(t) => {
            let x = &t.tensor;
            json!({ "tensor": {
                "dtype": x.dtype().name(),
                "shape": x.shape(),
                "stride": x.stride(),
                "storage_offset": x.storage_offset(),
                "requires_grad": x.requires_grad(),
                "parameter": t.parameter,
                "conj": t.conj,
                "neg": t.neg,
                "quantization": quantization_json(t),
            }})
        }
        Object::Storage(s) => {
            json!({ "storage": { "nbytes": s.storage.nbytes(), "dtype": s.dtype.map(|d| d.name()) } })
        }
        Object::DType(d) => json!({ "dtype": d.name() }),
        Object::Device(d) => json!({ "device": d.to_string() }),
        Object::Size(s) => json!({ "torch.Size": s }),
        Object::Complex(c) => json!({ "complex": [c.re.to_bits(), c.im.to_bits()] }),
        Object::QScheme(q) => json!({ "qscheme": q }),
        Object::Layout(l) => json!({ "layout": l }),
        Object::Global(g) => json!({ "global": format!("{g:?}") }),
        #[allow(unreachable_patterns)]
        other => json!({ "object": format!("{other:?}") }),
    }
}

/// Unwraps `Error::InFile` (checking it names `path`) and returns the inner error.
pub fn in_file<'e>(e: &'e stowage::Error, path: &Path) -> &'e stowage::Error {
    match e {
        stowage::Error::InFile { path: p, source } => {
            assert_eq!(p, path, "InFile names the wrong file");
            source
        }
        other => panic!(
            "expected Error::InFile for {}, got {other:?}",
            path.display()
        ),
    }
}

/// A Python with torch, safetensors and huggingface_hub: `$STOWAGE_TORCH_PYTHON`,
/// else `$HOME/.torch-venv/bin/python` (`scripts/torch-venv.sh` makes one).
/// Without one, prints `SKIPPED` and gives `None`, unless
/// `STOWAGE_REQUIRE_TORCH` is set (as `.ci/run` sets it): then it panics.
pub fn torch_python() -> Option<PathBuf> {
    let found = std::env::var_os("STOWAGE_TORCH_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".torch-venv/bin/python"))
        })
        .filter(|p| {
            std::process::Command::new(p)
                .args(["-c", "import torch, safetensors, huggingface_hub"])
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if found.is_none() {
        assert!(
            std::env::var_os("STOWAGE_REQUIRE_TORCH").is_none(),
            "STOWAGE_REQUIRE_TORCH is set but no Python imports torch, safetensors and huggingface_hub"
        );
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIPPED: no Python with torch, safetensors and huggingface_hub (run scripts/torch-venv.sh)"
        );
    }
    found
}

/// Runs the Python `script` with `args` in the PyTorch environment
/// ([`torch_python`]) and gives its stdout, or `None` without one; a failed
/// script fails the test with its stderr.
pub fn run_torch_script(script: &str, args: &[&std::ffi::OsStr]) -> Option<Vec<u8>> {
    let py = torch_python()?;
    let out = std::process::Command::new(py)
        .args(["-c", script])
        .args(args)
        .output()
        .expect("the PyTorch environment's python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(out.stdout)
}
