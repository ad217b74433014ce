//! The crate's layers, checked: every `use` of one module by another goes
//! downward in the table below (or stays inside one module), so the module
//! graph has no cycle. `docs/architecture.md` explains each layer.
//!
//! A module here is a top-level module of `src/` (`storage`, `layout`, …),
//! except that `checkpoint`'s children count on their own (`checkpoint/value`,
//! `checkpoint/torch`, …, and each format, `checkpoint/format/torch_zip`, …),
//! since they are the layers of the checkpoint side.
//! References are read from the source: `crate::name`, `super::name`, a
//! file's own submodules named bare (`folder::folder_at`), and
//! the root re-exports (`crate::{Tensor, DType, …}`), outside comments.
//!
//! The checkpoint containers are crates of their own, below all of these: the
//! generic pickle machine `stowage-pickle` and the zip container `stowage-zip`
//! (with `ReadAt`, which `io` re-exports). They cannot use stowage at all, so
//! the crate boundary keeps them apart, and their re-exports
//! `checkpoint::pickle` and `checkpoint::zip` count as no module here.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Layers, lowest first. A module may use modules of its own layer or lower
/// ones; within a layer, the uses must still form no cycle.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "foundations",
        &["error", "sync", "io", "minifloat", "device", "warn"],
    ),
    ("elements", &["dtype", "element", "overflow"]),
    ("layouts", &["layout"]),
    ("storages", &["storage"]),
    (
        "tensors",
        &[
            "tensor", "overlap", "view", "copy", "display", "fake", "kernel", "autograd", "ops",
            "access", "array",
        ],
    ),
    (
        "checkpoint meaning",
        &[
            "checkpoint/value",
            "checkpoint/globals",
            "checkpoint/options",
            "checkpoint/torch",
            "checkpoint/records",
            "checkpoint/content",
        ],
    ),
    (
        "checkpoint formats",
        &[
            "checkpoint/format/torch_zip",
            "checkpoint/format/torch_legacy",
            "checkpoint/format/safetensors",
            "checkpoint/format/sharded",
            "checkpoint/format/parts",
            "checkpoint/format/dcp",
            "checkpoint/scan",
        ],
    ),
    (
        "checkpoint entry points",
        &[
            "checkpoint",
            "checkpoint/entry",
            "checkpoint/source",
            "checkpoint/detect",
            "checkpoint/folder",
            "checkpoint/destination",
        ],
    ),
    ("typed storages", &["typed_storage"]),
];

/// What the root re-exports, by the module that defines it.
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("Operand", "ops"),
    ("Device", "device"),
    ("DeviceType", "device"),
    ("DType", "dtype"),
    ("Kind", "dtype"),
    ("Element", "element"),
    ("Scalar", "element"),
    ("Error", "error"),
    ("Result", "error"),
    ("load", "checkpoint/entry"),
    ("save", "checkpoint/format/torch_zip"),
    ("load_with", "checkpoint/entry"),
    ("load_mmap", "checkpoint/entry"),
    ("save_with", "checkpoint/format/torch_zip"),
    ("LoadMode", "checkpoint/options"),
    ("LoadOptions", "checkpoint/options"),
    ("SaveOptions", "checkpoint/options"),
    ("Checkpoint", "checkpoint/value"),
    ("UntypedStorage", "storage"),
    ("Tensor", "tensor"),
    ("LegacyArgs", "typed_storage"),
    ("LegacyClass", "typed_storage"),
    ("LegacyStorageClass", "typed_storage"),
    ("Storage", "typed_storage"),
    ("TypedStorage", "typed_storage"),
];

/// The one recursion the design keeps, edge by edge, each with its reason; any
/// other cycle fails. Gradients are part of a tensor, as in PyTorch: a tensor
/// holds its `grad` and `grad_fn` (tensor → autograd), and the backward pass
/// walks tensors (autograd → tensor); arithmetic records its backward
/// (ops → autograd), and the backward formulas are arithmetic (autograd → ops),
/// as PyTorch's `derivatives.yaml` formulas call `at::` operations. Breaking
/// these would take trait objects between the three (c10's
/// `AutogradMetaInterface`) for no gain to a reader.
const RECURSION: &[(&str, &str)] = &[("autograd", "tensor"), ("autograd", "ops")];

/// Other crates re-exported under `src/`, as module paths: their uses are
/// uses of another crate (`stowage-pickle`, `stowage-zip`), not of a module
/// of this one.
const EXTERNAL: &[&str] = &["checkpoint/pickle", "checkpoint/zip"];

/// `error/` names other modules' types in its variants (dtypes, devices, the
/// typed-storage constructors), by design: it is the one error type, below
/// everything else, and only names types.
const EXEMPT: &[&str] = &["error"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file: `checkpoint/format/dcp/item.rs` → `[checkpoint, format, dcp, item]`,
/// `storage/mod.rs` → `[storage]`, `lib.rs` → `[]`.
fn module_path(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).expect("file under src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The unit a module path belongs to: its top-level module, or under
/// `checkpoint`, the folder of its layer's module: `checkpoint/<child>`
/// (`checkpoint/value`, `checkpoint/torch`, …), and for the formats
/// `checkpoint/format/<format>`.
fn unit(path: &[String], known: &BTreeSet<String>) -> Option<String> {
    let first = path.first()?;
    if first == "checkpoint" {
        let depth = if path.get(1).is_some_and(|c| c == "format") {
            3
        } else {
            2
        };
        if path.len() >= depth {
            let u = path[..depth].join("/");
            if known.contains(&u) {
                return Some(u);
            }
        }
    }
    Some(first.clone())
}

/// The submodules `text` declares (`mod name;`, `pub mod name;`, …), which
/// its code may name bare (`folder::folder_at`), unit tests aside.
fn children(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l
                .strip_prefix("pub ")
                .or_else(|| l.strip_prefix("pub(crate) "))
                .unwrap_or(l);
            let name = rest.strip_prefix("mod ")?.strip_suffix(';')?;
            (name != "tests").then(|| name.trim().to_owned())
        })
        .collect()
}

/// Every path the code of `text` names from `crate::`, `super::` or one of
/// its own submodules (`child::`), resolved against `here` (the file's
/// module path) to a module path, with comments left out.
fn referenced(text: &str, here: &[String]) -> Vec<Vec<String>> {
    let code: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    let child_paths: Vec<String> = children(text)
        .into_iter()
        .map(|c| format!("{c}::"))
        .collect();
    let starts = code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
        .chain(
            child_paths
                .iter()
                .flat_map(|c| code.match_indices(c.as_str())),
        );
    for (start, _) in starts {
        // Only whole path starts: not `foo_crate::`, `self::super::` or `x::child::`.
        if start > 0
            && (bytes[start - 1].is_ascii_alphanumeric()
                || bytes[start - 1] == b'_'
                || (bytes[start - 1] == b':' && !code[..start].ends_with("self::")))
        {
            continue;
        }
        let mut base: Vec<String> = Vec::new();
        let mut rest = &code[start..];
        if let Some(r) = rest.strip_prefix("crate::") {
            rest = r;
        } else if !rest.starts_with("super::") {
            // A submodule of this file's module, named bare.
            base = here.to_vec();
        } else {
            base = here.to_vec();
            // A `mod.rs` file is the module itself; `super` is its parent.
            while let Some(r) = rest.strip_prefix("super::") {
                base.pop();
                rest = r;
            }
        }
        expand(base, rest, &mut out);
    }
    out
}

/// The module paths `s` names after `base`: one for a plain path
/// (`a::b::C`), one for each item of a group at any depth
/// (`a::{b::C, d::{E, F}}`).
fn expand(base: Vec<String>, s: &str, out: &mut Vec<Vec<String>>) {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut p = base;
    let mut r = s;
    loop {
        if let Some(group) = r.strip_prefix('{') {
            // The items up to the matching brace, split at top-level commas.
            let mut depth = 1;
            let mut item_start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        expand(p.clone(), group[item_start..i].trim(), out);
                        item_start = i + 1;
                        if c == '}' {
                            return;
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            return;
        }
        let name = ident(r);
        if name.is_empty() {
            break;
        }
        r = &r[name.len()..];
        p.push(name);
        match r.strip_prefix("::") {
            Some(next) => r = next,
            None => break,
        }
    }
    if !p.is_empty() {
        out.push(p);
    }
}

/// `unit → the units it uses`, for every file of `src/`.
fn graph() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let known: BTreeSet<String> = files
        .iter()
        .map(|f| module_path(f))
        .filter(|p| p.len() >= 2 && p[0] == "checkpoint")
        .map(|p| {
            let depth = if p[1] == "format" { 3 } else { 2 };
            p[..depth.min(p.len())].join("/")
        })
        .filter(|u| u != "checkpoint/format")
        .collect();
    let root: BTreeMap<&str, &str> = ROOT_ITEMS.iter().copied().collect();
    let mut g: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let here = module_path(file);
        let Some(from) = unit(&here, &known) else {
            continue; // lib.rs
        };
        let mut text = fs::read_to_string(file).expect("readable source");
        // Unit tests are not part of the architecture (and their `super` is the file).
        if let Some(i) = text.find("#[cfg(test)]\nmod tests {") {
            text.truncate(i);
        }
        for mut path in referenced(&text, &here) {
            if path.len() == 1 {
                if let Some(m) = root.get(path[0].as_str()) {
                    path = m.split('/').map(str::to_owned).collect();
                }
            }
            if is_external(&path) {
                continue;
            }
            let Some(to) = unit(&path, &known) else {
                continue;
            };
            if to != from && !to.starts_with(char::is_uppercase) {
                let shown = file.strip_prefix(src()).unwrap().display().to_string();
                g.entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_default()
                    .insert(shown);
            }
        }
    }
    g
}

/// Whether `path` is one of the [`EXTERNAL`] re-exports or inside one.
fn is_external(path: &[String]) -> bool {
    EXTERNAL.iter().any(|e| {
        let e: Vec<&str> = e.split('/').collect();
        path.len() >= e.len() && path.iter().zip(&e).all(|(p, e)| p == e)
    })
}

fn layer_of(unit: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, units)| units.contains(&unit))
}

#[test]
fn every_module_has_a_layer() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let g = graph();
    let mut missing: BTreeSet<String> = BTreeSet::new();
    for (from, tos) in &g {
        for u in std::iter::once(from).chain(tos.keys()) {
            if layer_of(u).is_none() {
                missing.insert(u.clone());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "modules with no layer in tests/it/architecture.rs: {missing:?}"
    );
}

#[test]
fn uses_go_down_the_layers() {
    let mut upward = Vec::new();
    for (from, tos) in graph() {
        if EXEMPT.contains(&from.as_str()) {
            continue;
        }
        for (to, files) in tos {
            if let (Some(a), Some(b)) = (layer_of(&from), layer_of(&to)) {
                if b > a {
                    upward.push(format!(
                        "{from} ({}) uses {to} ({}) in {files:?}",
                        LAYERS[a].0, LAYERS[b].0
                    ));
                }
            }
        }
    }
    assert!(
        upward.is_empty(),
        "uses up the layers:\n{}",
        upward.join("\n")
    );
}

#[test]
fn the_module_graph_has_no_cycle() {
    let g = graph();
    let edges: BTreeMap<&str, Vec<&str>> = g
        .iter()
        .filter(|(from, _)| !EXEMPT.contains(&from.as_str()))
        .map(|(from, tos)| {
            let tos = tos
                .keys()
                .map(String::as_str)
                .filter(|to| !RECURSION.contains(&(from.as_str(), *to)))
                .collect();
            (from.as_str(), tos)
        })
        .collect();
    // Depth-first search; a grey node met again closes a cycle.
    fn visit<'a>(
        n: &'a str,
        edges: &BTreeMap<&'a str, Vec<&'a str>>,
        state: &mut BTreeMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<&'a str>> {
        match state.get(n) {
            Some(2) => return None,
            Some(1) => {
                let i = stack.iter().position(|s| *s == n).unwrap();
                let mut cycle = stack[i..].to_vec();
                cycle.push(n);
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(n, 1);
        stack.push(n);
        for &m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, state, stack) {
                return Some(c);
            }
        }
        stack.pop();
        state.insert(n, 2);
        None
    }
    let mut state = BTreeMap::new();
    for &n in edges.keys() {
        let mut stack = Vec::new();
        if let Some(cycle) = visit(n, &edges, &mut state, &mut stack) {
            let detail: Vec<String> = cycle
                .windows(2)
                .map(|w| format!("{} -> {} in {:?}", w[0], w[1], g[w[0]][w[1]]))
                .collect();
            panic!(
                "module cycle: {}\n{}",
                cycle.join(" -> "),
                detail.join("\n")
            );
        }
    }
}

#[test]
fn the_kept_recursion_is_still_there() {
    // An edge listed in RECURSION that the code no longer has should leave the list.
    let g = graph();
    for (from, to) in RECURSION {
        assert!(
            g.get(*from).is_some_and(|tos| tos.contains_key(*to)),
            "{from} no longer uses {to}: remove the edge from RECURSION"
        );
    }
}

/// The module graph as `docs/architecture.md` shows it: one line per
/// module (`error` left out, as the document says why), its uses grouped by
/// folder (`checkpoint/{options, value}`).
fn graph_text() -> String {
    let mut out = String::new();
    for (from, tos) in graph() {
        if from == "error" {
            continue;
        }
        let mut groups: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for to in tos.keys() {
            let (dir, name) = to.rsplit_once('/').unwrap_or(("", to));
            groups.entry(dir.to_owned()).or_default().push(name);
        }
        let mut parts: Vec<String> = Vec::new();
        for (dir, names) in groups {
            match names.as_slice() {
                _ if dir.is_empty() => parts.extend(names.iter().map(|n| n.to_string())),
                [one] => parts.push(format!("{dir}/{one}")),
                _ => parts.push(format!("{dir}/{{{}}}", names.join(", "))),
            }
        }
        parts.sort();
        out.push_str(&format!("{from:<30} -> {}\n", parts.join(", ")));
    }
    out
}

#[test]
fn print_the_graph() {
    print!("{}", graph_text());
}

/// `docs/architecture.md` shows the module graph as it is: its `text`
/// block is [`graph_text`] (print it to update the document).
#[test]
fn the_documented_graph_is_the_graph() {
    let doc = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/architecture.md"),
    )
    .unwrap();
    let start = doc
        .find("```text\n")
        .expect("docs/architecture.md has the graph in a text block")
        + 8;
    let end = start + doc[start..].find("```").unwrap();
    assert_eq!(
        doc[start..end],
        graph_text(),
        "docs/architecture.md's module graph is stale: replace it with what `cargo test -p stowage --test it architecture -- --nocapture print` prints"
    );
}

/// Every `docs/…` and `scripts/…` path that the sources, the README and the
/// documents cite exists, so a citation cannot outlive its file (the source
/// once cited a `docs/cli-contract.md` and a script that were not there).
#[test]
fn every_cited_docs_and_scripts_path_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("crates"), root.join("docs"), root.join("scripts")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "target" && name != "fixtures" {
                    dirs.push(path);
                }
            } else if [".rs", ".md", ".py", ".sh"]
                .iter()
                .any(|e| name.ends_with(e))
            {
                files.push(path);
            }
        }
    }
    let path_char = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut missing = BTreeSet::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap_or_default();
        for prefix in ["docs/", "scripts/"] {
            for (at, _) in text.match_indices(prefix) {
                // A citation starts the path: not `shared/docs/`, not a URL
                // (`docs.rs/`, `…/docs/`), not part of a longer name.
                let before = text[..at].chars().next_back();
                if before.is_some_and(|c| path_char(c) || c == ':') {
                    continue;
                }
                let cited: String = text[at..].chars().take_while(|&c| path_char(c)).collect();
                let cited = cited.trim_end_matches(['.', '/', '-']);
                // Placeholders and bare folder mentions name no one file.
                let name = cited.rsplit('/').next().unwrap_or_default();
                if cited.len() <= prefix.len() || !name.contains('.') || cited.contains("NAME") {
                    continue;
                }
                if !root.join(cited).exists() {
                    missing.insert(format!(
                        "{} cites {cited}",
                        file.strip_prefix(&root).unwrap_or(file).display()
                    ));
                }
            }
        }
    }
    assert!(missing.is_empty(), "cited paths that do not exist:\n{}", {
        let list: Vec<_> = missing.into_iter().collect();
        list.join("\n")
    });
}

/// The reader of paths sees through groups at any depth and through a
/// file's own submodules, so an edge cannot hide behind `a::{b, c::D}`.
#[test]
fn paths_are_read_through_groups_and_bare_children() {
    let here: Vec<String> = vec!["checkpoint".into()];
    let text = "mod format;\nuse crate::checkpoint::{value::graph::X, format::{dcp, torch_zip::load}};\n\
                use format::{sharded, safetensors::Y};\nfn f() { super::io::open(); } // crate::hidden::Z\n";
    // (A child named inside a group is also read as a bare start; the
    // graph is a set of edges, so that repeat is harmless.)
    let got: BTreeSet<String> = referenced(text, &here)
        .into_iter()
        .map(|p| p.join("/"))
        .collect();
    assert_eq!(
        got.iter().map(String::as_str).collect::<Vec<_>>(),
        [
            "checkpoint/format/dcp",
            "checkpoint/format/safetensors/Y",
            "checkpoint/format/sharded",
            "checkpoint/format/torch_zip/load",
            "checkpoint/value/graph/X",
            "io/open",
        ]
    );
}
