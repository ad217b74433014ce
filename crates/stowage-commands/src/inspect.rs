//! `inspect`: what a checkpoint holds, as the CLI contract specifies
//! (`docs/cli-contract.md`): [`inspect`] gives an [`Inspection`], which
//! serializes to `stowage inspect --json`'s object and writes the table
//! `stowage inspect` prints ([`Inspection::write_text`]).
//!
//! Without hashes nothing but metadata is read: the checkpoint is loaded
//! fake (the pickle and the archive's directory; time and memory do not
//! grow with the tensors' size). With hashes, the checkpoint is loaded
//! lazily and each contiguous tensor is hashed window by window straight
//! from the file, so the file is never held in memory.
//!
//! Non-tensor values (`epoch`, `config.lr`, …) follow the table as a short
//! tree (short lists and tuples of scalars on one line, at most 40 lines), and
//! are listed in full in the JSON's `"values"`, each as the contract's
//! `{"path", "type", "value"}` (a storage object saved on its own, outside
//! the contract's types, as `{"type": "storage", "storage_key": …}`).

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::Path;

use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{json, Value as Json};
use stowage::checkpoint::pickle::Value;
use stowage::checkpoint::{dotted, Layout, Object, TensorObject};
use stowage::Checkpoint;

use crate::listing::{human, path_json, rows, Row};
use crate::{data, values, CommandError, Context};

/// Most lines of the value tree under the table (the JSON lists them all).
const TREE_LINES: usize = 40;

/// What [`inspect`] reads.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct InspectOptions {
    hashes: bool,
}

impl Default for InspectOptions {
    /// Hashes every tensor.
    fn default() -> InspectOptions {
        InspectOptions { hashes: true }
    }
}

impl InspectOptions {
    /// Whether every tensor's `sha256` is computed (the default). Without,
    /// only the pickle and the archive's directory are read (`--no-hash`,
    /// and the table of `stowage inspect`): every `sha256` is null.
    #[must_use]
    pub fn with_hashes(mut self, hashes: bool) -> InspectOptions {
        self.hashes = hashes;
        self
    }
}

/// What a checkpoint holds: [`inspect`]'s result.
///
/// Serializes to the JSON object of `stowage inspect --json`, its members
/// in alphabetical order; the tensor entries are made as they are written,
/// so a checkpoint of millions of views is never held as one document.
#[derive(Debug)]
pub struct Inspection {
    ckpt: Checkpoint,
    /// Each row's hash, in the order of [`rows`]; `None` without hashes.
    hashes: Option<Vec<Option<[u8; 32]>>>,
    /// `"values"`, each entry as the contract lists it.
    values: Vec<Json>,
    /// Whether the values were listed once per shared container, not per path.
    values_once: bool,
    /// `"objects"`, when listed.
    objects: Option<Vec<Json>>,
    transfer: Option<Json>,
}

/// Inspects the checkpoint at `src` (a file, a folder or a URL).
///
/// ```
/// use std::path::Path;
/// use stowage_commands::inspect::{inspect, InspectOptions};
/// use stowage_commands::Context;
///
/// let src = Path::new("../stowage/tests/fixtures/sharded/bin");
/// let inspection = inspect(src, &Context::default(), &InspectOptions::default())?;
/// let json = serde_json::to_value(&inspection)?; // `stowage inspect --json`'s object
/// assert_eq!(json["format"], "sharded-bin");
/// assert_eq!(json["tensors"][0]["sha256"].as_str().map(str::len), Some(64));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`CommandError::Input`] when it cannot be read or is refused, or a
/// tensor cannot be read for its hash (naming its path).
pub fn inspect(
    src: &Path,
    cx: &Context,
    options: &InspectOptions,
) -> Result<Inspection, CommandError> {
    let ckpt = cx.load(src, !options.hashes)?;
    let (values, values_once) = {
        let (leaves, once) = values::leaves(&ckpt, src)?;
        (leaves.iter().map(values::value_json).collect(), once)
    };
    let objects = ckpt.root_value().objects().map_err(CommandError::input)?;
    let objects = (cx.globals_given() || !objects.is_empty())
        .then(|| objects.iter().map(values::object_json).collect());
    let hashes = if options.hashes {
        Some(hash_all(&ckpt, src, cx)?)
    } else {
        None
    };
    Ok(Inspection {
        transfer: crate::transfer_json(cx),
        ckpt,
        hashes,
        values,
        values_once,
        objects,
    })
}

/// Every row's hash, in order. Every tensor is hashed before anything is
/// written: a read that fails writes nothing.
fn hash_all(
    ckpt: &Checkpoint,
    src: &Path,
    cx: &Context,
) -> Result<Vec<Option<[u8; 32]>>, CommandError> {
    let rows = rows(ckpt)?;
    let total: u64 = rows
        .iter()
        .filter(|r| !r.is_container())
        .map(|r| r.object.tensor.nbytes() as u64)
        .sum();
    let bar = cx
        .progress()
        .bytes(total, format!("hashing {}", src.display()));
    let hashed: Vec<Option<&TensorObject>> = rows
        .iter()
        .map(|r| (!r.is_container() && r.object.tensor.has_data()).then_some(&*r.object))
        .collect();
    let hashes = data::digest_all(&hashed, |n| bar.inc(n))
        .into_iter()
        .zip(&rows)
        .map(|(sha, r)| sha.map_err(|e| CommandError::at(&r.path, e)))
        .collect();
    bar.finish_and_clear();
    hashes
}

impl Inspection {
    /// The checkpoint inspected, as loaded (fake without hashes, else lazily).
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.ckpt
    }

    /// The contract's name of what was inspected: a set by its layout
    /// (`dcp`, `sharded-bin`, …), a file by its container.
    pub fn format(&self) -> Layout {
        self.ckpt.layout()
    }

    /// Writes the table `stowage inspect` prints: a row per tensor, a
    /// summary line, the values as a short tree and the inert objects.
    ///
    /// # Errors
    /// A failure to write, or the walk's limit (as [`inspect`]).
    pub fn write_text(&self, out: &mut dyn Write) -> Result<(), CommandError> {
        let rows = rows(&self.ckpt)?;
        table(&self.ckpt, self.format().name(), &rows, out)?;
        let leaves = if self.values_once {
            self.ckpt.root_value().leaves_once()?
        } else {
            self.ckpt.root_value().leaves()?
        };
        values::tree(&self.ckpt, &leaves, TREE_LINES, out)?;
        objects_text(&self.ckpt, out)?;
        Ok(())
    }

    /// Writes the JSON object of `stowage inspect --json`, and a newline.
    ///
    /// # Errors
    /// A failure to write, or the walk's limit (as [`inspect`]), before
    /// anything is written.
    pub fn write_json(&self, out: &mut dyn Write) -> Result<(), CommandError> {
        serde_json::to_writer(&mut *out, self).map_err(std::io::Error::from)?;
        out.write_all(b"\n")?;
        Ok(())
    }
}

impl Serialize for Inspection {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The rows first: a walk that fails writes nothing.
        let rows = rows(&self.ckpt).map_err(S::Error::custom)?;
        let format = self.format();
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("byteorder", self.ckpt.byteorder().name())?;
        map.serialize_entry("format", format.name())?;
        if format == Layout::Dcp {
            // The items' own format, which the load read from the first tensor item.
            map.serialize_entry("item_format", self.ckpt.format().name())?;
        }
        if let Some(objects) = &self.objects {
            map.serialize_entry("objects", objects)?;
        }
        map.serialize_entry("storages", &Storages(&self.ckpt))?;
        let hashes = self.hashes.as_deref();
        map.serialize_entry(
            "tensors",
            &Tensors {
                rows: &rows,
                hashes,
            },
        )?;
        if let Some(transfer) = &self.transfer {
            map.serialize_entry("transfer", transfer)?;
        }
        map.serialize_entry("values", &self.values)?;
        map.end()
    }
}

/// `"storages"`, each entry made as it is written.
struct Storages<'c>(&'c Checkpoint);

impl Serialize for Storages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let storages = self.0.storages();
        let mut seq = s.serialize_seq(Some(storages.len()))?;
        for st in storages {
            seq.serialize_element(&json!({"key": st.key, "nbytes": st.storage.nbytes(), "location": st.location, "storage_type": st.storage_type()}))?;
        }
        seq.end()
    }
}

/// `"tensors"`, each entry made as it is written.
struct Tensors<'r, 'c> {
    rows: &'r [Row<'c>],
    hashes: Option<&'r [Option<[u8; 32]>]>,
}

impl Serialize for Tensors<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.rows.len()))?;
        for (i, r) in self.rows.iter().enumerate() {
            let sha = self.hashes.and_then(|h| h[i]).map(hex::encode);
            seq.serialize_element(&tensor_json(r, sha.as_deref()))?;
        }
        seq.end()
    }
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

/// The inert objects, one line each, at most [`TREE_LINES`].
fn objects_text(ckpt: &Checkpoint, out: &mut dyn Write) -> Result<(), CommandError> {
    let objects = ckpt.root_value().objects().map_err(CommandError::input)?;
    if objects.is_empty() {
        return Ok(());
    }
    writeln!(out, "inert objects (never imported or called):")?;
    for o in objects.iter().take(TREE_LINES) {
        let (module, name) = o.class().unwrap_or_default();
        let path = if o.path().is_empty() {
            "(root)".to_owned()
        } else {
            dotted(o.path())
        };
        writeln!(out, "  {path}: {module}.{name}")?;
    }
    if objects.len() > TREE_LINES {
        writeln!(
            out,
            "  … {} more (all of them: --json)",
            objects.len() - TREE_LINES
        )?;
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
                    format!(
                        "[{}]",
                        std::iter::once(t.shape()[0].to_string())
                            .chain(dims)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
                _ => format!("{:?}", t.shape()),
            };
            return [
                name.clone(),
                dtype,
                shape,
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ];
        }
        if t.is_meta() {
            dtype.push_str(" [meta]");
        }
        // The first two others and how many there are, without walking the
        // group per row (FSDP's flat parameters: tens of thousands of views
        // of one storage would make the table quadratic).
        let group = &groups[&*r.key];
        let first: Vec<&str> = group
            .iter()
            .map(|&j| names[j].as_str())
            .filter(|p| p != name)
            .take(2)
            .collect();
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
    let header = [
        "path",
        "dtype",
        "shape",
        "stride",
        "offset",
        "storage",
        "shared with",
    ];
    let mut width = header.map(str::len);
    for i in 0..rows.len() {
        for (w, c) in width.iter_mut().zip(cells(i)) {
            *w = (*w).max(c.chars().count());
        }
    }
    let row = |cells: &[&str]| {
        cells
            .iter()
            .zip(width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    writeln!(out, "{}", row(&header))?;
    for i in 0..rows.len() {
        writeln!(out, "{}", row(&cells(i).each_ref().map(String::as_str)))?;
    }
    writeln!(out, "{}", summary(ckpt, format, rows))
}

/// The line under the table: how many tensors and storages, their bytes,
/// and what sharing saves.
fn summary(ckpt: &Checkpoint, format: &str, rows: &[Row<'_>]) -> String {
    // Sharing saves what the tensors' own bytes would take beyond the
    // storages: tied weights save a copy; disjoint slices of one storage
    // (an LSTM's gates) save nothing.
    let storage_bytes: u64 = ckpt
        .storages()
        .iter()
        .map(|s| s.storage.nbytes() as u64)
        .sum();
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
    format!(
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
