//! What a checkpoint lists, as every subcommand that reports tensors shows
//! it: one row per (path, tensor), paths as the contract's JSON lists, and
//! sizes in human units.

use std::borrow::Cow;
use std::ops::Deref;

use serde_json::{json, Value as Json};
use stowage::checkpoint::{PathKey, TensorObject};
use stowage::Checkpoint;

use crate::CommandError;

/// A hash map with `foldhash`'s hasher: storages by their id, in process.
type FoldMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// One tensor of a checkpoint, with what `inspect` reports of it.
pub struct Row<'c> {
    /// Keys from the root down to the tensor.
    pub path: Vec<PathKey>,
    /// The tensor object (a component of a sparse or nested tensor: a plain
    /// tensor object made for it).
    pub object: RowObject<'c>,
    /// The storage's record key.
    pub key: Cow<'c, str>,
}

/// A row's tensor object: the checkpoint's own, or one made for a component.
/// Boxed when made: a row stays a few words, whatever a tensor object holds
/// (a checkpoint of millions of tensors has as many rows).
pub enum RowObject<'c> {
    /// A tensor object of the checkpoint.
    Of(&'c TensorObject),
    /// A plain tensor object made for a component of a sparse or nested tensor.
    Made(Box<TensorObject>),
}

impl Deref for RowObject<'_> {
    type Target = TensorObject;

    fn deref(&self) -> &TensorObject {
        match self {
            RowObject::Of(o) => o,
            RowObject::Made(o) => o,
        }
    }
}

impl Row<'_> {
    /// True for a sparse or nested tensor: listed with its layout and logical
    /// shape, without storage fields (its data is in its component rows).
    pub fn is_container(&self) -> bool {
        !self.object.kind().is_strided()
    }
}

/// Every tensor of `ckpt` with its storage key. A sparse or nested tensor is
/// one row, followed by a row per component under its path plus the
/// component's name (`[…, "indices"]`, `[…, "values"]`), as the CLI contract has it.
///
/// # Errors
/// When the walk exceeds its limits.
pub fn rows(ckpt: &Checkpoint) -> Result<Vec<Row<'_>>, CommandError> {
    let storages = ckpt.storages();
    // A loader records storages in the order the tensors first reach them,
    // and a state dict's tensors mostly reach one each, in that order: the
    // record after the last one found is tried first, and a map of every
    // record is made only for a tensor that is not there.
    let next = std::cell::Cell::new(0usize);
    let keys = std::cell::OnceCell::<FoldMap<usize, &str>>::new();
    let recorded = |id: usize| -> Option<&str> {
        let at = next.get();
        if let Some(s) = storages.get(at).filter(|s| s.storage.id() == id) {
            next.set(at + 1);
            return Some(&s.key);
        }
        keys.get_or_init(|| {
            let mut keys = FoldMap::default();
            for s in storages {
                keys.entry(s.storage.id()).or_insert(&*s.key);
            }
            keys
        })
        .get(&id)
        .copied()
    };
    // A storage with no record (a meta tensor or wrapper subclass saved
    // without data) is keyed `@0`, `@1`, … in order of appearance: the same
    // on every run, and equal exactly for tensors on one storage.
    let unrecorded = std::cell::RefCell::new(FoldMap::<usize, usize>::default());
    let key_of = |t: &stowage::Tensor| -> Cow<'_, str> {
        let id = t.untyped_storage().id();
        recorded(id).map_or_else(
            || {
                let mut u = unrecorded.borrow_mut();
                let n = u.len();
                Cow::Owned(format!("@{}", u.entry(id).or_insert(n)))
            },
            Cow::Borrowed,
        )
    };
    let tensors = ckpt.tensors().map_err(CommandError::input)?;
    let mut out = Vec::with_capacity(tensors.len());
    for (path, object) in tensors {
        let components: Vec<Row<'_>> = object
            .kind()
            .components()
            .into_iter()
            .map(|(name, t)| {
                let mut p = path.clone();
                p.push(PathKey::Key(name.to_owned()));
                Row {
                    path: p,
                    object: RowObject::Made(Box::new(TensorObject::new(t.clone()))),
                    key: key_of(t),
                }
            })
            .collect();
        out.push(Row {
            key: key_of(&object.tensor),
            path,
            object: RowObject::Of(object),
        });
        out.extend(components);
    }
    Ok(out)
}

/// A path as the contract's JSON list: string keys as strings, indices as numbers.
pub fn path_json(path: &[PathKey]) -> Json {
    Json::Array(
        path.iter()
            .map(|k| match k {
                PathKey::Key(s) => Json::String(s.clone()),
                PathKey::Index(i) => json!(i),
            })
            .collect(),
    )
}

/// `1.5 KiB`, `12 B`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}
