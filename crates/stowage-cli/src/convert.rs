//! `stowage convert IN OUT`: the arguments, then the library's
//! [`convert`](stowage_commands::convert::convert), and the lines it gives
//! printed (`docs/cli-contract.md`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use stowage_commands::convert::{convert, ConvertOptions};
use stowage_commands::Context;

use crate::Failure;

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
    /// Also write OUT's content manifest to FILE (as `stowage manifest OUT`
    /// prints it), each tensor hashed as its bytes are written, not read
    /// back (docs/manifest.md)
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
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

/// Runs `convert`.
pub fn run(args: Args, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let mut options = ConvertOptions::default()
        .with_to(args.to.map(Into::into))
        .with_max_shard_size(args.max_shard_size)
        .with_ranks(args.ranks)
        .with_sync(!args.no_sync)
        .with_drop_values(args.drop_values)
        .with_drop_objects(args.drop_objects)
        .with_state_dict(args.state_dict)
        .with_select(args.select)
        .with_manifest(args.manifest.is_some());
    if let (Some(rank), Some(world)) = (args.rank, args.world) {
        options = options.with_part(rank, world);
    }
    let conversion = convert(&args.input, &args.output, cx, &options)?;
    write!(out, "{conversion}")?;
    if let (Some(path), Some(m)) = (&args.manifest, conversion.manifest()) {
        stowage_commands::manifest::write_file(path, cx, |f| m.write_json(f))?;
    }
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
