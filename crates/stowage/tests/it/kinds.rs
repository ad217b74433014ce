//! Every tensor kind PyTorch saves (`tests/fixtures/kinds/`, made by
//! `scripts/make_kind_fixtures.py` with real PyTorch): sparse COO, CSR, CSC,
//! BSR, BSC; per-channel and packed quantized; nested; meta without storage;
//! tensors with Python state; a subclass; and malformed variants.
//!
//! stowage must report for each what PyTorch reports (`NAME.json`), keep it
//! through its own save and load, and (with torch) write files PyTorch loads
//! to the same report. Without torch the interop test prints SKIPPED and
//! passes, unless `STOWAGE_REQUIRE_TORCH` is set.

use crate::common;
use stowage::FormatError;

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{sha256_hex, tensor_bytes};
use serde_json::{json, Map, Value as J};
use stowage::checkpoint::{
    Object, PathKey, PyValue, Quantization, TensorKind, TensorObject, ValueKind, ValueRef,
};
use stowage::Checkpoint;
use stowage::{Error, Tensor};

fn kinds_dir() -> PathBuf {
    common::fixtures_dir().join("kinds")
}

fn expected(name: &str) -> J {
    let text = std::fs::read_to_string(kinds_dir().join(format!("{name}.json"))).unwrap();
    serde_json::from_str(&text).unwrap()
}

const LOADABLE: &[&str] = &[
    "sparse_coo",
    "sparse_compressed",
    "sparse_edge_cases",
    "quantized_per_channel",
    "quantized_packed",
    "nested",
    "sparse_legacy_format",
    "meta",
    "tensor_state",
];

/// A tensor's logical bytes; packed dtypes (`quint4x2`) as their packed bytes (`int_repr()`).
fn bytes(t: &Tensor) -> Vec<u8> {
    let per_byte = t.dtype().elements_per_byte();
    if per_byte == 1 {
        return tensor_bytes(t).unwrap();
    }
    assert!(t.is_contiguous() && t.storage_offset().is_multiple_of(per_byte));
    let all = t.untyped_storage().bytes().unwrap();
    let start = t.storage_offset() / per_byte;
    all[start..start + t.numel().div_ceil(per_byte)].to_vec()
}

fn plain(t: &Tensor) -> J {
    json!({
        "dtype": t.dtype().name(),
        "shape": t.shape(),
        "stride": t.stride(),
        "storage_offset": t.storage_offset(),
        "sha256": sha256_hex(&bytes(t)),
    })
}

fn leaf(v: &ValueRef<'_>) -> J {
    match v.kind() {
        ValueKind::None => J::Null,
        ValueKind::Bool => json!(v.as_bool().unwrap()),
        ValueKind::Int => json!(v.as_i64().unwrap()),
        ValueKind::Float => json!(v.as_f64().unwrap()),
        ValueKind::Str => json!(v.as_str().unwrap()),
        ValueKind::Dict => J::Object(
            v.as_dict()
                .unwrap()
                .map(|(k, v)| (k.as_str().unwrap().to_owned(), leaf(&v)))
                .collect(),
        ),
        other => panic!("unexpected state value {other}"),
    }
}

/// What `describe()` in `make_kind_fixtures.py` reports, computed by stowage.
fn describe(ckpt: &Checkpoint, path: &[PathKey], t: &TensorObject) -> J {
    let x = &t.tensor;
    let mut d = Map::new();
    d.insert("path".into(), common::path_json(path));
    d.insert("dtype".into(), json!(x.dtype().name()));
    d.insert("device".into(), json!(x.device().to_string()));
    d.insert("requires_grad".into(), json!(x.requires_grad()));
    d.insert("parameter".into(), json!(t.parameter));
    d.insert("layout".into(), json!(t.kind().layout_name()));
    d.insert("shape".into(), json!(x.shape()));
    if !t.kind().is_strided() {
        let comps: Map<String, J> = t
            .kind()
            .components()
            .into_iter()
            .map(|(n, c)| (n.to_owned(), plain(c)))
            .collect();
        d.insert("components".into(), J::Object(comps));
        // The device is the components'.
        d.insert(
            "device".into(),
            json!(t.kind().components()[0].1.device().to_string()),
        );
        if let TensorKind::SparseCoo { coalesced, .. } = t.kind() {
            d.insert("coalesced".into(), json!(coalesced.unwrap()));
        }
        return J::Object(d);
    }
    d.insert("stride".into(), json!(x.stride()));
    d.insert("storage_offset".into(), json!(x.storage_offset()));
    if x.is_meta() {
        return J::Object(d);
    }
    d.insert("sha256".into(), json!(sha256_hex(&bytes(x))));
    d.insert("storage_nbytes".into(), json!(x.untyped_storage().nbytes()));
    if let Some(q) = t.quantization() {
        d.insert("qscheme".into(), json!(q.qscheme()));
        match q {
            Quantization::PerTensorAffine { scale, zero_point } => {
                d.insert("scale".into(), json!(scale));
                d.insert("zero_point".into(), json!(zero_point));
            }
            Quantization::PerChannel {
                scales,
                zero_points,
                axis,
            } => {
                d.insert("axis".into(), json!(axis));
                d.insert(
                    "components".into(),
                    json!({"scales": plain(scales), "zero_points": plain(zero_points)}),
                );
            }
            _ => panic!("unknown quantization"),
        }
    }
    let here = ckpt.root_value().get_path(path).unwrap();
    if let Some(state) = here.state() {
        d.insert("attrs".into(), leaf(&state));
    }
    J::Object(d)
}

/// The report for every tensor, with the dense hash left out (stowage does not densify).
fn report(ckpt: &Checkpoint) -> Vec<J> {
    ckpt.tensors()
        .unwrap()
        .iter()
        .map(|(p, t)| describe(ckpt, p, t))
        .collect()
}

fn torch_report(expected: &J) -> Vec<J> {
    expected["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e.as_object_mut().unwrap().remove("dense_sha256");
            e
        })
        .collect()
}

fn assert_reports_eq(got: &[J], want: &[J], what: &str) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: tensor count\n got {got:#?}\nwant {want:#?}"
    );
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g, w, "{what}: {}", w["path"]);
    }
}

fn load(name: &str) -> stowage::Result<Checkpoint> {
    stowage::load(kinds_dir().join(format!("{name}.pt")))
}

#[test]
fn each_kind_loads_as_pytorch_reports_it() {
    for name in LOADABLE {
        let ckpt = load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_reports_eq(&report(&ckpt), &torch_report(&expected(name)), name);
    }
}

#[test]
fn each_kind_survives_stowage_save_and_load() {
    let dir = tempfile::tempdir().unwrap();
    for name in LOADABLE {
        let ckpt = load(name).unwrap();
        let out = dir.path().join(format!("{name}.pt"));
        stowage::save(&out, &ckpt).unwrap_or_else(|e| panic!("{name}: save: {e}"));
        let again = stowage::load(&out).unwrap_or_else(|e| panic!("{name}: reload: {e}"));
        assert_reports_eq(&report(&again), &report(&ckpt), name);
    }
}

#[test]
fn layouts_and_components_are_named_as_pytorch_names_them() {
    let ckpt = load("sparse_compressed").unwrap();
    let names: Vec<(String, &str, Vec<&str>)> = ckpt
        .tensors()
        .unwrap()
        .into_iter()
        .map(|(p, t)| {
            let comps = t.kind().components().into_iter().map(|(n, _)| n).collect();
            (
                stowage::checkpoint::dotted(&p),
                t.kind().layout_name(),
                comps,
            )
        })
        .collect();
    assert_eq!(
        names[0],
        (
            "csr".into(),
            "sparse_csr",
            vec!["crow_indices", "col_indices", "values"]
        )
    );
    assert_eq!(
        names[1],
        (
            "csc".into(),
            "sparse_csc",
            vec!["ccol_indices", "row_indices", "values"]
        )
    );
    assert_eq!(names[2].1, "sparse_bsr");
    assert_eq!(names[3].1, "sparse_bsc");
    // The placeholder has the dense shape and no data.
    let (_, csr) = &ckpt.tensors().unwrap()[0];
    assert_eq!(csr.tensor.shape(), &[3, 4]);
    assert!(!csr.tensor.has_data());
}

#[test]
fn a_subclass_is_refused_like_pytorch_refuses_it() {
    match load("subclass") {
        Err(e) => {
            let msg = format!("{e}");
            assert!(msg.contains("Tagged"), "{msg}");
        }
        Ok(_) => panic!("subclass.pt loaded without its class being allowed"),
    }
}

/// Loaded inertly, or with its class allowed as `add_safe_globals` would: the
/// tensor part reads as PyTorch reports it, and the subclass is recorded,
/// never constructed.
#[test]
fn a_subclass_loads_inertly_or_when_allowed_keeping_its_class() {
    let path = kinds_dir().join("subclass.pt");
    let want = expected("subclass");
    let inert = stowage::LoadOptions::default().with_inert(true);
    let allowed = stowage::LoadOptions::default().with_allow_globals(["__main__.Tagged"]);
    for opts in [inert, allowed] {
        let ckpt = stowage::load_with(&path, &opts).unwrap();
        let tensors = ckpt.tensors().unwrap();
        assert_eq!(tensors.len(), 1);
        let (_, t) = &tensors[0];
        let w = &want["tensors"][0];
        assert_eq!(json!(t.tensor.shape()), w["shape"]);
        assert_eq!(t.tensor.dtype().name(), w["dtype"]);
        assert_eq!(json!(sha256_hex(&bytes(&t.tensor))), w["sha256"]);
        match t.subclass() {
            Some(stowage::checkpoint::pickle::Value::Ext(Object::Class(c))) => {
                assert_eq!(
                    format!("{}.{}", c.module, c.name),
                    w["class"].as_str().unwrap()
                );
            }
            other => panic!("subclass recorded as {other:?}"),
        }
    }
}

fn root_cause(e: &Error) -> &Error {
    match e {
        Error::InFile { source, .. }
        | Error::InRecord { source, .. }
        | Error::AtPath { source, .. }
        | Error::InStorage { source, .. } => root_cause(source),
        e => e,
    }
}

#[test]
fn malformed_kinds_give_typed_errors() {
    for (name, layout) in [
        ("hostile_sparse_coo_index", "sparse_coo"),
        ("hostile_sparse_coo_negative", "sparse_coo"),
        ("hostile_sparse_csr_col", "sparse_csr"),
        ("hostile_sparse_csr_crow", "sparse_csr"),
        ("hostile_sparse_csr_crow_decreasing", "sparse_csr"),
        ("hostile_sparse_bsr_blocks", "sparse_bsr"),
        ("hostile_sparse_coo_values_shape", "sparse_coo"),
        ("hostile_nested_negative", "nested"),
        ("hostile_nested_offsets", "nested"),
        ("hostile_qscales_length", "per_channel_affine"),
    ] {
        // PyTorch's weights_only loader refuses every one of them too.
        assert_eq!(expected(name)["weights_only"], json!(false), "{name}");
        let e = load(name).err().unwrap_or_else(|| panic!("{name} loaded"));
        match root_cause(&e) {
            Error::Format(FormatError::BadTensorKind { layout: l, .. }) => {
                assert_eq!(*l, layout, "{name}: {e}")
            }
            other => panic!("{name}: {other:?}"),
        }
    }
}

/// Loads each file in PyTorch (`weights_only` as the original allows) and
/// prints `kind_manifest` of it.
const HELPER: &str = r#"
import sys, json, warnings
warnings.simplefilter("ignore")
try:
    import torch
except Exception:
    sys.exit(77)
sys.path.insert(0, sys.argv[1])
from make_kind_fixtures import kind_manifest
out = {}
for arg in sys.argv[2:]:
    path, wo = arg.rsplit("=", 1)
    try:
        out[path] = {"tensors": kind_manifest(torch.load(path, weights_only=(wo == "1")))}
    except Exception as e:
        out[path] = {"error": "%s: %s" % (type(e).__name__, e)}
print(json.dumps(out))
"#;

fn python() -> Option<PathBuf> {
    std::env::var_os("STOWAGE_TORCH_PYTHON")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".torch-venv/bin/python")))
        .filter(|p| p.exists())
}

fn skip(why: &str) {
    assert!(
        std::env::var_os("STOWAGE_REQUIRE_TORCH").is_none(),
        "STOWAGE_REQUIRE_TORCH is set but there is no PyTorch environment: {why}"
    );
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr().lock(),
        "\nSKIPPED: no PyTorch environment ({why})\n"
    );
}

#[test]
fn pytorch_reads_what_stowage_saves_of_each_kind() {
    let Some(py) = python() else {
        return skip("no python at $STOWAGE_TORCH_PYTHON or $HOME/.torch-venv/bin/python");
    };
    let dir = tempfile::tempdir().unwrap();
    let mut args = Vec::new();
    for name in LOADABLE {
        let ckpt = load(name).unwrap();
        let out = dir.path().join(format!("{name}.pt"));
        stowage::save(&out, &ckpt).unwrap();
        let wo = expected(name)["weights_only"] == json!(true);
        args.push(format!("{}={}", out.display(), u8::from(wo)));
    }
    let run = Command::new(&py)
        .arg("-c")
        .arg(HELPER)
        .arg(common::scripts_dir())
        .args(&args)
        .output()
        .unwrap();
    if run.status.code() == Some(77) {
        return skip("python cannot import torch");
    }
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let text = String::from_utf8(run.stdout).unwrap();
    let got: J = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    for (name, arg) in LOADABLE.iter().zip(&args) {
        let path = arg.rsplit_once('=').unwrap().0;
        let r = &got[path];
        assert!(
            r.get("error").is_none(),
            "{name}: PyTorch on stowage's file: {}",
            r["error"]
        );
        let want = expected(name)["tensors"].clone();
        assert_eq!(
            r["tensors"], want,
            "{name}: PyTorch on stowage's file vs on the original"
        );
    }
}

/// A COO tensor built from its components in Rust saves, reloads in stowage
/// with its components, and (with torch) loads in PyTorch as that sparse tensor.
#[test]
fn a_sparse_tensor_built_from_components_saves() {
    let indices = Tensor::from_vec(vec![0i64, 1, 2, 0], &[2, 2]).unwrap();
    let values = Tensor::from_slice(&[5.0f32, -1.5]).unwrap();
    let kind = TensorKind::SparseCoo {
        indices: Box::new(indices.clone()),
        values: Box::new(values.clone()),
        coalesced: Some(true),
    };
    let obj = TensorObject::with_kind(kind, &[3, 4]).unwrap();
    assert!(TensorObject::with_kind(TensorKind::Strided, &[1]).is_err());
    let ckpt = Checkpoint::from_value(PyValue::from(obj)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("coo.pt");
    stowage::save(&out, &ckpt).unwrap();
    let back = stowage::load(&out).unwrap();
    let (_, t) = &back.tensors().unwrap()[0];
    assert_eq!(
        (t.kind().layout_name(), t.tensor.shape()),
        ("sparse_coo", &[3, 4][..])
    );
    let comps = t.kind().components();
    assert_eq!(comps[0].1.to_vec::<i64>().unwrap(), [0, 1, 2, 0]);
    assert_eq!(comps[1].1.to_vec::<f32>().unwrap(), [5.0, -1.5]);

    let Some(py) = python() else {
        return skip("no python at $STOWAGE_TORCH_PYTHON or $HOME/.torch-venv/bin/python");
    };
    let run = Command::new(&py)
        .arg("-c")
        .arg(HELPER)
        .arg(common::scripts_dir())
        .arg(format!("{}=1", out.display()))
        .output()
        .unwrap();
    if run.status.code() == Some(77) {
        return skip("python cannot import torch");
    }
    let text = String::from_utf8(run.stdout).unwrap();
    let got: J = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let r = &got[out.to_str().unwrap()]["tensors"][0];
    assert_eq!(r["layout"], json!("sparse_coo"), "{got}");
    assert_eq!(r["shape"], json!([3, 4]));
    assert_eq!(r["coalesced"], json!(true));
}
