//! A scan report as the JSON of `stowage scan --json` (`docs/cli-contract.md`),
//! made here once for the command line and the Python package alike.

use serde_json::{json, Map, Value as Json};

use super::{GlobalUse, ScanReport};
use crate::error::one_line;

fn global_json(g: &GlobalUse) -> Json {
    json!({
        "module": g.module,
        "name": g.name,
        "verdict": g.verdict.as_str(),
        "risk": g.risk.map(|r| r.as_str()),
        "count": g.count,
    })
}

impl ScanReport {
    /// The report as the contract's JSON: `{"files": [{"path", "kind",
    /// "globals": [{"module", "name", "verdict", "risk", "count"}], "pickles":
    /// [{"record", "protocol", "opcodes", "globals"}], "error"}]}`.
    pub fn to_json(&self) -> Json {
        let files: Vec<Json> = self
            .files
            .iter()
            .map(|f| {
                let pickles: Vec<Json> = f
                    .pickles
                    .iter()
                    .map(|p| {
                        let opcodes: Map<String, Json> = p
                            .opcodes
                            .iter()
                            .map(|(name, n)| ((*name).to_owned(), json!(n)))
                            .collect();
                        json!({
                            "record": p.record,
                            "protocol": p.protocol,
                            "opcodes": opcodes,
                            "globals": p.globals.iter().map(global_json).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                json!({
                    "path": f.path.display().to_string(),
                    "kind": f.kind.map(|k| k.as_str()),
                    "globals": f.globals.iter().map(global_json).collect::<Vec<_>>(),
                    "pickles": pickles,
                    "error": f.error.as_ref().map(|e| one_line(e)),
                })
            })
            .collect();
        json!({ "files": files })
    }
}
