//! What a checkpoint folder holds, found once for every store: a
//! distributed checkpoint, the ranks' files of DCP's Hugging Face layout, a
//! sharded set, or a set saved as one file. A folder is a [`Location`]: a
//! local directory or a prefix in an object store, read through the same
//! `exists` and `list`.

use crate::error::ErrorContext;

use crate::checkpoint::format::dcp;
use crate::checkpoint::format::sharded::ShardFormat;
use crate::io::Location;
use crate::{Error, Result};

/// The checkpoint a folder holds, as [`resolve`](crate::checkpoint::resolve) finds it
/// ([`Source::folder`](crate::checkpoint::Source::folder)). The variants
/// are in the order they are looked for: a folder holding a `.metadata` is
/// a distributed checkpoint whatever else it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Folder {
    /// A PyTorch Distributed Checkpoint: the folder, which holds `.metadata`.
    Dcp(Location),
    /// DCP's Hugging Face layout (no `.metadata`): the ranks'
    /// `shard-0000R-model-0000X-of-0000Y.safetensors` files, sorted.
    Ranks(Vec<Location>),
    /// A Hugging Face sharded set: its `*.index.json`.
    Sharded(Location),
    /// A set saved as one file: `model.safetensors` (before
    /// `pytorch_model.bin`).
    Single(Location),
}

impl Folder {
    /// The checkpoint files the folder holds that a check reads one by one:
    /// the ranks' files, or the single file. A sharded set's shards are named
    /// by its index ([`crate::checkpoint::format::sharded::ShardIndex::files`]); a distributed
    /// checkpoint's data files by its metadata.
    pub fn files(&self) -> &[Location] {
        match self {
            Folder::Ranks(files) => files,
            Folder::Single(file) => std::slice::from_ref(file),
            Folder::Dcp(_) | Folder::Sharded(_) => &[],
        }
    }
}

/// The checkpoint folder `here` names, if it names one: a folder (a local
/// directory, or with the `remote` feature a URL ending in `/`), or an
/// `*.index.json`. `None` for anything else, which is read as a file.
///
/// A folder is looked into the same way wherever it is: a probe for
/// `.metadata`, then one listing; where the store cannot list (a plain
/// `http(s)://` server) or refuses to, probes for the index and single-file
/// names stand in (the ranks' layout then cannot be found).
///
/// # Errors
/// [`Error::InFile`] naming the folder, around a not-found error when it
/// holds no checkpoint, or the store's error.
///
/// The folder is opened once, and the locations found are read relative to
/// that handle ([`Location::anchored`]): a load reads one version of the
/// folder even while a save replaces it.
pub(crate) fn folder_at(here: &Location) -> Result<Option<Folder>> {
    let here = &here.anchored();
    if !here.is_folder() {
        let index = here.file_name().is_some_and(|n| n.ends_with(".index.json"));
        return Ok(index.then(|| Folder::Sharded(here.clone())));
    }
    let at = |name: &str| here.join(name);
    if here.join(dcp::METADATA_FILE).exists()? {
        return Ok(Some(Folder::Dcp(here.clone())));
    }
    let formats = [ShardFormat::Safetensors, ShardFormat::Bin];
    let listed = here.list();
    if let Ok(names) = &listed {
        let ranks: Vec<Location> = names
            .iter()
            .filter(|n| dcp::hf::is_rank_file(n))
            .map(|n| at(n))
            .collect();
        if !ranks.is_empty() {
            return Ok(Some(Folder::Ranks(ranks)));
        }
        let named = |name: String| names.contains(&name).then(|| at(&name));
        let index = formats
            .iter()
            .find_map(|f| named(f.index_name()))
            .or_else(|| {
                // Else the folder's only index.
                let mut indexes = names.iter().filter(|n| n.ends_with(".index.json"));
                match (indexes.next(), indexes.next()) {
                    (Some(only), None) => Some(at(only)),
                    _ => None,
                }
            });
        if let Some(index) = index {
            return Ok(Some(Folder::Sharded(index)));
        }
        if let Some(file) = formats.iter().find_map(|f| named(f.file_name(""))) {
            return Ok(Some(Folder::Single(file)));
        }
    } else {
        for format in formats {
            if here.join(&format.index_name()).exists()? {
                return Ok(Some(Folder::Sharded(at(&format.index_name()))));
            }
        }
        for format in formats {
            if here.join(&format.file_name("")).exists()? {
                return Ok(Some(Folder::Single(at(&format.file_name("")))));
            }
        }
    }
    let why = match listed {
        Ok(_) => "a folder that holds no checkpoint (no .metadata, *.index.json, \
                  model.safetensors, pytorch_model.bin or rank files)"
            .to_owned(),
        Err(e) => format!(
            "no .metadata, *.index.json, model.safetensors or pytorch_model.bin, and the folder \
             could not be listed for rank files: {}",
            match &e {
                Error::InFile { source, .. } => source.to_string(),
                e => e.to_string(),
            }
        ),
    };
    Err(Error::Io(std::io::Error::new(std::io::ErrorKind::NotFound, why)).in_file(here.path()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::format::sharded::{self, ShardFormat, ShardOptions};
    use crate::checkpoint::options::LoadOptions;
    use crate::checkpoint::Checkpoint;
    use crate::{CheckpointError, Tensor};

    /// A state dict of four tensors, every element `value`.
    fn state(value: f32) -> Checkpoint {
        Checkpoint::from_state_dict(
            ["a", "b", "c", "d"].map(|n| (n, Tensor::from_vec(vec![value; 64], &[64]).unwrap())),
        )
    }

    fn values(ckpt: &Checkpoint) -> Vec<f32> {
        ckpt.state_dict()
            .unwrap()
            .iter()
            .flat_map(|(_, t)| t.to_vec::<f32>().unwrap())
            .collect()
    }

    /// `.bin` shards of two of [`state`]'s tensors each: 2 shards, named
    /// alike whatever the values.
    fn two_tensors_a_shard() -> ShardOptions {
        ShardOptions::default()
            .with_format(ShardFormat::Bin)
            .with_max_shard_size(512)
    }

    /// issue 27, item 1, in the forced window: the index read, then the set
    /// replaced by a save, then the shards opened. The load gives the old
    /// set whole or a clear error, never shards of both versions (8 old
    /// tensors and 42 new, as the campaign saw).
    #[test]
    fn a_set_replaced_between_its_index_and_its_shards_is_never_mixed() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("model");
        // Two tensors a shard: 2 shards, named alike in both versions, so a
        // load that opened them by name would read the new ones under the
        // old index.
        let small = two_tensors_a_shard();
        sharded::save_sharded(&dir, &state(1.0), &small).unwrap();
        let options = LoadOptions::default();
        let source = crate::checkpoint::resolve(&dir, &options).unwrap();
        let Some(Folder::Sharded(index)) = source.folder() else {
            panic!("a sharded set");
        };
        let text = index
            .read_all(crate::Limit::IndexBytes, sharded::MAX_INDEX_BYTES)
            .unwrap();
        sharded::save_sharded(&dir, &state(2.0), &small).unwrap();
        let load_shard =
            |f: &Location| crate::checkpoint::Source::at(f).and_then(|s| s.load(&options));
        match sharded::load_indexed(index, &String::from_utf8_lossy(&text), load_shard) {
            Ok(ckpt) => assert_eq!(values(&ckpt), vec![1.0; 256]),
            Err(e) => assert!(
                matches!(e.root(), Error::Checkpoint(CheckpointError::FolderReplaced { folder }) if folder == &dir),
                "{e}"
            ),
        }
        assert_eq!(values(&crate::load(&dir).unwrap()), vec![2.0; 256]);
    }

    /// A set whose shards were opened before the save (a lazy load holds
    /// them) keeps reading its own version after the folder is replaced.
    #[test]
    fn shards_opened_before_a_replace_keep_their_version() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("model");
        let small = two_tensors_a_shard();
        sharded::save_sharded(&dir, &state(1.0), &small).unwrap();
        let lazy = LoadOptions::default().with_mode(crate::LoadMode::Lazy);
        let old = crate::load_with(&dir, &lazy).unwrap();
        sharded::save_sharded(&dir, &state(2.0), &small).unwrap();
        assert_eq!(values(&old), vec![1.0; 256]);
    }
}
