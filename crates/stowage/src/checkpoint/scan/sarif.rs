//! A scan report as SARIF 2.1.0 (`stowage scan --format sarif`,
//! docs/cli-contract.md), for GitHub code scanning and other SARIF viewers.
//!
//! One result per unsafe global per pickle, located in its file (the
//! artifact), its zip member or legacy section (a logical location) and
//! its byte offset; one per file that could not be read. GitHub places a
//! result on a line (`region.startLine` is required there), so a region is
//! line 1 of the file, and also, where the file's bytes at the global are
//! known (outside a zip, or in a stored member), `byteOffset`.

use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde_json::{json, Value as Json};
use std::path::Path;

use super::{FileScan, GlobalUse, PickleScan, Risk, ScanReport};
use crate::error::one_line;

/// The JSON schema of SARIF 2.1.0, as the OASIS standard publishes it.
const SCHEMA: &str =
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json";

/// Each rule: its id, name, level, GitHub's `security-severity`, and text.
const RULES: [(&str, &str, &str, &str, &str); 3] = [
    (
        "unsafe-global/code",
        "UnsafeGlobalRunsCode",
        "error",
        "9.8",
        "A pickle names a global that can run commands or code, or touch files, the network or the interpreter, when loaded with torch.load(weights_only=False) or pickle.load.",
    ),
    (
        "unsafe-global/import",
        "UnsafeGlobalImports",
        "warning",
        "5.0",
        "A pickle names a class outside PyTorch's weights_only allowlist: loading it with torch.load(weights_only=False) imports that class's package and runs its code. `stowage inspect --inert` reads the file without importing it.",
    ),
    (
        "unreadable",
        "UnreadableFile",
        "error",
        "5.0",
        "A file or part of one could not be read, so the scan of it is incomplete.",
    ),
];

/// What is kept literally in a path's URI reference: RFC 3986's unreserved
/// characters and `/`.
const PATH: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

impl ScanReport {
    /// The report as a SARIF 2.1.0 log: one run of the tool `stowage`, its
    /// rules (`unsafe-global/code`, `unsafe-global/import`, `unreadable`)
    /// and a result per unsafe global in each pickle, and per file that
    /// could not be read.
    pub fn to_sarif(&self) -> Json {
        let rules: Vec<Json> = RULES
            .iter()
            .map(|(id, name, level, severity, text)| {
                json!({
                    "id": id,
                    "name": name,
                    "shortDescription": {"text": text},
                    "defaultConfiguration": {"level": level},
                    "properties": {"tags": ["security"], "security-severity": severity},
                })
            })
            .collect();
        let results: Vec<Json> = self.files.iter().flat_map(file_results).collect();
        json!({
            "$schema": SCHEMA,
            "version": "2.1.0",
            "runs": [{
                "tool": {"driver": {
                    "name": "stowage",
                    "version": env!("CARGO_PKG_VERSION"),
                    "informationUri": "https://docs.rs/stowage",
                    "rules": rules,
                }},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }],
        })
    }
}

/// The results of one file: its unsafe globals, pickle by pickle, then its
/// error.
fn file_results(f: &FileScan) -> Vec<Json> {
    let uri = uri(&f.path);
    let mut out: Vec<Json> = f
        .pickles
        .iter()
        .flat_map(|p| p.globals.iter().map(move |g| (p, g)))
        .filter_map(|(p, g)| Some((p, g, g.risk?)))
        .map(|(p, g, risk)| global_result(&uri, p, g, risk))
        .collect();
    if let Some(e) = &f.error {
        let text = format!("{}: {}", f.path.display(), one_line(e));
        out.push(json!({
            "ruleId": RULES[2].0,
            "ruleIndex": 2,
            "level": RULES[2].2,
            "message": {"text": text},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": uri},
                "region": {"startLine": 1},
            }}],
            "partialFingerprints": {"stowage/v1": format!("unreadable:{uri}")},
        }));
    }
    out
}

fn global_result(uri: &str, p: &PickleScan, g: &GlobalUse, risk: Risk) -> Json {
    let (index, does) = match (risk, super::risk::reason(&g.module, &g.name)) {
        (Risk::Code, Some(why)) => (0, format!("can run code ({why})")),
        (Risk::Code, None) => (0, "can run code".to_owned()),
        (Risk::Import, _) => (1, "imports a class and runs its package's code".to_owned()),
    };
    let full = format!("{}.{}", g.module, g.name);
    let mut region = json!({"startLine": 1});
    if let Some(base) = p.member_offset {
        region["byteOffset"] = json!(base + g.offset);
    }
    json!({
        "ruleId": RULES[index].0,
        "ruleIndex": index,
        "level": RULES[index].2,
        "message": {"text": format!(
            "`{full}`, named by `{}` at offset {} ({} time{}), {does} under torch.load(weights_only=False)",
            p.record,
            g.offset,
            g.count,
            if g.count == 1 { "" } else { "s" },
        )},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": uri},
                "region": region,
            },
            "logicalLocations": [{"fullyQualifiedName": p.record, "kind": "resource"}],
        }],
        "partialFingerprints": {"stowage/v1": format!("{full}:{}", p.record)},
        "properties": {
            "module": g.module,
            "name": g.name,
            "risk": risk.as_str(),
            "count": g.count,
            "record": p.record,
            "offset": g.offset,
        },
    })
}

/// `path` as a URI reference: relative paths stay relative (to where the
/// scan ran, as GitHub wants them to the repository), absolute ones are
/// `file://` URIs; everything but unreserved characters and `/` is
/// percent-encoded.
fn uri(path: &Path) -> String {
    let text = path.to_string_lossy();
    let encoded = utf8_percent_encode(&text, PATH).to_string();
    if path.is_absolute() {
        format!("file://{encoded}")
    } else {
        encoded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_uri_references() {
        assert_eq!(uri(Path::new("models/a b.pt")), "models/a%20b.pt");
        assert_eq!(uri(Path::new("/tmp/x#1.pt")), "file:///tmp/x%231.pt");
        assert_eq!(uri(Path::new("ü.pt")), "%C3%BC.pt");
    }
}
