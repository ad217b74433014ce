//! Hugging Face sharded sets: one model's tensors split over several files
//! (`model-00001-of-00004.safetensors` …, or `pytorch_model-00001-of-00002.bin`
//! …) and an index (`model.safetensors.index.json`,
//! `pytorch_model.bin.index.json`) mapping each tensor name to its file:
//!
//! ```json
//! {"metadata": {"total_size": 4400}, "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors", …}}
//! ```
//!
//! Loading gives one [`Checkpoint`] whose root is a state dict (an
//! `OrderedDict` of every tensor by name) and whose storages are every
//! shard's. Each shard is loaded as its own file, with the caller's mode
//! (eager, memory-mapped, lazy, meta), so storage sharing inside a `.bin` shard
//! is kept, as PyTorch sees it; files share nothing, as in PyTorch. Every
//! tensor of every shard is loaded, also one the index does not name (as
//! `transformers` loads each shard whole); a tensor the index puts in a shard
//! must be there.
//!
//! Saving follows `huggingface_hub.split_state_dict_into_shards_factory`:
//! tensors in order, a new shard when the next tensor would pass the size
//! limit, a tensor larger than the limit alone in its shard, tensors sharing a
//! storage (`.bin`) in the shard of the first; one shard is written as
//! `model.safetensors`/`pytorch_model.bin` without an index. The whole set is
//! replaced in one step (`io::replace_dir`): a failed save leaves the previous
//! set usable.

use crate::error::{ErrorContext, FormatError};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::checkpoint::format::torch_zip::save_with;
use crate::checkpoint::options::SaveOptions;
use crate::checkpoint::pickle::Value;
use crate::checkpoint::value::graph::{
    dotted, Checkpoint, Format, Object, PathKey, StorageRecord, TensorObject,
};
use crate::io::Location;
use crate::{Error, Result};

/// The file kind of a sharded set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardFormat {
    /// `model-0000N-of-0000M.safetensors` and `model.safetensors.index.json`.
    Safetensors,
    /// `pytorch_model-0000N-of-0000M.bin` (torch zip) and `pytorch_model.bin.index.json`.
    Bin,
}

impl ShardFormat {
    /// The name of a set's file with Hugging Face's `suffix` (`""` or `-00001-of-00004`).
    pub(crate) fn file_name(self, suffix: &str) -> String {
        match self {
            ShardFormat::Safetensors => format!("model{suffix}.safetensors"),
            ShardFormat::Bin => format!("pytorch_model{suffix}.bin"),
        }
    }

    /// The index file's name.
    pub fn index_name(self) -> String {
        self.file_name("") + ".index.json"
    }

    /// Whether `name` is one of this kind's set files (a shard, the single
    /// file, or the index): the files a save replaces, as `huggingface_hub` removes them.
    fn owns(self, name: &str) -> bool {
        let (prefix, suffix) = match self {
            ShardFormat::Safetensors => ("model", ".safetensors"),
            ShardFormat::Bin => ("pytorch_model", ".bin"),
        };
        let Some(rest) = name.strip_prefix(prefix) else {
            return false;
        };
        let rest = rest.strip_suffix(".index.json").unwrap_or(rest);
        let Some(middle) = rest.strip_suffix(suffix) else {
            return false;
        };
        let b = middle.as_bytes();
        middle.is_empty()
            || (b.len() == 15
                && b[0] == b'-'
                && &b[6..10] == b"-of-"
                && b[1..6].iter().chain(&b[10..]).all(u8::is_ascii_digit))
    }
}

/// How to save a sharded set: `ShardOptions::default().with_format(ShardFormat::Bin)`.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct ShardOptions {
    pub(crate) format: ShardFormat,
    pub(crate) max_shard_size: u64,
    pub(crate) sync: bool,
    pub(crate) part: Option<(usize, usize)>,
    pub(crate) digests: Option<crate::checkpoint::content::WrittenDigests>,
}

impl ShardOptions {
    /// The shards' file kind (safetensors by default).
    pub fn with_format(mut self, format: ShardFormat) -> Self {
        self.format = format;
        self
    }

    /// The most bytes of tensor data per shard (a larger tensor gets a shard
    /// of its own), as `max_shard_size` in Hugging Face (5 GB by default);
    /// see [`parse_size`].
    pub fn with_max_shard_size(mut self, bytes: u64) -> Self {
        self.max_shard_size = bytes;
        self
    }

    /// Syncs the files and folders before the set replaces the old one (on
    /// by default).
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// Writes only rank `rank`'s part of the set, of `world` processes
    /// converting the same source into the same folder at once, with no
    /// communication between them (see [`save_sharded`]).
    pub fn with_part(mut self, rank: usize, world: usize) -> Self {
        self.part = Some((rank, world));
        self
    }

    /// Hands `digests` the bytes of each tensor as its shard is written
    /// (see [`SaveOptions::with_digests`]).
    pub fn with_digests(mut self, digests: crate::checkpoint::content::WrittenDigests) -> Self {
        self.digests = Some(digests);
        self
    }
}

impl Default for ShardOptions {
    /// safetensors shards of at most 5 GB (Hugging Face's default), synced.
    fn default() -> Self {
        ShardOptions {
            format: ShardFormat::Safetensors,
            max_shard_size: 5_000_000_000,
            sync: true,
            part: None,
            digests: None,
        }
    }
}

/// A size in Hugging Face's notation (`"5GB"`, `"500MB"`, `"10KiB"`, `"2.5GB"`,
/// or a plain number of bytes, with or without `B`): `KB`, `MB`, `GB`, `TB`
/// are powers of 1000, `KiB`, `MiB`, `GiB`, `TiB` of 1024, case-insensitive.
///
/// # Errors
/// [`FormatError::BadObject`] naming the text when it is not such a size.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let bad = || {
        Error::Format(FormatError::BadObject {
            context: "shard size",
            expected: "a number of bytes, or a number with KB, MB, GB, TB, KiB, MiB, GiB or TiB",
            found: format!("{text:?}"),
        })
    };
    if let Ok(n) = t.parse::<u64>() {
        return Ok(n);
    }
    const UNITS: [(&str, f64); 9] = [
        ("KIB", 1024.0),
        ("MIB", 1048576.0),
        ("GIB", 1073741824.0),
        ("TIB", 1099511627776.0),
        ("KB", 1e3),
        ("MB", 1e6),
        ("GB", 1e9),
        ("TB", 1e12),
        ("B", 1.0),
    ];
    let upper = t.to_ascii_uppercase();
    let (number, scale) = UNITS
        .iter()
        .find_map(|(unit, scale)| upper.strip_suffix(unit).map(|n| (n.trim(), *scale)))
        .ok_or_else(bad)?;
    let value: f64 = number.parse().map_err(|_| bad())?;
    let bytes = value * scale;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// Largest `*.index.json` read, in bytes (a set of a trillion parameters
/// indexes in a few MB).
pub const MAX_INDEX_BYTES: u64 = crate::Limit::IndexBytes.default_value();

/// A parsed index: the `metadata` object and `weight_map` in file order.
#[derive(Clone, Debug)]
pub struct ShardIndex {
    /// The `metadata` object (`total_size` and anything else the writer put there).
    pub metadata: serde_json::Map<String, Json>,
    /// Each tensor name with the shard file holding it.
    pub weight_map: Vec<(String, String)>,
}

impl ShardIndex {
    /// Parses an index file's text.
    ///
    /// # Errors
    /// [`FormatError::BadObject`] when the text is not JSON of the index's shape, or
    /// when a shard is named by anything but a plain file name in the index's
    /// folder (a path with a separator or `..` is refused, so an index can
    /// never make a load read outside its folder).
    pub fn parse(text: &str) -> Result<ShardIndex> {
        let bad = |expected: &'static str, found: String| {
            Error::Format(FormatError::BadObject {
                context: "sharded set index",
                expected,
                found,
            })
        };
        let json: Json = serde_json::from_str(text)
            .map_err(|e| bad("a JSON object", format!("invalid JSON ({e})")))?;
        let Json::Object(mut top) = json else {
            return Err(bad("a JSON object", kind(&json).into()));
        };
        let metadata = match top.remove("metadata") {
            None | Some(Json::Null) => serde_json::Map::new(),
            Some(Json::Object(m)) => m,
            Some(other) => return Err(bad("a \"metadata\" object", kind(&other).into())),
        };
        let map = match top.remove("weight_map") {
            Some(Json::Object(m)) => m,
            Some(other) => return Err(bad("a \"weight_map\" object", kind(&other).into())),
            None => return Err(bad("a \"weight_map\" object", "none".into())),
        };
        let mut weight_map = Vec::with_capacity(map.len());
        for (name, file) in map {
            let Json::String(file) = file else {
                return Err(bad(
                    "a shard file name",
                    format!("{} for {name:?}", kind(&file)),
                ));
            };
            let plain = !file.is_empty()
                && file != "."
                && file != ".."
                && !file.contains(['/', '\\', '\0']);
            if !plain {
                return Err(bad(
                    "a shard file name in the index's folder",
                    format!("{file:?} for {name:?}"),
                ));
            }
            weight_map.push((name, file));
        }
        Ok(ShardIndex {
            metadata,
            weight_map,
        })
    }

    /// The shard files, sorted and each once (the order `transformers` loads them in).
    pub fn files(&self) -> Vec<&str> {
        let mut files: Vec<&str> = self.weight_map.iter().map(|(_, f)| f.as_str()).collect();
        files.sort_unstable();
        files.dedup();
        files
    }
}

fn kind(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// Loads the set whose index `index` holds `text`, each shard (named
/// relative to the index's folder) through `load_shard` (which
/// decides the mode and wraps its errors with the shard's name).
///
/// # Errors
/// The index's errors ([`ShardIndex::parse`]) wrapped in
/// [`Error::InFile`] naming it; a shard's errors as `load_shard` gives them;
/// [`FormatError::ShardLacksTensor`] when a shard lacks a tensor the index puts in
/// it; [`FormatError::DuplicateName`] when two shards hold one name.
pub(crate) fn load_indexed(
    index: &Location,
    text: &str,
    load_shard: impl Fn(&Location) -> Result<Checkpoint>,
) -> Result<Checkpoint> {
    let in_index = |e: Error| e.in_file(index.path());
    let parsed = ShardIndex::parse(text).map_err(in_index)?;
    let dir = index.parent();
    let mut expected: HashMap<&str, Vec<&str>> = HashMap::new();
    for (name, file) in &parsed.weight_map {
        expected.entry(file.as_str()).or_default().push(name);
    }
    let mut merged = Checkpoint::new();
    let mut items = Vec::new();
    let mut names = HashSet::new();
    for (i, file) in parsed.files().into_iter().enumerate() {
        let here = dir.join(file);
        let path = here.path();
        let shard = load_shard(&here).map_err(|e| e.or_missing(path.clone(), index.path()))?;
        let in_shard = |e: Error| e.in_file(path.clone());
        if i == 0 {
            merged.format = shard.format;
            merged.byteorder = shard.byteorder;
            merged.safetensors_metadata = shard.safetensors_metadata.clone();
        }
        let tensors = shard.tensors().map_err(in_shard)?;
        let held: HashSet<String> = tensors.iter().map(|(p, _)| dotted(p)).collect();
        for name in &expected[file] {
            if !held.contains(*name) {
                return Err(in_index(Error::Format(FormatError::ShardLacksTensor {
                    name: (*name).to_owned(),
                    shard: file.to_owned(),
                })));
            }
        }
        for (path, t) in tensors {
            let name = dotted(&path);
            if !names.insert(name.clone()) {
                return Err(in_shard(Error::Format(FormatError::DuplicateName { name })));
            }
            items.push((
                Value::str(&name),
                Value::Ext(Object::Tensor(std::sync::Arc::new(t.clone()))),
            ));
        }
        merged
            .storages
            .extend(shard.storages.into_iter().map(|s| StorageRecord {
                key: format!("{file}/{}", s.key).into(),
                ..s
            }));
    }
    let root = merged.graph.dict(items);
    merged.ordered.insert(root);
    merged.root = Value::Node(root);
    // A set stowage wrote from a nested checkpoint: its structure back.
    #[cfg(feature = "safetensors")]
    {
        use crate::checkpoint::format::safetensors::{restore_tree, TREE_KEY};
        if let Some(Json::String(tree)) = parsed.metadata.get(TREE_KEY) {
            merged
                .safetensors_metadata
                .get_or_insert_with(Default::default)
                .insert(TREE_KEY.to_owned(), tree.clone());
            restore_tree(&mut merged).map_err(in_index)?;
        }
    }
    Ok(merged)
}

/// What a sharded save wrote.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SavedSet {
    /// The shard files, in order (one file, without an index, for a set of one shard).
    pub files: Vec<PathBuf>,
    /// The index, when there is more than one shard.
    pub index: Option<PathBuf>,
    /// `metadata.total_size`: the bytes of tensor data the shards hold.
    pub total_size: u64,
    /// With [`ShardOptions::with_part`], when this rank did not write the
    /// index: the ranks whose markers it did not find, or found holding
    /// another set's (see [`save_sharded`]). Empty otherwise.
    pub pending: Vec<PendingRank>,
}

pub use super::parts::PendingRank;

/// Saves every tensor of `ckpt`, named by dotted path, as a sharded set in the
/// folder `dir` (made if missing). The set's files already in `dir` (shards
/// and index of the same kind) are replaced as a whole; other files stay.
///
/// A set holds a flat map of tensors. A checkpoint that is not one (a
/// training checkpoint, with nested dicts and values) also has its
/// structure and values kept, as `safetensors::save` keeps them in one
/// file (the entry `stowage.tree`, `TREE_KEY`), and a load of the set gives
/// that checkpoint back; pass [`Checkpoint::tensors_only`] to write the
/// tensors alone. The checkpoint's safetensors metadata (where a converter
/// puts its values, as JSON under their dotted paths, for other readers) is
/// kept too. Both go in the index's `metadata`, beside `total_size`, or in
/// the one safetensors shard's `__metadata__` when there is no index (a
/// single `.bin` shard with metadata to keep gets an index).
/// In safetensors shards each tensor is a contiguous copy; in `.bin` shards,
/// tensors sharing a storage share it in their shard.
///
/// With [`ShardOptions::with_part`], `world` processes write one set
/// together: every rank makes the same plan (the shards and their names
/// follow from the tensors' sizes alone) and assigns the shards to ranks
/// the same way (largest first, each to the rank with the fewest bytes so
/// far, ties to the lower rank), then writes its own shards, each whole or
/// not at all, into `dir`, and no other file. Then it leaves a marker
/// (`.stowage-part-RANK-of-WORLD`, holding the set's file names and index)
/// and looks for every rank's: the rank that finds all of them, with the
/// same content, is the last to finish (markers are written before they
/// are looked for, so at least the last one sees them all); it writes the
/// index, whole or not at all, and removes the markers. Two ranks finishing
/// at once may both write it, the same bytes. The plan gives each rank a
/// shard where the tensors allow (shards of at most the total over `world`
/// when the shard size would give fewer), so the work divides; the result
/// is file for file what one process writes with that plan. Files of an earlier, different set in `dir`
/// are not removed: give each conversion its own folder.
///
/// # Errors
/// What a single-file save of the shards gives (an unsupported dtype names the
/// tensor), I/O errors; all wrapped in [`Error::InFile`] naming `dir`.
pub fn save_sharded(dir: &Path, ckpt: &Checkpoint, options: &ShardOptions) -> Result<SavedSet> {
    // A container held at several places is written once, at its first (the
    // structure kept with the set records the rest as refs).
    let tensors = ckpt.tensors_once()?;
    let plan = divided(plan(&tensors, options)?, &tensors, options)?;
    let format = options.format;
    let count = plan.shards.len();
    let names: Vec<String> = (0..count)
        .map(|i| match count {
            1 => format.file_name(""),
            n => format.file_name(&format!("-{:05}-of-{n:05}", i + 1)),
        })
        .collect();
    let kept = kept_metadata(ckpt)?;
    let bin_with_metadata = format == ShardFormat::Bin && !kept.is_empty();
    let index_name = (count > 1 || bin_with_metadata).then(|| format.index_name());
    let set = PlannedSet {
        tensors,
        plan,
        names,
        kept,
        index_name,
        options,
    };
    match options.part {
        Some((rank, world)) => set.save_part(dir, rank, world),
        None => set.save_whole(dir),
    }
}

/// The metadata a set keeps: the checkpoint's safetensors metadata and, for
/// a nested checkpoint, its structure and values, kept as a single
/// safetensors file keeps them, so that the set loads back as what was
/// saved (in the index's metadata, or the lone shard's).
fn kept_metadata(ckpt: &Checkpoint) -> Result<BTreeMap<String, String>> {
    #[cfg_attr(not(feature = "safetensors"), allow(unused_mut))]
    let mut kept = ckpt.safetensors_metadata.clone().unwrap_or_default();
    #[cfg(feature = "safetensors")]
    {
        use crate::checkpoint::format::safetensors::{record_tree, TREE_KEY};
        match record_tree(ckpt)? {
            Some(tree) => kept.insert(TREE_KEY.to_owned(), tree),
            None => kept.remove(TREE_KEY),
        };
    }
    Ok(kept)
}

/// A sharded save, planned: what [`save_sharded`]'s steps share.
struct PlannedSet<'a> {
    /// Every tensor of the checkpoint, with its path.
    tensors: Vec<(Vec<PathKey>, &'a TensorObject)>,
    plan: Plan,
    /// The shards' file names, in order.
    names: Vec<String>,
    /// The metadata the set keeps ([`kept_metadata`]).
    kept: BTreeMap<String, String>,
    /// The index's file name, when the set has one.
    index_name: Option<String>,
    options: &'a ShardOptions,
}

impl PlannedSet<'_> {
    /// The bytes of tensor data of `shard`.
    fn shard_size(&self, shard: &[usize]) -> u64 {
        shard
            .iter()
            .map(|&i| self.tensors[i].1.tensor.nbytes() as u64)
            .sum()
    }

    /// Writes shard `k` at `path`; its errors name the shard as the set
    /// will hold it.
    fn write_shard(&self, k: usize, path: &Path) -> Result<()> {
        let (shard, name) = (&self.plan.shards[k], &self.names[k]);
        let mut part = Checkpoint::new();
        let items = shard
            .iter()
            .map(|&i| {
                let (name, t) = (&self.plan.names[i], self.tensors[i].1);
                (
                    Value::str(name),
                    Value::Ext(Object::Tensor(std::sync::Arc::new(TensorObject::clone(t)))),
                )
            })
            .collect::<Vec<_>>();
        let root = part.graph.dict(items);
        part.ordered.insert(root);
        part.root = Value::Node(root);
        // Errors name the shard as the set will hold it, not the
        // staging folder it is written in.
        let as_named = |e: Error| match e {
            Error::InFile { path: p, source } if p == path => Error::InFile {
                path: name.into(),
                source,
            },
            e => e,
        };
        // Every shard is saved with the set's `sync`, whatever its format.
        let mut options = SaveOptions::default().with_sync(self.options.sync);
        if let Some(d) = &self.options.digests {
            options = options.with_digests(d.clone());
        }
        (|| -> Result<()> {
            match self.options.format {
                ShardFormat::Safetensors => {
                    // Every shard has `__metadata__` (which the save gives
                    // `"format": "pt"`); a lone shard keeps the checkpoint's.
                    let meta = if self.names.len() == 1 {
                        self.kept.clone()
                    } else {
                        Default::default()
                    };
                    part.format = Format::Safetensors;
                    part.safetensors_metadata = Some(meta);
                    save_safetensors(path, &part, &options)?;
                }
                ShardFormat::Bin => save_with(path, &part, &options)?,
            }
            Ok(())
        })()
        .map_err(as_named)
    }

    /// The index's JSON text: the kept metadata and `total_size`, and each
    /// tensor's shard.
    fn index_text(&self) -> Result<String> {
        let tensor_names = &self.plan.names;
        let weight_map: serde_json::Map<String, Json> = self
            .plan
            .shards
            .iter()
            .zip(&self.names)
            .flat_map(|(shard, file)| {
                shard
                    .iter()
                    .map(move |&i| (tensor_names[i].clone(), Json::String(file.clone())))
            })
            .collect();
        let mut metadata: serde_json::Map<String, Json> = self
            .kept
            .iter()
            .map(|(k, v)| (k.clone(), Json::String(v.clone())))
            .collect();
        metadata.insert("total_size".into(), self.plan.total_size.into());
        let index = serde_json::json!({
            "metadata": metadata,
            "weight_map": weight_map,
        });
        let mut text = serde_json::to_string_pretty(&index).map_err(|e| Error::Io(e.into()))?;
        text.push('\n');
        Ok(text)
    }

    /// Rank `rank`'s part of a set written by `world` processes: its own
    /// shards, its marker, and the index when it finishes last.
    fn save_part(&self, dir: &Path, rank: usize, world: usize) -> Result<SavedSet> {
        let names = &self.names;
        super::parts::check_rank(dir, rank, world)?;
        let sizes: Vec<u64> = self
            .plan
            .shards
            .iter()
            .map(|s| self.shard_size(s))
            .collect();
        let owners = assign(&sizes, world);
        let mine: Vec<usize> = (0..names.len()).filter(|&k| owners[k] == rank).collect();
        fs::create_dir_all(dir).map_err(|e| Error::Io(e).in_file(dir.to_owned()))?;
        for &k in &mine {
            self.write_shard(k, &dir.join(&names[k]))
                .map_err(|e| match e {
                    e @ Error::InFile { .. } => e,
                    e => e.in_file(dir.join(&names[k])),
                })?;
        }
        let index_name = &self.index_name;
        let index = index_name.as_ref().map(|_| self.index_text()).transpose()?;
        let manifest = format!("{}\n{}", names.join("\n"), index.as_deref().unwrap_or(""));
        let index_entry = index_name.as_deref().zip(index.as_deref());
        let sync = self.options.sync;
        let pending =
            super::parts::finish(
                dir,
                rank,
                world,
                &manifest,
                "",
                sync,
                |_| match index_entry {
                    Some((name, text)) => {
                        crate::io::write_atomically(&dir.join(name), sync, |tmp| {
                            fs::write(tmp, text).map_err(Error::Io)
                        })
                    }
                    None => Ok(()),
                },
            )?;
        let wrote_index = pending.is_empty() && index_entry.is_some();
        Ok(SavedSet {
            files: mine.iter().map(|&k| dir.join(&names[k])).collect(),
            index: wrote_index.then(|| dir.join(index_name.as_deref().unwrap_or_default())),
            total_size: self.plan.total_size,
            pending,
        })
    }

    /// The whole set, written in a staging folder that replaces the set's
    /// files in `dir` in one step.
    fn save_whole(self, dir: &Path) -> Result<SavedSet> {
        let format = self.options.format;
        crate::io::replace_dir(
            dir,
            self.options.sync,
            move |n| format.owns(n),
            |staging| {
                for (k, name) in self.names.iter().enumerate() {
                    self.write_shard(k, &staging.join(name))?;
                }
                if let Some(index_name) = &self.index_name {
                    fs::write(staging.join(index_name), self.index_text()?).map_err(Error::Io)?;
                }
                Ok(())
            },
        )?;
        Ok(SavedSet {
            files: self.names.iter().map(|n| dir.join(n)).collect(),
            index: self.index_name.map(|n| dir.join(n)),
            total_size: self.plan.total_size,
            pending: Vec::new(),
        })
    }
}

#[cfg(feature = "safetensors")]
fn save_safetensors(path: &Path, part: &Checkpoint, options: &SaveOptions) -> Result<()> {
    crate::checkpoint::format::safetensors::save_with(path, part, options)
}

#[cfg(not(feature = "safetensors"))]
fn save_safetensors(_: &Path, _: &Checkpoint, _: &SaveOptions) -> Result<()> {
    Err(Error::Checkpoint(crate::CheckpointError::FeatureDisabled {
        feature: "safetensors",
        what: "safetensors files",
    }))
}

/// Which rank writes each shard: the largest first, each to the rank with
/// the fewest bytes so far (ties to the lower rank, then the earlier shard),
/// so that every rank computes the same assignment.
fn assign(sizes: &[u64], world: usize) -> Vec<usize> {
    let world = world.max(1);
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by(|&a, &b| sizes[b].cmp(&sizes[a]).then(a.cmp(&b)));
    let mut load = vec![0u64; world];
    let mut owners = vec![0; sizes.len()];
    for k in order {
        let rank = (0..world).min_by_key(|&r| (load[r], r)).unwrap_or(0);
        owners[k] = rank;
        load[rank] += sizes[k];
    }
    owners
}

/// The shards: indices into the tensor list, and the data size of the set.
struct Plan {
    names: Vec<String>,
    shards: Vec<Vec<usize>>,
    total_size: u64,
}

/// The plan of a set that `world` processes write at once
/// ([`ShardOptions::with_part`]): at least one shard each where the tensors
/// allow, so the work divides `world` ways whatever the shard size. A plan
/// of fewer shards than processes is made again with shards of at most the
/// total over `world` (a tensor larger than that is a shard of its own). It
/// depends only on the tensors and `world`, so every rank plans the same.
fn divided(
    planned: Plan,
    tensors: &[(Vec<PathKey>, &TensorObject)],
    options: &ShardOptions,
) -> Result<Plan> {
    let Some((_, world)) = options.part else {
        return Ok(planned);
    };
    let even = (planned.total_size / world.max(1) as u64).max(1);
    if planned.shards.len() >= world || even >= options.max_shard_size {
        return Ok(planned);
    }
    let smaller = ShardOptions {
        max_shard_size: even,
        ..options.clone()
    };
    plan(tensors, &smaller)
}

/// `huggingface_hub`'s split: sizes are each tensor's bytes in safetensors
/// shards, and each storage's bytes (counted once, with the first tensor on
/// it) in `.bin` shards.
fn plan(tensors: &[(Vec<PathKey>, &TensorObject)], options: &ShardOptions) -> Result<Plan> {
    let names: Vec<String> = tensors.iter().map(|(p, _)| dotted(p)).collect();
    let mut seen = HashSet::new();
    for n in &names {
        if !seen.insert(n.as_str()) {
            return Err(Error::Format(FormatError::DuplicateName {
                name: n.clone(),
            }));
        }
    }
    let max = options.max_shard_size;
    let mut shards: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut current_size = 0u64;
    let mut total_size = 0u64;
    let mut first_on_storage: HashMap<usize, usize> = HashMap::new();
    let mut followers: Vec<(usize, usize)> = Vec::new();
    for (i, (_, t)) in tensors.iter().enumerate() {
        let size = match options.format {
            ShardFormat::Safetensors => t.tensor.nbytes() as u64,
            ShardFormat::Bin => {
                let storage = t.tensor.untyped_storage();
                if let Some(&first) = first_on_storage.get(&storage.id()) {
                    followers.push((i, first));
                    continue;
                }
                first_on_storage.insert(storage.id(), i);
                storage.nbytes() as u64
            }
        };
        total_size += size;
        if size > max {
            shards.push(vec![i]);
            continue;
        }
        if current_size + size > max && !current.is_empty() {
            shards.push(std::mem::take(&mut current));
            current_size = 0;
        }
        current.push(i);
        current_size += size;
    }
    if !current.is_empty() || shards.is_empty() {
        shards.push(current);
    }
    for (i, first) in followers {
        if let Some(shard) = shards.iter_mut().find(|s| s.contains(&first)) {
            shard.push(i);
        }
    }
    Ok(Plan {
        names,
        shards,
        total_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FormatError;

    #[test]
    fn sizes_in_hugging_face_notation() {
        assert_eq!(parse_size("5GB").unwrap(), 5_000_000_000);
        assert_eq!(parse_size("500MB").unwrap(), 500_000_000);
        assert_eq!(parse_size("2.5 gb").unwrap(), 2_500_000_000);
        assert_eq!(parse_size("10KiB").unwrap(), 10240);
        assert_eq!(parse_size("1234").unwrap(), 1234);
        assert_eq!(parse_size("200B").unwrap(), 200);
        for bad in ["", "GB", "5XB", "-1GB", "nanGB", "0.0001KB"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn set_file_names() {
        let s = ShardFormat::Safetensors;
        assert!(s.owns("model.safetensors"));
        assert!(s.owns("model-00001-of-00004.safetensors"));
        assert!(s.owns("model.safetensors.index.json"));
        assert!(!s.owns("model-1-of-4.safetensors"));
        assert!(!s.owns("config.json"));
        assert!(!s.owns("pytorch_model.bin"));
        assert!(ShardFormat::Bin.owns("pytorch_model-00002-of-00002.bin"));
    }

    #[test]
    fn index_parsing_refuses_paths_outside_the_folder() {
        let ok = ShardIndex::parse(
            r#"{"metadata": {"total_size": 8}, "weight_map": {"b": "s2", "a": "s1", "c": "s1"}}"#,
        )
        .unwrap();
        assert_eq!(ok.files(), ["s1", "s2"]);
        for bad in [
            r#"{"weight_map": {"a": "../x"}}"#,
            r#"{"weight_map": {"a": "/etc/passwd"}}"#,
            r#"{"weight_map": {"a": 3}}"#,
            r#"{"weight_map": []}"#,
            r#"{"metadata": {}}"#,
            r#"[1]"#,
            "not json",
        ] {
            assert!(
                matches!(
                    ShardIndex::parse(bad),
                    Err(Error::Format(FormatError::BadObject { .. }))
                ),
                "{bad}"
            );
        }
    }
}
