//! Where a save goes, and in what format: the one rule from a destination's
//! name (and a folder format, when one is given) to what is written, and
//! the one save that follows it. The command line's `convert` and the
//! Python package's `save` both resolve their destination here, so they
//! accept and refuse the same names with the same error.

use std::path::{Path, PathBuf};

use crate::checkpoint::format::sharded::ShardFormat;
use crate::checkpoint::format::{dcp, sharded};
use crate::error::CheckpointError;
use crate::{Checkpoint, Error, Result, SaveOptions};

/// The folder layouts a save writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FolderFormat {
    /// A Hugging Face sharded set of safetensors files.
    Safetensors,
    /// A Hugging Face sharded set of `pytorch_model` `.bin` files (torch zip).
    Bin,
    /// A PyTorch Distributed Checkpoint.
    Dcp,
}

impl std::str::FromStr for FolderFormat {
    type Err = Error;

    /// `safetensors`, `bin` or `dcp`.
    fn from_str(s: &str) -> Result<FolderFormat> {
        match s {
            "safetensors" => Ok(FolderFormat::Safetensors),
            "bin" => Ok(FolderFormat::Bin),
            "dcp" => Ok(FolderFormat::Dcp),
            other => Err(Error::Format(crate::error::FormatError::BadObject {
                context: "folder format",
                expected: "safetensors or bin (a sharded set) or dcp",
                found: format!("{other:?}"),
            })),
        }
    }
}

/// What a save writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SaveFormat {
    /// `torch.save`'s zip format, one file.
    TorchZip,
    /// One safetensors file.
    Safetensors,
    /// A Hugging Face sharded set, in a folder.
    Sharded(ShardFormat),
    /// A PyTorch Distributed Checkpoint folder.
    Dcp,
}

/// A destination resolved: the file or folder to write, and its format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    path: PathBuf,
    format: SaveFormat,
}

/// The names of a file written as a torch zip: `torch.save`'s usual ones,
/// `checkpoint.pth.tar` (PyTorch's ImageNet example) and `.pkl` among them.
const TORCH_ZIP: [&str; 6] = ["pt", "pth", "bin", "ckpt", "tar", "pkl"];

impl Destination {
    /// The one rule. Without `folder`, the name tells the format:
    /// `model.safetensors.index.json` and `pytorch_model.bin.index.json`, a
    /// sharded set in their folder; `.safetensors`, one safetensors file;
    /// `.pt`, `.pth`, `.bin`, `.ckpt`, `.tar` and `.pkl`, a torch zip; any
    /// other name is refused ([`CheckpointError::UnknownSaveFormat`]). With
    /// `folder`, `path` is that folder, except a file named for the same
    /// format (`r.safetensors` with [`FolderFormat::Safetensors`], `x.bin`
    /// with [`FolderFormat::Bin`]), which stays that file.
    ///
    /// # Errors
    /// [`CheckpointError::UnknownSaveFormat`].
    pub fn resolve(path: impl AsRef<Path>, folder: Option<FolderFormat>) -> Result<Destination> {
        let path = path.as_ref();
        let named = Self::by_name(path);
        let format = match (folder, named) {
            (Some(FolderFormat::Safetensors), Some(f @ SaveFormat::Safetensors))
            | (Some(FolderFormat::Bin), Some(f @ SaveFormat::TorchZip)) => f,
            (Some(FolderFormat::Safetensors), _) => SaveFormat::Sharded(ShardFormat::Safetensors),
            (Some(FolderFormat::Bin), _) => SaveFormat::Sharded(ShardFormat::Bin),
            (Some(FolderFormat::Dcp), _) => SaveFormat::Dcp,
            (None, Some(f)) => f,
            (None, None) => {
                return Err(Error::Checkpoint(CheckpointError::UnknownSaveFormat {
                    path: path.to_owned(),
                }))
            }
        };
        // An index's name stands for the set in its folder.
        let index = folder.is_none() && matches!(format, SaveFormat::Sharded(_));
        let path = if index {
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_owned()
        } else {
            path.to_owned()
        };
        Ok(Destination { path, format })
    }

    /// The format a name alone tells, if any.
    fn by_name(path: &Path) -> Option<SaveFormat> {
        let name = path.file_name()?.to_str()?;
        for format in [ShardFormat::Safetensors, ShardFormat::Bin] {
            if name == format.index_name() {
                return Some(SaveFormat::Sharded(format));
            }
        }
        match path.extension()?.to_str()? {
            "safetensors" => Some(SaveFormat::Safetensors),
            ext if TORCH_ZIP.contains(&ext) => Some(SaveFormat::TorchZip),
            _ => None,
        }
    }

    /// The file, or for a sharded set or a DCP the folder, to write.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What is written there.
    pub fn format(&self) -> SaveFormat {
        self.format
    }
}

/// Saves `ckpt` to `dest` with `options`: a torch zip or a safetensors file
/// written crash-safely (a temporary renamed over the old file), or a sharded
/// set (shards of at most [`SaveOptions::with_max_shard_size`], 5 GB by
/// default) or a DCP of one rank's file, each folder's set replaced whole.
///
/// # Errors
/// What the format's own save gives; [`CheckpointError::FeatureDisabled`]
/// for safetensors in a build without that feature.
pub fn save_to(ckpt: &Checkpoint, dest: &Destination, options: &SaveOptions) -> Result<()> {
    let path = dest.path();
    match dest.format {
        SaveFormat::TorchZip => crate::save_with(path, ckpt, options),
        #[cfg(feature = "safetensors")]
        SaveFormat::Safetensors => {
            crate::checkpoint::format::safetensors::save_with(path, ckpt, options)
        }
        #[cfg(not(feature = "safetensors"))]
        SaveFormat::Safetensors => Err(Error::Checkpoint(CheckpointError::FeatureDisabled {
            feature: "safetensors",
            what: "safetensors files",
        })),
        SaveFormat::Sharded(format) => {
            let shards = sharded::ShardOptions::default()
                .with_format(format)
                .with_max_shard_size(options.max_shard_size)
                .with_sync(options.sync);
            let shards = match &options.digests {
                Some(d) => shards.with_digests(d.clone()),
                None => shards,
            };
            sharded::save_sharded(path, ckpt, &shards).map(|_| ())
        }
        SaveFormat::Dcp => {
            let dcp = dcp::DcpSaveOptions::default()
                .with_sync(options.sync)
                .with_zstd(options.zstd);
            let dcp = match &options.digests {
                Some(d) => dcp.with_digests(d.clone()),
                None => dcp,
            };
            dcp::save(path, ckpt, &dcp)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(path: &str, folder: Option<FolderFormat>) -> (String, SaveFormat) {
        let d = Destination::resolve(path, folder).unwrap();
        (d.path().display().to_string(), d.format())
    }

    #[test]
    fn the_name_tells_the_format() {
        for name in [
            "a.pt",
            "a.pth",
            "a.bin",
            "a.ckpt",
            "checkpoint.pth.tar",
            "a.pkl",
        ] {
            assert_eq!(resolved(name, None), (name.into(), SaveFormat::TorchZip));
        }
        assert_eq!(
            resolved("d/a.safetensors", None),
            ("d/a.safetensors".into(), SaveFormat::Safetensors)
        );
        assert_eq!(
            resolved("d/model.safetensors.index.json", None),
            ("d".into(), SaveFormat::Sharded(ShardFormat::Safetensors))
        );
        assert_eq!(
            resolved("pytorch_model.bin.index.json", None),
            (".".into(), SaveFormat::Sharded(ShardFormat::Bin))
        );
        for name in ["a.weights", "a.safetensor", "a", "a.json"] {
            let e = Destination::resolve(name, None).unwrap_err();
            assert!(
                matches!(&e, Error::Checkpoint(CheckpointError::UnknownSaveFormat { path }) if path == Path::new(name)),
                "{name}: {e}"
            );
            assert!(e.to_string().contains(name), "{e}");
        }
    }

    #[test]
    fn a_folder_format_makes_a_folder_unless_the_file_is_of_it() {
        use FolderFormat::*;
        assert_eq!(
            resolved("out", Some(Safetensors)),
            ("out".into(), SaveFormat::Sharded(ShardFormat::Safetensors))
        );
        assert_eq!(
            resolved("r.safetensors", Some(Safetensors)),
            ("r.safetensors".into(), SaveFormat::Safetensors)
        );
        assert_eq!(
            resolved("x.bin", Some(Bin)),
            ("x.bin".into(), SaveFormat::TorchZip)
        );
        assert_eq!(
            resolved("x.pt", Some(Safetensors)),
            ("x.pt".into(), SaveFormat::Sharded(ShardFormat::Safetensors))
        );
        assert_eq!(
            resolved("any.name", Some(Dcp)),
            ("any.name".into(), SaveFormat::Dcp)
        );
        assert_eq!("dcp".parse::<FolderFormat>().unwrap(), Dcp);
        assert!("zip".parse::<FolderFormat>().is_err());
    }
}
