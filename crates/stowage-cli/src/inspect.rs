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

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Value as Json};
use stowage::checkpoint::pickle::Value;
use stowage::checkpoint::{dotted, Object};
use stowage::Checkpoint;

use crate::listing::{human, path_json, rows, Row};
use crate::{data, progress, values, Context, Failure};

/// Most lines of the value tree under the table (`--json` lists them all).
const TREE_LINES: usize = 40;

/// Arguments of `inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(help = concat!("The checkpoint: ", inputs!()))]
    file: PathBuf,
    /// Print one JSON object instead of a table
    #[arg(long)]
    json: bool,
    /// With --json: read only the pickle and the archive's directory (fake tensors): no tensor bytes are read and `sha256` is null
    #[arg(long)]
    no_hash: bool,
}

/// Runs `inspect`.
pub fn run(args: Args, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let ckpt = cx.load(&args.file, !args.json || args.no_hash)?;
    let rows = rows(&ckpt)?;
    let leaves = values::leaves(&ckpt, &args.file)?;
    // The contract's name of what the file is: a set by its layout
    // (`dcp`, `sharded-bin`, …), a file by its container.
    let format = ckpt.layout().name();
    if !args.json {
        table(&ckpt, format, &rows, out)?;
        values::tree(&ckpt, &leaves, TREE_LINES, out)?;
        objects_text(&ckpt, out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let total: u64 = if args.no_hash {
        0
    } else {
        rows.iter().filter(|r| !r.is_container()).map(|r| r.object.tensor.nbytes() as u64).sum()
    };
    // Every tensor is hashed before anything is printed: a read that fails
    // leaves stdout empty. The hashes are the only per-tensor state kept;
    // each entry is made and printed in turn (the document is never held
    // whole: a checkpoint of millions of views prints hundreds of MB).
    let bar = progress::bytes(total, format!("hashing {}", args.file.display()));
    let hashes = rows
        .iter()
        .map(|r| {
            if r.is_container() || !r.object.tensor.has_data() {
                return Ok(None);
            }
            let sha = data::digest(&r.object, |n| bar.inc(n));
            sha.map(Some).map_err(|e| Failure::at(&r.path, e))
        })
        .collect::<Result<Vec<_>, Failure>>();
    bar.finish_and_clear();
    let hashes = hashes?;
    let mut doc = json!({
        "format": format,
        "byteorder": ckpt.byteorder().name(),
        // These two are printed entry by entry below.
        "storages": Json::Null,
        "tensors": Json::Null,
        "values": leaves.iter().map(values::value_json).collect::<Vec<_>>(),
    });
    if format == "dcp" {
        // The items' own format, which the load read from the first tensor item.
        doc["item_format"] = json!(ckpt.format().name());
    }
    let objects = ckpt.root_value().objects().map_err(Failure::input)?;
    if cx.globals_given() || !objects.is_empty() {
        doc["objects"] = objects.iter().map(values::object_json).collect();
    }
    crate::remote::add_transfer(cx, &mut doc);
    let Json::Object(members) = doc else { unreachable!("built as an object") };
    // The members in alphabetical order, as serde_json prints a map.
    out.write_all(b"{")?;
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, key).map_err(std::io::Error::from)?;
        out.write_all(b":")?;
        if key == "storages" {
            let entries = ckpt.storages().iter().map(|s| {
                json!({"key": s.key, "nbytes": s.storage.nbytes(), "location": s.location, "storage_type": s.storage_type()})
            });
            json_array(out, entries)?;
        } else if key == "tensors" {
            let entries = rows.iter().zip(&hashes).map(|(r, sha)| {
                let sha = sha.map(hex::encode);
                tensor_json(r, sha.as_deref())
            });
            json_array(out, entries)?;
        } else {
            serde_json::to_writer(&mut *out, value).map_err(std::io::Error::from)?;
        }
    }
    out.write_all(b"}\n")?;
    Ok(ExitCode::SUCCESS)
}

/// Prints a JSON array of `entries`, each made and printed in turn.
fn json_array(out: &mut dyn Write, entries: impl Iterator<Item = Json>) -> std::io::Result<()> {
    out.write_all(b"[")?;
    for (i, entry) in entries.enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        serde_json::to_writer(&mut *out, &entry)?;
    }
    out.write_all(b"]")
}

/// A row's entry in `"tensors"`, with its hash (`None`: null).
fn tensor_json(r: &Row<'_>, sha: Option<&str>) -> Json {
    let t = &r.object.tensor;
    if r.is_container() {
        // No storage of its own: the components carry the storage fields.
        return json!({
            "path": path_json(&r.path),
            "layout": r.object.kind.layout_name(),
            "dtype": t.dtype().name(),
            "shape": t.shape(),
            "requires_grad": t.requires_grad(),
            "parameter": r.object.parameter,
        });
    }
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
    entry
}

/// The inert objects (`--inert`), one line each, at most [`TREE_LINES`].
fn objects_text(ckpt: &Checkpoint, out: &mut dyn Write) -> Result<(), Failure> {
    let objects = ckpt.root_value().objects().map_err(Failure::input)?;
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

fn table(
    ckpt: &Checkpoint,
    format: &str,
    rows: &[Row<'_>],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let names: Vec<String> = rows.iter().map(|r| dotted(&r.path)).collect();
    // Each storage's rows, and how often each name is in its storage's
    // group (once, unless two paths print alike).
    let mut groups: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut times: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, (r, name)) in rows.iter().zip(&names).enumerate() {
        groups.entry(&r.key).or_default().push(i);
        *times.entry((&r.key, name)).or_default() += 1;
    }
    let cells = |i: usize| -> [String; 7] {
        let (r, name) = (&rows[i], &names[i]);
        let t = &r.object.tensor;
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
            return [name.clone(), dtype, shape, "-".into(), "-".into(), "-".into(), "-".into()];
        }
        if t.is_meta() {
            dtype.push_str(" [meta]");
        }
        // The first two others and how many there are, without walking the
        // group per row (FSDP's flat parameters: tens of thousands of views
        // of one storage would make the table quadratic).
        let group = &groups[&*r.key];
        let first: Vec<&str> =
            group.iter().map(|&j| names[j].as_str()).filter(|p| p != name).take(2).collect();
        let shared = match group.len() - times[&(&*r.key, name.as_str())] {
            0 => "-".to_string(),
            1..=2 => first.join(", "),
            n => format!("{}, … ({n} tensors)", first.join(", ")),
        };
        [
            name.clone(),
            dtype,
            format!("{:?}", t.shape()),
            format!("{:?}", t.stride()),
            t.storage_offset().to_string(),
            format!("{} ({})", r.key, human(t.untyped_storage().nbytes() as u64)),
            shared,
        ]
    };
    // Two passes over the rows, the cells made in each rather than held: the
    // widths, then the lines (a checkpoint may hold millions of tensors).
    let header = ["path", "dtype", "shape", "stride", "offset", "storage", "shared with"];
    let mut width = header.map(str::len);
    for i in 0..rows.len() {
        for (w, c) in width.iter_mut().zip(cells(i)) {
            *w = (*w).max(c.chars().count());
        }
    }
    let row = |cells: &[&str]| {
        cells.iter().zip(width).map(|(c, w)| format!("{c:<w$}")).collect::<Vec<_>>().join("  ").trim_end().to_string()
    };
    writeln!(out, "{}", row(&header))?;
    for i in 0..rows.len() {
        writeln!(out, "{}", row(&cells(i).each_ref().map(String::as_str)))?;
    }
    // Sharing saves what the tensors' own bytes would take beyond the
    // storages: tied weights save a copy; disjoint slices of one storage
    // (an LSTM's gates) save nothing.
    let storage_bytes: u64 = ckpt.storages().iter().map(|s| s.storage.nbytes() as u64).sum();
    // Only tensors on a storage the file holds count (not meta tensors or
    // wrapper subclasses saved without data), with a per-channel quantizer's
    // scales and zero points, each at its packed size (`quint4x2` holds two
    // elements a byte).
    let recorded: HashSet<usize> = ckpt.storages().iter().map(|s| s.storage.id()).collect();
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
        ckpt.storages().len(),
        human(logical),
        human(storage_bytes),
        human(logical.saturating_sub(storage_bytes)),
        format,
        ckpt.byteorder().name()
    )
}
