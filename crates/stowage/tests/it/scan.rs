//! `stowage::checkpoint::scan` against PyTorch.
//!
//! The globals a scan calls `decoded` or `unsafe` are exactly those
//! `torch.serialization.get_unsafe_globals_in_checkpoint` lists (where it can
//! read the file), and those an inert tracing unpickler finds in every pickle
//! of the file (`scripts/torch_scan_oracle.py`: CPython's own unpickler, with
//! a `find_class` that records names and returns stubs). Names are compared
//! as CPython imports them (its full Python 2 → 3 table; PyTorch's static
//! walk uses a shorter one).
//!
//! The hostile files of `fixtures/scan/` (made by
//! `scripts/make_scan_fixtures.py`) carry PyTorch's answers in
//! `expected.json`, checked without torch; with torch, every fixture is also
//! checked live. Live checks skip without torch unless `STOWAGE_REQUIRE_TORCH`
//! is set.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as J;
use stowage::checkpoint::scan::{allowed_names, scan_path, FileScan, Risk, ScanKind, Verdict};

fn scan_dir() -> PathBuf {
    common::fixtures_dir().join("scan")
}

fn scan_one(path: &Path) -> FileScan {
    let mut report = scan_path(path, &stowage::LoadOptions::default());
    assert_eq!(report.files.len(), 1, "{}", path.display());
    report.files.remove(0)
}

/// The names a scan does not call allowed.
fn flagged(f: &FileScan) -> BTreeSet<String> {
    f.globals
        .iter()
        .filter(|g| g.verdict != Verdict::Allowed)
        .map(|g| format!("{}.{}", g.module, g.name))
        .collect()
}

fn names(v: &J) -> Option<BTreeSet<String>> {
    v.as_array().map(|a| {
        a.iter()
            .map(|s| s.as_str().expect("a name").to_owned())
            .collect()
    })
}

/// Holds the scan of `path` to the oracle's answer `r` for it.
fn check(path: &Path, r: &J) {
    let f = scan_one(path);
    // Where CPython's unpickler stops on the file (a bad opcode, a Python 2
    // str that is not UTF-8), the scan, which runs nothing, may read further.
    if let Some(expected) = names(&r["oracle"]) {
        assert!(f.error.is_none(), "{}: {:?}", path.display(), f.error);
        assert_eq!(flagged(&f), expected, "{} (oracle)", path.display());
    }
    // PyTorch's own scan reads only `data.pkl`: the field corpus hides
    // pickles elsewhere.
    let field = path.parent().is_some_and(|p| p.ends_with("field"));
    if let (Some(torch), false) = (names(&r["torch_mapped"]), field) {
        assert_eq!(flagged(&f), torch, "{} (torch)", path.display());
    }
}

#[test]
fn hostile_files_match_recorded_torch_answers() {
    let text = std::fs::read_to_string(scan_dir().join("expected.json")).unwrap();
    let expected: serde_json::Map<String, J> = serde_json::from_str(&text).unwrap();
    assert!(expected.len() >= 11);
    for (name, r) in &expected {
        let path = scan_dir().join(name);
        check(&path, r);
        // Every one is flagged, except the data types stowage decodes.
        let f = scan_one(&path);
        assert_eq!(f.is_unsafe(), name != "numpy_values.pt", "{name}");
    }
}

#[test]
fn finds_what_pattern_matchers_miss() {
    // A STACK_GLOBAL of memoized strings.
    let f = scan_one(&scan_dir().join("stack_global_memo.pt"));
    assert_eq!(flagged(&f), BTreeSet::from(["builtins.exec".to_owned()]));
    assert_eq!(f.pickles[0].protocol, 4);
    // The second of two archives back to back.
    let f = scan_one(&scan_dir().join("back_to_back.distcp"));
    assert_eq!(f.pickles.len(), 2);
    assert!(f.is_unsafe());
    // Every pickle of the legacy stream, and of a TorchScript archive.
    let f = scan_one(&scan_dir().join("legacy_os_system.pt"));
    assert_eq!(f.kind, Some(ScanKind::TorchLegacy));
    assert_eq!(f.pickles.len(), 5);
    let f = scan_one(&scan_dir().join("torchscript.pt"));
    let records: Vec<_> = f.pickles.iter().map(|p| p.record.as_str()).collect();
    assert!(
        records.iter().any(|r| r.ends_with("/constants.pkl")),
        "{records:?}"
    );
    assert!(
        records.iter().any(|r| r.ends_with("/data.pkl")),
        "{records:?}"
    );
}

fn field_dir() -> PathBuf {
    scan_dir().join("field")
}

/// The field corpus (`fixtures/scan/field/`, issue 26 items 1-7): every
/// pickle wherever it lies, equal to what CPython's own unpickler finds
/// where it reads the file.
#[test]
fn field_corpus_finds_every_pickle() {
    let text = std::fs::read_to_string(field_dir().join("expected.json")).unwrap();
    let expected: serde_json::Map<String, J> = serde_json::from_str(&text).unwrap();
    assert!(expected.len() >= 15);
    for (name, r) in &expected {
        let path = field_dir().join(name);
        let f = scan_one(&path);
        if let Some(oracle) = names(&r["oracle"]) {
            if name != "truly_encrypted.zip" {
                assert!(f.error.is_none(), "{name}: {:?}", f.error);
            }
            assert_eq!(flagged(&f), oracle, "{name}");
        }
        // Every one is flagged but the plain array; all but the whole model
        // (classes to import) and the plain array run code.
        let clean = ["plain.npy", "truly_encrypted.zip"].contains(&name.as_str());
        assert_eq!(f.is_unsafe(), !clean, "{name}");
        let code = !["plain.npy", "whole_model.pt", "truly_encrypted.zip"].contains(&name.as_str());
        assert_eq!(f.runs_code(), code, "{name}");
    }
    let scan = |name: &str| scan_one(&field_dir().join(name));
    // A zip of any layout is a zip, not a torch save.
    assert_eq!(scan("root_pkl.zip").kind, Some(ScanKind::Zip));
    assert_eq!(scan("data_txt.zip").kind, Some(ScanKind::TorchZip));
    // Nested archives name their records through the outer one.
    let f = scan("nested.zip");
    assert_eq!(
        f.pickles
            .iter()
            .map(|p| p.record.as_str())
            .collect::<Vec<_>>(),
        ["outer.zip!inner.pt!archive/data.pkl"]
    );
    // All six pickles back to back.
    assert_eq!(scan("six_pickles.pkl").pickles.len(), 6);
    // A frame that ends inside an opcode is malformed, and unsafe code.
    let f = scan("frame_straddle.pkl");
    assert_eq!(
        flagged(&f),
        BTreeSet::from(["<malformed>.FRAME".to_owned()])
    );
    assert_eq!(f.globals[0].risk, Some(Risk::Code));
    // A cut pickle keeps what it called, with an error.
    let f = scan("cut_exec.pkl");
    assert_eq!(flagged(&f), BTreeSet::from(["builtins.exec".to_owned()]));
    assert!(f.error.is_some());
    // What is truly encrypted is an error naming the member.
    let f = scan("truly_encrypted.zip");
    let e = f.error.expect("an error").to_string();
    assert!(e.contains("secret.pkl") && e.contains("encrypted"), "{e}");
    // A .npy of plain elements holds no pickle; an object array's is read.
    let f = scan("plain.npy");
    assert_eq!(
        (f.kind, f.pickles.len(), f.error.is_none()),
        (Some(ScanKind::Npy), 0, true)
    );
    let f = scan("object.npy");
    assert!(f
        .globals
        .iter()
        .any(|g| g.name == "system" && g.risk == Some(Risk::Code)));
    // Only imports, no code.
    let f = scan("whole_model.pt");
    assert!(f
        .globals
        .iter()
        .filter(|g| g.verdict == Verdict::Unsafe)
        .all(|g| g.risk == Some(Risk::Import)));
}

/// A folder is judged by content: a cut pickle and an object array under
/// names that say nothing are found (they had made a folder scan "clean").
#[test]
fn folders_judge_files_by_content() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(field_dir().join("cut_exec.pkl"), dir.path().join("notes")).unwrap();
    std::fs::copy(field_dir().join("object.npy"), dir.path().join("w.dat")).unwrap();
    std::fs::copy(field_dir().join("plain.npy"), dir.path().join("plain.npy")).unwrap();
    std::fs::write(dir.path().join("README.md"), "# weights\n").unwrap();
    let report = scan_path(dir.path(), &stowage::LoadOptions::default());
    let found: Vec<_> = report
        .files
        .iter()
        .map(|f| f.path.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(found, ["notes", "plain.npy", "w.dat"]);
    assert!(report.is_unsafe() && report.runs_code());
    assert!(report.has_errors(), "the cut pickle is reported");
}

#[test]
fn folders_are_scanned_recursively_and_links_do_not_loop() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("a/b");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::copy(common::fixture("simple"), sub.join("model.bin")).unwrap();
    std::fs::copy(scan_dir().join("os_system.pt"), dir.path().join("x.pt")).unwrap();
    std::fs::write(dir.path().join("README.md"), "# not a pickle\n").unwrap();
    // Text whose first byte is an opcode (`i`: INST) but which is no pickle.
    std::fs::write(dir.path().join("x.py"), "import os\nprint(1)\n").unwrap();
    std::fs::write(
        dir.path().join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.10)\nproject(x)\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "cat\ndog\nRun it.\n").unwrap();
    std::os::unix::fs::symlink(dir.path(), sub.join("loop")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("gone"), sub.join("dangling")).unwrap();
    let report = scan_path(dir.path(), &stowage::LoadOptions::default());
    let found: Vec<_> = report
        .files
        .iter()
        .map(|f| f.path.strip_prefix(dir.path()).unwrap().to_owned())
        .collect();
    assert_eq!(
        found,
        [PathBuf::from("a/b/model.bin"), PathBuf::from("x.pt")]
    );
    assert!(report.is_unsafe());
    assert!(!report.has_errors());
    // A file named directly is listed even when it is no pickle.
    let report = scan_path(
        &dir.path().join("README.md"),
        &stowage::LoadOptions::default(),
    );
    assert!(report.has_errors());
    let report = scan_path(
        &dir.path().join("missing.pt"),
        &stowage::LoadOptions::default(),
    );
    assert!(report.has_errors());
}

/// Runs the oracle on `files`; `None` (after SKIPPED) without torch.
fn oracle(files: &[PathBuf]) -> Option<serde_json::Map<String, J>> {
    let py = common::torch_python()?;
    let out = Command::new(&py)
        .arg(common::scripts_dir().join("torch_scan_oracle.py"))
        .args(files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "oracle: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn every_fixture_agrees_with_live_torch() {
    let mut files = Vec::new();
    for dir in [
        common::fixtures_dir(),
        common::hostile_dir(),
        scan_dir(),
        field_dir(),
        common::fixtures_dir().join("py2"),
    ] {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            if ["pt", "pkl", "distcp", "zip", "npz", "npy"].contains(&ext) {
                files.push(p);
            }
        }
    }
    files.sort();
    let Some(report) = oracle(&files) else { return };
    let mut with_torch = 0;
    for p in &files {
        let r = &report[p.to_str().unwrap()];
        check(p, r);
        with_torch += usize::from(!r["torch"].is_null());
    }
    assert!(with_torch > 40, "torch read only {with_torch} files");
}

#[test]
fn allowed_names_are_pytorchs_allowlist() {
    let Some(py) = common::torch_python() else {
        return;
    };
    let out = Command::new(py)
        .args([
            "-c",
            "from torch import _weights_only_unpickler as w; print('\\n'.join(sorted(w._get_allowed_globals())))",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let torch: BTreeSet<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let ours: BTreeSet<String> = allowed_names().iter().map(|s| s.to_string()).collect();
    assert_eq!(
        ours, torch,
        "scripts/gen_torch_allowlist.py regenerates the table"
    );
}

/// A distributed checkpoint's `.metadata` is judged by DCP's own data
/// classes (issue 26, item 20): a DCP folder scans clean; a pickle that
/// names those classes beside something else stays unsafe, all of it.
#[test]
fn dcp_metadata_is_judged_by_dcps_classes() {
    let report = scan_path(
        &common::fixtures_dir().join("dcp/one"),
        &stowage::LoadOptions::default(),
    );
    assert_eq!(report.files.len(), 2);
    assert!(!report.is_unsafe(), "{:?}", report.files[0].globals);
    let md = &report
        .files
        .iter()
        .find(|f| f.path.ends_with(".metadata"))
        .unwrap();
    assert!(md
        .globals
        .iter()
        .any(|g| g.name == "Metadata" && g.verdict == Verdict::Decoded));
    let mixed = b"\x80\x02ctorch.distributed.checkpoint.metadata\nMetadata\nq\x00cos\nsystem\nq\x01\x86q\x02.";
    let f = stowage::checkpoint::scan::scan_bytes(mixed, &Default::default());
    assert_eq!(
        flagged(&f),
        BTreeSet::from([
            "os.system".to_owned(),
            "torch.distributed.checkpoint.metadata.Metadata".to_owned()
        ])
    );
    assert!(f.globals.iter().all(|g| g.verdict == Verdict::Unsafe));
}

/// A bare pickle (protocol 2) that memoizes `puts` ints in one list and
/// reads `gets` of them back into it.
fn memo_pickle(puts: u32, gets: u32) -> Vec<u8> {
    let mut p = b"\x80\x02".to_vec();
    p.extend(memo_pickle_body(puts, gets));
    p
}

/// [`memo_pickle`] without its `PROTO`, as protocol 1 writes it.
fn memo_pickle_body(puts: u32, gets: u32) -> Vec<u8> {
    let mut p = b"]q\x00(".to_vec();
    for i in 1..=puts {
        p.extend_from_slice(b"K\x01r");
        p.extend_from_slice(&i.to_le_bytes());
    }
    for i in 1..=gets {
        p.push(b'j');
        p.extend_from_slice(&i.to_le_bytes());
    }
    p.extend_from_slice(b"ccollections\nOrderedDict\n)Re.");
    p
}

/// A scan counts memo entries as a load does (only those read back), also
/// when the pickle is longer than the window it starts reading with: a
/// state dict of a million tensors memoizes a million tuples, which the
/// loader reads and the scan must too.
#[test]
fn scan_counts_memo_entries_as_the_loader_does() {
    use stowage::checkpoint::pickle::Limits;
    let options =
        stowage::LoadOptions::default().with_pickle_limits(Limits::default().with_max_memo(1000));
    let dir = tempfile::tempdir().unwrap();
    let scan = |name: &str, pickle: Vec<u8>| {
        let path = dir.path().join(name);
        std::fs::write(&path, pickle).unwrap();
        let mut report = scan_path(&path, &options);
        report.files.remove(0)
    };
    // 3,000 entries (15 KB, past the first window), none read back.
    let unread = scan("unread.pkl", memo_pickle(3000, 0));
    assert!(unread.error.is_none(), "{:?}", unread.error);
    assert_eq!(flagged(&unread), BTreeSet::new());
    // 1,001 read back: over the limit, as for the loader.
    let read = scan("read.pkl", memo_pickle(3000, 1001));
    let error = read.error.expect("over max_memo");
    assert!(error.to_string().contains("max_memo"), "{error}");
    // The same pickle under the default limits.
    let mut report = scan_path(
        &dir.path().join("read.pkl"),
        &stowage::LoadOptions::default(),
    );
    let default = report.files.remove(0);
    assert!(default.error.is_none(), "{:?}", default.error);
    // Found in a folder, without `PROTO`, it is read a growing window at a
    // time: a window that ends before its `STOP` holds more entries than
    // the limit, yet the pickle, read whole, does not.
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("state"), memo_pickle_body(3000, 0)).unwrap();
    let report = scan_path(folder.path(), &options);
    assert_eq!(report.files.len(), 1, "the pickle was left out");
    assert!(
        report.files[0].error.is_none(),
        "{:?}",
        report.files[0].error
    );
    assert_eq!(report.files[0].kind, Some(ScanKind::Pickle));
}

/// Every module of the running Python's standard library
/// (`sys.stdlib_module_names`, public and private) makes even a class in it
/// `"code"`: the generated table (`scripts/gen_stdlib_modules.py`) misses
/// none of them (issue 38).
#[test]
fn every_stdlib_module_of_the_running_python_is_code() {
    let Some(py) = common::torch_python() else {
        return;
    };
    let out = Command::new(&py)
        .args([
            "-c",
            "import sys; print('\\n'.join(sorted(sys.stdlib_module_names)))",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let names = String::from_utf8(out.stdout).unwrap();
    let mut missed = Vec::new();
    for module in names.lines() {
        // GLOBAL `module.Gadget` called with no arguments.
        let pickle = format!("c{module}\nGadget\n)R.");
        let f = stowage::checkpoint::scan::scan_bytes(pickle.as_bytes(), &Default::default());
        let g = &f.globals[0];
        if g.verdict == Verdict::Unsafe && g.risk != Some(Risk::Code) {
            missed.push(module.to_owned());
        }
    }
    assert!(names.lines().count() > 250);
    assert!(
        missed.is_empty(),
        "stdlib modules not called code: {missed:?}"
    );
}
