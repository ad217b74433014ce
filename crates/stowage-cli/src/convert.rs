//! `stowage convert IN OUT`: rewrite a checkpoint in the format OUT's
//! extension names (`.pt`, `.pth`, `.bin`, `.ckpt`, `.tar`, `.pkl`: torch zip;
//! `.safetensors`; the library's one rule, `Destination::resolve`),
//! or as a folder: a Hugging Face sharded set (`--to safetensors|bin`, or an
//! OUT named `model.safetensors.index.json`/`pytorch_model.bin.index.json`;
//! `--max-shard-size`) or a distributed checkpoint (`--to dcp`, `--ranks`).
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

use stowage::{CheckpointError, ErrorContext};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use stowage::checkpoint::{dotted, save_to, Destination, PathKey, Progress, SaveFormat, ValueKind};
use stowage::Checkpoint;

use crate::values::typed_json;
use crate::listing::human;
use crate::{progress, Context, Failure};

/// Arguments of `convert`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(help = concat!("The checkpoint to read: ", inputs!()))]
    input: PathBuf,
    /// Where to write it: .pt/.pth/.bin/.ckpt/.tar/.pkl (torch zip) or .safetensors
    output: PathBuf,
    /// To .safetensors: leave the non-tensor values out (by default they are
    /// stored in `__metadata__`, as JSON under their dotted paths); to a
    /// sharded set, which holds only tensors, drop them instead of refusing
    #[arg(long)]
    drop_values: bool,
    /// Write OUT as a folder: a sharded set of safetensors or .bin files, or a
    /// distributed checkpoint (DCP)
    #[arg(long, value_enum)]
    to: Option<FolderFormat>,
    /// Largest shard of a sharded set, in Hugging Face's notation (5GB, 500MB, 2GiB)
    #[arg(long, default_value = "5GB")]
    max_shard_size: String,
    /// Ranks' files of a DCP folder (each tensor split over them along its
    /// first dimension); 1 by default, or --world's
    #[arg(long)]
    ranks: Option<usize>,
    /// With --to safetensors|bin|dcp: write only this process's part of the
    /// output, as rank RANK of --world processes converting the same IN into
    /// the same OUT at once (torchrun's RANK and WORLD_SIZE when both are
    /// absent); the last to finish writes the index or DCP's .metadata
    /// (docs/distributed.md)
    #[arg(long, requires = "world")]
    rank: Option<usize>,
    /// The number of processes of --rank
    #[arg(long, requires = "rank")]
    world: Option<usize>,
    /// Skip the final sync of the written files and folder to the disk (as
    /// `torch.save` does); by default OUT is durable when convert returns
    #[arg(long)]
    no_sync: bool,
    /// To a torch checkpoint: drop what torch.load(weights_only=True) refuses
    /// (inert objects, with all they hold, numpy values, datetime …) instead
    /// of refusing the conversion: a dict entry holding one is removed, a
    /// list item or the root becomes None
    #[arg(long)]
    drop_objects: bool,
    /// Write what `model.state_dict()` gives for an nn.Module saved whole
    /// (`torch.save(model)`): its parameters and persistent buffers, named as
    /// PyTorch names them (`fc1.weight`). Reads IN inertly (nothing is
    /// imported or run)
    #[arg(long)]
    state_dict: bool,
    /// Keep only the value at this dotted path (`model`, `state_dict`), its
    /// paths relative to it: a training checkpoint's weights
    #[arg(long, value_name = "PATH")]
    select: Option<String>,
}

/// A folder OUT's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum FolderFormat {
    /// A Hugging Face set of safetensors shards.
    Safetensors,
    /// A Hugging Face set of pytorch_model .bin shards (torch zip).
    Bin,
    /// A PyTorch Distributed Checkpoint folder.
    Dcp,
}

impl From<FolderFormat> for stowage::checkpoint::FolderFormat {
    fn from(f: FolderFormat) -> Self {
        match f {
            FolderFormat::Safetensors => Self::Safetensors,
            FolderFormat::Bin => Self::Bin,
            FolderFormat::Dcp => Self::Dcp,
        }
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
) -> Result<(BTreeMap<String, String>, Option<String>), Failure> {
    let place = if for_set {
        "the set's metadata (the index's, or the one shard's __metadata__)"
    } else {
        "__metadata__"
    };
    let leaves = crate::values::leaves(ckpt, input)?;
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
            return Err(Failure::usage(format!(
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
) -> Result<(Checkpoint, Vec<String>), Failure> {
    let mut notes = Vec::new();
    let (metadata, note) = store_values(ckpt, input, drop_values, false)?;
    notes.extend(note);
    let mut groups: HashMap<usize, Vec<String>> = HashMap::new();
    let mut order = Vec::new();
    for (path, t) in ckpt.tensors().map_err(Failure::input)? {
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
        .map_err(Failure::input)?
        .iter()
        .filter(|(_, t)| !t.kind.is_strided())
        .map(|(path, t)| format!("{} ({})", dotted(path), t.kind.layout_name()))
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
        ckpt.tensors_only().map_err(Failure::input)?
    } else {
        ckpt.clone()
    };
    ckpt.set_safetensors_metadata((!metadata.is_empty()).then_some(metadata));
    Ok((ckpt, notes))
}

/// Runs `convert`.
pub fn run(args: Args, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    // The library's one rule from OUT and `--to` to what is written, as
    // Python's `stowage.save` resolves its destination: a file's own name
    // wins over `--to` of its format (`--to safetensors r.safetensors` is
    // that file, not a folder of that name).
    let dest = Destination::resolve(&args.output, args.to.map(Into::into)).map_err(Failure::input)?;
    let format = dest.format();
    let folder = matches!(format, SaveFormat::Sharded(_) | SaveFormat::Dcp);
    if args.rank.is_some() && !folder {
        return Err(Failure::usage(
            "convert: --rank/--world write a part of a folder: give --to safetensors, bin or dcp and a folder",
        ));
    }
    let in_input = |e: stowage::Error| {
        Failure::input(e.in_file(args.input.clone()))
    };
    // `--select` first, so that what is left out is neither converted nor
    // refused; `--state-dict` reads the module at the selected path.
    let mut ckpt = if args.state_dict {
        let whole = cx.load_inert(&args.input)?;
        let module = match &args.select {
            Some(path) => whole.get(path).map_err(in_input)?,
            None => whole.root_value(),
        };
        Checkpoint::from_state_dict(module.module_state_dict().map_err(in_input)?)
    } else {
        let ckpt = cx.load(&args.input, false)?;
        match &args.select {
            Some(path) => ckpt.select(path).map_err(in_input)?,
            None => ckpt,
        }
    };
    if format == SaveFormat::TorchZip {
        if args.drop_objects {
            let n = ckpt.drop_objects();
            if n > 0 {
                log::warn!("{}: dropped {n} values torch.load(weights_only=True) refuses (--drop-objects)", args.input.display());
            }
        } else if let Some((path, class)) = ckpt.unsaveable().map_err(Failure::input)?.into_iter().next() {
            return Err(in_input(stowage::Error::Checkpoint(CheckpointError::NotSaveable { path, class })));
        }
    }
    // A conversion that would write nothing is an error, never an empty file.
    // Nothing: no tensor, and a root that is None or an empty container (a
    // dict of empty dicts is still a structure `torch.load` gives back).
    let root = ckpt.root_value();
    let holds_nothing = ckpt.tensors().map_err(Failure::input)?.is_empty()
        && (root.kind() == ValueKind::None || root.is_empty().unwrap_or(false));
    if holds_nothing {
        return Err(Failure::msg(format!(
            "convert: {} would write nothing: no tensors and no values are left (the root is empty){}",
            args.input.display(),
            if args.drop_objects {
                " after --drop-objects (for an nn.Module saved whole, --state-dict gives its weights)"
            } else {
                ""
            }
        )));
    }
    if let Some(to) = folder_format(format) {
        return to_folder(&args, &ckpt, dest.path(), to, out);
    }
    let total: u64 = match format {
        SaveFormat::Safetensors => ckpt
            .tensors()
            .map_err(Failure::input)?
            .iter()
            .map(|(_, t)| t.tensor.nbytes() as u64)
            .sum(),
        _ => ckpt.storages().iter().map(|s| s.storage.nbytes() as u64).sum(),
    };
    let bar = progress::bytes(total, format!("writing {}", args.output.display()));
    let tick = bar.clone();
    let options = cx.save_options().with_progress(Progress::new(move |n| tick.inc(n))).with_sync(!args.no_sync);
    let mut notes = Vec::new();
    let written = match format {
        SaveFormat::Safetensors => {
            let (ckpt, said) = for_safetensors(&ckpt, &args.input, args.drop_values)?;
            notes = said;
            save_to(&ckpt, &dest, &options)
        }
        _ => save_to(&ckpt, &dest, &options),
    };
    bar.finish_and_clear();
    written.map_err(|e| match e {
        // An input the target format cannot hold is refused input (exit 2).
        e @ (stowage::Error::AtPath { .. } | stowage::Error::Checkpoint(CheckpointError::NotSaveable { .. })) => Failure::input(e),
        // So is an input that could not be read while writing (a lazily
        // loaded storage whose file or server failed): exit 2.
        stowage::Error::InFile { ref source, .. }
            if matches!(&**source, stowage::Error::InFile { path, .. } if *path == args.input) =>
        {
            Failure::input(e)
        }
        // The library names the file it was writing; naming it again would repeat it.
        e @ stowage::Error::InFile { .. } => Failure::from(e),
        e => Failure::from(e.in_file(args.output.clone())),
    })?;
    for note in notes {
        writeln!(out, "{note}")?;
    }
    Ok(ExitCode::SUCCESS)
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
fn part_of(args: &Args) -> Result<Option<(usize, usize)>, Failure> {
    let (rank, world) = match (args.rank, args.world) {
        (Some(r), Some(w)) => (r, w),
        _ => {
            let var = |name: &str| std::env::var(name).ok();
            match (var("RANK"), var("WORLD_SIZE")) {
                (Some(r), Some(w)) => {
                    let parse = |name: &str, v: &str| {
                        v.trim().parse::<usize>().map_err(|_| {
                            Failure::usage(format!("convert: {name}={v:?} is not a number"))
                        })
                    };
                    (parse("RANK", &r)?, parse("WORLD_SIZE", &w)?)
                }
                _ => return Ok(None),
            }
        }
    };
    if world == 0 || rank >= world {
        return Err(Failure::usage(format!(
            "convert: rank {rank} of a world of {world}: the rank must be below the world size"
        )));
    }
    Ok(Some((rank, world)))
}

/// Writes a sharded set or a DCP folder at `dir`.
fn to_folder(
    args: &Args,
    ckpt: &Checkpoint,
    dir: &Path,
    format: FolderFormat,
    out: &mut dyn Write,
) -> Result<ExitCode, Failure> {
    use stowage::checkpoint::dcp::{self, DcpSaveOptions};
    use stowage::checkpoint::sharded::{parse_size, save_sharded, ShardFormat, ShardOptions};
    let in_dir = |e: stowage::Error| match e {
        e @ stowage::Error::InFile { .. } => Failure::from(e),
        e => Failure::from(e.in_file(dir.to_owned())),
    };
    let bar = progress::spinner(format!("writing {}", dir.display()));
    let written = match format {
        FolderFormat::Dcp => {
            let part = part_of(args).inspect_err(|_| bar.finish_and_clear())?;
            let ranks = match (args.ranks, part) {
                (Some(0), _) => {
                    bar.finish_and_clear();
                    return Err(Failure::usage("convert: --ranks must be at least 1"));
                }
                (Some(n), Some((_, world))) if n != world => {
                    bar.finish_and_clear();
                    return Err(Failure::usage(format!(
                        "convert: --ranks {n} with a world of {world}: each process writes its rank's file, so the DCP has as many as the world"
                    )));
                }
                (_, Some((_, world))) => world,
                (n, None) => n.unwrap_or(1),
            };
            let options = DcpSaveOptions::default()
                .with_ranks(ranks)
                .with_sync(!args.no_sync);
            match part {
                None => dcp::save(dir, ckpt, &options).map(|()| {
                    format!(
                        "wrote a distributed checkpoint of {ranks} ranks' files to {}",
                        dir.display()
                    )
                }),
                Some((rank, world)) => dcp::save_part(dir, ckpt, &options, rank).map(|pending| {
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
                    line
                }),
            }
        }
        FolderFormat::Safetensors | FolderFormat::Bin => {
            let max_shard_size = parse_size(&args.max_shard_size).map_err(|e| {
                bar.finish_and_clear();
                Failure::usage(format!("convert: --max-shard-size: {e}"))
            })?;
            // A set holds a state dict: its values go into the index's
            // metadata, as a single file keeps them in `__metadata__`.
            let (metadata, note) = store_values(ckpt, &args.input, args.drop_values, true)
                .inspect_err(|_| bar.finish_and_clear())?;
            // Without the values, nothing of the structure but the tensors'
            // names is written (the library keeps a nested checkpoint's
            // structure and values in the set).
            let mut with_values = if args.drop_values {
                ckpt.tensors_only().map_err(Failure::input)?
            } else {
                ckpt.clone()
            };
            with_values.set_safetensors_metadata((!metadata.is_empty()).then_some(metadata));
            let ckpt = &with_values;
            let mut options = ShardOptions::default()
                .with_format(match format {
                    FolderFormat::Bin => ShardFormat::Bin,
                    _ => ShardFormat::Safetensors,
                })
                .with_max_shard_size(max_shard_size)
                .with_sync(!args.no_sync);
            let part = part_of(args).inspect_err(|_| bar.finish_and_clear())?;
            if let Some((rank, world)) = part {
                options = options.with_part(rank, world);
            }
            save_sharded(dir, ckpt, &options).map(|saved| {
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
                    line.push_str(&format!("\nwrote the index {} (the last rank to finish)", index.display()));
                }
                if !saved.pending.is_empty() {
                    line.push('\n');
                    line.push_str(&pending_line(&saved.pending));
                }
                if let Some(note) = &note {
                    line.push('\n');
                    line.push_str(note);
                }
                line
            })
        }
    };
    bar.finish_and_clear();
    let line = written.map_err(in_dir)?;
    writeln!(out, "{line}")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_folder_format_maps_to_the_librarys() {
        for f in [FolderFormat::Safetensors, FolderFormat::Bin, FolderFormat::Dcp] {
            let ours = format!("{f:?}");
            let theirs = format!("{:?}", stowage::checkpoint::FolderFormat::from(f));
            assert_eq!(ours, theirs);
        }
    }
}
