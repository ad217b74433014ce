//! `stowage inspect FILE [--json]`: what a checkpoint holds, as the CLI
//! contract specifies (`docs/cli-contract.md`).
//!
//! The table needs no tensor bytes, so it loads fake tensors: the pickle and
//! the archive's directory are read, no storage (time and memory do not grow
//! with the tensors' size). `--json` hashes every tensor: the checkpoint is
//! loaded lazily and each contiguous tensor is hashed window by window
//! straight from the file, so the file is never held in memory.
//!
//! Non-tensor values (`epoch`, `config.lr`, …) follow the table as a short
//! tree (short lists and tuples of scalars on one line, at most 40 lines), and
//! are listed in full in `--json`'s `"values"`, each as the contract's
//! `{"path", "type", "value"}` (a storage object saved on its own, outside
//! the contract's types, as `{"type": "storage", "storage_key": …}`).

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Value as Json};
use stowage::serialize::pickle::Value;
use stowage::serialize::{dotted, LoadOptions, Object, PathKey, TensorObject};
use stowage::Checkpoint;

use crate::{data, progress, values, Failure};

/// Most lines of the value tree under the table (`--json` lists them all).
const TREE_LINES: usize = 40;

/// Arguments of `inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The checkpoint (torch zip, torch legacy or safetensors; detected by content)
    file: PathBuf,
    /// Print one JSON object instead of a table
    #[arg(long)]
    json: bool,
    /// With --json: read only the pickle and the archive's directory (fake tensors): no tensor bytes are read and `sha256` is null
    #[arg(long)]
    no_hash: bool,
}

/// One tensor of a checkpoint, with what `inspect` reports of it.
pub struct Row<'c> {
    /// Keys from the root down to the tensor.
    pub path: Vec<PathKey>,
    /// The tensor object (a component of a sparse or nested tensor: a plain
    /// tensor object made for it).
    pub object: Cow<'c, TensorObject>,
    /// The storage's record key.
    pub key: String,
}

impl Row<'_> {
    /// True for a sparse or nested tensor: listed with its layout and logical
    /// shape, without storage fields (its data is in its component rows).
    pub fn is_container(&self) -> bool {
        !self.object.kind.is_strided()
    }
}

/// Every tensor of `ckpt` with its storage key. A sparse or nested tensor is
/// one row, followed by a row per component under its path plus the
/// component's name (`[…, "indices"]`, `[…, "values"]`), as the CLI contract has it.
///
/// # Errors
/// When the walk exceeds its limits.
pub fn rows(ckpt: &Checkpoint) -> Result<Vec<Row<'_>>, Failure> {
    let keys: HashMap<usize, &str> = ckpt.storages.iter().map(|s| (s.storage.id(), s.key.as_str())).collect();
    // A storage with no record (a meta tensor or wrapper subclass saved
    // without data) is keyed `@0`, `@1`, … in order of appearance: the same
    // on every run, and equal exactly for tensors on one storage.
    let unrecorded = std::cell::RefCell::new(HashMap::<usize, usize>::new());
    let key_of = |t: &stowage::Tensor| {
        let id = t.untyped_storage().id();
        keys.get(&id).map_or_else(
            || {
                let mut u = unrecorded.borrow_mut();
                let n = u.len();
                format!("@{}", u.entry(id).or_insert(n))
            },
            |k| k.to_string(),
        )
    };
    let mut out = Vec::new();
    for (path, object) in ckpt.tensors().map_err(Failure::input)? {
        let components: Vec<Row<'_>> = object
            .kind
            .components()
            .into_iter()
            .map(|(name, t)| {
                let mut p = path.clone();
                p.push(PathKey::Key(name.to_owned()));
                Row { path: p, object: Cow::Owned(TensorObject::new(t.clone())), key: key_of(t) }
            })
            .collect();
        out.push(Row { key: key_of(&object.tensor), path, object: Cow::Borrowed(object) });
        out.extend(components);
    }
    Ok(out)
}

/// The global options `--inert` and `--allow-global`, set once by `main`.
static GLOBALS: std::sync::OnceLock<(bool, HashSet<String>)> = std::sync::OnceLock::new();

/// Records `--inert` and `--allow-global` for every load of this run.
pub fn set_globals(inert: bool, allow: Vec<String>) {
    let _ = GLOBALS.set((inert, allow.into_iter().collect()));
}

/// Load options with `--inert` and `--allow-global` applied.
pub fn options() -> LoadOptions {
    let (inert, allow) = GLOBALS.get().cloned().unwrap_or_default();
    LoadOptions {
        inert,
        allow_globals: allow,
        ..LoadOptions::default()
    }
}

/// Whether `--inert` or `--allow-global` was given.
fn globals_given() -> bool {
    GLOBALS.get().is_some_and(|(inert, allow)| *inert || !allow.is_empty())
}

/// Loads `file` for reading its metadata only (`fake`: no storage is read),
/// or lazily (each storage read when used, by windows when contiguous).
///
/// # Errors
/// The load's error, naming the file once.
pub fn load(file: &std::path::Path, metadata_only: bool) -> Result<Checkpoint, Failure> {
    let options = LoadOptions {
        fake: metadata_only,
        lazy: !metadata_only,
        ..options()
    };
    let bar = progress::fetching(file, format!("reading {}", file.display()));
    let loaded = stowage::serialize::load_with(file, &options).map_err(Failure::input);
    bar.finish_and_clear();
    loaded
}

/// A path as the contract's JSON list: string keys as strings, indices as numbers.
pub fn path_json(path: &[PathKey]) -> Json {
    Json::Array(
        path.iter()
            .map(|k| match k {
                PathKey::Key(s) => Json::String(s.clone()),
                PathKey::Index(i) => json!(i),
            })
            .collect(),
    )
}

/// `1.5 KiB`, `12 B`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Runs `inspect`.
pub fn run(args: Args, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let ckpt = load(&args.file, !args.json || args.no_hash)?;
    let rows = rows(&ckpt)?;
    let leaves = values::leaves(&ckpt, &args.file)?;
    if !args.json {
        table(&ckpt, &rows, out)?;
        values::tree(&ckpt, &leaves, TREE_LINES, out)?;
        objects_text(&ckpt, out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let total: u64 = if args.no_hash {
        0
    } else {
        rows.iter().filter(|r| !r.is_container()).map(|r| r.object.tensor.nbytes() as u64).sum()
    };
    let bar = progress::bytes(total, format!("hashing {}", args.file.display()));
    let tensors = rows
        .iter()
        .map(|r| {
            let t = &r.object.tensor;
            if r.is_container() {
                // No storage of its own: the components carry the storage fields.
                return Ok(json!({
                    "path": path_json(&r.path),
                    "layout": r.object.kind.layout_name(),
                    "dtype": t.dtype().name(),
                    "shape": t.shape(),
                    "requires_grad": t.requires_grad(),
                    "parameter": r.object.parameter,
                }));
            }
            let sha = if !t.has_data() {
                Json::Null
            } else {
                let sha = data::sha256(&r.object, |n| bar.inc(n));
                Json::String(sha.map_err(|e| Failure::at(&r.path, e))?)
            };
            let mut entry = json!({
                "path": path_json(&r.path),
                "dtype": t.dtype().name(),
                "shape": t.shape(),
                "stride": t.stride(),
                "storage_offset": t.storage_offset(),
                "storage_key": r.key,
                "storage_nbytes": t.untyped_storage().nbytes(),
                "requires_grad": t.requires_grad(),
                "parameter": r.object.parameter,
                "sha256": sha,
            });
            // A subclass (loaded inertly or allowed by name): its class, never constructed.
            if let Some(Value::Ext(Object::Class(c))) = &r.object.subclass {
                entry["class"] = json!(format!("{}.{}", c.module, c.name));
            }
            Ok(entry)
        })
        .collect::<Result<Vec<_>, Failure>>();
    bar.finish_and_clear();
    let tensors = tensors?;
    let storages: Vec<Json> = ckpt
        .storages
        .iter()
        .map(|s| json!({"key": s.key, "nbytes": s.storage.nbytes(), "location": s.location, "storage_type": s.storage_type()}))
        .collect();
    let mut doc = json!({
        "format": ckpt.format.name(),
        "byteorder": ckpt.byteorder.name(),
        "storages": storages,
        "tensors": tensors,
        "values": leaves.iter().map(values::value_json).collect::<Vec<_>>(),
    });
    let objects = ckpt.objects().map_err(Failure::input)?;
    if globals_given() || !objects.is_empty() {
        doc["objects"] = objects.iter().map(values::object_json).collect();
    }
    crate::remote::add_transfer(&mut doc);
    writeln!(out, "{doc}")?;
    Ok(ExitCode::SUCCESS)
}

/// The inert objects (`--inert`), one line each, at most [`TREE_LINES`].
fn objects_text(ckpt: &Checkpoint, out: &mut dyn Write) -> Result<(), Failure> {
    let objects = ckpt.objects().map_err(Failure::input)?;
    if objects.is_empty() {
        return Ok(());
    }
    writeln!(out, "inert objects (never imported or called):")?;
    for o in objects.iter().take(TREE_LINES) {
        let (module, name) = o.class().unwrap_or_default();
        let path = if o.path().is_empty() { "(root)".to_owned() } else { dotted(o.path()) };
        writeln!(out, "  {path}: {module}.{name}")?;
    }
    if objects.len() > TREE_LINES {
        writeln!(out, "  … {} more (all of them: --json)", objects.len() - TREE_LINES)?;
    }
    Ok(())
}

fn table(ckpt: &Checkpoint, rows: &[Row<'_>], out: &mut dyn Write) -> std::io::Result<()> {
    let mut by_key: HashMap<&str, Vec<String>> = HashMap::new();
    for r in rows {
        by_key.entry(&r.key).or_default().push(dotted(&r.path));
    }
    let header = ["path", "dtype", "shape", "stride", "offset", "storage", "shared with"];
    let mut lines: Vec<[String; 7]> = Vec::new();
    for r in rows {
        let t = &r.object.tensor;
        let name = dotted(&r.path);
        let others: Vec<&str> = by_key[r.key.as_str()].iter().filter(|p| **p != name).map(String::as_str).collect();
        let shared = match others.len() {
            0 => "-".to_string(),
            1..=2 => others.join(", "),
            n => format!("{}, … ({n} tensors)", others[..2].join(", ")),
        };
        let mut dtype = t.dtype().name().to_string();
        if r.object.parameter {
            dtype.push_str(" (param)");
        }
        if let Some(q) = &r.object.quantization {
            dtype.push_str(&format!(" [{}]", q.qscheme()));
        }
        if r.is_container() {
            // The layout kind; its data is in the component rows below it.
            dtype.push_str(&format!(" [{}]", r.object.kind.layout_name()));
            // A nested tensor's padded shape needs its sizes, which a metadata-only
            // load does not read: its ragged dimensions then show as `?`.
            let shape = match r.object.kind.components().first() {
                Some(("buffer", b)) if !b.has_data() => {
                    let dims = t.shape().iter().skip(1).map(|_| "?".to_string());
                    format!("[{}]", std::iter::once(t.shape()[0].to_string()).chain(dims).collect::<Vec<_>>().join(", "))
                }
                _ => format!("{:?}", t.shape()),
            };
            lines.push([name, dtype, shape, "-".into(), "-".into(), "-".into(), "-".into()]);
            continue;
        }
        if t.is_meta() {
            dtype.push_str(" [meta]");
        }
        lines.push([
            name,
            dtype,
            format!("{:?}", t.shape()),
            format!("{:?}", t.stride()),
            t.storage_offset().to_string(),
            format!("{} ({})", r.key, human(t.untyped_storage().nbytes() as u64)),
            shared,
        ]);
    }
    let mut width = header.map(str::len);
    for l in &lines {
        for (w, c) in width.iter_mut().zip(l) {
            *w = (*w).max(c.chars().count());
        }
    }
    let row = |cells: &[&str]| {
        cells.iter().zip(width).map(|(c, w)| format!("{c:<w$}")).collect::<Vec<_>>().join("  ").trim_end().to_string()
    };
    writeln!(out, "{}", row(&header))?;
    for l in &lines {
        writeln!(out, "{}", row(&l.each_ref().map(String::as_str)))?;
    }
    // Sharing saves what the tensors' own bytes would take beyond the
    // storages: tied weights save a copy; disjoint slices of one storage
    // (an LSTM's gates) save nothing.
    let storage_bytes: u64 = ckpt.storages.iter().map(|s| s.storage.nbytes() as u64).sum();
    // Only tensors on a storage the file holds count (not meta tensors or
    // wrapper subclasses saved without data), with a per-channel quantizer's
    // scales and zero points, each at its packed size (`quint4x2` holds two
    // elements a byte).
    let recorded: HashSet<usize> = ckpt.storages.iter().map(|s| s.storage.id()).collect();
    let logical: u64 = rows
        .iter()
        .filter(|r| !r.is_container())
        .flat_map(|r| r.object.data_tensors())
        .filter(|(_, t)| recorded.contains(&t.untyped_storage().id()))
        .map(|(_, t)| (t.numel().div_ceil(t.dtype().elements_per_byte()) * t.dtype().size()) as u64)
        .sum();
    writeln!(
        out,
        "{} tensors, {} storages, {} in tensors, {} in storages, {} saved by sharing ({}, {} byte order)",
        rows.len(),
        ckpt.storages.len(),
        human(logical),
        human(storage_bytes),
        human(logical.saturating_sub(storage_bytes)),
        ckpt.format.name(),
        ckpt.byteorder.name()
    )
}
