//! The `stowage` binary run on the fixtures as other programs run it:
//! `inspect`, `diff`, `convert`, `verify` and `bench` against the CLI
//! contract (`docs/cli-contract.md`). `scripts/check-roundtrip` also holds
//! `convert`'s output against PyTorch.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use stowage::{Checkpoint, DType, Tensor};
use stowage_zip::{ZipLimits, ZipReader, ZipWriter};

/// No command on these small files may take longer (a hang is a failure).
const TIMEOUT: Duration = Duration::from_secs(120);

/// Files the hostile README marks as accepted by PyTorch: refusing them is
/// allowed, loading them is too (memo_doubling must load).
const ACCEPTED_HOSTILE: [&str; 3] = ["deep_nesting.pt", "deflate_bomb.pt", "memo_doubling.pt"];

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    pid: u32,
}

impl Run {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status {:?}\n--- stdout\n{}--- stderr\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs the binary with `args`, killing it past [`TIMEOUT`].
fn stowage<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stowage"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the stowage binary starts");
    let pid = child.id();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            let args: Vec<_> = args
                .iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect();
            panic!("stowage {args:?} ran past {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Run {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        pid,
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../stowage/tests/fixtures")
}

fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// `*.pt` files in `dir`, sorted.
fn pt_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

fn good_fixtures() -> Vec<PathBuf> {
    pt_files(&fixtures())
}

fn hostile_fixtures() -> Vec<PathBuf> {
    pt_files(&fixtures().join("hostile"))
}

fn file_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

/// A folder of its own in the system temporary folder, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "stowage-cli-test-{}-{name}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A failure's stderr: exactly one line, naming `file`, no panic.
fn assert_one_error_line(run: &Run, file: &str) {
    assert!(!run.stderr.contains("panicked"), "{run:?}");
    assert!(!run.stderr.contains("RUST_BACKTRACE"), "{run:?}");
    assert_eq!(run.stderr.lines().count(), 1, "{run:?}");
    assert!(run.stderr.ends_with('\n'), "{run:?}");
    assert!(
        run.stderr.contains(file),
        "the error line names {file}: {run:?}"
    );
}

fn parse(run: &Run) -> Json {
    serde_json::from_str(run.stdout.trim_end()).unwrap_or_else(|e| panic!("{e}: {run:?}"))
}

fn keys(v: &Json) -> BTreeSet<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

fn set<'a>(names: &[&'a str]) -> BTreeSet<&'a str> {
    names.iter().copied().collect()
}

// ---------------------------------------------------------------- inspect

#[test]
fn inspect_json_has_the_contract_keys() {
    let tensor_keys = set(&[
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
    ]);
    for file in good_fixtures() {
        let run = stowage(&[Path::new("inspect"), &file, Path::new("--json")]);
        assert_eq!(run.code(), Some(0), "{}: {run:?}", file.display());
        assert!(run.stderr.is_empty(), "{run:?}");
        assert_eq!(
            run.stdout.lines().count(),
            1,
            "one JSON object on one line: {run:?}"
        );
        let doc = parse(&run);
        assert_eq!(
            keys(&doc),
            set(&["format", "byteorder", "storages", "tensors", "values"]),
            "{}",
            file.display()
        );
        assert!(
            ["torch-zip", "torch-legacy", "safetensors"].contains(&doc["format"].as_str().unwrap())
        );
        assert!(["little", "big"].contains(&doc["byteorder"].as_str().unwrap()));
        let storage_keys: BTreeSet<&str> = doc["storages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                assert_eq!(
                    keys(s),
                    set(&["key", "nbytes", "location", "storage_type"]),
                    "{}",
                    file.display()
                );
                assert!(s["nbytes"].is_u64());
                s["key"].as_str().unwrap()
            })
            .collect();
        for t in doc["tensors"].as_array().unwrap() {
            assert_eq!(keys(t), tensor_keys, "{}", file.display());
            assert!(
                t["path"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|k| k.is_string() || k.is_i64()),
                "{t}"
            );
            assert!(!t["dtype"].as_str().unwrap().starts_with("torch."), "{t}");
            let shape = t["shape"].as_array().unwrap();
            assert_eq!(shape.len(), t["stride"].as_array().unwrap().len(), "{t}");
            assert!(
                t["storage_offset"].is_u64() && t["storage_nbytes"].is_u64(),
                "{t}"
            );
            assert!(
                storage_keys.contains(t["storage_key"].as_str().unwrap()),
                "{t}"
            );
            assert!(
                t["requires_grad"].is_boolean() && t["parameter"].is_boolean(),
                "{t}"
            );
            let sha = t["sha256"].as_str().unwrap();
            assert!(
                sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
                "{t}"
            );
        }
    }
}

/// A tensor object at several paths (pickled once, fetched from the memo) is
/// listed once per path, from PyTorch's file and from stowage's copy of it
/// (which `convert` writes with the object once: `tests/it/roundtrip.rs`).
#[test]
fn inspect_lists_a_tensor_object_once_per_path() {
    let paths = |file: &Path| -> Vec<String> {
        let run = stowage(&[Path::new("inspect"), file, Path::new("--json")]);
        assert_eq!(run.code(), Some(0), "{run:?}");
        parse(&run)["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["path"].to_string())
            .collect()
    };
    let original = fixture("same_object.pt");
    let listed = paths(&original);
    assert_eq!(listed.len(), 16, "{listed:?}");
    for p in [
        r#"["a"]"#,
        r#"["b"]"#,
        r#"["list",0]"#,
        r#"["list",1]"#,
        r#"["nested","z","w","v"]"#,
    ] {
        assert!(listed.iter().any(|l| l == p), "{p} in {listed:?}");
    }
    let dir = TempDir::new("same-object");
    let out = dir.join("copy.pt");
    let run = stowage(&[Path::new("convert"), &original, &out]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_eq!(paths(&out), listed);
}

#[test]
fn inspect_table_ends_with_a_summary_line() {
    let run = stowage(&[Path::new("inspect"), &fixture("views.pt")]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines[0].starts_with("path") && lines[0].contains("shared with"),
        "{run:?}"
    );
    assert_eq!(
        lines.len(),
        1 + 6 + 1,
        "header, six tensors, summary: {run:?}"
    );
    let summary = lines.last().unwrap();
    assert!(summary.starts_with("6 tensors, 1 storages, "), "{summary}");
    assert!(summary.contains("saved by sharing"), "{summary}");

    let run = stowage(&[Path::new("inspect"), &fixture("simple.pt")]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let summary = run.stdout.lines().last().unwrap();
    assert!(
        summary.contains(" tensors, ") && summary.contains(" storages, "),
        "{summary}"
    );
}

#[test]
fn inspect_refuses_each_hostile_fixture_in_one_line() {
    for file in hostile_fixtures() {
        let name = file_name(&file);
        let run = stowage(&[Path::new("inspect"), &file]);
        if name == "memo_doubling.pt" {
            assert_eq!(
                run.code(),
                Some(0),
                "PyTorch loads it, with no tensors: {run:?}"
            );
            continue;
        }
        if ACCEPTED_HOSTILE.contains(&name.as_str()) && run.code() == Some(0) {
            continue;
        }
        assert_eq!(run.code(), Some(2), "{name}: {run:?}");
        assert_one_error_line(&run, &name);
        assert!(run.stdout.is_empty(), "{name}: {run:?}");
    }
}

// ---------------------------------------------------------------- diff

#[test]
fn diff_of_each_fixture_with_itself_is_the_same() {
    for file in good_fixtures() {
        let run = stowage(&[Path::new("diff"), &file, &file]);
        assert_eq!(run.code(), Some(0), "{}: {run:?}", file.display());
        assert_eq!(run.stdout, "same\n", "{run:?}");
        assert!(run.stderr.is_empty(), "{run:?}");
        let run = stowage(&[Path::new("diff"), &file, &file, Path::new("--json")]);
        assert_eq!(run.code(), Some(0), "{run:?}");
        assert_eq!(
            parse(&run),
            serde_json::json!({"same": true, "differences": []})
        );
    }
}

#[test]
fn diff_of_two_fixtures_lists_the_differences() {
    let (a, b) = (fixture("simple.pt"), fixture("views.pt"));
    let run = stowage(&[Path::new("diff"), &a, &b]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(run.stderr.is_empty(), "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines.contains(&"weight: missing in B"), "{run:?}");
    assert!(lines.contains(&"base: missing in A"), "{run:?}");
    assert_eq!(
        *lines.last().unwrap(),
        format!("{} differences", lines.len() - 1)
    );

    let run = stowage(&[Path::new("diff"), &a, &b, Path::new("--json")]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    let doc = parse(&run);
    assert_eq!(keys(&doc), set(&["same", "differences"]));
    assert_eq!(doc["same"], false);
    let diffs = doc["differences"].as_array().unwrap();
    assert_eq!(diffs.len(), lines.len() - 1);
    for d in diffs {
        assert!(d["path"].is_array(), "{d}");
        let kind = d["kind"].as_str().unwrap();
        assert!(
            [
                "missing_in_a",
                "missing_in_b",
                "dtype",
                "shape",
                "values",
                "value",
                "sharing"
            ]
            .contains(&kind),
            "{d}"
        );
    }
}

/// Two checkpoints that differ in every way `diff` knows, written by the library.
#[test]
fn diff_reports_each_kind_of_difference() {
    let dir = TempDir::new("diff");
    let (a, b) = (dir.join("a.pt"), dir.join("b.pt"));
    let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let s = Tensor::from_slice(&[1i64, 2]).unwrap();
    let same = Tensor::from_slice(&[7u8, 8, 9]).unwrap();
    stowage::save(
        &a,
        &Checkpoint::from_state_dict([
            ("w", w.clone()),
            ("w_again", w.clone()),
            ("d", Tensor::from_slice(&[1.0f32]).unwrap()),
            ("s", s.clone()),
            ("same", same.clone()),
            ("only_a", s.clone()),
        ]),
    )
    .unwrap();
    stowage::save(
        &b,
        &Checkpoint::from_state_dict([
            ("w", Tensor::from_slice(&[1.0f32, 2.0, 3.5, 4.25]).unwrap()),
            ("w_again", w.deep_clone().unwrap()),
            (
                "d",
                Tensor::from_slice(&[1.0f32])
                    .unwrap()
                    .to_dtype(DType::Float64)
                    .unwrap(),
            ),
            ("s", s.reshape(&[2, 1]).unwrap()),
            ("same", same),
            ("only_b", s),
        ]),
    )
    .unwrap();

    let run = stowage(&[Path::new("diff"), &a, &b]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert_eq!(
        run.stdout,
        "w: values differ in 2 of 4 elements, max abs diff 5e-1\n\
         d: dtype float32 in A, float64 in B\n\
         s: shape [2] in A, [2, 1] in B\n\
         only_a: missing in B\n\
         only_b: missing in A\n\
         w: sharing: w, w_again share one storage in A but not in B (there: w alone; w_again alone)\n\
         6 differences\n"
    );

    let run = stowage(&[Path::new("diff"), &a, &b, Path::new("--json")]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    let doc = parse(&run);
    assert_eq!(doc["same"], false);
    let diffs = doc["differences"].as_array().unwrap();
    let kinds: Vec<&str> = diffs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "values",
            "dtype",
            "shape",
            "missing_in_b",
            "missing_in_a",
            "sharing"
        ]
    );
    assert_eq!(diffs[0]["path"], serde_json::json!(["w"]));
    assert_eq!(diffs[0]["max_abs_diff"], 0.5);
    assert_eq!(diffs[0]["elements_differing"], 2);
    assert_eq!(diffs[1]["a"], "float32");
    assert_eq!(diffs[1]["b"], "float64");
    assert_eq!(diffs[2]["b"], serde_json::json!([2, 1]));
    assert_eq!(diffs[5]["shared_in"], "a");
    assert_eq!(diffs[5]["paths"], serde_json::json!([["w"], ["w_again"]]));

    // The other way round, the sharing is B's.
    let run = stowage(&[Path::new("diff"), &b, &a, Path::new("--json")]);
    let doc = parse(&run);
    let sharing: Vec<&Json> = doc["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "sharing")
        .collect();
    assert_eq!(sharing.len(), 1, "{run:?}");
    assert_eq!(sharing[0]["shared_in"], "b");
}

#[test]
fn diff_of_an_unreadable_file_exits_2() {
    let hostile = fixture("hostile/os_system.pt");
    let run = stowage(&[Path::new("diff"), &fixture("simple.pt"), &hostile]);
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert_one_error_line(&run, "os_system.pt");
    let run = stowage(&[
        Path::new("diff"),
        &fixture("no_such_file.pt"),
        &fixture("simple.pt"),
    ]);
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert_one_error_line(&run, "no_such_file.pt");
}

// ---------------------------------------------------------------- verify

#[test]
fn verify_passes_every_good_fixture() {
    for file in good_fixtures() {
        let run = stowage(&[Path::new("verify"), &file]);
        assert_eq!(run.code(), Some(0), "{}: {run:?}", file.display());
        assert_eq!(run.stdout.lines().last(), Some("ok"), "{run:?}");
        assert!(run.stderr.is_empty(), "{run:?}");
    }
}

#[test]
fn verify_reports_the_defect_of_each_hostile_fixture() {
    for file in hostile_fixtures() {
        let name = file_name(&file);
        let run = stowage(&[Path::new("verify"), &file]);
        assert!(
            !run.stderr.contains("panicked") && !run.stdout.contains("panicked"),
            "{name}: {run:?}"
        );
        if name == "memo_doubling.pt" {
            assert_eq!(run.code(), Some(0), "{run:?}");
            continue;
        }
        assert!(matches!(run.code(), Some(1 | 2)), "{name}: {run:?}");
        if run.code() == Some(1) {
            let lines: Vec<&str> = run.stdout.lines().collect();
            let last = *lines.last().unwrap();
            assert!(
                last == "1 defect" || last.ends_with(" defects"),
                "{name}: {run:?}"
            );
            // Every defect line names the file.
            let defects = lines[..lines.len() - 1].iter().filter(|l| {
                !l.contains(": note: ") && !l.contains(": warning: ") && !l.starts_with("checked: ")
            });
            for line in defects {
                assert!(line.contains(&name), "{name}: {line}");
            }
        } else {
            assert_one_error_line(&run, &name);
        }
    }
    // The bomb is flagged although PyTorch reads its first 48 bytes happily.
    let run = stowage(&[Path::new("verify"), &fixture("hostile/deflate_bomb.pt")]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(
        run.stdout.contains("data/0") && run.stdout.contains("inflates past"),
        "{run:?}"
    );
    // The location of a refused global: the pickle record.
    let run = stowage(&[Path::new("verify"), &fixture("hostile/os_system.pt")]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(
        run.stdout.contains("data.pkl") && run.stdout.contains("os.system"),
        "{run:?}"
    );
}

/// `simple.pt` rebuilt record by record with an extra, unreferenced record,
/// with the central directory's CRC-32 of `data/0` replaced by `crc`.
fn rebuilt_simple(crc: Option<u32>) -> Vec<u8> {
    let original = std::fs::read(fixture("simple.pt")).unwrap();
    let zip = ZipReader::new(&original[..], &ZipLimits::default()).unwrap();
    let root = format!("{}/", zip.root());
    let mut w = ZipWriter::new(Vec::new(), "simple", 64);
    for e in zip.entries() {
        w.write_record(
            zip.name(e).strip_prefix(&root).unwrap(),
            &zip.read_to_vec(e).unwrap(),
        )
        .unwrap();
    }
    w.write_record("data/99", b"nobody reads me").unwrap();
    let mut bytes = w.finish().unwrap();
    if let Some(crc) = crc {
        // The central header of simple/data/0: signature, then the CRC at +16 and the name at +46.
        let name = b"simple/data/0";
        let at = (0..bytes.len() - 46 - name.len())
            .find(|&i| {
                bytes[i..i + 4] == *b"PK\x01\x02" && bytes[i + 46..i + 46 + name.len()] == *name
            })
            .expect("central header of data/0");
        bytes[at + 16..at + 20].copy_from_slice(&crc.to_le_bytes());
    }
    bytes
}

#[test]
fn verify_notes_unreferenced_records_and_warns_of_missing_crcs() {
    let dir = TempDir::new("verify");
    let extra = dir.join("extra.pt");
    std::fs::write(&extra, rebuilt_simple(None)).unwrap();
    let run = stowage(&[Path::new("verify"), &extra]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("note: record simple/data/99 (15 bytes) is never referenced"),
        "{run:?}"
    );
    assert!(run.stdout.ends_with("\nok\n"), "{run:?}");

    // CRC-32 0: what PyTorch writes with CRC computation off. A warning, not a defect.
    let no_crc = dir.join("no_crc.pt");
    std::fs::write(&no_crc, rebuilt_simple(Some(0))).unwrap();
    let run = stowage(&[Path::new("verify"), &no_crc]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stdout
            .contains("warning: record simple/data/0: no CRC-32 recorded"),
        "{run:?}"
    );

    // A wrong CRC-32: a defect naming the record and where its data lies.
    let bad_crc = dir.join("bad_crc.pt");
    std::fs::write(&bad_crc, rebuilt_simple(Some(0x1234_5678))).unwrap();
    let run = stowage(&[Path::new("verify"), &bad_crc]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    let defect = run
        .stdout
        .lines()
        .find(|l| l.contains("crc-32 mismatch"))
        .unwrap_or_else(|| panic!("{run:?}"));
    assert!(
        defect.contains("bad_crc.pt")
            && defect.contains("simple/data/0")
            && defect.contains("offset"),
        "{defect}"
    );
    assert_eq!(run.stdout.lines().last(), Some("1 defect"), "{run:?}");
}

#[test]
fn verify_of_a_file_that_cannot_be_opened_exits_2() {
    let run = stowage(&[Path::new("verify"), &fixture("no_such_file.pt")]);
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert_one_error_line(&run, "no_such_file.pt");
    assert!(run.stdout.is_empty(), "{run:?}");
    let run = stowage(&[Path::new("verify"), &fixtures().join("hostile")]);
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert_one_error_line(&run, "hostile");
}

#[test]
fn an_error_names_the_file_once() {
    // Reading: a file that does not exist, a folder, a file that is no
    // checkpoint, a refused global, a record past the file's end, a short
    // record; for every command and mode that reads, on either side of diff.
    let dir = TempDir::new("once");
    let text = dir.join("notes.txt");
    std::fs::write(&text, "not a checkpoint\n").unwrap();
    let bad: Vec<(PathBuf, String)> = vec![
        (fixture("no_such_file.pt"), "no_such_file.pt".into()),
        (fixtures().join("hostile"), "hostile".into()),
        (text.clone(), "notes.txt".into()),
        (fixture("hostile/os_system.pt"), "os_system.pt".into()),
        (fixture("hostile/short_record.pt"), "short_record.pt".into()),
        (
            fixture("hostile/deflate_bomb_huge_size.pt"),
            "deflate_bomb_huge_size.pt".into(),
        ),
    ];
    for (input, name) in &bad {
        let simple = fixture("simple.pt");
        let out_pt = dir.join("out.pt");
        let out_st = dir.join("out.safetensors");
        let cases: Vec<Vec<&Path>> = vec![
            vec![Path::new("inspect"), input],
            vec![Path::new("inspect"), input, Path::new("--json")],
            vec![
                Path::new("inspect"),
                input,
                Path::new("--json"),
                Path::new("--no-hash"),
            ],
            vec![Path::new("verify"), input],
            vec![Path::new("convert"), input, &out_pt],
            vec![Path::new("convert"), input, &out_st],
            vec![Path::new("diff"), input, &simple],
            vec![Path::new("diff"), &simple, input],
            vec![Path::new("diff"), input, &simple, Path::new("--json")],
        ];
        for args in cases {
            let run = stowage(&args);
            // verify reports a defect in the content (1); it cannot open a folder (2).
            if args[0] == Path::new("verify") && run.code() == Some(1) {
                // One line per defect, each naming the file once, then the count.
                let lines: Vec<&str> = run.stdout.lines().collect();
                assert!(lines.len() >= 2, "{args:?} {run:?}");
                let (last, before) = lines.split_last().unwrap();
                assert!(
                    last.ends_with(" defect") || last.ends_with(" defects"),
                    "{run:?}"
                );
                let (checked, found) = before.split_last().unwrap();
                assert!(checked.starts_with("checked: "), "{run:?}");
                for line in found {
                    assert_eq!(line.matches(name.as_str()).count(), 1, "{args:?} {run:?}");
                }
                continue;
            }
            assert_eq!(run.code(), Some(2), "{args:?} {run:?}");
            assert_one_error_line(&run, name);
            assert_eq!(
                run.stderr.matches(name.as_str()).count(),
                1,
                "{args:?} {run:?}"
            );
        }
    }
    // Writing: a folder that does not exist. The library names the file;
    // the command line does not name it again.
    let dir = TempDir::new("convert");
    for out in ["missing/out.pt", "missing/out.safetensors"] {
        let out = dir.join(out);
        let run = stowage(&[Path::new("convert"), &fixture("simple.pt"), &out]);
        assert_eq!(run.code(), Some(2), "{run:?}");
        assert_one_error_line(&run, "out.");
        let named = out.display().to_string();
        assert_eq!(run.stderr.matches(named.as_str()).count(), 1, "{run:?}");
    }
}

// ---------------------------------------------------------------- bench

fn storage_bytes(file: &Path) -> u64 {
    let doc = parse(&stowage(&[Path::new("inspect"), file, Path::new("--json")]));
    doc["storages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["nbytes"].as_u64().unwrap())
        .sum()
}

fn check_bench_json(run: &Run, op: &str, bytes: u64) {
    assert_eq!(run.code(), Some(0), "{run:?}");
    // No progress bar when stderr is not a terminal.
    assert!(run.stderr.is_empty(), "{run:?}");
    assert_eq!(run.stdout.lines().count(), 1, "{run:?}");
    let doc = parse(run);
    assert_eq!(
        keys(&doc),
        set(&["op", "mmap", "bytes", "median_s", "min_s", "gb_per_s"]),
        "{run:?}"
    );
    assert_eq!(doc["op"], op);
    assert_eq!(doc["mmap"], false);
    assert_eq!(doc["bytes"].as_u64(), Some(bytes));
    let (median, min) = (
        doc["median_s"].as_f64().unwrap(),
        doc["min_s"].as_f64().unwrap(),
    );
    assert!(min > 0.0 && min <= median, "{run:?}");
    let gbps = doc["gb_per_s"].as_f64().unwrap();
    assert!(
        (gbps - bytes as f64 / median / 1e9).abs() <= 1e-9 * gbps.max(1.0),
        "{run:?}"
    );
    // The keys in the contract's order.
    assert!(
        run.stdout.starts_with(&format!(
            "{{\"op\": \"{op}\", \"mmap\": false, \"bytes\": {bytes}, \"median_s\": "
        )),
        "{run:?}"
    );
}

#[test]
fn bench_load_prints_the_contract_json() {
    let file = fixture("dtypes.pt");
    let run = stowage(&[
        Path::new("bench"),
        Path::new("load"),
        &file,
        Path::new("--repeat"),
        Path::new("2"),
        Path::new("--json"),
    ]);
    check_bench_json(&run, "load", storage_bytes(&file));
}

#[test]
fn bench_save_prints_the_contract_json_and_cleans_up() {
    let file = fixture("views.pt");
    let run = stowage(&[
        Path::new("bench"),
        Path::new("save"),
        &file,
        Path::new("--repeat"),
        Path::new("2"),
        Path::new("--json"),
    ]);
    check_bench_json(&run, "save", storage_bytes(&file));
    let prefix = format!("stowage-bench-{}-", run.pid);
    let left: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "temporary files left behind: {left:?}");
}

#[test]
fn bench_without_json_prints_a_line_for_people() {
    let run = stowage(&[
        Path::new("bench"),
        Path::new("load"),
        &fixture("simple.pt"),
        Path::new("--repeat"),
        Path::new("1"),
    ]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_eq!(run.stdout.lines().count(), 1, "{run:?}");
    assert!(
        run.stdout.starts_with("load ") && run.stdout.contains("GB/s"),
        "{run:?}"
    );
}

#[test]
fn bench_mmap_times_the_memory_mapped_load() {
    let eager = parse(&stowage(&[
        Path::new("bench"),
        Path::new("load"),
        &fixture("views.pt"),
        Path::new("--repeat"),
        Path::new("2"),
        Path::new("--json"),
    ]));
    let run = stowage(&[
        Path::new("bench"),
        Path::new("load"),
        &fixture("views.pt"),
        Path::new("--mmap"),
        Path::new("--repeat"),
        Path::new("2"),
        Path::new("--json"),
    ]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let doc = parse(&run);
    assert_eq!(doc["mmap"], true);
    assert_eq!(doc["op"], "load");
    assert_eq!(doc["bytes"], eager["bytes"]);
    assert!(doc["median_s"].as_f64().unwrap() > 0.0);
    // No bytes are read: no bandwidth is claimed (issue 26, item 20).
    assert!(doc["gb_per_s"].is_null(), "{doc}");
    assert!(eager["gb_per_s"].is_number());
    let text = stowage(&[
        Path::new("bench"),
        Path::new("load"),
        &fixture("views.pt"),
        Path::new("--mmap"),
        Path::new("--repeat"),
        Path::new("2"),
    ]);
    assert!(
        text.stdout.contains("no bytes read") && !text.stdout.contains("GB/s"),
        "{}",
        text.stdout
    );
    // A file that is not a checkpoint is refused as input, mapped or not.
    let bad = stowage(&[
        Path::new("bench"),
        Path::new("load"),
        &fixture("hostile/not_a_checkpoint.pt"),
        Path::new("--mmap"),
    ]);
    assert_eq!(bad.code(), Some(2), "{bad:?}");
    assert_one_error_line(&bad, "not_a_checkpoint.pt");
}

#[test]
fn bench_load_baselines_time_a_copy_and_a_read_in_the_same_rounds() {
    let file = fixture("views.pt");
    let run = stowage(&[
        Path::new("bench"),
        Path::new("load"),
        &file,
        Path::new("--repeat"),
        Path::new("3"),
        Path::new("--baselines"),
        Path::new("--json"),
    ]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_eq!(run.stdout.lines().count(), 1, "{run:?}");
    let doc = parse(&run);
    assert_eq!(doc["bytes"].as_u64(), Some(storage_bytes(&file)));
    let base = &doc["baselines"];
    assert_eq!(
        keys(base),
        set(&[
            "load_runs_s",
            "copy",
            "copy_touched",
            "read_touched",
            "read",
            "read2"
        ]),
        "{run:?}"
    );
    // Every run's time, in the order they ran: the loads' median is theirs.
    let mut loads: Vec<f64> = base["load_runs_s"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    assert_eq!(loads.len(), 3, "{run:?}");
    loads.sort_by(f64::total_cmp);
    let load = doc["median_s"].as_f64().unwrap();
    assert_eq!(loads[1], load, "{run:?}");
    for name in ["copy", "copy_touched", "read_touched", "read", "read2"] {
        let b = &base[name];
        assert_eq!(
            keys(b),
            set(&["median_s", "min_s", "load_over", "runs_s"]),
            "{run:?}"
        );
        assert_eq!(b["runs_s"].as_array().unwrap().len(), 3, "{name}: {run:?}");
        let (median, min) = (
            b["median_s"].as_f64().unwrap(),
            b["min_s"].as_f64().unwrap(),
        );
        assert!(min > 0.0 && min <= median, "{name}: {run:?}");
        let ratio = b["load_over"].as_f64().unwrap();
        assert!(
            (ratio - load / median).abs() <= 1e-9 * ratio,
            "{name}: {run:?}"
        );
    }
    // The contract's keys come first, in their order.
    assert!(
        run.stdout
            .starts_with("{\"op\": \"load\", \"mmap\": false, \"bytes\": "),
        "{run:?}"
    );
    // For people: the load's line, then one line per baseline.
    let run = stowage(&[
        Path::new("bench"),
        Path::new("load"),
        &file,
        Path::new("--repeat"),
        Path::new("1"),
        Path::new("--baselines"),
    ]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{run:?}");
    assert!(lines[0].starts_with("load "), "{run:?}");
    assert!(lines[1].starts_with("baseline copy: median "), "{run:?}");
    assert!(lines[5].contains("load / read2 = "), "{run:?}");
    // Loads only, of a file: not with save, --mmap or a folder.
    for args in [
        &["bench", "save", "--baselines"][..],
        &["bench", "load", "--baselines", "--mmap"][..],
    ] {
        let mut args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        args.insert(2, file.as_os_str());
        let run = stowage(&args);
        assert_eq!(run.code(), Some(2), "{args:?} {run:?}");
    }
    // A sharded set loads, but its folder is not one file to read.
    let run = stowage(&[
        Path::new("bench"),
        Path::new("load"),
        &fixtures().join("sharded/bin"),
        Path::new("--baselines"),
    ]);
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert_one_error_line(&run, "--baselines");
}

#[test]
fn bench_refuses_bad_input_and_usage() {
    let run = stowage(&[
        Path::new("bench"),
        Path::new("load"),
        &fixture("hostile/os_system.pt"),
        Path::new("--json"),
    ]);
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert_one_error_line(&run, "os_system.pt");
    let run = stowage(&[
        Path::new("bench"),
        Path::new("load"),
        &fixture("simple.pt"),
        Path::new("--repeat"),
        Path::new("0"),
    ]);
    assert_eq!(run.code(), Some(2), "{run:?}");
    let run = stowage(&[Path::new("bench"), Path::new("copy"), &fixture("simple.pt")]);
    assert_eq!(run.code(), Some(2), "{run:?}");
}

#[test]
fn inspect_no_hash_reads_only_the_pickle_and_reports_the_same_layouts() {
    for file in good_fixtures() {
        let full = parse(&stowage(&[
            Path::new("inspect"),
            &file,
            Path::new("--json"),
        ]));
        let run = stowage(&[
            Path::new("inspect"),
            &file,
            Path::new("--json"),
            Path::new("--no-hash"),
        ]);
        assert_eq!(run.code(), Some(0), "{}: {run:?}", file.display());
        let quick = parse(&run);
        let (a, b) = (
            full["tensors"].as_array().unwrap(),
            quick["tensors"].as_array().unwrap(),
        );
        assert_eq!(a.len(), b.len(), "{}", file.display());
        for (x, y) in a.iter().zip(b) {
            assert!(y["sha256"].is_null(), "{}: {y}", file.display());
            let mut x = x.clone();
            x["sha256"] = Json::Null;
            assert_eq!(&x, y, "{}", file.display());
        }
    }
    // Meta loading still checks that each record is there with its size.
    let run = stowage(&[
        Path::new("inspect"),
        &fixture("hostile/short_record.pt"),
        Path::new("--no-hash"),
    ]);
    assert_eq!(run.code(), Some(2), "{run:?}");
}

// ---------------------------------------------------------------- values

/// `training_checkpoint.values.json`: the `"values"` list Python sees
/// (`scripts/make_fixtures.py`).
fn expected_values() -> Json {
    let text = std::fs::read_to_string(fixture("training_checkpoint.values.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn inspect_json_lists_the_values_python_sees() {
    let file = fixture("training_checkpoint.pt");
    for extra in [None, Some("--no-hash")] {
        let mut args = vec![Path::new("inspect"), &file, Path::new("--json")];
        args.extend(extra.map(Path::new));
        let run = stowage(&args);
        assert_eq!(run.code(), Some(0), "{run:?}");
        let doc = parse(&run);
        assert_eq!(doc["values"], expected_values(), "{extra:?}");
    }
    // A checkpoint without values lists none.
    let doc = parse(&stowage(&[
        Path::new("inspect"),
        &fixture("simple.pt"),
        Path::new("--json"),
    ]));
    assert_eq!(doc["values"], serde_json::json!([]));
    // Every fixture's values have the contract's form.
    let types = [
        "none", "bool", "int", "float", "complex", "str", "bytes", "dtype", "size", "device",
        "dict", "list", "tuple",
    ];
    for file in good_fixtures() {
        let doc = parse(&stowage(&[
            Path::new("inspect"),
            &file,
            Path::new("--json"),
        ]));
        for v in doc["values"].as_array().unwrap() {
            if v["type"] == "storage" {
                // A storage object saved on its own (legacy_classes): named by its key.
                assert_eq!(
                    keys(v),
                    set(&["path", "type", "value", "storage_key"]),
                    "{v}"
                );
                continue;
            }
            assert_eq!(
                keys(v),
                set(&["path", "type", "value"]),
                "{}: {v}",
                file.display()
            );
            assert!(v["path"].is_array(), "{v}");
            assert!(
                types.contains(&v["type"].as_str().unwrap()),
                "{}: {v}",
                file.display()
            );
        }
    }
}

#[test]
fn inspect_table_shows_the_values_as_a_tree() {
    let run = stowage(&[Path::new("inspect"), &fixture("training_checkpoint.pt")]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    let start = lines
        .iter()
        .position(|l| *l == "values:")
        .expect("a values tree");
    assert!(
        lines[start - 1].starts_with("8 tensors, 8 storages"),
        "{run:?}"
    );
    let tree = &lines[start..];
    for want in [
        "  epoch: 3",
        "  config:",
        "    lr: 0.001",
        "    name: \"gpt\"",
        "    betas: (0.9, 0.999)",
        "    layers: [4, 3]",
        "    dtype: torch.bfloat16",
        "    huge: 1180591620717411303424",
        "        params: [0, 1]",
    ] {
        assert!(tree.contains(&want), "{want:?} in {run:?}");
    }
    assert!(tree.len() <= 41, "a short tree: {run:?}");
    // A long list is cut short.
    let dir = TempDir::new("tree");
    let many = dir.join("many.pt");
    let mut b = Checkpoint::builder();
    for i in 0..100 {
        b = b.value(&format!("v{i}"), i);
    }
    stowage::save(&many, &b.build().unwrap()).unwrap();
    let run = stowage(&[Path::new("inspect"), &many]);
    let tree: Vec<&str> = run.stdout.lines().skip_while(|l| *l != "values:").collect();
    assert_eq!(tree.len(), 42, "{run:?}");
    assert_eq!(tree[1], "  v0: 0");
    assert_eq!(tree[41], "  … 60 more values (all of them: --json)");
    // No values, no tree.
    let run = stowage(&[Path::new("inspect"), &fixture("simple.pt")]);
    assert!(!run.stdout.contains("values:"), "{run:?}");
}

fn training(dir: &TempDir, name: &str, epoch: i64, lr: f64, w: &[f32], tie: bool) -> PathBuf {
    let weight = Tensor::from_slice(w).unwrap();
    let head = if tie {
        weight.clone()
    } else {
        weight.deep_clone().unwrap()
    };
    let ckpt = Checkpoint::builder()
        .tensors("model", [("embed", weight), ("head", head)])
        .value("epoch", epoch)
        .value("config.lr", lr)
        .value("config.name", "gpt")
        .build()
        .unwrap();
    let path = dir.join(name);
    stowage::save(&path, &ckpt).unwrap();
    path
}

#[test]
fn diff_compares_values_with_tolerances_and_optional_sharing() {
    let dir = TempDir::new("diff-values");
    let a = training(&dir, "a.pt", 3, 1e-3, &[1.0, 2.0], true);
    let b = training(&dir, "b.pt", 4, 1.0005e-3, &[1.0, 2.001], false);
    let same_but_tol = training(&dir, "c.pt", 3, 1.0005e-3, &[1.0, 2.001], true);

    let run = stowage(&[Path::new("diff"), &a, &b]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "model.embed: values differ in 1 of 2 elements, max abs diff 9.999275207519531e-4",
            "model.head: values differ in 1 of 2 elements, max abs diff 9.999275207519531e-4",
            "epoch: int 3 in A, int 4 in B",
            "config.lr: float 0.001 in A, float 0.0010005 in B",
            "model.embed: sharing: model.embed, model.head share one storage in A but not in B (there: model.embed alone; model.head alone)",
            "5 differences",
        ],
        "{run:?}"
    );
    let doc = parse(&stowage(&[Path::new("diff"), &a, &b, Path::new("--json")]));
    let diffs = doc["differences"].as_array().unwrap();
    assert_eq!(diffs[2]["kind"], "value");
    assert_eq!(diffs[2]["path"], serde_json::json!(["epoch"]));
    assert_eq!(
        diffs[2]["a"],
        serde_json::json!({"type": "int", "value": 3})
    );
    assert_eq!(
        diffs[2]["b"],
        serde_json::json!({"type": "int", "value": 4})
    );
    assert_eq!(diffs[3]["a"]["value"], 1e-3);

    // Within the tolerances the floats match; the int and the sharing still differ.
    let run = stowage(&[
        Path::new("diff"),
        &a,
        &b,
        Path::new("--atol"),
        Path::new("1e-6"),
        Path::new("--rtol"),
        Path::new("1e-3"),
    ]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{run:?}");
    assert!(lines[0].starts_with("epoch:"), "{run:?}");
    assert!(lines[1].contains("sharing"), "{run:?}");
    // Too tight a tolerance lets the weights differ again.
    let run = stowage(&[
        Path::new("diff"),
        &a,
        &same_but_tol,
        Path::new("--atol"),
        Path::new("1e-5"),
    ]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    assert!(run.stdout.contains("1 outside the tolerance"), "{run:?}");
    let run = stowage(&[
        Path::new("diff"),
        &a,
        &same_but_tol,
        Path::new("--atol"),
        Path::new("1e-2"),
    ]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_eq!(run.stdout, "same\n");
    // --ignore-sharing leaves the sharing out.
    let run = stowage(&[
        Path::new("diff"),
        &a,
        &b,
        Path::new("--rtol"),
        Path::new("1e-3"),
        Path::new("--ignore-sharing"),
    ]);
    assert_eq!(
        run.stdout, "epoch: int 3 in A, int 4 in B\n1 difference\n",
        "{run:?}"
    );
    // Bad tolerances are usage errors.
    for bad in ["-1", "nan", "x"] {
        let run = stowage(&[
            Path::new("diff"),
            &a,
            &b,
            Path::new("--atol"),
            Path::new(bad),
        ]);
        assert_eq!(run.code(), Some(2), "{bad}: {run:?}");
    }
}

/// The safetensors header of `file`: its JSON object.
fn safetensors_header(file: &Path) -> Json {
    let bytes = std::fs::read(file).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    serde_json::from_slice(&bytes[8..8 + n]).unwrap()
}

#[test]
fn convert_to_safetensors_keeps_values_in_metadata_and_names_tied_tensors() {
    let dir = TempDir::new("convert-values");
    let input = training(&dir, "in.pt", 3, 1e-3, &[1.0, 2.0], true);
    let out = dir.join("out.safetensors");
    let run = stowage(&[Path::new("convert"), &input, &out]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_eq!(
        run.stdout,
        "stored 3 non-tensor values in __metadata__ as JSON under their dotted paths: epoch, config.lr, config.name\n\
         1 group of tensors shares a storage (tied); each tensor is written as a copy of its own: [model.embed, model.head]\n",
        "{run:?}"
    );
    let header = safetensors_header(&out);
    let meta = &header["__metadata__"];
    let value = |k: &str| -> Json { serde_json::from_str(meta[k].as_str().unwrap()).unwrap() };
    assert_eq!(
        value("epoch"),
        serde_json::json!({"type": "int", "value": 3})
    );
    assert_eq!(
        value("config.lr"),
        serde_json::json!({"type": "float", "value": 0.001})
    );
    assert_eq!(
        value("config.name"),
        serde_json::json!({"type": "str", "value": "gpt"})
    );
    assert!(header["model.embed"].is_object() && header["model.head"].is_object());

    // --drop-values drops them, and says so.
    let run = stowage(&[
        Path::new("convert"),
        &input,
        &out,
        Path::new("--drop-values"),
    ]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert!(
        run.stdout.starts_with(
            "dropped 3 non-tensor values (--drop-values): epoch, config.lr, config.name\n"
        ),
        "{run:?}"
    );
    assert!(safetensors_header(&out).get("__metadata__").is_none());

    // To torch zip everything is kept, silently.
    let pt = dir.join("out.pt");
    let run = stowage(&[
        Path::new("convert"),
        &fixture("training_checkpoint.pt"),
        &pt,
    ]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    let doc = parse(&stowage(&[Path::new("inspect"), &pt, Path::new("--json")]));
    assert_eq!(doc["values"], expected_values());
}

#[test]
fn quiet_is_accepted_everywhere_and_no_bar_is_drawn_off_a_terminal() {
    let file = fixture("training_checkpoint.pt");
    let dir = TempDir::new("quiet");
    let out = dir.join("q.safetensors");
    let runs: Vec<Vec<&Path>> = vec![
        vec![Path::new("--quiet"), Path::new("inspect"), &file],
        vec![
            Path::new("inspect"),
            &file,
            Path::new("--json"),
            Path::new("-q"),
        ],
        vec![Path::new("diff"), &file, &file, Path::new("--quiet")],
        vec![Path::new("verify"), Path::new("--quiet"), &file],
        vec![Path::new("convert"), &file, &out, Path::new("--quiet")],
    ];
    for args in runs {
        let run = stowage(&args);
        assert_eq!(run.code(), Some(0), "{args:?}: {run:?}");
        assert_eq!(run.stderr, "", "{args:?}: {run:?}");
    }
    // Without --quiet, stderr is not a terminal here: no bar either.
    let run = stowage(&[Path::new("inspect"), &file, Path::new("--json")]);
    assert_eq!(run.stderr, "", "{run:?}");
}

/// Errors say what to do next, in the command line's words (issue 26, items
/// 11 and 18): a refused global names `stowage scan` and `--inert`; a value
/// torch.load refuses names the file and `--drop-objects`, never the
/// library's `Checkpoint::drop_objects`.
#[test]
fn errors_say_what_to_do_next() {
    let model = fixtures().join("scan/whole_model.pt");
    let run = stowage(&["inspect".as_ref(), model.as_os_str()]);
    assert_eq!(run.code(), Some(2));
    assert!(
        run.stderr.contains("stowage scan") && run.stderr.contains("--inert"),
        "{}",
        run.stderr
    );
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("w.pt");
    let run = stowage(&[
        "convert".as_ref(),
        "--inert".as_ref(),
        model.as_os_str(),
        out.as_os_str(),
    ]);
    assert_ne!(run.code(), Some(0));
    assert!(run.stderr.contains("whole_model.pt"), "{}", run.stderr);
    assert!(run.stderr.contains("--drop-objects"), "{}", run.stderr);
    assert!(!run.stderr.contains("Checkpoint::"), "{}", run.stderr);
    assert!(!out.exists());
}

/// A class named as a value and never called is the contract's `type`, with
/// `module` and `name` (issue 26, item 9): a builtin type, an allowed class,
/// and (with `--inert`) a class outside the allowlist.
#[test]
fn classes_named_as_values_are_types() {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/types_as_values.pt");
    let doc = parse(&stowage(&[
        Path::new("inspect"),
        Path::new("--inert"),
        &file,
        Path::new("--json"),
    ]));
    assert_eq!(
        doc["values"],
        serde_json::json!([
            {"path": ["t"], "type": "type", "module": "builtins", "name": "list", "value": null},
            {"path": ["g"], "type": "type", "module": "collections", "name": "OrderedDict", "value": null},
            {"path": ["c"], "type": "type", "module": "torch.nn.modules.linear", "name": "Linear", "value": null},
        ])
    );
}

/// An inert object the pickle reuses through its memo is listed at every
/// path that reaches it, as tensors are (issue 26, item 8).
#[test]
fn a_shared_object_is_listed_at_every_path() {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/shared_object.pt");
    let doc = parse(&stowage(&[
        Path::new("inspect"),
        Path::new("--inert"),
        &file,
        Path::new("--json"),
    ]));
    let paths: Vec<_> = doc["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            assert_eq!(
                (&o["module"], &o["name"]),
                (&"__main__".into(), &"Strategy".into())
            );
            o["path"].clone()
        })
        .collect();
    assert_eq!(
        paths,
        [
            serde_json::json!(["eval"]),
            serde_json::json!(["save"]),
            serde_json::json!(["nested", "log"])
        ]
    );
}

/// Weights out of a `torch.save(model)` file (issue 26, item 15):
/// `--state-dict` writes `model.state_dict()`'s names; a conversion that
/// would write nothing is an error, not an empty file.
#[test]
fn convert_state_dict_and_nothing_to_write() {
    let model = fixtures().join("scan/whole_model.pt");
    let dir = tempfile::tempdir().unwrap();
    // A .pt keeps the order (a safetensors file sorts its names).
    let out = dir.path().join("w.pt");
    let run = stowage(&[
        "convert".as_ref(),
        "--state-dict".as_ref(),
        model.as_os_str(),
        out.as_os_str(),
    ]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let doc = parse(&stowage(&[Path::new("inspect"), &out, Path::new("--json")]));
    let names: Vec<_> = doc["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["path"][0].as_str().unwrap().to_owned())
        .collect();
    // nn.Sequential(nn.Linear(3, 2), nn.ReLU()).state_dict()
    assert_eq!(names, ["0.weight", "0.bias"]);
    let empty = dir.path().join("empty.pt");
    let run = stowage(&[
        "convert".as_ref(),
        "--inert".as_ref(),
        "--drop-objects".as_ref(),
        model.as_os_str(),
        empty.as_os_str(),
    ]);
    assert_eq!(run.code(), Some(2), "{run:?}");
    assert!(
        run.stderr.contains("would write nothing") && run.stderr.contains("--state-dict"),
        "{}",
        run.stderr
    );
    assert!(!empty.exists());
}

/// `.pt` → `.safetensors` → `.pt` keeps the structure (issue 26, item 16):
/// the safetensors file lists what the `.pt` does, nested paths and values
/// alike, and so does the `.pt` made back from it, which a second
/// conversion to `.safetensors` writes again without a collision. With
/// `--drop-values` the tensors are flat, under their dotted names.
#[test]
fn convert_to_safetensors_and_back_keeps_the_structure() {
    let dir = TempDir::new("roundtrip-structure");
    let pt = training(&dir, "train.pt", 3, 1e-3, &[1.0, 2.0], false);
    let (st, back, again, flat) = (
        dir.join("train.safetensors"),
        dir.join("back.pt"),
        dir.join("again.safetensors"),
        dir.join("flat.safetensors"),
    );
    for (from, to) in [(&pt, &st), (&st, &back), (&back, &again)] {
        let run = stowage(&[Path::new("convert"), from, to]);
        assert_eq!(run.code(), Some(0), "{run:?}");
    }
    let listing = |file: &Path| {
        let doc = parse(&stowage(&[Path::new("inspect"), file, Path::new("--json")]));
        let paths: Vec<Json> = doc["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["path"].clone())
            .collect();
        (paths, doc["values"].clone())
    };
    let want = listing(&pt);
    assert_eq!(
        want.0,
        [
            serde_json::json!(["model", "embed"]),
            serde_json::json!(["model", "head"])
        ]
    );
    for file in [&st, &back, &again] {
        assert_eq!(listing(file), want, "{}", file.display());
    }
    let run = stowage(&[Path::new("convert"), Path::new("--drop-values"), &pt, &flat]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let (paths, values) = listing(&flat);
    assert_eq!(
        paths,
        [
            serde_json::json!(["model.embed"]),
            serde_json::json!(["model.head"])
        ]
    );
    assert_eq!(values, serde_json::json!([]));
}

/// `diff`'s `object` kind (issue 26, item 14): inert objects of different
/// classes at one path, and an object against the plain dict of what it
/// holds, each one difference naming the classes; what they hold is
/// compared by path as everywhere else.
#[test]
fn diff_names_objects_of_other_classes() {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let (a, b) = (data.join("objects_a.pt"), data.join("objects_b.pt"));
    let run = stowage(&[
        Path::new("diff"),
        Path::new("--inert"),
        &a,
        &b,
        Path::new("--json"),
    ]);
    assert_eq!(run.code(), Some(1), "{run:?}");
    let doc = parse(&run);
    let objects: Vec<&Json> = doc["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["kind"] == "object")
        .collect();
    let activation =
        |name: &str| serde_json::json!({"module": "torch.nn.modules.activation", "name": name});
    assert_eq!(
        objects,
        [
            &serde_json::json!({"path": ["act"], "kind": "object", "a": activation("ReLU"), "b": activation("GELU")}),
            &serde_json::json!({"path": ["box"], "kind": "object", "a": {"module": "__main__", "name": "Box"}, "b": null}),
        ]
    );
    let run = stowage(&[Path::new("diff"), Path::new("--inert"), &a, &a]);
    assert_eq!(run.code(), Some(0), "{run:?}");
}

/// An empty container of a type JSON and stowage's model lack is listed as
/// its dict or list with `class` naming the Python type, as the contract
/// says (issue 26, item 14); plain empty containers have no `class`.
#[test]
fn empty_containers_of_other_types_name_their_class() {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/empty_containers.pt");
    let run = stowage(&[
        Path::new("inspect"),
        Path::new("--inert"),
        &file,
        Path::new("--json"),
    ]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let doc = parse(&run);
    let got: Vec<(String, String, Option<String>)> = doc["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["path"][0].as_str().unwrap().to_owned(),
                v["type"].as_str().unwrap().to_owned(),
                v["class"].as_str().map(str::to_owned),
            )
        })
        .collect();
    let want = [
        ("dd", "dict", Some("collections.defaultdict")),
        ("c", "dict", Some("collections.Counter")),
        ("ns", "dict", Some("argparse.Namespace")),
        ("dq", "list", Some("collections.deque")),
        ("s", "list", Some("set")),
        ("fs", "list", Some("frozenset")),
        ("d", "dict", None),
        ("l", "list", None),
        ("t", "tuple", None),
    ]
    .map(|(p, t, c)| (p.to_owned(), t.to_owned(), c.map(str::to_owned)));
    assert_eq!(got, want);
    assert!(doc["values"]
        .as_array()
        .unwrap()
        .iter()
        .all(|v| v["value"] == serde_json::json!([])));
}

/// Issue 43, item 4: an error that hits a limit names it and says how to
/// raise it, and both ways it names work: `--limit NAME=N` and
/// `STOWAGE_LIMITS`. A tensor reached by 2^8 paths goes to a DCP under each
/// (as `dcp.save` writes it); with the walk limit below that, it is refused,
/// naming `paths`; a limit that does not exist is a usage error.
#[test]
fn a_limit_hit_names_itself_and_how_to_raise_it() {
    use stowage::checkpoint::PyValue;
    let dir = TempDir::new("limits");
    let src = dir.join("shared.pt");
    let w = Tensor::ones(&[2], DType::Float32).unwrap();
    let mut top = PyValue::Shared(std::sync::Arc::new(PyValue::OrderedDict(vec![(
        "w".into(),
        w.into(),
    )])));
    for _ in 0..8 {
        top = PyValue::Shared(std::sync::Arc::new(PyValue::list([top.clone(), top])));
    }
    let ckpt = Checkpoint::from_value(PyValue::OrderedDict(vec![("root".into(), top)])).unwrap();
    stowage::save(&src, &ckpt).unwrap();
    let out = dir.join("out");
    let convert = |extra: &[&str], env: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stowage"));
        cmd.args(["convert", "--to", "dcp"])
            .arg(&src)
            .arg(&out)
            .args(extra);
        match env {
            Some(v) => cmd.env("STOWAGE_LIMITS", v),
            None => cmd.env_remove("STOWAGE_LIMITS"),
        };
        cmd.output().unwrap()
    };
    let ok = convert(&[], None);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let items = stowage::load(&out).unwrap().tensors().unwrap().len();
    assert_eq!(items, 256, "one item per path, as dcp.save writes them");

    for refused in [
        convert(&["--limit", "paths=1000"], None),
        convert(&[], Some("paths=1000")),
        convert(&["--limit", "paths=1000"], Some("paths=100000000")),
    ] {
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{stderr}");
        for said in [
            "paths walked (paths)",
            "(at most 1000)",
            "STOWAGE_LIMITS=paths=N",
            "--limit paths=N",
        ] {
            assert!(stderr.contains(said), "{said:?} not in {stderr}");
        }
    }
    // The environment raised, the flag not given: the environment holds.
    let raised = convert(&[], Some("records=4000000,paths=9000000"));
    assert!(
        raised.status.success(),
        "{}",
        String::from_utf8_lossy(&raised.stderr)
    );

    let unknown = stowage(&[
        Path::new("inspect"),
        &src,
        Path::new("--limit"),
        Path::new("nope=1"),
    ]);
    assert_eq!(unknown.code(), Some(2), "{unknown:?}");
    assert!(
        unknown.stderr.contains("no such limit") && unknown.stderr.contains("paths"),
        "{unknown:?}"
    );
    let fixed = stowage(&[
        Path::new("inspect"),
        &src,
        Path::new("--limit"),
        Path::new("tree-bytes=1"),
    ]);
    assert_eq!(fixed.code(), Some(2), "{fixed:?}");
    assert!(fixed.stderr.contains("a fixed limit"), "{fixed:?}");
}
