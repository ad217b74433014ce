//! What each dataclass of `.metadata` becomes at its `BUILD`: a record in
//! `Parts`, from the attributes its state names; the `Metadata` itself
//! hands its items, storage and planner data over. Anything of another
//! shape makes the decoder give up (the generic reader then reads it).

use std::rc::Rc;

use super::{attr_id, Decoder, Step, V};
use crate::checkpoint::format::dcp::metadata::parts::{
    ChunkRec, IndexRec, InfoRec, ItemRec, TensorRec, NO_HINT,
};
use crate::checkpoint::format::dcp::metadata::Class;
use crate::checkpoint::value::graph::PathKey;

impl Decoder<'_> {
    /// The attributes `wanted` of a `BUILD` state dict, each at most once;
    /// others are ignored.
    fn attrs<const N: usize>(state: V, wanted: [&str; N]) -> Step<[Option<V>; N]> {
        let V::Dict(map) = state else {
            return None;
        };
        let map = Rc::try_unwrap(map).ok()?;
        let ids = wanted.map(attr_id);
        let mut out: [Option<V>; N] = std::array::from_fn(|_| None);
        for (k, v) in map.items {
            let V::Str(k) = k else {
                return None;
            };
            if let Some(i) = ids.iter().position(|&id| id == k) {
                if out[i].replace(v).is_some() {
                    return None;
                }
            }
        }
        Some(out)
    }

    pub(super) fn build(&mut self, class: Class, state: V) -> Step<V> {
        match class {
            Class::ChunkStorageMetadata => {
                let [Some(V::Size(offsets)), Some(V::Size(sizes))] =
                    Self::attrs(state, ["offsets", "sizes"])?
                else {
                    return None;
                };
                self.parts.charge(offsets.len() + sizes.len()).ok()?;
                self.parts.chunks.push(ChunkRec { offsets, sizes });
                Some(V::Chunk(self.parts.chunks.len() as u32 - 1))
            }
            Class::MetadataIndex => {
                let [Some(V::Str(fqn)), offset, index] =
                    Self::attrs(state, ["fqn", "offset", "index"])?
                else {
                    return None;
                };
                let offset = match offset {
                    None | Some(V::None) => None,
                    Some(V::Size(d)) => {
                        self.parts.charge(d.len()).ok()?;
                        Some(d)
                    }
                    Some(_) => return None,
                };
                let hint = match index {
                    Some(V::Int(i)) => u32::try_from(i).unwrap_or(NO_HINT),
                    None | Some(V::None) => NO_HINT,
                    Some(_) => return None,
                };
                self.parts.indices.push(IndexRec { fqn, offset, hint });
                Some(V::Index(self.parts.indices.len() as u32 - 1))
            }
            Class::StorageInfo => {
                let [Some(V::Str(file)), Some(V::Int(offset)), Some(V::Int(length)), transforms] =
                    Self::attrs(
                        state,
                        ["relative_path", "offset", "length", "transform_descriptors"],
                    )?
                else {
                    return None;
                };
                let transforms = match transforms {
                    None | Some(V::None) => 0,
                    Some(V::List(l) | V::Tuple(l)) => {
                        let names = l
                            .items
                            .iter()
                            .map(|t| match t {
                                V::Str(s) => Some(*s),
                                _ => None,
                            })
                            .collect::<Option<Box<[u32]>>>()?;
                        self.parts.transforms(names)
                    }
                    Some(_) => return None,
                };
                self.parts.infos.push(InfoRec {
                    file,
                    offset,
                    length,
                    transforms,
                });
                Some(V::Info(self.parts.infos.len() as u32 - 1))
            }
            Class::TensorProperties => {
                // `TensorProperties.__getstate__`: (dtype, layout,
                // requires_grad, memory_format, pin_memory, ...).
                let V::Tuple(t) = state else {
                    return None;
                };
                match t.items.as_slice() {
                    // Newer releases add fields at the end.
                    [V::DType(d), _, V::Bool(rg), _, _, ..] => Some(V::Props(*d, *rg)),
                    _ => None,
                }
            }
            Class::TensorStorageMetadata => {
                let [Some(V::Props(dtype, requires_grad)), Some(V::Size(size)), Some(V::List(chunks))] =
                    Self::attrs(state, ["properties", "size", "chunks"])?
                else {
                    return None;
                };
                let chunks = Rc::try_unwrap(chunks).ok()?;
                let chunks = chunks
                    .items
                    .into_iter()
                    .map(|c| match c {
                        V::Chunk(id) => Some(id),
                        _ => None,
                    })
                    .collect::<Option<Vec<u32>>>()?;
                self.parts.tensors.push(TensorRec {
                    dtype,
                    requires_grad,
                    size,
                    chunks,
                });
                Some(V::Tensor(self.parts.tensors.len() as u32 - 1))
            }
            Class::BytesStorageMetadata => Some(V::BytesMeta),
            Class::StorageMeta => Some(V::Tag),
            Class::Metadata => self.root(state),
            Class::MemoryFormat | Class::Path => None,
        }
    }

    /// The `Metadata`'s state: its items, storage and planner data into
    /// `Parts`.
    fn root(&mut self, state: V) -> Step<V> {
        let [Some(V::Dict(items)), Some(V::Dict(storage)), planner, version] = Self::attrs(
            state,
            [
                "state_dict_metadata",
                "storage_data",
                "planner_data",
                "version",
            ],
        )?
        else {
            return None;
        };
        let items = Rc::try_unwrap(items).ok()?;
        if !items.storage.is_empty() {
            return None;
        }
        for (k, v) in items.items {
            let V::Str(name) = k else {
                return None;
            };
            if !self.names.insert(name) {
                return None;
            }
            let item = match v {
                V::Tensor(t) => ItemRec::Tensor(t),
                // An instance without attributes has no `BUILD`.
                V::BytesMeta | V::Obj(Class::BytesStorageMetadata) => ItemRec::Bytes,
                _ => return None,
            };
            self.parts.items.push((name, item));
        }
        let storage = Rc::try_unwrap(storage).ok()?;
        if !storage.items.is_empty() {
            return None;
        }
        self.parts.storage = storage.storage;
        match planner {
            None | Some(V::None) => {}
            Some(V::Dict(planner)) => {
                for (k, v) in Rc::try_unwrap(planner).ok()?.items {
                    let keys = match (k, v) {
                        (V::Str(name), V::Tuple(keys) | V::List(keys)) => (name, keys),
                        (V::Str(name), V::Ints(d)) => {
                            let path = self
                                .parts
                                .get_dims(d)
                                .iter()
                                .map(|&i| PathKey::Index(i as i64))
                                .collect();
                            self.parts.planner.push((name, path));
                            continue;
                        }
                        // A tuple holding a tuple: the generic reader refuses it.
                        (V::Str(_), V::ArgInts(_)) => return None,
                        _ => continue,
                    };
                    let (name, keys) = keys;
                    self.parts.charge(keys.items.len()).ok()?;
                    let path = keys
                        .items
                        .iter()
                        .map(|k| match k {
                            V::Str(s) => Some(PathKey::Key(self.parts.string(*s).to_owned())),
                            V::Int(i) => Some(PathKey::Index(*i)),
                            _ => None,
                        })
                        .collect::<Option<Vec<_>>>()?;
                    self.parts.planner.push((name, path));
                }
            }
            Some(_) => return None,
        }
        self.parts.version = match version {
            Some(V::Str(s)) => Some(self.parts.string(s).to_owned()),
            _ => None,
        };
        Some(V::Root)
    }
}
