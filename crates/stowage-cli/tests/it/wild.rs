//! Checkpoints from the wild that `torch.load(weights_only=True)` refuses,
//! read inertly (`--inert`): each fixture of `crates/stowage/tests/fixtures/wild/`
//! (made by `scripts/make_wild_fixtures.py` with real PyTorch) lists the same
//! tensors (bit-exact), values and objects as `torch.load(weights_only=False)`
//! gave, recorded beside it in `NAME.expected.json`. And nothing a file names
//! is ever called.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as Json;

fn wild(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../stowage/tests/fixtures/wild")
        .join(name)
}

fn stowage(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stowage"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the stowage binary runs")
}

fn inspect_inert(file: &Path) -> Json {
    let out = stowage(
        &["inspect", "--inert", "--json", file.to_str().unwrap()],
        Path::new("."),
    );
    assert!(
        out.status.success(),
        "{}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The listed fields of each entry of `doc[list]`.
fn fields(doc: &Json, list: &str, keys: &[&str]) -> Vec<Json> {
    doc[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} list"))
        .iter()
        .map(|e| Json::Array(keys.iter().map(|k| e[*k].clone()).collect()))
        .collect()
}

fn check(stem: &str, file: &str) {
    let expected: Json = serde_json::from_str(
        &std::fs::read_to_string(wild(&format!("{stem}.expected.json"))).unwrap(),
    )
    .unwrap();
    let got = inspect_inert(&wild(file));
    let t = [
        "path",
        "dtype",
        "shape",
        "parameter",
        "requires_grad",
        "sha256",
    ];
    assert_eq!(
        fields(&got, "tensors", &t),
        fields(&expected, "tensors", &t),
        "{file}: tensors"
    );
    let values = |doc: &Json| doc["values"].as_array().unwrap().clone();
    let (got_values, want_values) = (values(&got), values(&expected));
    assert_eq!(
        got_values.len(),
        want_values.len(),
        "{file}: number of values"
    );
    for (g, w) in got_values.iter().zip(&want_values) {
        // Every field PyTorch's side recorded is there, equal.
        for (k, v) in w.as_object().unwrap() {
            assert_eq!(&g[k], v, "{file}: field {k} of value {w}, stowage gave {g}");
        }
    }
    let o = ["path", "module", "name"];
    assert_eq!(
        fields(&got, "objects", &o),
        fields(&expected, "objects", &o),
        "{file}: objects"
    );
}

#[test]
fn whole_module_save_reads_as_torch_load_gives() {
    check("whole_module", "whole_module.pt");
}

#[test]
fn legacy_format_whole_module_save_reads_as_torch_load_gives() {
    check("whole_module_legacy", "whole_module_legacy.pt");
}

#[test]
fn lightning_checkpoint_with_namespace_reads_as_torch_load_gives() {
    check("lightning", "lightning.ckpt");
}

#[test]
fn numpy_arrays_and_scalars_read_as_torch_load_gives() {
    check("numpy", "numpy.pt");
}

#[test]
fn rng_states_read_as_torch_load_gives() {
    check("rng", "rng.pt");
}

#[test]
fn datetime_pathlib_and_collections_read_as_torch_load_gives() {
    check("pydata", "pydata.pt");
}

#[test]
fn whole_module_paths_run_through_the_state() {
    let got = inspect_inert(&wild("whole_module.pt"));
    let paths: Vec<&Json> = got["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["path"])
        .collect();
    assert_eq!(
        *paths[0],
        serde_json::json!(["_modules", "0", "_parameters", "weight"])
    );
    let objects = got["objects"].as_array().unwrap();
    assert_eq!(objects[0]["module"], "torch.nn.modules.container");
    assert_eq!(objects[0]["name"], "Sequential");
    assert_eq!(objects[1]["path"], serde_json::json!(["_modules", "0"]));
    assert_eq!(objects[1]["name"], "Linear");
}

#[test]
fn without_inert_the_foreign_globals_are_refused() {
    for file in [
        "whole_module.pt",
        "lightning.ckpt",
        "numpy.pt",
        "hostile_calls.pt",
    ] {
        let out = stowage(
            &["inspect", "--json", wild(file).to_str().unwrap()],
            Path::new("."),
        );
        assert_eq!(out.status.code(), Some(2), "{file}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("refused global"), "{file}: {err}");
    }
}

#[test]
fn allow_global_decodes_just_that_name() {
    let file = wild("lightning.ckpt");
    let file = file.to_str().unwrap();
    let out = stowage(
        &[
            "inspect",
            "--json",
            "--allow-global",
            "argparse.Namespace",
            file,
        ],
        Path::new("."),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Json = serde_json::from_slice(&out.stdout).unwrap();
    let lr = doc["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["path"] == serde_json::json!(["hyper_parameters", "lr"]))
        .expect("hyper_parameters.lr listed");
    assert_eq!(lr["value"], 0.001);
    assert_eq!(doc["objects"], serde_json::json!([]));
    let numpy = wild("numpy.pt");
    let out = stowage(
        &[
            "inspect",
            "--json",
            "--allow-global",
            "argparse.Namespace",
            numpy.to_str().unwrap(),
        ],
        Path::new("."),
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn hostile_calls_are_listed_never_made() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("stowage_inert_marker_must_not_exist");
    let file = wild("hostile_calls.pt");
    let file = file.to_str().unwrap();
    for args in [
        vec!["inspect", "--inert", "--json", file],
        vec!["inspect", "--inert", file],
        vec!["verify", "--inert", file],
        vec!["convert", "--inert", file, "out.safetensors"],
        vec!["diff", "--inert", file, file],
    ] {
        let out = stowage(&args, dir.path());
        assert!(!marker.exists(), "{args:?} ran a call");
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let doc = inspect_inert(&wild("hostile_calls.pt"));
    let objects = fields(&doc, "objects", &["path", "module", "name"]);
    assert_eq!(
        objects,
        vec![
            serde_json::json!([["system"], "posix", "system"]),
            // As the pickle names them (protocol 2 writes Python 2's module names).
            serde_json::json!([["eval"], "__builtin__", "eval"]),
            serde_json::json!([["popen"], "commands", "Popen"]),
        ]
    );
    let args = doc["values"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["path"] == serde_json::json!(["system", "args", 0]))
        .expect("os.system's argument listed");
    assert_eq!(args["value"], "touch stowage_inert_marker_must_not_exist");
}

#[test]
fn convert_inert_whole_module_extracts_every_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let file = wild("whole_module.pt");
    let out = stowage(
        &[
            "convert",
            "--inert",
            file.to_str().unwrap(),
            "weights.safetensors",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st = stowage::load(dir.path().join("weights.safetensors")).unwrap();
    let mut names: Vec<String> = st
        .state_dict()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "_modules.0._parameters.bias",
            "_modules.0._parameters.weight",
            "_modules.2._parameters.bias",
            "_modules.2._parameters.weight",
        ]
    );
}

#[test]
fn saving_an_inert_object_to_pt_is_refused_unless_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let file = wild("hostile_calls.pt");
    let file = file.to_str().unwrap();
    let out = stowage(&["convert", "--inert", file, "out.pt"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("posix.system") && err.contains("\"system\""),
        "{err}"
    );
    assert!(!dir.path().join("out.pt").exists());
    let out = stowage(
        &["convert", "--inert", "--drop-objects", file, "out.pt"],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = inspect_inert(&dir.path().join("out.pt"));
    assert_eq!(
        fields(&doc, "tensors", &["path"]),
        vec![serde_json::json!([["weight"]])]
    );
    assert_eq!(doc["objects"], serde_json::json!([]));
}

/// A TorchScript archive (`torch.jit.save`) reads without `--inert`: its
/// `__torch__` classes are inert objects, the tensors are the state dict's
/// (dotted paths through the modules' state), then `constants.pkl`'s under
/// `CONSTANTS`; the code is never read.
fn check_torchscript(stem: &str) {
    let file = wild(&format!("{stem}.pt"));
    let expected: Json = serde_json::from_str(
        &std::fs::read_to_string(wild(&format!("{stem}.expected.json"))).unwrap(),
    )
    .unwrap();
    let out = stowage(
        &["inspect", "--json", file.to_str().unwrap()],
        Path::new("."),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["format"], "torchscript", "{stem}");
    // A TorchScript archive records no Parameter class: `parameter` is not compared.
    let t = ["path", "dtype", "shape", "requires_grad", "sha256"];
    assert_eq!(
        fields(&got, "tensors", &t),
        fields(&expected, "tensors", &t),
        "{stem}"
    );
    assert_eq!(got["objects"][0]["path"], serde_json::json!([]));
    let root = got["objects"][0]["name"].as_str().unwrap();
    assert_eq!(root, expected["root"].as_str().unwrap());

    let dir = tempfile::tempdir().unwrap();
    let out = stowage(
        &["convert", file.to_str().unwrap(), "weights.safetensors"],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let st = stowage::load(dir.path().join("weights.safetensors")).unwrap();
    let mut names: Vec<String> = st
        .state_dict()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    names.sort();
    let mut want: Vec<String> = expected["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["path"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().map_or_else(|| k.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(".")
        })
        .collect();
    want.sort();
    assert_eq!(names, want, "{stem}");
}

#[test]
fn torchscript_scripted_module_reads_as_torch_jit_load_gives() {
    check_torchscript("torchscript");
}

#[test]
fn torchscript_traced_module_with_constants_reads_as_torch_jit_load_gives() {
    check_torchscript("torchscript_traced");
}

/// Typed list and dict attributes, which TorchScript's pickler wraps in
/// `torch.jit._pickle.build_intlist` … and `restore_type_tag`: read as the
/// lists and dicts they mark, without `--inert`.
#[test]
fn torchscript_typed_attributes_read_as_data() {
    check_torchscript("torchscript_typed");
    let file = wild("torchscript_typed.pt");
    let out = stowage(
        &["inspect", "--json", file.to_str().unwrap()],
        Path::new("."),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Json = serde_json::from_slice(&out.stdout).unwrap();
    let value = |path: Json| {
        got["values"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["path"] == path)
            .map(|v| v["value"].clone())
    };
    assert_eq!(
        value(serde_json::json!(["sizes", 2])),
        Some(serde_json::json!(4))
    );
    assert_eq!(
        value(serde_json::json!(["rates", 1])),
        Some(serde_json::json!(1.5))
    );
    assert_eq!(
        value(serde_json::json!(["flags", 0])),
        Some(serde_json::json!(true))
    );
    assert_eq!(
        value(serde_json::json!(["names", "a"])),
        Some(serde_json::json!(1))
    );
}

/// `.pt` → `.safetensors` keeps the values a file holds beside its
/// tensors, whatever their type: the numpy arrays, scalars and dtypes, the
/// `datetime`, `pathlib`, `slice` and `range` values, the classes, qschemes
/// and layouts of the wild fixtures list the same (paths, types and
/// values, an array's sha256 among them) from the converted file as from
/// its source. (Issue 26, item 16: they were left out as "lost".)
#[test]
fn values_of_every_type_survive_conversion_to_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    for file in [
        "numpy.pt",
        "rng.pt",
        "pydata.pt",
        "lightning.ckpt",
        "whole_module.pt",
    ] {
        let out = dir.path().join(format!("{file}.safetensors"));
        let converted = stowage(
            &[
                "convert",
                "--inert",
                wild(file).to_str().unwrap(),
                out.to_str().unwrap(),
            ],
            Path::new("."),
        );
        assert!(
            converted.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&converted.stderr)
        );
        let (before, after) = (inspect_inert(&wild(file)), inspect_inert(&out));
        let values = |doc: &Json| -> Vec<Json> {
            doc["values"]
                .as_array()
                .unwrap_or_else(|| panic!("{file}: no values list"))
                .to_vec()
        };
        let (want, got) = (values(&before), values(&after));
        assert!(!want.is_empty(), "{file}: no values to compare");
        let missing: Vec<&Json> = want.iter().filter(|v| !got.contains(v)).collect();
        assert!(missing.is_empty(), "{file}: lost or changed: {missing:#?}");
        assert_eq!(got.len(), want.len(), "{file}: values added");
    }
}
