//! [`manifest`]: what a checkpoint holds, by content, the same in every
//! form stowage reads (`docs/manifest.md`).
//!
//! One entry per tensor: its name (the dotted path, as a state dict and
//! safetensors name it), dtype, shape and the SHA-256 of its logical
//! elements (row-major, little-endian, whatever its strides, container or
//! byte order on disk; the `sha256` of `inspect --json`, computed by the
//! same code). A digest of the non-tensor values in a canonical JSON
//! encoding, and a root digest over the sorted tensor entries. A `.pt`, its
//! safetensors conversion, a sharded set and a DCP at any world size give
//! the same manifest; converting, resharding or re-saving changes none of it.
//!
//! ```no_run
//! use stowage_commands::{manifest, Context};
//!
//! let m = manifest::manifest("model.pt".as_ref(), &Context::default(), &Default::default())?;
//! println!("{} tensors, root {}", m.tensors().len(), m.root_sha256());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

use stowage::checkpoint::content::{self, WrittenDigest};
use stowage::checkpoint::{dotted, TensorObject};
use stowage::Checkpoint;

use crate::listing::rows;
use crate::{data, values, CommandError, Context};

/// The manifest format's name and version, its `"format"` member.
pub const FORMAT: &str = "stowage-manifest/1";

/// How [`manifest`] runs; nothing to set yet.
#[non_exhaustive]
#[derive(Clone, Debug, Default)]
pub struct ManifestOptions {}

/// One tensor of a [`Manifest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorEntry {
    /// PyTorch's dtype name (`float32`).
    pub dtype: String,
    /// The dotted path (`model.layers.0.weight`).
    pub name: String,
    /// The sizes.
    pub shape: Vec<usize>,
    /// Hex SHA-256 of the logical elements.
    pub sha256: String,
}

/// A checkpoint's manifest; serializes to the JSON `stowage manifest`
/// prints (members in alphabetical order).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Manifest {
    format: &'static str,
    root_sha256: String,
    tensors: Vec<TensorEntry>,
    values_sha256: String,
}

impl Manifest {
    /// The tensors, sorted by name (then digest, for equal names).
    pub fn tensors(&self) -> &[TensorEntry] {
        &self.tensors
    }

    /// The SHA-256 over the sorted tensor entries ([`root_of`]).
    pub fn root_sha256(&self) -> &str {
        &self.root_sha256
    }

    /// The SHA-256 of the non-tensor values' canonical encoding.
    pub fn values_sha256(&self) -> &str {
        &self.values_sha256
    }

    /// A manifest from its JSON text, as [`write_json`](Self::write_json)
    /// writes it.
    ///
    /// # Errors
    /// [`CommandError::Usage`]: not JSON, or not a manifest of this format.
    pub fn from_json(text: &str) -> Result<Manifest, CommandError> {
        #[derive(Deserialize)]
        struct Doc {
            format: String,
            root_sha256: String,
            tensors: Vec<TensorEntry>,
            values_sha256: String,
        }
        let doc: Doc = serde_json::from_str(text)
            .map_err(|e| CommandError::Usage(format!("not a manifest: {e}")))?;
        if doc.format != FORMAT {
            return Err(CommandError::Usage(format!(
                "a manifest of format {:?}, not {FORMAT:?}",
                doc.format
            )));
        }
        let hex64 = |h: &str| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit());
        if let Some(e) = doc.tensors.iter().find(|e| !hex64(&e.sha256)) {
            return Err(CommandError::Usage(format!(
                "not a manifest: tensor {:?} has sha256 {:?}, expected 64 hex digits",
                e.name, e.sha256
            )));
        }
        Ok(Manifest {
            format: FORMAT,
            root_sha256: doc.root_sha256,
            tensors: doc.tensors,
            values_sha256: doc.values_sha256,
        })
    }

    /// How `found` differs from this manifest, the one expected: each
    /// tensor changed (dtype, shape or digest), missing (listed here, not
    /// there) or extra (there, not listed here), in name order; and whether
    /// the values differ. Equal manifests give no difference.
    pub fn differences(&self, found: &Manifest) -> Vec<String> {
        let (want, got) = (by_name(&self.tensors), by_name(&found.tensors));
        let what = |e: &TensorEntry| format!("{} {:?} sha256 {}", e.dtype, e.shape, e.sha256);
        let mut out = Vec::new();
        for (name, w) in &want {
            match got.get(name) {
                None => out.push(format!(
                    "tensor {name:?}: missing (the manifest lists {})",
                    what(w[0])
                )),
                Some(g) if g != w => out.push(format!(
                    "tensor {name:?}: changed: {}, the manifest expects {}",
                    g.iter().map(|e| what(e)).collect::<Vec<_>>().join("; "),
                    w.iter().map(|e| what(e)).collect::<Vec<_>>().join("; ")
                )),
                Some(_) => {}
            }
        }
        for (name, g) in &got {
            if !want.contains_key(name) {
                out.push(format!(
                    "tensor {name:?}: extra, not in the manifest ({})",
                    what(g[0])
                ));
            }
        }
        if self.values_sha256 != found.values_sha256 {
            out.push("the non-tensor values differ from the manifest's".into());
        }
        out
    }

    /// The manifest as an in-toto statement in the layout of OpenSSF Model
    /// Signing (OMS) v1.0, for a DSSE signer to sign unchanged
    /// (`docs/manifest.md`): one resource per tensor (its name, `sha256`,
    /// its digest), the subject `name` with OMS's root digest (the SHA-256
    /// of the resources' digests, as bytes, in order), and the serialization
    /// method `stowage-tensors` with this manifest's own digests.
    pub fn to_oms_statement(&self, name: &str) -> Json {
        let mut root = Sha256::new();
        let mut resources = Vec::with_capacity(self.tensors.len());
        for e in &self.tensors {
            // Every digest is 64 hex digits: made here, or checked by `from_json`.
            let mut raw = [0u8; 32];
            let _ = hex::decode_to_slice(&e.sha256, &mut raw);
            root.update(raw);
            resources.push(
                serde_json::json!({"algorithm": "sha256", "digest": e.sha256, "name": e.name}),
            );
        }
        serde_json::json!({
            "_type": "https://in-toto.io/Statement/v1",
            "predicate": {
                "resources": resources,
                "serialization": {
                    "hash_type": "sha256",
                    "manifest_format": FORMAT,
                    "method": "stowage-tensors",
                    "root_sha256": self.root_sha256,
                    "tensors": self.tensors.iter().map(|e| serde_json::json!({"dtype": e.dtype, "name": e.name, "shape": e.shape})).collect::<Vec<_>>(),
                    "values_sha256": self.values_sha256,
                },
            },
            "predicateType": "https://model_signing/signature/v1.0",
            "subject": [{"digest": {"sha256": hex::encode(root.finalize())}, "name": name}],
        })
    }

    /// Writes the JSON object, and a newline.
    ///
    /// # Errors
    /// A failure to write.
    pub fn write_json(&self, out: &mut dyn Write) -> std::io::Result<()> {
        serde_json::to_writer(&mut *out, self)?;
        out.write_all(b"\n")
    }
}

/// `entries` by name (a name listed twice keeps both).
fn by_name(entries: &[TensorEntry]) -> std::collections::BTreeMap<&str, Vec<&TensorEntry>> {
    let mut map: std::collections::BTreeMap<&str, Vec<&TensorEntry>> = Default::default();
    for e in entries {
        map.entry(e.name.as_str()).or_default().push(e);
    }
    map
}

/// The root digest of `entries` (sorted by name): the SHA-256 of one line
/// per entry, `name TAB dtype TAB sizes joined by "," TAB sha256 LF`.
pub fn root_of(entries: &[TensorEntry]) -> String {
    use std::fmt::Write as _;
    let mut h = Sha256::new();
    // One line at a time, in a buffer reused (a `format!` each was a few
    // percent of a manifest of many small tensors).
    let mut line = String::new();
    for e in entries {
        line.clear();
        // Writing to a `String` cannot fail.
        let _ = write!(line, "{}\t{}\t", e.name, e.dtype);
        for (i, n) in e.shape.iter().enumerate() {
            let _ = write!(line, "{}{n}", if i == 0 { "" } else { "," });
        }
        let _ = writeln!(line, "\t{}", e.sha256);
        h.update(line.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The manifest of the checkpoint at `src` (a file, a folder or a URL):
/// read lazily, every tensor hashed on every core, each byte read once.
///
/// # Errors
/// [`CommandError::Input`]: `src` cannot be read or is refused; a tensor
/// cannot be read, or has no data (a meta tensor), naming its path.
pub fn manifest(
    src: &Path,
    cx: &Context,
    _options: &ManifestOptions,
) -> Result<Manifest, CommandError> {
    let ckpt = cx.load(src, false)?;
    Ok(build(&ckpt, src, cx, &BTreeMap::new())?.0)
}

/// The manifest of `ckpt` as it is, in memory: what [`manifest`] gives for
/// the file it would be saved as (`torch.save`, [`stowage::save`] or any
/// other form stowage writes), computed on every core from the storages
/// where they lie. `label` names it in progress and warnings.
///
/// Taken before an asynchronous save and compared with the manifest of
/// what was written ([`Manifest::differences`]), it tells a save that wrote
/// other bytes than those it was given from one that wrote them.
///
/// # Errors
/// [`CommandError::Input`]: a tensor cannot be read, or has no data (a
/// meta tensor), naming its path; the values' walk exceeds its limits.
pub fn of_checkpoint(
    ckpt: &Checkpoint,
    label: &str,
    cx: &Context,
) -> Result<Manifest, CommandError> {
    Ok(build(ckpt, Path::new(label), cx, &BTreeMap::new())?.0)
}

/// The manifest of the checkpoint just written at `out` (read lazily: its
/// structure, not its tensors' bytes), each tensor's digest taken from
/// `written` (what the save fed [`WrittenDigests`](stowage::checkpoint::content::WrittenDigests))
/// where it has the tensor's name and length; the others are hashed by
/// reading them from `out`. Gives how many tensors, and bytes, were.
///
/// # Errors
/// As [`manifest`], for `out`.
pub(crate) fn of_written(
    out: &Path,
    cx: &Context,
    written: &BTreeMap<String, WrittenDigest>,
) -> Result<(Manifest, Reread), CommandError> {
    let ckpt = cx.load(out, false)?;
    build(&ckpt, out, cx, written)
}

/// The tensors a manifest of a written checkpoint hashed by reading them
/// again ([`of_written`]): none when every byte was hashed as it was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reread {
    /// Their names, in the checkpoint's order.
    pub names: Vec<String>,
    /// Their bytes.
    pub bytes: u64,
}

/// The manifest of `ckpt` (read from `src`): each tensor's digest from
/// `known` by its dotted name where it has the tensor's length, else
/// hashed, on every core.
fn build(
    ckpt: &Checkpoint,
    src: &Path,
    cx: &Context,
    known: &BTreeMap<String, WrittenDigest>,
) -> Result<(Manifest, Reread), CommandError> {
    let rows = rows(ckpt)?;
    let rows: Vec<_> = rows.iter().filter(|r| !r.is_container()).collect();
    if let Some(r) = rows.iter().find(|r| !r.object.tensor.has_data()) {
        return Err(CommandError::at(
            &r.path,
            stowage::Error::Storage(stowage::StorageError::NoData {
                op: "a manifest's digest",
                device: r.object.tensor.device(),
            }),
        ));
    }
    let names: Vec<String> = rows.iter().map(|r| dotted(&r.path)).collect();
    let found: Vec<Option<[u8; 32]>> = rows
        .iter()
        .zip(&names)
        .map(|(r, name)| {
            let w = known.get(name)?;
            (w.len() == content::logical_len(&r.object.tensor) as u64).then(|| w.sha256())
        })
        .collect();
    let todo = |i: usize| found[i].is_none();
    let reread = Reread {
        names: (0..rows.len())
            .filter(|&i| todo(i))
            .map(|i| names[i].clone())
            .collect(),
        bytes: (0..rows.len())
            .filter(|&i| todo(i))
            .map(|i| rows[i].object.tensor.nbytes() as u64)
            .sum(),
    };
    let bar = cx
        .progress()
        .bytes(reread.bytes, format!("hashing {}", src.display()));
    let objects: Vec<Option<&TensorObject>> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| todo(i).then_some(&*r.object))
        .collect();
    let digests = data::digest_all(&objects, |n| bar.inc(n));
    bar.finish_and_clear();
    let mut tensors = Vec::with_capacity(rows.len());
    for (((r, digest), found), name) in rows.iter().zip(digests).zip(found).zip(names) {
        let digest = match found {
            Some(d) => d,
            None => digest
                .map_err(|e| CommandError::at(&r.path, e))?
                .unwrap_or_default(),
        };
        let t = &r.object.tensor;
        tensors.push(TensorEntry {
            dtype: t.dtype().name().to_owned(),
            name,
            shape: t.shape().to_vec(),
            sha256: hex_of(&digest),
        });
    }
    tensors.sort_by(|a, b| (&a.name, &a.sha256).cmp(&(&b.name, &b.sha256)));
    let (leaves, _) = values::leaves(ckpt, src)?;
    let manifest = Manifest {
        format: FORMAT,
        root_sha256: root_of(&tensors),
        values_sha256: values_digest(leaves.iter().map(values::value_json)),
        tensors,
    };
    Ok((manifest, reread))
}

/// A digest in lowercase hex, as `hex::encode` writes it, in one piece
/// (it builds its string a char at a time): a manifest's and `inspect
/// --json`'s `sha256`.
pub(crate) fn hex_of(digest: &[u8; 32]) -> String {
    let mut text = vec![0; 64];
    // 64 bytes hold the hex of 32: this cannot fail, nor can the UTF-8.
    let _ = hex::encode_to_slice(digest, &mut text);
    String::from_utf8(text).unwrap_or_default()
}

/// Writes the file (or object) `path` whole or not at all, through the
/// library's one crash-safe writer ([`Location::create`](stowage::io::Location::create):
/// a synced sibling renamed over it, a device written into, a URL uploaded
/// once complete). How `stowage manifest -o FILE` and `convert --manifest
/// FILE` write FILE.
///
/// # Errors
/// `write`'s error, or the file system's or store's, naming `path`.
pub fn write_file(
    path: &Path,
    cx: &Context,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), CommandError> {
    let location = cx.save_options().location(path);
    Ok(location.create(true, None, |out| {
        // The JSON comes in pieces of a few bytes: buffered, they are one
        // system call each 64 KiB, not one each (20,000 tensors' manifest
        // written in 0.6 s of system time before).
        let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
        write(&mut out)
            .and_then(|()| out.flush())
            .map_err(stowage::Error::Io)
    })?)
}

/// The SHA-256 of the values' canonical encoding: each value's entry of
/// `inspect --json` `"values"` (its `path` a list of keys) as compact JSON
/// with its members sorted, the entries sorted as text, joined by LF.
fn values_digest(entries: impl Iterator<Item = Json>) -> String {
    // `serde_json` keeps an object's members sorted (no `preserve_order`).
    let mut texts: Vec<String> = entries.map(|e| e.to_string()).collect();
    texts.sort();
    let mut h = Sha256::new();
    for t in &texts {
        h.update(t.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use stowage::{DType, Tensor};

    /// A checkpoint in memory has the manifest of the file it is saved as:
    /// views of one storage, a transposed one, values; a tensor changed
    /// after the manifest was taken is named by the difference.
    #[test]
    fn a_checkpoint_in_memory_has_its_saved_files_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let base = Tensor::arange(0.0, 24.0, 1.0, DType::Float32)
            .unwrap()
            .reshape(&[4, 6])
            .unwrap();
        let ckpt = Checkpoint::builder()
            .tensors(
                "model",
                [
                    ("whole", base.clone()),
                    ("row", base.select(0, 1).unwrap()),
                    ("t", base.t().unwrap()),
                    ("half", base.to_dtype(DType::BFloat16).unwrap()),
                ],
            )
            .value("step", 7)
            .value("config.lr", 0.5)
            .build()
            .unwrap();
        let cx = Context::default();
        let before = of_checkpoint(&ckpt, "memory", &cx).unwrap();
        assert_eq!(before.tensors().len(), 4);
        let file = dir.path().join("m.pt");
        stowage::save(&file, &ckpt).unwrap();
        assert_eq!(before, manifest(&file, &cx, &Default::default()).unwrap());
        base.fill_(1.0).unwrap();
        let after = of_checkpoint(&ckpt, "memory", &cx).unwrap();
        let changed: Vec<String> = before.differences(&after);
        assert_eq!(changed.len(), 3, "{changed:?}");
        for name in ["model.whole", "model.row", "model.t"] {
            assert!(
                changed.iter().any(|c| c.contains(name)),
                "{name}: {changed:?}"
            );
        }
    }
}
