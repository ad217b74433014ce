//! Where a loaded checkpoint came from: the [`Layout`] it was read in and
//! the files read ([`Checkpoint::layout`](crate::Checkpoint::layout),
//! [`Checkpoint::files`](crate::Checkpoint::files)).

use crate::checkpoint::value::graph::Format;
use crate::io::Location;

/// The layout of a checkpoint: the container of a single file, or the
/// folder layout of a set; named as `inspect --json`'s `"format"` names it
/// ([`name`](Layout::name)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// A torch zip archive (`torch.save` since PyTorch 1.6).
    TorchZip,
    /// A TorchScript archive (`torch.jit.save`).
    TorchScript,
    /// The legacy single-stream format of `torch.save`.
    TorchLegacy,
    /// A safetensors file.
    Safetensors,
    /// A Hugging Face sharded set of safetensors files, by its index.
    ShardedSafetensors,
    /// A Hugging Face sharded set of torch zip (`.bin`) files, by its index.
    ShardedBin,
    /// A PyTorch Distributed Checkpoint: a folder holding `.metadata`.
    Dcp,
    /// DCP's Hugging Face layout: the ranks' safetensors files.
    DcpHf,
}

impl Layout {
    /// A single file of the container `format`.
    pub fn file(format: Format) -> Layout {
        match format {
            Format::TorchZip => Layout::TorchZip,
            Format::TorchScript => Layout::TorchScript,
            Format::TorchLegacy => Layout::TorchLegacy,
            Format::Safetensors => Layout::Safetensors,
        }
    }

    /// A sharded set whose shards are of the container `format`.
    pub fn sharded(format: Format) -> Layout {
        match format {
            Format::Safetensors => Layout::ShardedSafetensors,
            _ => Layout::ShardedBin,
        }
    }

    /// The name the CLI contract gives it (`inspect --json`'s `"format"`):
    /// `torch-zip`, `torchscript`, `torch-legacy`, `safetensors`,
    /// `sharded-safetensors`, `sharded-bin`, `dcp` or `dcp-hf`.
    pub fn name(self) -> &'static str {
        match self {
            Layout::TorchZip => Format::TorchZip.name(),
            Layout::TorchScript => Format::TorchScript.name(),
            Layout::TorchLegacy => Format::TorchLegacy.name(),
            Layout::Safetensors => Format::Safetensors.name(),
            Layout::ShardedSafetensors => "sharded-safetensors",
            Layout::ShardedBin => "sharded-bin",
            Layout::Dcp => "dcp",
            Layout::DcpHf => "dcp-hf",
        }
    }

    /// Whether the checkpoint is a set of files (a sharded set or a
    /// distributed checkpoint) rather than one file.
    pub fn is_set(self) -> bool {
        matches!(
            self,
            Layout::ShardedSafetensors | Layout::ShardedBin | Layout::Dcp | Layout::DcpHf
        )
    }
}

/// Where a loaded checkpoint came from: its layout and the files read.
#[derive(Clone, Debug)]
pub(crate) struct Origin {
    pub(crate) layout: Layout,
    pub(crate) files: Vec<Location>,
}
