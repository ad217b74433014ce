//! Interoperability with real PyTorch: files stowage writes load in
//! `torch.load(path, weights_only=True)` and PyTorch reports for them exactly
//! what it reports for the originals (`scripts/torch_manifest.py`); the
//! safetensors files load in the `safetensors` package with the same values.
//!
//! Needs a Python with torch: `$STOWAGE_TORCH_PYTHON`, else
//! `$HOME/.torch-venv/bin/python` (`scripts/torch-venv.sh` makes one). Without
//! one the tests print `SKIPPED: no PyTorch environment` and pass, unless
//! `STOWAGE_REQUIRE_TORCH` is set (as `.ci/run` sets it): then they fail.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::{
    assert_manifest_eq, expected_manifest, fixture_names, load_fixture, manifest, sha256_hex, Hash,
};
use serde_json::Value as J;
use stowage::checkpoint::dotted;

/// Exit status of the helper when `import torch` fails.
const NO_TORCH: i32 = 77;

/// Loads each file with `weights_only=True`, then takes `torch_manifest.manifest()`
/// of it (`.pt`), or reads it with `safetensors.torch.load_file` (`.safetensors`).
const HELPER: &str = r#"
import sys, json, hashlib
try:
    import torch
except Exception:
    sys.exit(77)
sys.path.insert(0, sys.argv[1])
from torch_manifest import manifest, object_groups, raw_bytes
out = {}
for path in sys.argv[2:]:
    try:
        if path.endswith(".safetensors"):
            try:
                from safetensors.torch import load_file
            except ImportError:
                out[path] = {"skipped": "no safetensors package"}
                continue
            out[path] = {"tensors": {k: [str(v.dtype).replace("torch.", ""), list(v.shape),
                         hashlib.sha256(raw_bytes(v)).hexdigest()] for k, v in load_file(path).items()}}
        else:
            obj = torch.load(path, weights_only=True)
            out[path] = {"manifest": manifest(path), "objects": object_groups(obj)}
    except Exception as e:
        out[path] = {"error": "%s: %s" % (type(e).__name__, e)}
print(json.dumps(out))
"#;

fn python() -> Option<PathBuf> {
    let p = std::env::var_os("STOWAGE_TORCH_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".torch-venv/bin/python"))
        })?;
    p.exists().then_some(p)
}

fn skip(why: &str) {
    assert!(
        std::env::var_os("STOWAGE_REQUIRE_TORCH").is_none(),
        "STOWAGE_REQUIRE_TORCH is set but there is no PyTorch environment: {why}"
    );
    // Straight to the process's stderr: libtest captures `eprintln!` of passing tests.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr().lock(),
        "\n==============================================================\n\
         SKIPPED: no PyTorch environment ({why})\n\
         set STOWAGE_TORCH_PYTHON or run scripts/torch-venv.sh\n\
         ==============================================================\n"
    );
}

/// Runs the helper on `files`; `None` (after printing SKIPPED) when there is no torch.
fn torch_report(files: &[PathBuf]) -> Option<serde_json::Map<String, J>> {
    let Some(py) = python() else {
        skip("no python at $STOWAGE_TORCH_PYTHON or $HOME/.torch-venv/bin/python");
        return None;
    };
    let out = Command::new(&py)
        .arg("-c")
        .arg(HELPER)
        .arg(common::scripts_dir())
        .args(files)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", py.display()));
    if out.status.code() == Some(NO_TORCH) {
        skip(&format!("{} cannot import torch", py.display()));
        return None;
    }
    assert!(
        out.status.success(),
        "helper failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let line = text.lines().last().expect("helper printed nothing");
    match serde_json::from_str(line).expect("helper's JSON") {
        J::Object(m) => Some(m),
        other => panic!("helper printed {other}"),
    }
}

fn key(p: &Path) -> String {
    p.to_str().expect("utf-8 temp path").to_owned()
}

/// A tensor as the safetensors check expects it: dotted name, dtype, shape, sha256.
type Expected = Vec<(String, String, Vec<usize>, String)>;

/// Every fixture saved by stowage (`.pt`, and `.safetensors` where its dtypes
/// allow), and PyTorch's report on all of them from one Python process.
struct Shared {
    _dir: tempfile::TempDir,
    pt: Vec<(String, PathBuf)>,
    st: Vec<(String, PathBuf, Expected)>,
    report: Option<serde_json::Map<String, J>>,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let (mut pt, mut st) = (Vec::new(), Vec::new());
        for name in fixture_names() {
            let ckpt = load_fixture(&name);
            let out = dir.path().join(format!("{name}.pt"));
            stowage::save(&out, &ckpt).unwrap_or_else(|e| panic!("{name}: save: {e}"));
            pt.push((name.clone(), out));
            let out = dir.path().join(format!("{name}.safetensors"));
            if stowage::checkpoint::safetensors::save(&out, &ckpt).is_err() {
                continue; // complex128 / quantized: refused (tested in roundtrip.rs)
            }
            let want: Expected = ckpt
                .tensors()
                .unwrap()
                .iter()
                .map(|(p, t)| {
                    (
                        dotted(p),
                        t.tensor.dtype().name().to_owned(),
                        t.tensor.shape().to_vec(),
                        sha256_hex(&common::logical_bytes(t).unwrap()),
                    )
                })
                .collect();
            st.push((name, out, want));
        }
        let files: Vec<PathBuf> = pt
            .iter()
            .map(|(_, p)| p.clone())
            .chain(st.iter().map(|(_, p, _)| p.clone()))
            .collect();
        let report = torch_report(&files);
        Shared {
            _dir: dir,
            pt,
            st,
            report,
        }
    })
}

#[test]
fn pytorch_loads_what_stowage_saves() {
    let shared = shared();
    let Some(report) = &shared.report else { return };
    let mut failures = Vec::new();
    for (name, file) in &shared.pt {
        let entry = &report[&key(file)];
        if let Some(err) = entry.get("error") {
            failures.push(format!(
                "{name}: torch.load(weights_only=True) of stowage's file failed: {err}"
            ));
            continue;
        }
        let theirs = entry["manifest"].as_array().expect("manifest list").clone();
        // PyTorch reads stowage's file as it read the original …
        assert_manifest_eq(
            &format!("{name}: torch on stowage's file vs torch on the original"),
            &theirs,
            &expected_manifest(name),
            &[],
        );
        // … and as stowage reads it.
        let ours = manifest(&stowage::load(file).unwrap(), Hash::Values).unwrap();
        assert_manifest_eq(
            &format!("{name}: torch vs stowage on stowage's file"),
            &theirs,
            &ours,
            &[],
        );
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Loads each (trusted, committed) original fixture with `weights_only=False`
/// and prints `object_groups` of it: which paths PyTorch sees as one object.
const OBJECTS_HELPER: &str = r#"
import sys, json
try:
    import torch
except Exception:
    sys.exit(77)
sys.path.insert(0, sys.argv[1])
from torch_manifest import object_groups
print(json.dumps({p: object_groups(torch.load(p, weights_only=False)) for p in sys.argv[2:]}))
"#;

/// Runs `helper` on `files` with the scripts folder first; `None` (after
/// printing SKIPPED) when there is no torch.
fn run_helper(helper: &str, files: &[PathBuf]) -> Option<J> {
    let Some(py) = python() else {
        skip("no python at $STOWAGE_TORCH_PYTHON or $HOME/.torch-venv/bin/python");
        return None;
    };
    let out = Command::new(&py)
        .arg("-c")
        .arg(helper)
        .arg(common::scripts_dir())
        .args(files)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", py.display()));
    if out.status.code() == Some(NO_TORCH) {
        skip(&format!("{} cannot import torch", py.display()));
        return None;
    }
    assert!(
        out.status.success(),
        "helper failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    Some(serde_json::from_str(text.lines().last().expect("helper printed nothing")).unwrap())
}

/// A tensor object reachable twice (`{"a": t, "b": t}`) in a file torch.save
/// wrote is one object when PyTorch loads stowage's copy (`a is b`), as it was
/// in the original, and one for stowage too (NOTE [tensor identity]).
#[test]
fn pytorch_sees_the_originals_objects_in_stowage_files() {
    let shared = shared();
    let Some(report) = &shared.report else { return };
    let originals: Vec<PathBuf> = shared.pt.iter().map(|(n, _)| common::fixture(n)).collect();
    let Some(theirs) = run_helper(OBJECTS_HELPER, &originals) else {
        return;
    };
    let mut shared_somewhere = 0;
    for (name, file) in &shared.pt {
        let original = &theirs[&key(&common::fixture(name))];
        let ours = J::from(common::object_groups(&load_fixture(name)));
        assert_eq!(&ours, original, "{name}: stowage's objects vs torch's");
        assert_eq!(
            &report[&key(file)]["objects"],
            original,
            "{name}: torch's objects in stowage's file vs in the original"
        );
        let groups = original.as_array().unwrap();
        if groups.iter().enumerate().any(|(i, g)| g != &J::from(i)) {
            shared_somewhere += 1;
        }
    }
    // nested, requires_grad and same_object hold one object at several paths.
    assert!(shared_somewhere >= 3, "{shared_somewhere}");
}

/// The same through the builder: one `Tensor` (clones of one handle) put at
/// several paths is one object for PyTorch; a view over the same bytes with
/// the same layout, and a detached copy of the handle, are others.
#[test]
fn pytorch_loads_one_object_where_the_builder_put_one_tensor() {
    use stowage::checkpoint::{PyValue, TensorObject};
    use stowage::Tensor;
    let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])
        .unwrap()
        .reshape(&[2, 3])
        .unwrap();
    let grad = Tensor::from_slice(&[0.5f64, -1.0])
        .unwrap()
        .with_requires_grad(true)
        .unwrap();
    let mut p = TensorObject::new(grad);
    p.parameter = true;
    let ckpt = stowage::Checkpoint::builder()
        .value("a", t.clone())
        .value("b", t.clone())
        .value("list", PyValue::list([t.clone(), t.clone()]))
        .value("nested.x.y", t.clone())
        .tensors("model", [("w", t.clone())])
        .value("p", p.clone())
        .value("again.p", p)
        .value("look_alike", t.reshape(&[2, 3]).unwrap())
        .value("detached", t.detach())
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("built.pt");
    stowage::save(&file, &ckpt).unwrap();
    let groups: Vec<usize> = vec![0, 0, 0, 0, 0, 0, 6, 6, 8, 9];
    assert_eq!(common::object_groups(&ckpt), groups);
    assert_eq!(
        common::object_groups(&stowage::load(&file).unwrap()),
        groups
    );
    let Some(report) = torch_report(std::slice::from_ref(&file)) else {
        return;
    };
    let entry = &report[&key(&file)];
    assert!(entry.get("error").is_none(), "{}", entry["error"]);
    assert_eq!(entry["objects"], J::from(groups));
}

#[test]
fn torch_manifest_script_on_a_stowage_file() {
    // The script itself, as the fixtures README runs it.
    let Some(py) = python() else {
        skip("no python");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("views.pt");
    stowage::save(&out, &load_fixture("views")).unwrap();
    let run = Command::new(&py)
        .arg(common::scripts_dir().join("torch_manifest.py"))
        .arg(&out)
        .output()
        .unwrap();
    if !run.status.success()
        && String::from_utf8_lossy(&run.stderr).contains("No module named 'torch'")
    {
        skip("python cannot import torch");
        return;
    }
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let theirs: Vec<J> = serde_json::from_slice(&run.stdout).expect("manifest JSON");
    assert_manifest_eq(
        "views (torch_manifest.py on stowage's file)",
        &theirs,
        &expected_manifest("views"),
        &[],
    );
}

#[test]
fn safetensors_package_reads_what_stowage_writes() {
    let shared = shared();
    assert!(shared.st.len() >= 15);
    let Some(report) = &shared.report else { return };
    for (name, file, want) in &shared.st {
        let entry = &report[&key(file)];
        if let Some(why) = entry.get("skipped") {
            skip(&why.to_string());
            return;
        }
        assert!(
            entry.get("error").is_none(),
            "{name}: safetensors.torch.load_file failed: {}",
            entry["error"]
        );
        let got = entry["tensors"].as_object().unwrap();
        assert_eq!(
            got.len(),
            want.len(),
            "{name}: names {:?}",
            got.keys().collect::<Vec<_>>()
        );
        for (n, dtype, shape, sha) in want {
            let g = got.get(n).unwrap_or_else(|| panic!("{name}: {n} missing"));
            assert_eq!(g[0], J::from(dtype.as_str()), "{name}: {n}: dtype");
            assert_eq!(g[1], serde_json::json!(shape), "{name}: {n}: shape");
            assert_eq!(g[2], J::from(sha.as_str()), "{name}: {n}: values");
        }
    }
}

/// Loads one file with `weights_only=True` and prints what Python sees: the
/// contract's values list, the tensor manifest, and the container types.
const VALUES_HELPER: &str = r#"
import sys, json
try:
    import torch
except Exception:
    sys.exit(77)
sys.path.insert(0, sys.argv[1])
from torch_manifest import manifest, values_manifest
obj = torch.load(sys.argv[2], weights_only=True)
print(json.dumps({
    "values": values_manifest(obj),
    "manifest": manifest(sys.argv[2]),
    "types": {str(k): type(v).__name__ for k, v in obj.items()},
    "tied": obj["model"]["fc.weight"].data_ptr() == obj["tied"].data_ptr(),
    "param": isinstance(obj["param"], torch.nn.Parameter),
}))
"#;

/// A value leaf in the contract's JSON form, computed on stowage's side.
fn leaf_json(v: &stowage::checkpoint::ValueRef<'_>) -> J {
    use serde_json::json;
    use stowage::checkpoint::pickle::Value;
    use stowage::checkpoint::ValueKind as K;
    let float = |f: f64| {
        if f.is_nan() {
            json!("nan")
        } else if f.is_infinite() {
            json!(if f > 0.0 { "inf" } else { "-inf" })
        } else {
            json!(f)
        }
    };
    let value = match v.kind() {
        K::None => J::Null,
        K::Bool => json!(v.as_bool().unwrap()),
        K::Int => match v.raw() {
            Value::Int(i) if i.unsigned_abs() <= 1 << 53 => json!(i),
            Value::Int(i) => json!(i.to_string()),
            Value::BigInt(b) => json!(b.to_string()),
            _ => unreachable!(),
        },
        K::Float => float(v.as_f64().unwrap()),
        K::Complex => {
            let c = v.as_complex().unwrap();
            json!([float(c.re), float(c.im)])
        }
        K::Str => json!(v.as_str().unwrap()),
        K::Bytes => json!(v
            .as_bytes()
            .unwrap()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()),
        K::DType => json!(v.as_dtype().unwrap().name()),
        K::Size => json!(v.as_size().unwrap()),
        K::Device => json!(v.as_device().unwrap().to_string()),
        K::Dict | K::List | K::Tuple => json!([]),
        other => panic!("no contract type for {other}"),
    };
    json!({"path": common::path_json(v.path()), "type": v.kind().name(), "value": value})
}

#[test]
fn pytorch_loads_what_the_builder_makes() {
    use stowage::checkpoint::{PyValue, TensorObject};
    use stowage::{DType, Device, Tensor};
    let w = Tensor::from_slice(&[1.0f32, -2.0, 3.5, 0.25, 8.0, -0.5])
        .unwrap()
        .reshape(&[2, 3])
        .unwrap();
    let b = Tensor::from_slice(&[0.5f32, 1.5]).unwrap();
    let ints = Tensor::from_slice(&[7i64, 8, 9]).unwrap();
    let mut p = TensorObject::new(Tensor::from_slice(&[0.125f64, 4.0]).unwrap());
    p.parameter = true;
    let ckpt = stowage::Checkpoint::builder()
        .tensors("model", [("fc.weight", w.clone()), ("fc.bias", b)])
        .value("tied", w.transpose(0, 1).unwrap())
        .value("param", p)
        .value("ints", ints)
        .value("epoch", 3)
        .value("step", 1i64 << 60)
        .value("config.lr", 1e-3)
        .value("config.name", "gpt")
        .value("config.betas", PyValue::tuple([0.9, 0.999]))
        .value("config.layers", vec![4, 3])
        .value("config.amp", false)
        .value("config.seed", None::<i64>)
        .value("config.dtype", DType::BFloat16)
        .value("config.device", Device::CPU)
        .value("config.shape", PyValue::size([4, 3]))
        .value("config.best", f64::INFINITY)
        .value("config.z", num_complex::Complex64::new(1.5, -2.0))
        .value("config.blob", PyValue::bytes(b"\x00\xffab".to_vec()))
        .value("config.empty", PyValue::dict(Vec::<(String, i64)>::new()))
        .value("config.nothing", PyValue::tuple(Vec::<i64>::new()))
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("built.pt");
    stowage::save(&file, &ckpt).unwrap();

    let Some(py) = python() else {
        skip("no python at $STOWAGE_TORCH_PYTHON or $HOME/.torch-venv/bin/python");
        return;
    };
    let out = Command::new(&py)
        .arg("-c")
        .arg(VALUES_HELPER)
        .arg(common::scripts_dir())
        .arg(&file)
        .output()
        .unwrap();
    if out.status.code() == Some(NO_TORCH) {
        skip(&format!("{} cannot import torch", py.display()));
        return;
    }
    assert!(
        out.status.success(),
        "torch.load(weights_only=True) of the built checkpoint failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: J = serde_json::from_slice(&out.stdout).unwrap();
    // Every value as Python sees it, and as stowage walks it.
    let ours: Vec<J> = ckpt
        .root_value()
        .leaves()
        .unwrap()
        .iter()
        .map(leaf_json)
        .collect();
    assert_eq!(theirs["values"], J::Array(ours));
    let some = |path: &str| {
        theirs["values"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| common::path_json(&path_keys(path)) == v["path"])
            .unwrap_or_else(|| panic!("{path} missing"))
            .clone()
    };
    assert_eq!(some("config.lr")["value"], 1e-3);
    assert_eq!(some("step")["value"], "1152921504606846976");
    assert_eq!(some("config.dtype")["value"], "bfloat16");
    assert_eq!(some("config.best")["value"], "inf");
    assert_eq!(some("config.empty")["type"], "dict");
    // Containers keep their types; tied tensors share; a Parameter stays one.
    assert_eq!(theirs["types"]["model"], "OrderedDict");
    assert_eq!(theirs["types"]["config"], "dict");
    assert_eq!(theirs["tied"], true);
    assert_eq!(theirs["param"], true);
    // Every tensor as PyTorch sees it, and as stowage reads the file back.
    let ours = manifest(&stowage::load(&file).unwrap(), Hash::Values).unwrap();
    assert_manifest_eq(
        "builder: torch vs stowage",
        theirs["manifest"].as_array().unwrap(),
        &ours,
        &[],
    );
    let back = stowage::load(&file).unwrap();
    assert_eq!(back.get("config.name").unwrap().as_str().unwrap(), "gpt");
    assert_eq!(back.get("step").unwrap().as_i64().unwrap(), 1i64 << 60);
}

fn path_keys(dotted: &str) -> Vec<stowage::checkpoint::PathKey> {
    dotted
        .split('.')
        .map(|k| stowage::checkpoint::PathKey::Key(k.into()))
        .collect()
}

/// A safetensors file with `__metadata__` says `"format": "pt"`, so that
/// Hugging Face's loaders take it (issue 26, item 12):
/// `huggingface_hub.load_torch_model(strict=True)` loads it into the module
/// it came from.
#[test]
fn safetensors_with_metadata_load_in_huggingface_hub() {
    let weight = stowage::Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
    let bias = stowage::Tensor::from_vec(vec![0.5f32, -0.5], &[2]).unwrap();
    let mut ckpt = stowage::Checkpoint::from_state_dict([("weight", weight), ("bias", bias)]);
    ckpt.set_safetensors_metadata(Some([("epoch".to_owned(), "3".to_owned())].into()));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    stowage::checkpoint::safetensors::save(&path, &ckpt).unwrap();
    let script = r#"
import json, sys, torch, huggingface_hub
from safetensors import safe_open
m = torch.nn.Linear(2, 2)
huggingface_hub.load_torch_model(m, sys.argv[1], strict=True)
with safe_open(sys.argv[1], "pt") as f:
    meta = f.metadata()
print(json.dumps({"weight": m.weight.flatten().tolist(), "bias": m.bias.tolist(), "meta": meta}))
"#;
    let Some(out) = common::run_torch_script(script, &[path.as_os_str()]) else {
        return;
    };
    let got: J = serde_json::from_slice(&out).unwrap();
    assert_eq!(got["weight"], serde_json::json!([1.0, 2.0, 3.0, 4.0]));
    assert_eq!(got["bias"], serde_json::json!([0.5, -0.5]));
    assert_eq!(
        got["meta"],
        serde_json::json!({"epoch": "3", "format": "pt"})
    );
}

/// `.pt` → `.safetensors` → `.pt` gives back what PyTorch saved (issue 26,
/// item 16): a training checkpoint made by `torch.save` (nested dicts, an
/// `OrderedDict` state dict, int keys, lists and tuples, ints past 64 bits,
/// NaN, bytes, a dtype, a `torch.Size`, a complex, empty containers) is
/// saved as safetensors by stowage, loaded back and saved as `.pt`; PyTorch
/// finds the two `.pt` files equal, and reads the safetensors file as any
/// other (flat names, `safetensors.torch.load_file`).
#[test]
fn pt_to_safetensors_and_back_keeps_structure_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let (orig, st, back) = (
        dir.path().join("train.pt"),
        dir.path().join("train.safetensors"),
        dir.path().join("back.pt"),
    );
    let make = r#"
import collections, sys, torch
sd = collections.OrderedDict([("fc.weight", torch.arange(6.).reshape(2, 3)), ("fc.bias", torch.ones(2))])
w = torch.arange(6.).reshape(3, 2)
torch.save({
    "model": sd,
    "tied": {"embed": w, "head": w, "t": w.t(), "row": w[1]},
    "optimizer": {"state": {0: {"step": torch.tensor(3.), "exp_avg": torch.zeros(2)}},
                  "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0, 1], "foreign": None}]},
    "epoch": 7, "name": "run-1", "big": 2**70, "nan": float("nan"), "flags": [True, False],
    "blob": b"\x00\x01", "dt": torch.float16, "shape": torch.Size([2, 3]), "c": 1 + 2j,
    "empty": {}, "t": (), "layers": [torch.full((2,), 5.0), {"inner": torch.eye(2)}],
}, sys.argv[1])
"#;
    if common::run_torch_script(make, &[orig.as_os_str()]).is_none() {
        return;
    }
    let ckpt = stowage::load(&orig).unwrap();
    stowage::checkpoint::safetensors::save(&st, &ckpt).unwrap();
    let read = stowage::load(&st).unwrap();
    assert_eq!(
        read.get("optimizer.param_groups.0.lr")
            .unwrap()
            .as_f64()
            .unwrap(),
        1e-3
    );
    assert!(
        read.safetensors_metadata()
            .is_none_or(|m| !m.contains_key(stowage::checkpoint::safetensors::TREE_KEY)),
        "the structure's entry is consumed by the load"
    );
    stowage::save(&back, &read).unwrap();
    let compare = r#"
import math, sys, torch
from safetensors.torch import load_file
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
def eq(x, y, p):
    assert type(x) is type(y), (p, type(x), type(y))
    if isinstance(x, dict):
        assert list(x) == list(y), (p, list(x), list(y))
        for k in x:
            eq(x[k], y[k], f"{p}.{k}")
    elif isinstance(x, (list, tuple)):
        assert len(x) == len(y), p
        for i, (u, v) in enumerate(zip(x, y)):
            eq(u, v, f"{p}.{i}")
    elif isinstance(x, torch.Tensor):
        assert x.dtype == y.dtype and torch.equal(x, y), p
    elif isinstance(x, float) and math.isnan(x):
        assert math.isnan(y), p
    else:
        assert x == y, (p, x, y)
eq(a, b, "")
# Tied tensors share one storage again, as in the original.
tied = b["tied"]
ptr = tied["embed"].untyped_storage().data_ptr()
assert all(t.untyped_storage().data_ptr() == ptr for t in tied.values()), "ties lost"
assert tied["t"].stride() == a["tied"]["t"].stride() and tied["row"].storage_offset() == 2
flat = load_file(sys.argv[3])
print(",".join(sorted(flat)))
"#;
    let out = common::run_torch_script(
        compare,
        &[orig.as_os_str(), back.as_os_str(), st.as_os_str()],
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap().trim(),
        "layers.0,layers.1.inner,model.fc.bias,model.fc.weight,optimizer.state.0.exp_avg,optimizer.state.0.step,tied.embed,tied.head,tied.row,tied.t"
    );
}

/// One value put at several places with `PyValue::Shared` is one object:
/// a checkpoint built so, saved by stowage, loads in PyTorch with `a is b`
/// (the pickle's memo), as `torch.save({"a": x, "b": x})` would have it;
/// a plain clone put twice is two equal objects.
#[test]
fn a_shared_value_is_one_object_in_pytorch() {
    use std::sync::Arc;
    use stowage::checkpoint::PyValue;
    let config = PyValue::dict([("lr", PyValue::Float(1e-3)), ("layers", PyValue::Int(2))]);
    let shared = PyValue::Shared(Arc::new(config.clone()));
    let ckpt = stowage::Checkpoint::from_value(PyValue::dict([
        ("a", shared.clone()),
        ("b", shared),
        ("c", config.clone()),
        ("d", config),
    ]))
    .unwrap();
    let id = |p: &str| ckpt.get(p).unwrap().id();
    assert_eq!(id("a"), id("b"));
    assert_ne!(id("c"), id("d"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.pt");
    stowage::save(&path, &ckpt).unwrap();
    let check = r#"
import sys, torch
d = torch.load(sys.argv[1], weights_only=True)
assert d["a"] is d["b"], "a and b are two objects"
assert d["c"] is not d["d"] and d["c"] == d["d"] == d["a"], d
print("ok")
"#;
    if let Some(out) = common::run_torch_script(check, &[path.as_os_str()]) {
        assert_eq!(String::from_utf8_lossy(&out).trim(), "ok");
    }
}
