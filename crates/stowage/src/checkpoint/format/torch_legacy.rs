//! The pre-1.6 single-stream format (`_use_new_zipfile_serialization=False`):
//! a magic-number pickle, the protocol version, a `sys_info` dict, the object
//! pickle, a pickled list of storage keys, then for each key an int64
//! little-endian element count followed by the storage's bytes (always
//! little-endian on disk).

use crate::error::{CheckpointError, ErrorContext, FormatError};
use num_bigint::BigInt;
use std::collections::HashMap;

use crate::checkpoint::options::LoadOptions;
use crate::checkpoint::pickle::{self, Graph, Hooks, Node, NodeId, PickleError, Pickled, Value};
use crate::checkpoint::records::{Mode, Records};
use crate::checkpoint::torch::{finish_kinds, StorageSource, Tables, TorchHooks};
use crate::checkpoint::value::graph::{
    check_views, ByteOrder, Checkpoint, Format, InertObject, NodeMap, NodeSet, Object,
    StorageRecord,
};
use crate::io::ReadAt;
use crate::{DType, Device, Error, Result, UntypedStorage};

/// The magic number's pickle after its `PROTO` opcode: `LONG1` of ten bytes.
const MAGIC_PICKLED: &[u8] = b"\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

/// Whether `head` starts as a legacy file does: the magic number pickled
/// with protocol 2 (`torch.save`'s default) or 3 (`pickle_protocol=3`). A
/// file of protocol 4 or 5 opens with a `FRAME`, which PyTorch's
/// `weights_only` loader refuses, and so does this test.
pub(crate) fn is_legacy(head: &[u8]) -> bool {
    matches!(head, [0x80, 2 | 3, rest @ ..] if rest.starts_with(MAGIC_PICKLED))
}

const MAGIC_NUMBER: u128 = 0x1950a86a20f9469cfc6c;
const PROTOCOL_VERSION: i64 = 1001;

/// Storages are allocated while the object pickle is read and filled from the stream after it.
struct Pending {
    storages: Vec<(String, UntypedStorage)>,
    declared: u64,
    file_len: u64,
}

impl StorageSource for Pending {
    fn load(
        &mut self,
        key: &str,
        _: Option<usize>,
        nbytes: usize,
        device: Device,
    ) -> Result<UntypedStorage> {
        // Every byte of every storage is in the file: refuse claims larger than the file
        // before allocating them.
        self.declared = self.declared.saturating_add(nbytes as u64);
        if !device.is_meta() && self.declared > self.file_len {
            return Err(Error::Format(FormatError::RecordSize {
                name: format!("storage {key}"),
                expected: self.file_len,
                found: self.declared,
            }));
        }
        let s = UntypedStorage::new_on(nbytes, device)?;
        self.storages.push((key.to_owned(), s.clone()));
        Ok(s)
    }
}

/// Hooks for the small header pickles: no globals, no persistent ids.
struct Plain;

impl Hooks for Plain {
    type Ext = ();
    type Error = Error;
    fn find_class(&mut self, module: &str, name: &str) -> Result<Value<()>> {
        Err(Error::Checkpoint(CheckpointError::GlobalNotAllowed {
            module: module.into(),
            name: name.into(),
        }))
    }
    fn persistent_load(&mut self, _: &mut Graph<()>, _: Value<()>) -> Result<Value<()>> {
        Err(Error::Format(FormatError::BadObject {
            context: "legacy header",
            expected: "plain data",
            found: "a persistent id".into(),
        }))
    }
    fn reduce(&mut self, _: &mut Graph<()>, _: Value<()>, _: Value<()>) -> Result<Value<()>> {
        Err(Error::Format(FormatError::BadObject {
            context: "legacy header",
            expected: "plain data",
            found: "a call".into(),
        }))
    }
    fn build(&mut self, _: &mut Graph<()>, _: Value<()>, _: Value<()>) -> Result<Value<()>> {
        Err(Error::Format(FormatError::BadObject {
            context: "legacy header",
            expected: "plain data",
            found: "BUILD".into(),
        }))
    }
    fn new_obj(&mut self, _: &mut Graph<()>, _: Value<()>, _: Value<()>) -> Result<Value<()>> {
        Err(Error::Format(FormatError::BadObject {
            context: "legacy header",
            expected: "plain data",
            found: "NEWOBJ".into(),
        }))
    }
}

/// Bytes of the file from `pos`, at most `n`.
fn window<R: ReadAt>(source: &R, pos: u64, n: u64) -> Result<Vec<u8>> {
    let n = n.min(source.len().saturating_sub(pos));
    let mut buf = crate::storage::zeroed_bytes(n as usize)?;
    source.read_exact_at(&mut buf, pos)?;
    Ok(buf)
}

/// True when a failed read might succeed with more of the file.
fn wants_more(e: &Error, have: u64, pos: u64, len: u64, max: u64) -> bool {
    matches!(
        e,
        Error::Format(FormatError::Pickle(
            PickleError::Truncated { .. } | PickleError::NoStop { .. }
        ))
    ) && have < len - pos
        && have < max
}

/// Reads a header pickle (plain data only) at `*pos` and advances past it.
fn header<R: ReadAt>(
    source: &R,
    pos: &mut u64,
    options: &LoadOptions,
    what: &'static str,
) -> Result<Pickled<()>> {
    let mut n: u64 = 1 << 12;
    loop {
        let buf = window(source, *pos, n)?;
        match pickle::unpickle(&buf, &mut Plain, &options.pickle_limits) {
            Err(e)
                if wants_more(
                    &e,
                    buf.len() as u64,
                    *pos,
                    source.len(),
                    options.max_pickle_bytes,
                ) =>
            {
                n *= 4
            }
            Err(e) => return Err(e.in_entry(what)),
            Ok(p) => {
                *pos += p.consumed as u64;
                return Ok(p);
            }
        }
    }
}

/// Loads a legacy-format file in `mode`: its storages are made by its pickle
/// and filled after it, from the stream that follows; in a mapped load each
/// whose bytes start at a multiple of its element size becomes a view of the
/// mapping, the others are copied (as every one is in the other modes: a
/// legacy file has no lazy load).
pub(crate) fn load<R: ReadAt>(source: &R, options: &LoadOptions, mode: Mode) -> Result<Checkpoint> {
    let mut placed: Records<'_, ()> = Records::new(mode).read_as_made();
    let len = source.len();
    let mut pos = 0u64;
    check_headers(source, &mut pos, options)?;
    let ObjectPickle {
        pickled,
        records,
        ordered,
        classes,
        state,
        objects,
        pending,
    } = object_pickle(source, &mut pos, len, options)?;
    let key_list = storage_keys(source, &mut pos, options)?;
    read_storages(source, pos, len, &records, &key_list, &mut placed)?;
    drop(pending);
    let mut ckpt = check_views(Checkpoint {
        format: Format::TorchLegacy,
        byteorder: ByteOrder::Little,
        graph: pickled.graph,
        root: pickled.root,
        storages: records,
        ordered,
        classes,
        state,
        objects,
        ..Checkpoint::new()
    })?;
    // Sparse and nested tensors are checked once every storage's bytes are in.
    finish_kinds(&mut ckpt)?;
    Ok(ckpt)
}

/// Reads the header pickles at `*pos` (the magic number, the protocol
/// version and `sys_info`), checks the first two, and advances past them.
fn check_headers<R: ReadAt>(source: &R, pos: &mut u64, options: &LoadOptions) -> Result<()> {
    let magic = header(source, pos, options, "magic number")?;
    if !matches!(&magic.root, Value::BigInt(b) if **b == BigInt::from(MAGIC_NUMBER)) {
        return Err(Error::Format(FormatError::NotACheckpoint {
            detail: "invalid magic number; corrupt file?".into(),
        }));
    }
    match header(source, pos, options, "protocol version")?.root {
        Value::Int(PROTOCOL_VERSION) => {}
        other => {
            return Err(Error::Format(FormatError::NotACheckpoint {
                detail: format!("invalid protocol version: {other:?}"),
            }))
        }
    }
    header(source, pos, options, "sys_info")?;
    Ok(())
}

/// The object pickle, read: its value, what the hooks gathered, and the
/// storages it allocated (filled from the stream after it).
struct ObjectPickle {
    pickled: Pickled<Object>,
    records: Vec<StorageRecord>,
    ordered: NodeSet,
    classes: NodeMap<&'static str>,
    state: NodeMap<Value<Object>>,
    objects: HashMap<NodeId, InertObject>,
    pending: Pending,
}

/// Reads the object pickle at `*pos` of the file of `len` bytes, from a
/// window of the file grown until it holds the whole pickle, and advances
/// past it. Storages are allocated as it names them.
fn object_pickle<R: ReadAt>(
    source: &R,
    pos: &mut u64,
    len: u64,
    options: &LoadOptions,
) -> Result<ObjectPickle> {
    let mut n: u64 = 1 << 16;
    let read = loop {
        let buf = window(source, *pos, n)?;
        let mut pending = Pending {
            storages: Vec::new(),
            declared: 0,
            file_len: len,
        };
        let mut hooks = TorchHooks::new(&mut pending, options, ByteOrder::Little, true);
        match pickle::unpickle(&buf, &mut hooks, &options.pickle_limits) {
            Err(e) if wants_more(&e, buf.len() as u64, *pos, len, options.max_pickle_bytes) => {
                n *= 4
            }
            Err(e) => return Err(e.in_entry("object pickle")),
            Ok(mut p) => {
                let objects = hooks.finish(&mut p)?;
                let Tables {
                    records,
                    ordered,
                    classes,
                    state,
                } = hooks.into_tables();
                break ObjectPickle {
                    pickled: p,
                    records,
                    ordered,
                    classes,
                    state,
                    objects,
                    pending,
                };
            }
        }
    };
    *pos += read.pickled.consumed as u64;
    Ok(read)
}

/// Reads the pickled list of storage keys at `*pos` and advances past it.
fn storage_keys<R: ReadAt>(
    source: &R,
    pos: &mut u64,
    options: &LoadOptions,
) -> Result<Vec<String>> {
    let keys = header(source, pos, options, "storage keys")?;
    match &keys.root {
        Value::Node(id) => match keys.graph.try_get(*id) {
            Some(Node::List(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<_>>(),
            _ => None,
        },
        _ => None,
    }
    .ok_or(Error::Format(FormatError::BadObject {
        context: "legacy storage keys",
        expected: "a list of str",
        found: "something else".into(),
    }))
}

/// Fills the storages of `records` from the stream at `pos` of the file of
/// `len` bytes, in the order of `key_list`; every storage listed must be
/// referenced, and every one referenced listed.
fn read_storages<R: ReadAt>(
    source: &R,
    mut pos: u64,
    len: u64,
    records: &[StorageRecord],
    key_list: &[String],
    placed: &mut Records<'_, ()>,
) -> Result<()> {
    for key in key_list {
        pos = read_storage(source, pos, len, records, key, placed)?;
    }
    if let Some(r) = records
        .iter()
        .find(|r| !key_list.iter().any(|k| **k == *r.key))
    {
        return Err(Error::Format(FormatError::MissingRecord {
            name: format!("storage {} (referenced but not listed)", r.key),
        }));
    }
    Ok(())
}

/// Fills the storage `key` from the stream at `pos` of the file of `len`
/// bytes (its element count, checked against the storage, then its bytes: a
/// slice of the mapping when `mapped` takes it, else copied). Returns the
/// position after it.
fn read_storage<R: ReadAt>(
    source: &R,
    mut pos: u64,
    len: u64,
    records: &[StorageRecord],
    key: &str,
    placed: &mut Records<'_, ()>,
) -> Result<u64> {
    let (storage, dtype) = records
        .iter()
        .find(|r| *r.key == *key)
        .map(|r| (r.storage.clone(), r.dtype))
        .ok_or_else(|| {
            Error::Format(FormatError::MissingRecord {
                name: format!("storage {key} (listed but never referenced)"),
            })
        })?;
    let count_bytes = window(source, pos, 8)?;
    let count = <[u8; 8]>::try_from(count_bytes.as_slice())
        .map(u64::from_le_bytes)
        .map_err(|_| {
            Error::Format(FormatError::MissingRecord {
                name: format!("storage {key} (file ends at offset {pos})"),
            })
        })?;
    pos += 8;
    let elem = dtype.map_or(1, DType::size) as u64;
    let nbytes = count.saturating_mul(elem);
    if nbytes != storage.nbytes() as u64 {
        return Err(Error::Format(FormatError::RecordSize {
            name: format!("storage {key}"),
            expected: storage.nbytes() as u64,
            found: nbytes,
        }));
    }
    if pos.checked_add(nbytes).is_none_or(|end| end > len) {
        return Err(Error::Format(FormatError::RecordSize {
            name: format!("storage {key}"),
            expected: nbytes,
            found: len.saturating_sub(pos),
        }));
    }
    let mapped_here = cfg!(target_endian = "little")
        && storage.has_data()
        && pos.is_multiple_of(elem)
        && placed.redirect(&storage, pos);
    if !mapped_here && storage.has_data() {
        let mut bytes = storage.bytes_mut()?;
        source
            .read_exact_at(&mut bytes, pos)
            .map_err(|e| Error::Io(e).in_entry(format!("storage {key}")))?;
        if cfg!(target_endian = "big") {
            if let Some(d) = dtype {
                crate::checkpoint::torch::byteswap(&mut bytes, d);
            }
        }
    }
    Ok(pos + nbytes)
}
