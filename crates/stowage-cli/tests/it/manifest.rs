//! `stowage manifest`: one checkpoint, one manifest, whatever its form
//! (`docs/manifest.md`, `docs/cli-contract.md`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

fn stowage<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    stowage_with(&[], args)
}

/// `stowage --quiet ARGS` with the environment's `env` set.
fn stowage_with<S: AsRef<std::ffi::OsStr>>(env: &[(&str, &str)], args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stowage"))
        .arg("--quiet")
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("the stowage binary runs")
}

/// What a run that must have succeeded printed.
fn succeeded(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../stowage/tests/fixtures")
}

fn manifest(src: &Path) -> Json {
    let out = succeeded(stowage(&["manifest".as_ref(), src.as_os_str()]));
    serde_json::from_str(&out).unwrap()
}

fn convert(src: &Path, dst: &Path, extra: &[&str]) {
    let mut args: Vec<&std::ffi::OsStr> =
        vec!["convert".as_ref(), src.as_os_str(), dst.as_os_str()];
    args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
    succeeded(stowage(&args));
}

#[test]
fn one_checkpoint_has_one_manifest_in_every_form() {
    let tmp = tempfile::tempdir().unwrap();
    let dcp = fixtures().join("dcp/four");
    let expected = manifest(&dcp);
    assert_eq!(expected["format"], "stowage-manifest/1");
    // Sorted by name, and the root is the digest of the entries' lines.
    let tensors = expected["tensors"].as_array().unwrap();
    let names: Vec<&str> = tensors
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let mut h = Sha256::new();
    for t in tensors {
        let shape: Vec<String> = t["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.to_string())
            .collect();
        h.update(format!(
            "{}\t{}\t{}\t{}\n",
            t["name"].as_str().unwrap(),
            t["dtype"].as_str().unwrap(),
            shape.join(","),
            t["sha256"].as_str().unwrap()
        ));
    }
    assert_eq!(
        expected["root_sha256"].as_str().unwrap(),
        hex(&h.finalize())
    );
    // The DCP of 4 ranks as one `.pt`, a safetensors set of small shards,
    // .bin shards, and a DCP of 3 ranks: the same manifest.
    let pt = tmp.path().join("one.pt");
    convert(&dcp, &pt, &[]);
    let set = tmp.path().join("set");
    convert(
        &dcp,
        &set,
        &["--to", "safetensors", "--max-shard-size", "200B"],
    );
    let bin = tmp.path().join("bin");
    convert(&dcp, &bin, &["--to", "bin", "--max-shard-size", "300B"]);
    let three = tmp.path().join("three");
    convert(&pt, &three, &["--to", "dcp", "--ranks", "3"]);
    for form in [&pt, &set, &bin, &three] {
        assert_eq!(manifest(form), expected, "{}", form.display());
    }
    // The same content in other item formats: PyTorch's zip items, zstd
    // items, safetensors items.
    let one = manifest(&fixtures().join("dcp/one"));
    for other in ["dcp/zstd", "dcp/safetensors"] {
        assert_eq!(manifest(&fixtures().join(other)), one, "{other}");
    }
    // -o writes the same object to FILE, nothing on stdout.
    let file = tmp.path().join("m.json");
    let out = stowage(&[
        "manifest".as_ref(),
        dcp.as_os_str(),
        "-o".as_ref(),
        file.as_os_str(),
    ]);
    assert!(out.status.success() && out.stdout.is_empty());
    let written: Json = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(written, expected);
    // A device is written to, never replaced by a file (as root, renaming
    // over `/dev/null` would replace it).
    let null = Path::new("/dev/null");
    succeeded(stowage(&[
        "manifest".as_ref(),
        dcp.as_os_str(),
        "-o".as_ref(),
        null.as_os_str(),
    ]));
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(null)
        .unwrap()
        .file_type()
        .is_char_device());
}

#[test]
fn a_pt_and_its_safetensors_have_one_manifest_and_a_missing_file_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixtures().join("state_dict.pt");
    let copy = tmp.path().join("copy.safetensors");
    convert(&src, &copy, &[]);
    assert_eq!(manifest(&copy), manifest(&src));
    let missing = stowage(&["manifest", "/nonexistent/x.pt"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("x.pt"));
}

/// `convert SRC DST --manifest FILE` and `extra`, which must succeed: what it printed.
fn convert_with_manifest(src: &Path, dst: &Path, file: &Path, extra: &[&str]) -> String {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "convert".as_ref(),
        src.as_os_str(),
        dst.as_os_str(),
        "--manifest".as_ref(),
        file.as_os_str(),
    ];
    args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
    succeeded(stowage(&args))
}

fn read_json(file: &Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

/// `convert --manifest FILE`: FILE is the manifest `stowage manifest OUT`
/// gives, in every output form, its digests taken from the bytes as they
/// were written; only what is not written in its own order (a view at an
/// offset, here) is read back, and the output says which.
#[test]
fn convert_writes_the_outputs_manifest_as_it_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let forms: [(&str, &[&str]); 5] = [
        ("out.pt", &[]),
        ("out.safetensors", &[]),
        ("set", &["--to", "safetensors", "--max-shard-size", "200B"]),
        ("bin", &["--to", "bin", "--max-shard-size", "300B"]),
        ("dcp", &["--to", "dcp", "--ranks", "3"]),
    ];
    for src in [
        fixtures().join("dcp/four"),
        fixtures().join("state_dict.pt"),
    ] {
        let expected = manifest(&src);
        for (name, extra) in forms {
            let dst = tmp.path().join(name);
            let file = tmp.path().join(format!("{name}.json"));
            let said = convert_with_manifest(&src, &dst, &file, extra);
            assert!(!said.contains("back from the output"), "{name}: {said}");
            let written = read_json(&file);
            assert_eq!(written, manifest(&dst), "{} to {name}", src.display());
            assert_eq!(written, expected, "{} to {name}", src.display());
        }
    }
    // Six views of one storage: the torch zip writer writes the storage,
    // whose ranges are the contiguous views' elements (`row`, `flat` at an
    // offset); the strided ones (a column, a transpose, a narrowed block)
    // are read back.
    let src = fixtures().join("views.pt");
    let (dst, file) = (tmp.path().join("views.pt"), tmp.path().join("v.json"));
    let said = convert_with_manifest(&src, &dst, &file, &[]);
    assert!(
        said.contains("the manifest read 3 tensors (160 B) back from the output")
            && said.ends_with(": col, t, narrow\n"),
        "{said}"
    );
    assert_eq!(read_json(&file), manifest(&src));
    // A part of a folder has no manifest of its own: refused, nothing written.
    let part = tmp.path().join("part");
    let refused = stowage(&[
        "convert".as_ref(),
        src.as_os_str(),
        part.as_os_str(),
        "--to".as_ref(),
        "dcp".as_ref(),
        "--rank".as_ref(),
        "0".as_ref(),
        "--world".as_ref(),
        "2".as_ref(),
        "--manifest".as_ref(),
        file.with_extension("part").as_os_str(),
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("stowage manifest"));
    assert!(!part.exists() && !file.with_extension("part").exists());
    // Under torchrun (its RANK and WORLD_SIZE set), a file is still whole:
    // written with its manifest.
    let (whole, whole_file) = (
        tmp.path().join("whole.safetensors"),
        file.with_extension("whole"),
    );
    succeeded(stowage_with(
        &[("RANK", "1"), ("WORLD_SIZE", "2")],
        &[
            "convert".as_ref(),
            src.as_os_str(),
            whole.as_os_str(),
            "--manifest".as_ref(),
            whole_file.as_os_str(),
        ],
    ));
    assert_eq!(read_json(&file.with_extension("whole")), manifest(&src));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn verify_checks_content_against_a_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixtures().join("state_dict.pt");
    let good = tmp.path().join("good.safetensors");
    convert(&src, &good, &[]);
    let m = tmp.path().join("m.json");
    let out = stowage(&[
        "manifest".as_ref(),
        src.as_os_str(),
        "-o".as_ref(),
        m.as_os_str(),
    ]);
    assert!(out.status.success());
    let verify = |file: &Path| {
        stowage(&[
            "verify".as_ref(),
            file.as_os_str(),
            "--manifest".as_ref(),
            m.as_os_str(),
        ])
    };
    let ok = verify(&good);
    let text = String::from_utf8_lossy(&ok.stdout).into_owned();
    assert_eq!(ok.status.code(), Some(0), "{text}");
    let tail = format!("content against {}\nok\n", m.display());
    assert!(text.ends_with(&tail), "{text}");
    // One flipped byte in the last tensor's data: that tensor, and only it.
    let mut raw = std::fs::read(&good).unwrap();
    let n = raw.len();
    raw[n - 3] ^= 0x10;
    let bad = tmp.path().join("bad.safetensors");
    std::fs::write(&bad, &raw).unwrap();
    let out = verify(&bad);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{text}");
    let defects: Vec<&str> = text.lines().filter(|l| l.contains(": tensor ")).collect();
    assert_eq!(defects.len(), 1, "{text}");
    assert!(defects[0].contains("changed"), "{text}");
    assert!(text.ends_with("1 defect\n"), "{text}");
    // A manifest that is not one: a usage error.
    let out = stowage(&[
        "verify".as_ref(),
        good.as_os_str(),
        "--manifest".as_ref(),
        src.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    // A manifest whose digest is not one: refused, naming the tensor.
    let text = std::fs::read_to_string(&m).unwrap();
    let doc: Json = serde_json::from_str(&text).unwrap();
    let first = doc["tensors"][0]["sha256"].as_str().unwrap().to_owned();
    let broken = tmp.path().join("broken.json");
    std::fs::write(&broken, text.replacen(&first, "zz", 1)).unwrap();
    let out = stowage(&[
        "verify".as_ref(),
        good.as_os_str(),
        "--manifest".as_ref(),
        broken.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("64 hex digits"));
}

#[test]
fn diff_by_content_finds_what_is_shared_across_names_and_formats() {
    use stowage::{Checkpoint, Tensor};
    let tmp = tempfile::tempdir().unwrap();
    let t = |v: Vec<f32>| Tensor::from_vec(v.clone(), &[v.len()]).unwrap();
    let a = Checkpoint::from_state_dict([
        ("x", t(vec![1.0; 100])),
        ("y", t(vec![2.0; 10])),
        ("z", t(vec![3.0; 50])),
    ]);
    // B: x kept, y changed, z's content under the name w, v new; as safetensors.
    let b = Checkpoint::from_state_dict([
        ("x", t(vec![1.0; 100])),
        ("y", t(vec![2.5; 10])),
        ("w", t(vec![3.0; 50])),
        ("v", t(vec![4.0; 7])),
    ]);
    let (pa, pb) = (tmp.path().join("a.pt"), tmp.path().join("b.pt"));
    stowage::save(&pa, &a).unwrap();
    stowage::save(&pb, &b).unwrap();
    let sb = tmp.path().join("b.safetensors");
    convert(&pb, &sb, &[]);
    let out = stowage(&[
        "diff".as_ref(),
        "--content".as_ref(),
        "--json".as_ref(),
        pa.as_os_str(),
        sb.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let d: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["identical"], 1);
    assert_eq!(d["changed"][0]["name"], "y");
    assert_eq!(d["moved"][0]["a"], serde_json::json!(["z"]));
    assert_eq!(d["moved"][0]["b"], serde_json::json!(["w"]));
    assert_eq!(d["only_in_a"], serde_json::json!([]));
    assert_eq!(d["only_in_b"][0]["name"], "v");
    assert_eq!(d["shared_bytes"], 4 * (100 + 50));
    assert_eq!(d["b_bytes"], 4 * (100 + 10 + 50 + 7));
    let text = stowage(&[
        "diff".as_ref(),
        "--content".as_ref(),
        pa.as_os_str(),
        sb.as_os_str(),
    ]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains("w: the same content as z in A"), "{text}");
    assert!(
        text.trim_end()
            .ends_with("B shares 600 B of its 668 B with A (89.8%)"),
        "{text}"
    );
    // A checkpoint against its own conversion: the same.
    let same = stowage(&[
        "diff".as_ref(),
        "--content".as_ref(),
        pb.as_os_str(),
        sb.as_os_str(),
    ]);
    assert_eq!(
        same.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&same.stdout)
    );
}

#[test]
fn an_oms_statement_lists_each_tensor_under_its_root() {
    let src = fixtures().join("state_dict.pt");
    let m = manifest(&src);
    let out = stowage(&[
        "manifest".as_ref(),
        src.as_os_str(),
        "--oms".as_ref(),
        "--name".as_ref(),
        "m".as_ref(),
    ]);
    assert!(out.status.success());
    let st: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(st["predicateType"], "https://model_signing/signature/v1.0");
    let resources = st["predicate"]["resources"].as_array().unwrap();
    let tensors = m["tensors"].as_array().unwrap();
    assert_eq!(resources.len(), tensors.len());
    let mut root = Sha256::new();
    for (r, t) in resources.iter().zip(tensors) {
        assert_eq!(r["name"], t["name"]);
        assert_eq!(r["digest"], t["sha256"]);
        let digest: Vec<u8> = (0..32)
            .map(|i| {
                u8::from_str_radix(&r["digest"].as_str().unwrap()[2 * i..2 * i + 2], 16).unwrap()
            })
            .collect();
        root.update(&digest);
    }
    assert_eq!(st["subject"][0]["name"], "m");
    assert_eq!(
        st["subject"][0]["digest"]["sha256"].as_str().unwrap(),
        hex(&root.finalize())
    );
}
