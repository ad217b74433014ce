//! `stowage scan` against the CLI contract (`docs/cli-contract.md`): the
//! JSON shape, the verdicts, the exit codes (0 nothing unsafe, 1 something
//! unsafe, 2 a file unreadable) and one stderr line per unreadable file.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value as Json;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../stowage/tests/fixtures")
}

fn stowage(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stowage"))
        .arg("scan")
        .args(args)
        .output()
        .expect("the stowage binary runs")
}

fn scan(paths: &[PathBuf], json: bool) -> (i32, String, String) {
    let mut args: Vec<&std::ffi::OsStr> = paths.iter().map(|p| p.as_os_str()).collect();
    if json {
        args.push("--json".as_ref());
    }
    let out = stowage(&args);
    (
        out.status.code().expect("an exit code, not a signal"),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn json(paths: &[PathBuf]) -> (i32, Json) {
    let (code, stdout, _) = scan(paths, true);
    (
        code,
        serde_json::from_str(&stdout).expect("one JSON object"),
    )
}

#[test]
fn clean_files_exit_0() {
    let files = [
        fixtures().join("simple.pt"),
        fixtures().join("legacy_format.pt"),
        fixtures().join("protocol4.pt"),
    ];
    let (code, out) = json(&files);
    assert_eq!(code, 0, "{out}");
    let listed = out["files"].as_array().unwrap();
    assert_eq!(listed.len(), 3);
    for f in listed {
        assert!(f["error"].is_null(), "{f}");
        assert!(f["path"].is_string());
        for g in f["globals"].as_array().unwrap() {
            assert_eq!(g["verdict"], "allowed", "{g}");
            assert!(g["module"].is_string() && g["name"].is_string());
            assert!(g["count"].as_u64().unwrap() >= 1);
        }
    }
}

#[test]
fn unsafe_globals_exit_1_and_are_named() {
    let (code, out) = json(&[fixtures().join("scan/os_system.pt")]);
    assert_eq!(code, 1);
    let g = &out["files"][0]["globals"];
    let unsafe_ones: Vec<_> = g
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["verdict"] == "unsafe")
        .map(|g| {
            (
                g["module"].as_str().unwrap(),
                g["name"].as_str().unwrap(),
                g["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(unsafe_ones, [("posix", "system", 1)]);
    // The text form names it too, with a summary line.
    let (code, text, _) = scan(&[fixtures().join("scan/os_system.pt")], false);
    assert_eq!(code, 1);
    assert!(text.contains("unsafe   posix.system ×1"), "{text}");
    assert!(
        text.trim_end()
            .ends_with("1 file scanned: 1 with unsafe globals, 0 unreadable"),
        "{text}"
    );
}

#[test]
fn decoded_globals_are_not_unsafe() {
    let (code, out) = json(&[fixtures().join("scan/numpy_values.pt")]);
    assert_eq!(code, 0);
    let verdicts: Vec<_> = out["files"][0]["globals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["verdict"].as_str().unwrap().to_owned())
        .collect();
    assert!(verdicts.iter().any(|v| v == "decoded"), "{verdicts:?}");
}

#[test]
fn unreadable_files_exit_2_with_one_stderr_line_each() {
    let missing = fixtures().join("no_such_file.pt");
    let garbage = fixtures().join("hostile/not_a_checkpoint.pt");
    let (code, _, stderr) = scan(&[missing.clone(), garbage.clone()], false);
    assert_eq!(code, 2);
    let lines: Vec<_> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(lines[0].starts_with("stowage: ") && lines[0].contains("no_such_file.pt"));
    assert!(lines[1].contains("not_a_checkpoint.pt"));
    // 2 wins over 1: the scan is incomplete.
    let (code, out) = json(&[fixtures().join("scan/os_system.pt"), missing]);
    assert_eq!(code, 2);
    assert!(out["files"][1]["error"].is_string());
    // A pickle that breaks off: what it named is listed, with the error.
    let (code, out) = json(&[fixtures().join("hostile/bad_opcode.pt")]);
    assert_eq!(code, 2);
    assert!(out["files"][0]["error"]
        .as_str()
        .unwrap()
        .contains("opcode"));
}

#[test]
fn folders_are_scanned_recursively() {
    let (code, out) = json(&[fixtures().join("scan")]);
    // field/ holds a truly encrypted member and a cut pickle: the scan is
    // incomplete, and 2 wins over 1.
    assert_eq!(code, 2);
    let files = out["files"].as_array().unwrap();
    // Every fixture, field/ included, but expected.json and the README:
    // JSON and text are no pickle.
    let listed = |dir: std::path::PathBuf| {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                let p = e.as_ref().unwrap().path();
                p.is_file()
                    && !matches!(p.extension().and_then(|e| e.to_str()), Some("json" | "md"))
            })
            .count()
    };
    let count = listed(fixtures().join("scan")) + listed(fixtures().join("scan/field"));
    assert_eq!(files.len(), count);
    let failed: Vec<_> = files
        .iter()
        .filter(|f| !f["error"].is_null())
        .map(|f| f["path"].as_str().unwrap().rsplit('/').next().unwrap())
        .collect();
    assert_eq!(failed, ["cut_exec.pkl", "truly_encrypted.zip"]);
}

#[test]
fn usage_without_paths_exits_2() {
    let out = stowage(&[]);
    assert_eq!(out.status.code(), Some(2));
}

/// Each unsafe global carries a risk; `--fail-on code` fails only on code,
/// and the text names what only imports (issue 26, item 7).
#[test]
fn risk_and_fail_on() {
    let model = fixtures().join("scan/whole_model.pt");
    let evil = fixtures().join("scan/os_system.pt");
    let (code, out) = json(&[model.clone(), evil.clone()]);
    assert_eq!(code, 1);
    let risks = |f: &Json| -> Vec<(String, Json)> {
        f["globals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| (g["name"].as_str().unwrap().to_owned(), g["risk"].clone()))
            .collect()
    };
    let model_risks = risks(&out["files"][0]);
    assert!(model_risks.contains(&("Linear".into(), Json::from("import"))));
    assert!(model_risks.contains(&("OrderedDict".into(), Json::Null)));
    assert!(risks(&out["files"][1]).contains(&("system".into(), Json::from("code"))));
    let run = |args: &[&std::ffi::OsStr]| stowage(args).status.code().unwrap();
    let fail_on_code = ["--fail-on".as_ref(), "code".as_ref()];
    assert_eq!(run(&[&fail_on_code[..], &[model.as_os_str()]].concat()), 0);
    assert_eq!(run(&[&fail_on_code[..], &[evil.as_os_str()]].concat()), 1);
    assert_eq!(run(&[model.as_os_str()]), 1);
    let (_, text, _) = scan(&[model], false);
    let line: Vec<_> = text
        .lines()
        .filter(|l| l.contains("only imports"))
        .collect();
    assert_eq!(line.len(), 1, "{text}");
    assert!(line[0].contains("torch.nn.modules.linear.Linear") && line[0].contains("--inert"));
    assert!(!line[0].contains("OrderedDict"));
}
