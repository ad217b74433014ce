//! The CLI on every tensor kind PyTorch saves (`crates/stowage/tests/fixtures/kinds/`):
//! `inspect` shows the layout kind and, with `--json`, lists a sparse or
//! nested tensor once with its layout and logical shape, then its components
//! under its path plus the component's name, each with its storage fields;
//! `convert` to safetensors writes the components under their dotted names;
//! `diff` compares layouts and components; malformed files exit 2.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as Json;
use stowage::{Checkpoint, DType, Tensor};

fn kinds(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../stowage/tests/fixtures/kinds")
        .join(format!("{name}.pt"))
}

fn stowage<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stowage"))
        .args(args)
        .output()
        .expect("the stowage binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn inspect_json(name: &str) -> Json {
    let out = stowage(&[
        "inspect".as_ref(),
        "--json".as_ref(),
        kinds(name).as_os_str(),
    ]);
    assert!(out.status.success(), "{name}: {}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn keys(v: &Json) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

#[test]
fn inspect_json_lists_each_sparse_tensor_then_its_components() {
    let doc = inspect_json("sparse_compressed");
    let storages: BTreeSet<&str> = doc["storages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    let tensors = doc["tensors"].as_array().unwrap();
    let container: BTreeSet<&str> = [
        "path",
        "layout",
        "dtype",
        "shape",
        "requires_grad",
        "parameter",
    ]
    .into();
    let component: BTreeSet<&str> = [
        "path",
        "dtype",
        "shape",
        "stride",
        "storage_offset",
        "storage_key",
        "storage_nbytes",
        "requires_grad",
        "parameter",
        "sha256",
    ]
    .into();
    let paths: Vec<String> = tensors.iter().map(|t| t["path"].to_string()).collect();
    assert_eq!(
        &paths[..4],
        [
            r#"["csr"]"#,
            r#"["csr","crow_indices"]"#,
            r#"["csr","col_indices"]"#,
            r#"["csr","values"]"#
        ]
    );
    for t in tensors {
        if t["path"].as_array().unwrap().len() == 1 {
            assert_eq!(keys(t), container, "{t}");
        } else {
            assert_eq!(keys(t), component, "{t}");
            assert!(storages.contains(t["storage_key"].as_str().unwrap()), "{t}");
        }
    }
    let layouts: Vec<&str> = tensors
        .iter()
        .filter_map(|t| t["layout"].as_str())
        .collect();
    assert_eq!(
        layouts,
        [
            "sparse_csr",
            "sparse_csc",
            "sparse_bsr",
            "sparse_bsc",
            "sparse_csr"
        ]
    );
    assert_eq!(tensors[0]["shape"], serde_json::json!([3, 4]));

    let nested = inspect_json("nested");
    let t = &nested["tensors"].as_array().unwrap()[0];
    assert_eq!(
        (t["layout"].as_str(), &t["shape"]),
        (Some("nested"), &serde_json::json!([2, 5]))
    );
    let coo = inspect_json("sparse_coo");
    let names: Vec<String> = coo["tensors"].as_array().unwrap()[..3]
        .iter()
        .map(|t| t["path"].to_string())
        .collect();
    assert_eq!(
        names,
        [
            r#"["coalesced"]"#,
            r#"["coalesced","indices"]"#,
            r#"["coalesced","values"]"#
        ]
    );
}

#[test]
fn inspect_shows_the_layout_kind() {
    for (name, kind) in [
        ("sparse_coo", "[sparse_coo]"),
        ("sparse_compressed", "[sparse_bsc]"),
        ("nested", "[nested]"),
        ("meta", "[meta]"),
        (
            "quantized_per_channel",
            "[per_channel_affine_float_qparams]",
        ),
    ] {
        let out = stowage(&["inspect".as_ref(), kinds(name).as_os_str()]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains(kind),
            "{name}: {}",
            text(&out.stdout)
        );
    }
}

#[test]
fn convert_writes_components_under_dotted_names_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("coo.safetensors");
    let out = stowage(&[
        "convert".as_ref(),
        kinds("sparse_coo").as_os_str(),
        st.as_os_str(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let back = stowage::load(&st).unwrap();
    let names: BTreeSet<String> = back
        .state_dict()
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let want: BTreeSet<String> = ["coalesced", "uncoalesced", "hybrid", "int_values"]
        .iter()
        .flat_map(|t| [format!("{t}.indices"), format!("{t}.values")])
        .collect();
    assert_eq!(names, want);

    for name in [
        "sparse_coo",
        "sparse_compressed",
        "nested",
        "meta",
        "quantized_per_channel",
    ] {
        let pt = dir.path().join(format!("{name}.pt"));
        let out = stowage(&["convert".as_ref(), kinds(name).as_os_str(), pt.as_os_str()]);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let out = stowage(&["diff".as_ref(), kinds(name).as_os_str(), pt.as_os_str()]);
        assert!(
            out.status.success(),
            "{name}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
}

#[test]
fn diff_names_a_layout_that_differs() {
    let dir = tempfile::tempdir().unwrap();
    let dense = dir.path().join("dense.pt");
    let ckpt = Checkpoint::from_state_dict([(
        "coalesced",
        Tensor::zeros(&[3, 4], DType::Float32).unwrap(),
    )]);
    stowage::save(&dense, &ckpt).unwrap();
    let out = stowage(&[
        "diff".as_ref(),
        kinds("sparse_coo").as_os_str(),
        dense.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("coalesced: layout sparse_coo in A, strided in B"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn malformed_kinds_exit_2_with_one_line() {
    for name in [
        "hostile_sparse_coo_index",
        "hostile_sparse_csr_crow",
        "hostile_nested_offsets",
        "hostile_qscales_length",
    ] {
        let out = stowage(&[
            "inspect".as_ref(),
            "--json".as_ref(),
            kinds(name).as_os_str(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let err = text(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{name}: {err}");
        assert!(
            err.contains(name) && err.contains("tensor"),
            "{name}: {err}"
        );
    }
}

#[test]
fn verify_checks_sparse_indices_and_nested_bounds() {
    for name in [
        "sparse_coo",
        "sparse_compressed",
        "nested",
        "sparse_legacy_format",
    ] {
        let out = stowage(&["verify".as_ref(), kinds(name).as_os_str()]);
        assert!(
            out.status.success(),
            "{name}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    for name in [
        "hostile_sparse_coo_index",
        "hostile_sparse_csr_col",
        "hostile_nested_offsets",
    ] {
        let out = stowage(&["verify".as_ref(), kinds(name).as_os_str()]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("tensor"),
            "{name}: {}",
            text(&out.stdout)
        );
    }
}

/// A subclass read with `--inert` (or `--allow-global`) names its class on the
/// tensor's entry; its data is the tensor PyTorch reports.
#[test]
fn a_subclass_names_its_class_under_inert() {
    let file = kinds("subclass");
    let want: Json = serde_json::from_str(
        &std::fs::read_to_string(kinds("subclass").with_extension("json")).unwrap(),
    )
    .unwrap();
    for flag in [&["--inert"][..], &["--allow-global", "__main__.Tagged"][..]] {
        let mut args = vec!["inspect", "--json"];
        args.extend_from_slice(flag);
        args.push(file.to_str().unwrap());
        let out = stowage(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let got: Json = serde_json::from_slice(&out.stdout).unwrap();
        let t = &got["tensors"][0];
        assert_eq!(t["class"], "__main__.Tagged");
        assert_eq!(t["sha256"], want["tensors"][0]["sha256"]);
    }
    let out = stowage(&["inspect", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("__main__.Tagged"));
}

/// The summary counts only bytes the file holds: a meta tensor saved without
/// storage adds nothing, a packed `quint4x2` tensor its packed bytes, a
/// per-channel quantizer its scales and zero points; none of them is
/// "saved by sharing". Tensors without a storage record get keys `@0`, `@1`,
/// … the same on every run.
#[test]
fn the_summary_counts_the_bytes_the_file_holds() {
    for (name, logical) in [
        ("meta", "0 B in tensors"),
        ("quantized_packed", "13 B in tensors, 13 B in storages"),
        (
            "quantized_per_channel",
            "124 B in tensors, 124 B in storages",
        ),
    ] {
        let out = stowage(&["inspect", kinds(name).to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let stdout = text(&out.stdout);
        let summary = stdout
            .lines()
            .find(|l| l.contains("saved by sharing"))
            .unwrap();
        assert!(summary.contains(logical), "{name}: {summary}");
        assert!(
            summary.contains(" 0 B saved by sharing"),
            "{name}: {summary}"
        );
    }
    let keys = || {
        let got = inspect_json("meta");
        got["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["storage_key"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let first = keys();
    assert!(first.iter().all(|k| k.starts_with('@')), "{first:?}");
    assert_eq!(first, keys());
}
