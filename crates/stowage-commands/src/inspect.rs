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

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use serde::ser::{Error as _, SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::Value as Json;
use stowage::checkpoint::pickle::Value;
use stowage::checkpoint::{dotted, Layout, Object, PathKey, TensorObject};
use stowage::Checkpoint;

use crate::listing::{human, rows, Row};

/// A hash map with `foldhash`'s hasher: keys of the checkpoint, in process.
type FoldMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
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
    ///
    /// The bytes are [`Serialize`]'s (a test holds them equal), the
    /// storages' and tensors' entries rendered on every core: a checkpoint
    /// of many tensors spends most of its `inspect` writing them.
    pub fn write_json(&self, out: &mut dyn Write) -> Result<(), CommandError> {
        // The rows first: a walk that fails writes nothing.
        let rows = rows(&self.ckpt)?;
        let format = self.format();
        let json = |out: &mut dyn Write, name: &str, value: &dyn erased::Json| {
            write!(out, ",\"{name}\":")?;
            value.write_to(out)
        };
        out.write_all(b"{\"byteorder\":")?;
        erased::Json::write_to(&self.ckpt.byteorder().name(), out)?;
        json(out, "format", &format.name())?;
        if format == Layout::Dcp {
            json(out, "item_format", &self.ckpt.format().name())?;
        }
        if let Some(objects) = &self.objects {
            json(out, "objects", objects)?;
        }
        out.write_all(b",\"storages\":")?;
        write_storages(out, &self.ckpt)?;
        out.write_all(b",\"tensors\":")?;
        write_tensors(out, &rows, self.hashes.as_deref())?;
        if let Some(transfer) = &self.transfer {
            json(out, "transfer", transfer)?;
        }
        json(out, "values", &self.values)?;
        out.write_all(b"}\n")?;
        Ok(())
    }
}

/// A value written as JSON through a `dyn Write`.
mod erased {
    use std::io::Write;

    pub(super) trait Json {
        fn write_to(&self, out: &mut dyn Write) -> std::io::Result<()>;
    }

    impl<T: serde::Serialize + ?Sized> Json for T {
        fn write_to(&self, out: &mut dyn Write) -> std::io::Result<()> {
            serde_json::to_writer(out, self).map_err(std::io::Error::from)
        }
    }
}

/// `"tensors"` as [`Tensors`] serializes it, in blocks ([`write_blocks`]).
fn write_tensors(
    out: &mut dyn Write,
    rows: &[Row<'_>],
    hashes: Option<&[Option<[u8; 32]>]>,
) -> std::io::Result<()> {
    write_blocks(
        out,
        rows,
        |i, r, buf| {
            let sha = hashes
                .and_then(|h| h[i])
                .map(|d| crate::manifest::hex_of(&d));
            Ok(serde_json::to_writer(buf, &TensorEntry(r, sha.as_deref()))?)
        },
        |out| erased::Json::write_to(&Tensors { rows, hashes }, out),
    )
}

/// `"storages"` as [`Storages`] serializes it, in blocks ([`write_blocks`]).
fn write_storages(out: &mut dyn Write, ckpt: &Checkpoint) -> std::io::Result<()> {
    write_blocks(
        out,
        ckpt.storages(),
        |_, st, buf| Ok(serde_json::to_writer(buf, &StorageEntry(st))?),
        |out| erased::Json::write_to(&Storages(ckpt), out),
    )
}

/// A JSON list of `items`, each written by `entry(index, item, buffer)`.
/// Many items are rendered in blocks, a block a core at a time, and written
/// in order: the output is `serialized`'s, and what is held is a block a
/// core, not the whole list. Few items (or one core) are `serialized`.
fn write_blocks<T: Sync>(
    out: &mut dyn Write,
    items: &[T],
    entry: impl Fn(usize, &T, &mut Vec<u8>) -> std::io::Result<()> + Sync,
    serialized: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    const BLOCK: usize = 4096;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    if cores == 1 || items.len() < 2 * BLOCK {
        return serialized(out);
    }
    // The entries `first..first + block.len()`, each after a comma but the very first.
    let render = |first: usize, block: &[T]| -> std::io::Result<Vec<u8>> {
        let mut buf = Vec::with_capacity(block.len() * 256);
        for (i, item) in (first..).zip(block) {
            if i > 0 {
                buf.push(b',');
            }
            entry(i, item, &mut buf)?;
        }
        Ok(buf)
    };
    out.write_all(b"[")?;
    let blocks: Vec<(usize, &[T])> = items
        .chunks(BLOCK)
        .enumerate()
        .map(|(k, block)| (k * BLOCK, block))
        .collect();
    for round in blocks.chunks(cores) {
        let rendered = std::thread::scope(|s| {
            let others: Vec<_> = round[1..]
                .iter()
                .map(|&(first, block)| s.spawn(move || render(first, block)))
                .collect();
            let mut rendered = vec![render(round[0].0, round[0].1)];
            rendered.extend(others.into_iter().map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }));
            rendered
        });
        for block in rendered {
            out.write_all(&block?)?;
        }
    }
    out.write_all(b"]")
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
            seq.serialize_element(&StorageEntry(st))?;
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
            let sha = self
                .hashes
                .and_then(|h| h[i])
                .map(|d| crate::manifest::hex_of(&d));
            seq.serialize_element(&TensorEntry(r, sha.as_deref()))?;
        }
        seq.end()
    }
}

/// A storage's entry in `"storages"`, its members in alphabetical order.
struct StorageEntry<'c>(&'c stowage::checkpoint::StorageRecord);

impl Serialize for StorageEntry<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let st = self.0;
        let mut map = s.serialize_map(Some(4))?;
        map.serialize_entry("key", &*st.key)?;
        map.serialize_entry("location", &*st.location)?;
        map.serialize_entry("nbytes", &st.storage.nbytes())?;
        map.serialize_entry("storage_type", &st.storage_type())?;
        map.end()
    }
}

/// A row's entry in `"tensors"`, with its hash (`None`: null), its members
/// in alphabetical order, written without a document made for it.
struct TensorEntry<'a, 'c>(&'a Row<'c>, Option<&'a str>);

impl Serialize for TensorEntry<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (r, sha) = (self.0, self.1);
        let t = &r.object.tensor;
        let mut map = s.serialize_map(None)?;
        if r.is_container() {
            // No storage of its own: the components carry the storage fields.
            map.serialize_entry("dtype", t.dtype().name())?;
            map.serialize_entry("layout", r.object.kind().layout_name())?;
            map.serialize_entry("parameter", &r.object.parameter)?;
            map.serialize_entry("path", &JsonPath(&r.path))?;
            map.serialize_entry("requires_grad", &t.requires_grad())?;
            map.serialize_entry("shape", t.shape())?;
            return map.end();
        }
        // A subclass (loaded inertly or allowed by name): its class, never constructed.
        if let Some(Value::Ext(Object::Class(c))) = r.object.subclass() {
            map.serialize_entry("class", &format!("{}.{}", c.module, c.name))?;
        }
        map.serialize_entry("dtype", t.dtype().name())?;
        map.serialize_entry("parameter", &r.object.parameter)?;
        map.serialize_entry("path", &JsonPath(&r.path))?;
        map.serialize_entry("requires_grad", &t.requires_grad())?;
        map.serialize_entry("sha256", &sha)?;
        map.serialize_entry("shape", t.shape())?;
        map.serialize_entry("storage_key", &*r.key)?;
        map.serialize_entry("storage_nbytes", &t.untyped_storage().nbytes())?;
        map.serialize_entry("storage_offset", &t.storage_offset())?;
        map.serialize_entry("stride", t.stride())?;
        map.end()
    }
}

/// A path as the contract's JSON list (as [`path_json`](crate::listing::path_json) makes it).
struct JsonPath<'a>(&'a [PathKey]);

impl Serialize for JsonPath<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for k in self.0 {
            match k {
                PathKey::Key(k) => seq.serialize_element(k)?,
                PathKey::Index(i) => seq.serialize_element(i)?,
            }
        }
        seq.end()
    }
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

/// The table of `stowage inspect`: a row per tensor, a column per field.
/// Each cell is written where it is needed, never held: measured for the
/// widths in a first pass, written in the second (a checkpoint may hold
/// millions of tensors).
struct Table<'r, 'c> {
    rows: &'r [Row<'c>],
    names: Vec<String>,
    /// Each row's storage group (the rows on its storage), by number.
    group: Vec<u32>,
    groups: Vec<Vec<u32>>,
    /// For each row, the rows of its group that print under another name.
    others: Vec<u32>,
}

const HEADER: [&str; 7] = [
    "path",
    "dtype",
    "shape",
    "stride",
    "offset",
    "storage",
    "shared with",
];

impl<'r, 'c> Table<'r, 'c> {
    fn new(rows: &'r [Row<'c>]) -> Table<'r, 'c> {
        let names: Vec<String> = rows.iter().map(|r| dotted(&r.path)).collect();
        let mut by_key: FoldMap<&str, u32> = FoldMap::default();
        let mut groups: Vec<Vec<u32>> = Vec::new();
        let mut group = Vec::with_capacity(rows.len());
        for (i, r) in rows.iter().enumerate() {
            let g = *by_key.entry(&r.key).or_insert_with(|| {
                groups.push(Vec::new());
                (groups.len() - 1) as u32
            });
            groups[g as usize].push(i as u32);
            group.push(g);
        }
        // How often each name is in its group (once, unless two paths print
        // alike), counted only in groups of several rows.
        let mut times: FoldMap<(u32, &str), u32> = FoldMap::default();
        for (i, name) in names.iter().enumerate() {
            if groups[group[i] as usize].len() > 1 {
                *times.entry((group[i], name)).or_default() += 1;
            }
        }
        let others = (0..rows.len())
            .map(|i| {
                let members = groups[group[i] as usize].len() as u32;
                members
                    - times
                        .get(&(group[i], names[i].as_str()))
                        .copied()
                        .unwrap_or(1)
            })
            .collect();
        Table {
            rows,
            names,
            group,
            groups,
            others,
        }
    }

    /// Writes column `col` of row `i`.
    fn cell(&self, i: usize, col: usize, w: &mut dyn std::fmt::Write) -> std::fmt::Result {
        let (r, name) = (&self.rows[i], &self.names[i]);
        let t = &r.object.tensor;
        match col {
            0 => w.write_str(name),
            1 => {
                w.write_str(t.dtype().name())?;
                if r.object.parameter {
                    w.write_str(" (param)")?;
                }
                if let Some(q) = r.object.quantization() {
                    write!(w, " [{}]", q.qscheme())?;
                }
                if r.is_container() {
                    // The layout kind; its data is in the component rows below it.
                    write!(w, " [{}]", r.object.kind().layout_name())
                } else if t.is_meta() {
                    w.write_str(" [meta]")
                } else {
                    Ok(())
                }
            }
            2 => match r.object.kind().components().first() {
                // A nested tensor's padded shape needs its sizes, which a
                // metadata-only load does not read: its ragged dimensions
                // then show as `?`.
                Some(("buffer", b)) if r.is_container() && !b.has_data() => {
                    write!(w, "[{}", t.shape()[0])?;
                    for _ in 1..t.shape().len() {
                        w.write_str(", ?")?;
                    }
                    w.write_str("]")
                }
                _ => write!(w, "{:?}", t.shape()),
            },
            _ if r.is_container() => w.write_str("-"),
            3 => write!(w, "{:?}", t.stride()),
            4 => write!(w, "{}", t.storage_offset()),
            5 => write!(
                w,
                "{} ({})",
                r.key,
                human(t.untyped_storage().nbytes() as u64)
            ),
            _ => {
                // The first two others and how many there are, without
                // walking the group per row (FSDP's flat parameters: tens of
                // thousands of views of one storage would make the table
                // quadratic).
                let others = self.others[i];
                if others == 0 {
                    return w.write_str("-");
                }
                let group = &self.groups[self.group[i] as usize];
                let mut first = group
                    .iter()
                    .map(|&j| self.names[j as usize].as_str())
                    .filter(|p| p != name)
                    .take(2);
                if let Some(p) = first.next() {
                    w.write_str(p)?;
                }
                for p in first {
                    write!(w, ", {p}")?;
                }
                if others > 2 {
                    write!(w, ", … ({others} tensors)")?;
                }
                Ok(())
            }
        }
    }
}

/// Counts the characters written to it.
struct Count(usize);

impl std::fmt::Write for Count {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 += s.chars().count();
        Ok(())
    }
}

fn table(
    ckpt: &Checkpoint,
    format: &str,
    rows: &[Row<'_>],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let table = Table::new(rows);
    let fmt_error = |_| std::io::Error::other("formatting a cell");
    let mut width = HEADER.map(|h| h.chars().count());
    for i in 0..rows.len() {
        for (col, w) in width.iter_mut().enumerate() {
            let mut n = Count(0);
            table.cell(i, col, &mut n).map_err(fmt_error)?;
            *w = (*w).max(n.0);
        }
    }
    // Each cell padded to its column's width, two spaces between columns,
    // the line's trailing spaces dropped.
    let mut line = String::new();
    let mut write_line = |cell: &mut dyn FnMut(usize, &mut String) -> std::fmt::Result| {
        line.clear();
        for (col, w) in width.iter().enumerate() {
            if col > 0 {
                line.push_str("  ");
            }
            let start = line.len();
            cell(col, &mut line).map_err(fmt_error)?;
            let n = line[start..].chars().count();
            line.extend(std::iter::repeat_n(' ', w.saturating_sub(n)));
        }
        writeln!(out, "{}", line.trim_end())
    };
    write_line(&mut |col, line| {
        line.push_str(HEADER[col]);
        Ok(())
    })?;
    for i in 0..rows.len() {
        write_line(&mut |col, line| table.cell(i, col, line))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use stowage::Tensor;

    /// `write_json` writes what `Serialize` gives, for a checkpoint whose
    /// tensors are rendered in parallel blocks (more than two blocks, one
    /// short) and for a small one, with and without hashes.
    #[test]
    fn json_written_in_blocks_is_the_serialized_document() {
        let dir = tempfile::tempdir().unwrap();
        for n in [3usize, 4096 * 2 + 1000] {
            let tensors: Vec<(String, Tensor)> = (0..n)
                .map(|i| {
                    let t = Tensor::from_slice(&[i as f32, 0.5]).unwrap();
                    (format!("layer{i}.w"), t)
                })
                .collect();
            let ckpt = Checkpoint::builder()
                .tensors("model", tensors)
                .value("step", 7)
                .build()
                .unwrap();
            let file = dir.path().join(format!("{n}.pt"));
            stowage::save(&file, &ckpt).unwrap();
            for hashes in [false, true] {
                let options = InspectOptions::default().with_hashes(hashes);
                let inspection = inspect(&file, &Context::default(), &options).unwrap();
                let mut written = Vec::new();
                inspection.write_json(&mut written).unwrap();
                let mut serialized = serde_json::to_vec(&inspection).unwrap();
                serialized.push(b'\n');
                assert!(written == serialized, "{n} tensors, hashes {hashes}");
            }
        }
    }
}
