//! Interoperability with real PyTorch: files stowage writes load in
//! `torch.load(path, weights_only=True)` and PyTorch reports for them exactly
//! what it reports for the originals (`scripts/torch_manifest.py`); the
//! safetensors files load in the `safetensors` package with the same values.
//!
//! Needs a Python with torch: `$STOWAGE_TORCH_PYTHON`, else
//! `$HOME/.torch-venv/bin/python` (`scripts/torch-venv.sh` makes one). Without
//! one the tests print `SKIPPED: no PyTorch environment` and pass, unless
//! `STOWAGE_REQUIRE_TORCH` is set (as `.ci/run` sets it): then they fail.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use common::{
    assert_manifest_eq, expected_manifest, fixture_names, load_fixture, manifest, sha256_hex, Hash,
};
use serde_json::Value as J;
use stowage::serialize::dotted;

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
from torch_manifest import manifest, raw_bytes
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
            torch.load(path, weights_only=True)
            out[path] = {"manifest": manifest(path)}
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
            if stowage::serialize::safetensors::save(&out, &ckpt).is_err() {
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
