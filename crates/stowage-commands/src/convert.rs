//! `convert`: rewrite a checkpoint as `stowage convert IN OUT` does
//! ([`convert`], with [`ConvertOptions`]), in the format OUT's
//! extension names (`.pt`, `.pth`, `.bin`, `.ckpt`, `.tar`, `.pkl`: torch zip;
//! `.safetensors`; the library's one rule, `Destination::resolve`),
//! or as a folder: a Hugging Face sharded set (`--to safetensors|bin`, or an
//! OUT named `model.safetensors.index.json`/`pytorch_model.bin.index.json`;
//! `--max-shard-size`) or a distributed checkpoint (`--to dcp`, `--ranks`);
//! each flag is a builder of [`ConvertOptions`].
//! A file OUT is written to a temporary file beside it and renamed into place;
//! a folder OUT is replaced as a whole.
//!
//! IN is loaded lazily and each storage goes from IN to OUT window by window,
//! so converting a large checkpoint does not hold it in memory.
//!
//! A torch zip OUT keeps everything. A safetensors file holds only tensors,
//! so nothing is dropped silently:
//! - the non-tensor values (`epoch`, `config.lr`, …) go into the file's
//!   `__metadata__` map, one entry per leaf, under its dotted path, as the
//!   JSON object `inspect --json` lists it without the path
//!   (`{"type": "float", "value": 0.001}`); the library keeps the structure
//!   itself (nesting, key types, the values) in `stowage.tree` and rebuilds
//!   it on reading. `--drop-values` leaves the values out and writes the
//!   tensors flat. Either way stdout names them;
//! - tensors that share a storage (tied weights) are written as separate
//!   copies, and stdout names each group;
//! - a sparse or nested tensor has no dense data of its own: its components
//!   are written, each under the tensor's dotted path and the component's
//!   name (`w.indices`, `w.values`; `w.crow_indices`, `w.col_indices`, …;
//!   `w.buffer`, `w.sizes`, `w.strides`, `w.offsets`), and stdout names them.
//!   Quantized tensors (per tensor or per channel) and meta tensors are
//!   refused, naming the tensor.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;
use stowage::{CheckpointError, ErrorContext};

use stowage::checkpoint::{
    dotted, save_to, Destination, FolderFormat, PathKey, Progress, SaveFormat, ValueKind,
};
use stowage::Checkpoint;

use stowage::checkpoint::content::WrittenDigests;

use crate::listing::human;
use crate::manifest::Manifest;
use crate::values::typed_json;
use crate::{CommandError, Context};

/// How [`convert`] writes its output: `stowage convert`'s flags.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConvertOptions {
    to: Option<FolderFormat>,
    max_shard_size: String,
    ranks: Option<usize>,
    part: Option<(usize, usize)>,
    sync: bool,
    drop_values: bool,
    drop_objects: bool,
    state_dict: bool,
    select: Option<String>,
    manifest: bool,
}

impl Default for ConvertOptions {
    fn default() -> ConvertOptions {
        ConvertOptions {
            to: None,
            max_shard_size: "5GB".into(),
            ranks: None,
            part: None,
            sync: true,
            drop_values: false,
            drop_objects: false,
            state_dict: false,
            select: None,
            manifest: false,
        }
    }
}

impl ConvertOptions {
    /// Writes OUT as a folder of this format (`--to`): a sharded set of
    /// safetensors or `.bin` files, or a distributed checkpoint. A file's
    /// own name wins over it (`r.safetensors` is that file).
    #[must_use]
    pub fn with_to(mut self, to: Option<FolderFormat>) -> ConvertOptions {
        self.to = to;
        self
    }

    /// The largest shard of a sharded set, in Hugging Face's notation
    /// (`5GB`, the default; `500MB`, `2GiB`).
    #[must_use]
    pub fn with_max_shard_size(mut self, size: impl Into<String>) -> ConvertOptions {
        self.max_shard_size = size.into();
        self
    }

    /// The ranks' files of a DCP folder (1 by default, or the world's).
    #[must_use]
    pub fn with_ranks(mut self, ranks: Option<usize>) -> ConvertOptions {
        self.ranks = ranks;
        self
    }

    /// Writes only this process's part of a folder, as rank `rank` of
    /// `world` processes converting the same IN into the same OUT at once;
    /// the last to finish writes the index or DCP's `.metadata`. Without,
    /// torchrun's `RANK` and `WORLD_SIZE` say, when both are set.
    #[must_use]
    pub fn with_part(mut self, rank: usize, world: usize) -> ConvertOptions {
        self.part = Some((rank, world));
        self
    }

    /// Whether OUT is made durable (synced) before [`convert`] returns (the
    /// default; `--no-sync` skips it, as `torch.save` does).
    #[must_use]
    pub fn with_sync(mut self, sync: bool) -> ConvertOptions {
        self.sync = sync;
        self
    }

    /// To safetensors, leaves the non-tensor values out; to a sharded set,
    /// drops them instead of refusing (`--drop-values`).
    #[must_use]
    pub fn with_drop_values(mut self, drop: bool) -> ConvertOptions {
        self.drop_values = drop;
        self
    }

    /// To a torch checkpoint, drops what `torch.load(weights_only=True)`
    /// refuses instead of refusing the conversion (`--drop-objects`).
    #[must_use]
    pub fn with_drop_objects(mut self, drop: bool) -> ConvertOptions {
        self.drop_objects = drop;
        self
    }

    /// Writes what `model.state_dict()` gives for an `nn.Module` saved
    /// whole, read inertly (`--state-dict`).
    #[must_use]
    pub fn with_state_dict(mut self, state_dict: bool) -> ConvertOptions {
        self.state_dict = state_dict;
        self
    }

    /// Keeps only the value at this dotted path (`model`), its paths
    /// relative to it (`--select`).
    #[must_use]
    pub fn with_select(mut self, path: Option<String>) -> ConvertOptions {
        self.select = path;
        self
    }

    /// Makes the content manifest of what is written
    /// ([`Conversion::manifest`], `--manifest FILE`), each tensor hashed
    /// from its bytes as they are written, on threads of their own, rather
    /// than by reading the output again (`docs/manifest.md`).
    #[must_use]
    pub fn with_manifest(mut self, manifest: bool) -> ConvertOptions {
        self.manifest = manifest;
        self
    }
}

/// What [`convert`] wrote: the lines `stowage convert` prints (what was
/// written, and the values stored, dropped or tied), through `Display`.
#[derive(Clone, Debug)]
pub struct Conversion {
    lines: Vec<String>,
    manifest: Option<Manifest>,
}

impl Conversion {
    /// The lines, in order.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    /// The content manifest of what was written, with
    /// [`ConvertOptions::with_manifest`]: the one
    /// [`manifest`](crate::manifest::manifest) of the output gives.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }
}

impl fmt::Display for Conversion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in &self.lines {
            writeln!(f, "{line}")?;
        }
        Ok(())
    }
}

/// The folder format of a folder destination.
fn folder_format(format: SaveFormat) -> Option<FolderFormat> {
    use stowage::checkpoint::sharded::ShardFormat;
    match format {
        SaveFormat::Sharded(ShardFormat::Safetensors) => Some(FolderFormat::Safetensors),
        SaveFormat::Sharded(ShardFormat::Bin) => Some(FolderFormat::Bin),
        SaveFormat::Dcp => Some(FolderFormat::Dcp),
        _ => None,
    }
}

/// How many names a note lists before `… (N in all)`.
const LISTED: usize = 8;

fn listed(names: &[String]) -> String {
    if names.len() <= LISTED {
        names.join(", ")
    } else {
        format!("{}, … ({} in all)", names[..LISTED].join(", "), names.len())
    }
}

/// A dotted path for a metadata key (the root itself: `value`).
fn key(path: &[PathKey]) -> String {
    if path.is_empty() {
        "value".into()
    } else {
        dotted(path)
    }
}

/// The checkpoint's values as safetensors metadata: each leaf as JSON under
/// its dotted path, beside the metadata the input already had (or none of
/// them, with `drop_values`), and the note saying so; `for_set`: for a
/// sharded set, whose index's metadata holds `total_size` of its own.
fn store_values(
    ckpt: &Checkpoint,
    input: &Path,
    drop_values: bool,
    for_set: bool,
) -> Result<(BTreeMap<String, String>, Option<String>), CommandError> {
    let place = if for_set {
        "the set's metadata (the index's, or the one shard's __metadata__)"
    } else {
        "__metadata__"
    };
    let (leaves, _) = crate::values::leaves(ckpt, input)?;
    let names: Vec<String> = leaves.iter().map(|l| key(l.path())).collect();
    let mut metadata: BTreeMap<String, String> =
        ckpt.safetensors_metadata().cloned().unwrap_or_default();
    if leaves.is_empty() {
        return Ok((metadata, None));
    }
    if drop_values {
        let note = format!(
            "dropped {} non-tensor values (--drop-values): {}",
            leaves.len(),
            listed(&names)
        );
        return Ok((metadata, Some(note)));
    }
    for (leaf, name) in leaves.iter().zip(&names) {
        let text = serde_json::Value::Object(typed_json(leaf)).to_string();
        let taken = for_set && name == "total_size";
        // An entry that already says the same (a file stowage wrote, read
        // back) is the value itself, not a collision.
        let before = metadata.insert(name.clone(), text.clone());
        if before.is_some_and(|b| b != text) || taken {
            return Err(CommandError::usage(format!(
                "convert: the value {name} and the input's metadata entry of that name would collide (use --drop-values)"
            )));
        }
    }
    let note = format!(
        "stored {} non-tensor values in {place} as JSON under their dotted paths: {}",
        leaves.len(),
        listed(&names)
    );
    Ok((metadata, Some(note)))
}

/// The checkpoint to write as safetensors: its values put in `__metadata__`
/// (or dropped), and the notes to print once it is written: the values
/// stored or dropped, and each group of tensors sharing a storage.
fn for_safetensors(
    ckpt: &Checkpoint,
    input: &Path,
    drop_values: bool,
) -> Result<(Checkpoint, Vec<String>), CommandError> {
    let mut notes = Vec::new();
    let (metadata, note) = store_values(ckpt, input, drop_values, false)?;
    notes.extend(note);
    let mut groups: HashMap<usize, Vec<String>> = HashMap::new();
    let mut order = Vec::new();
    for (path, t) in ckpt.tensors().map_err(CommandError::input)? {
        let id = t.tensor.untyped_storage().id();
        let group = groups.entry(id).or_default();
        if group.is_empty() {
            order.push(id);
        }
        group.push(dotted(&path));
    }
    let tied: Vec<String> = order
        .iter()
        .filter_map(|id| groups.get(id).filter(|g| g.len() > 1))
        .map(|g| format!("[{}]", g.join(", ")))
        .collect();
    if !tied.is_empty() {
        let (n, verb) = match tied.len() {
            1 => ("1 group of tensors".to_owned(), "shares"),
            n => (format!("{n} groups of tensors"), "share"),
        };
        notes.push(format!(
            "{n} {verb} a storage (tied); each tensor is written as a copy of its own: {}",
            listed(&tied)
        ));
    }
    let kinds: Vec<String> = ckpt
        .tensors()
        .map_err(CommandError::input)?
        .iter()
        .filter(|(_, t)| !t.kind().is_strided())
        .map(|(path, t)| format!("{} ({})", dotted(path), t.kind().layout_name()))
        .collect();
    if !kinds.is_empty() {
        notes.push(format!(
            "{} sparse or nested tensors are written as their components, each under the tensor's name and the component's (NAME.indices, NAME.values, NAME.crow_indices, …): {}",
            kinds.len(),
            listed(&kinds)
        ));
    }
    // Without the values, nothing of the structure but the tensors' names
    // is written (the library keeps a nested checkpoint's values in the file).
    let mut ckpt = if drop_values {
        ckpt.tensors_only().map_err(CommandError::input)?
    } else {
        ckpt.clone()
    };
    ckpt.set_safetensors_metadata((!metadata.is_empty()).then_some(metadata));
    Ok((ckpt, notes))
}

/// Converts the checkpoint at `src` (a file, a folder or a URL) into
/// `dst`, as `options` say.
///
/// A state dict saved by `torch.save`, rewritten as safetensors and
/// compared with what it came from:
///
/// ```
/// use std::path::Path;
/// use stowage_commands::convert::{convert, ConvertOptions};
/// use stowage_commands::diff::{diff, DiffOptions};
/// use stowage_commands::Context;
///
/// let src = Path::new("../stowage/tests/fixtures/state_dict.pt");
/// let out = tempfile::tempdir()?;
/// let dst = out.path().join("model.safetensors");
/// let cx = Context::default();
/// let conversion = convert(src, &dst, &cx, &ConvertOptions::default())?;
/// print!("{conversion}"); // what was stored, dropped or tied, if anything
/// assert!(diff(src, &dst, &cx, &DiffOptions::default())?.is_same());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`CommandError::Input`] when `src` cannot be read or what it holds
/// cannot be written in `dst`'s format (naming the path);
/// [`CommandError::Usage`] for options that do not go together;
/// [`CommandError::Failed`] for a conversion that would write nothing; the
/// library's error naming `dst` when it cannot be written (nothing is left
/// half-written).
pub fn convert(
    src: &Path,
    dst: &Path,
    cx: &Context,
    options: &ConvertOptions,
) -> Result<Conversion, CommandError> {
    let o = options;
    // The library's one rule from OUT and `--to` to what is written, as
    // Python's `stowage.save` resolves its destination: a file's own name
    // wins over `--to` of its format (`--to safetensors r.safetensors` is
    // that file, not a folder of that name).
    let dest = Destination::resolve(dst, o.to).map_err(CommandError::input)?;
    let format = dest.format();
    let folder = matches!(format, SaveFormat::Sharded(_) | SaveFormat::Dcp);
    if o.part.is_some() && !folder {
        return Err(CommandError::usage(
            "convert: --rank/--world write a part of a folder: give --to safetensors, bin or dcp and a folder",
        ));
    }
    // Only a folder has parts: a file written under torchrun is whole.
    if o.manifest && folder && part_of(o)?.is_some() {
        return Err(CommandError::usage(
            "convert: --manifest describes the whole output, and --rank/--world (or torchrun's RANK and WORLD_SIZE) write a part of it: once every rank is done, run `stowage manifest` on OUT",
        ));
    }
    let ckpt = read_input(src, o, cx, format)?;
    let digests = o.manifest.then(WrittenDigests::new);
    let mut conversion = match folder_format(format) {
        Some(to) => to_folder(src, o, cx, &ckpt, dest.path(), to, digests.as_ref())?,
        None => to_file(src, dst, o, cx, &ckpt, &dest, digests.as_ref())?,
    };
    if let Some(digests) = digests {
        let (manifest, reread) = crate::manifest::of_written(dest.path(), cx, &digests.finish())?;
        if !reread.names.is_empty() {
            let n = reread.names.len();
            conversion.lines.push(format!(
                "the manifest read {n} tensor{} ({}) back from the output, not written as its elements in order (a strided view, a lazily conjugated or negated tensor, a sparse one, DCP chunks not in row order or in a non-tensor item): {}",
                if n == 1 { "" } else { "s" },
                human(reread.bytes),
                listed(&reread.names)
            ));
        }
        conversion.manifest = Some(manifest);
    }
    Ok(conversion)
}

/// Writes the file `dest` (torch zip or safetensors).
fn to_file(
    src: &Path,
    dst: &Path,
    o: &ConvertOptions,
    cx: &Context,
    ckpt: &Checkpoint,
    dest: &Destination,
    digests: Option<&WrittenDigests>,
) -> Result<Conversion, CommandError> {
    let format = dest.format();
    let total: u64 = match format {
        SaveFormat::Safetensors => ckpt
            .tensors()
            .map_err(CommandError::input)?
            .iter()
            .map(|(_, t)| t.tensor.nbytes() as u64)
            .sum(),
        _ => ckpt
            .storages()
            .iter()
            .map(|s| s.storage.nbytes() as u64)
            .sum(),
    };
    let bar = cx
        .progress()
        .bytes(total, format!("writing {}", dst.display()));
    let tick = bar.clone();
    let mut options = cx
        .save_options()
        .with_progress(Progress::new(move |n| tick.inc(n)))
        .with_sync(o.sync);
    if let Some(d) = digests {
        options = options.with_digests(d.clone());
    }
    let mut notes = Vec::new();
    let written = match format {
        SaveFormat::Safetensors => {
            let (ckpt, said) = for_safetensors(ckpt, src, o.drop_values)?;
            notes = said;
            save_to(&ckpt, dest, &options)
        }
        _ => save_to(ckpt, dest, &options),
    };
    bar.finish_and_clear();
    written.map_err(|e| match e {
        // An input the target format cannot hold is refused input (exit 2).
        e @ (stowage::Error::AtPath { .. } | stowage::Error::Checkpoint(CheckpointError::NotSaveable { .. })) => CommandError::input(e),
        // So is an input that could not be read while writing (a lazily
        // loaded storage whose file or server failed): exit 2.
        stowage::Error::InFile { ref source, .. }
            if matches!(&**source, stowage::Error::InFile { path, .. } if *path == src) =>
        {
            CommandError::input(e)
        }
        // The library names the file it was writing; naming it again would repeat it.
        e @ stowage::Error::InFile { .. } => CommandError::from(e),
        e => CommandError::from(e.in_file(dst.to_owned())),
    })?;
    Ok(Conversion {
        lines: notes,
        manifest: None,
    })
}

/// IN as `options` select it (`--select`, `--state-dict`), checked for
/// what `format` can hold: the values `torch.load(weights_only=True)`
/// refuses dropped or refused, and a conversion that would write nothing
/// refused.
fn read_input(
    src: &Path,
    o: &ConvertOptions,
    cx: &Context,
    format: SaveFormat,
) -> Result<Checkpoint, CommandError> {
    let in_input = |e: stowage::Error| CommandError::input(e.in_file(src.to_owned()));
    // `--select` first, so that what is left out is neither converted nor
    // refused; `--state-dict` reads the module at the selected path.
    let mut ckpt = if o.state_dict {
        let whole = cx.load_inert(src)?;
        let module = match &o.select {
            Some(path) => whole.get(path).map_err(in_input)?,
            None => whole.root_value(),
        };
        Checkpoint::from_state_dict(module.module_state_dict().map_err(in_input)?)
    } else {
        let ckpt = cx.load(src, false)?;
        match &o.select {
            Some(path) => ckpt.select(path).map_err(in_input)?,
            None => ckpt,
        }
    };
    if format == SaveFormat::TorchZip {
        if o.drop_objects {
            let n = ckpt.drop_objects();
            if n > 0 {
                log::warn!(
                    "{}: dropped {n} values torch.load(weights_only=True) refuses (--drop-objects)",
                    src.display()
                );
            }
        } else if let Some((path, class)) = ckpt
            .unsaveable()
            .map_err(CommandError::input)?
            .into_iter()
            .next()
        {
            return Err(in_input(stowage::Error::Checkpoint(
                CheckpointError::NotSaveable { path, class },
            )));
        }
    }
    // A conversion that would write nothing is an error, never an empty file.
    // Nothing: no tensor, and a root that is None or an empty container (a
    // dict of empty dicts is still a structure `torch.load` gives back).
    let root = ckpt.root_value();
    let holds_nothing = ckpt.tensors_once().map_err(in_input)?.is_empty()
        && (root.kind() == ValueKind::None || root.is_empty().unwrap_or(false));
    if holds_nothing {
        return Err(CommandError::msg(format!(
            "convert: {} would write nothing: no tensors and no values are left (the root is empty){}",
            src.display(),
            if o.drop_objects {
                " after --drop-objects (for an nn.Module saved whole, --state-dict gives its weights)"
            } else {
                ""
            }
        )));
    }
    Ok(ckpt)
}

/// What a rank that did not write the index says: which ranks it found
/// unfinished. A marker left by another set is warned about: if its rank
/// has already finished this set, no rank will write the index.
fn pending_line(pending: &[stowage::checkpoint::sharded::PendingRank]) -> String {
    for p in pending {
        if let Some(marker) = &p.foreign_marker {
            log::warn!(
                "{} is another set's marker (an earlier conversion into this folder, or one running now); if rank {} of this conversion is done, no rank will write the index: give each conversion its own folder",
                marker.display(),
                p.rank
            );
        }
    }
    let ranks: Vec<String> = pending.iter().map(|p| p.rank.to_string()).collect();
    format!(
        "the index is left to the last rank to finish (rank{} {} not done yet)",
        if ranks.len() == 1 { "" } else { "s" },
        ranks.join(", ")
    )
}

/// This process's part of a set written by several (`--rank`/`--world`, or
/// torchrun's `RANK` and `WORLD_SIZE` when both flags are absent), if any.
fn part_of(o: &ConvertOptions) -> Result<Option<(usize, usize)>, CommandError> {
    let (rank, world) = match o.part {
        Some((r, w)) => (r, w),
        _ => {
            let var = |name: &str| std::env::var(name).ok();
            match (var("RANK"), var("WORLD_SIZE")) {
                (Some(r), Some(w)) => {
                    let parse = |name: &str, v: &str| {
                        v.trim().parse::<usize>().map_err(|_| {
                            CommandError::usage(format!("convert: {name}={v:?} is not a number"))
                        })
                    };
                    (parse("RANK", &r)?, parse("WORLD_SIZE", &w)?)
                }
                _ => return Ok(None),
            }
        }
    };
    if world == 0 || rank >= world {
        return Err(CommandError::usage(format!(
            "convert: rank {rank} of a world of {world}: the rank must be below the world size"
        )));
    }
    Ok(Some((rank, world)))
}

/// Writes a sharded set or a DCP folder at `dir`.
fn to_folder(
    src: &Path,
    o: &ConvertOptions,
    cx: &Context,
    ckpt: &Checkpoint,
    dir: &Path,
    format: FolderFormat,
    digests: Option<&WrittenDigests>,
) -> Result<Conversion, CommandError> {
    let _bar = cx.progress().spinner(format!("writing {}", dir.display()));
    let line = match format {
        FolderFormat::Dcp => to_dcp(o, ckpt, dir, digests)?,
        // Safetensors or Bin: `folder_format` gives no other.
        _ => to_set(src, o, ckpt, dir, format, digests)?,
    };
    Ok(Conversion {
        lines: line.lines().map(str::to_owned).collect(),
        manifest: None,
    })
}

/// An error writing the folder `dir`, named once.
fn in_dir(dir: &Path, e: stowage::Error) -> CommandError {
    match e {
        e @ stowage::Error::InFile { .. } => CommandError::from(e),
        e => CommandError::from(e.in_file(dir.to_owned())),
    }
}

/// Writes a DCP folder at `dir`: what was written, as lines.
fn to_dcp(
    o: &ConvertOptions,
    ckpt: &Checkpoint,
    dir: &Path,
    digests: Option<&WrittenDigests>,
) -> Result<String, CommandError> {
    use stowage::checkpoint::dcp::{self, DcpSaveOptions};
    let part = part_of(o)?;
    let ranks = match (o.ranks, part) {
        (Some(0), _) => return Err(CommandError::usage("convert: --ranks must be at least 1")),
        (Some(n), Some((_, world))) if n != world => {
            return Err(CommandError::usage(format!(
                "convert: --ranks {n} with a world of {world}: each process writes its rank's file, so the DCP has as many as the world"
            )));
        }
        (_, Some((_, world))) => world,
        (n, None) => n.unwrap_or(1),
    };
    let mut options = DcpSaveOptions::default()
        .with_ranks(ranks)
        .with_sync(o.sync);
    if let Some(d) = digests {
        options = options.with_digests(d.clone());
    }
    let Some((rank, world)) = part else {
        dcp::save(dir, ckpt, &options).map_err(|e| in_dir(dir, e))?;
        return Ok(format!(
            "wrote a distributed checkpoint of {ranks} ranks' files to {}",
            dir.display()
        ));
    };
    let pending = dcp::save_part(dir, ckpt, &options, rank).map_err(|e| in_dir(dir, e))?;
    let mut line = format!(
        "wrote rank {rank}'s file of a distributed checkpoint as rank {rank} of {world} to {}",
        dir.display()
    );
    line.push('\n');
    if pending.is_empty() {
        line.push_str(&format!(
            "wrote the index {} (the last rank to finish)",
            dir.join(".metadata").display()
        ));
    } else {
        line.push_str(&pending_line(&pending));
    }
    Ok(line)
}

/// Writes a sharded set of `format` at `dir`: what was written, as lines.
fn to_set(
    src: &Path,
    o: &ConvertOptions,
    ckpt: &Checkpoint,
    dir: &Path,
    format: FolderFormat,
    digests: Option<&WrittenDigests>,
) -> Result<String, CommandError> {
    use stowage::checkpoint::sharded::{parse_size, save_sharded, ShardFormat, ShardOptions};
    let max_shard_size = parse_size(&o.max_shard_size)
        .map_err(|e| CommandError::usage(format!("convert: --max-shard-size: {e}")))?;
    // A set holds a state dict: its values go into the index's
    // metadata, as a single file keeps them in `__metadata__`.
    let (metadata, note) = store_values(ckpt, src, o.drop_values, true)?;
    // Without the values, nothing of the structure but the tensors'
    // names is written (the library keeps a nested checkpoint's
    // structure and values in the set).
    let mut with_values = if o.drop_values {
        ckpt.tensors_only().map_err(CommandError::input)?
    } else {
        ckpt.clone()
    };
    with_values.set_safetensors_metadata((!metadata.is_empty()).then_some(metadata));
    let mut options = ShardOptions::default()
        .with_format(match format {
            FolderFormat::Bin => ShardFormat::Bin,
            _ => ShardFormat::Safetensors,
        })
        .with_max_shard_size(max_shard_size)
        .with_sync(o.sync);
    let part = part_of(o)?;
    if let Some((rank, world)) = part {
        options = options.with_part(rank, world);
    }
    if let Some(d) = digests {
        options = options.with_digests(d.clone());
    }
    let saved = save_sharded(dir, &with_values, &options).map_err(|e| in_dir(dir, e))?;
    let of = part.map_or(String::new(), |(rank, world)| {
        format!(" as rank {rank} of {world}")
    });
    let mut line = format!(
        "wrote {} shard{} ({} of tensor data){of} to {}",
        saved.files.len(),
        if saved.files.len() == 1 { "" } else { "s" },
        human(saved.total_size),
        dir.display()
    );
    if let (Some(_), Some(index)) = (part, &saved.index) {
        line.push_str(&format!(
            "\nwrote the index {} (the last rank to finish)",
            index.display()
        ));
    }
    if !saved.pending.is_empty() {
        line.push('\n');
        line.push_str(&pending_line(&saved.pending));
    }
    if let Some(note) = &note {
        line.push('\n');
        line.push_str(note);
    }
    Ok(line)
}
