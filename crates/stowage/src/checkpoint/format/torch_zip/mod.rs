//! The torch zip format (PyTorch 1.6 and later): a zip archive whose
//! `data.pkl` pickles the object tree and whose `data/<key>` records hold the
//! storages' bytes. Loading here ([`load`], [`load_lazy`]); saving in [`save`].

mod parallel;
mod save;
mod source;

use crate::error::{CheckpointError, ErrorContext, FormatError, StorageError};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

pub use save::{save, save_to_writer, save_with};

use self::source::ZipSource;
use crate::checkpoint::options::LoadOptions;
use crate::checkpoint::pickle::{self, Graph, Node, NodeId, Value};
use crate::checkpoint::records::{Mode, Records};
use crate::checkpoint::torch::{finish_kinds, Tables, TorchHooks};
use crate::checkpoint::value::graph::{check_views, ByteOrder, Checkpoint, Format, Object};
use crate::checkpoint::zip::{self, ZipLimits, ZipReader};
use crate::io::{ReadAt, ReadCost};
use crate::storage::Fetch;
use crate::{Error, Result};

/// Loads the archive `source` holds in `mode`, lazily only where the mode
/// asks and the caller gives [`load_lazy`] the source to keep.
pub(crate) fn load<R: ReadAt>(source: R, options: &LoadOptions, mode: Mode) -> Result<Checkpoint> {
    let zip = ZipReader::new(source, &zip_limits(options))?;
    load_zip_archive(&zip, options, Records::new(mode))
}

fn zip_limits(options: &LoadOptions) -> ZipLimits {
    ZipLimits {
        max_entries: options.max_records,
        max_record_to_vec: options.max_pickle_bytes,
    }
}

fn load_zip_archive<'z, R: ReadAt>(
    zip: &'z ZipReader<R>,
    options: &LoadOptions,
    mut records: Records<'z, &'z zip::Entry>,
) -> Result<Checkpoint> {
    // At most a storage a record (the directory's size is bounded by the
    // records limit), read a batch at a time.
    let storages = zip.entries().len();
    records.reserve(storages.min(parallel::BATCH_RECORDS));
    // A TorchScript archive (`torch.jit.save`): its `__torch__` classes are
    // inert objects, its code is never read, and the tensors of
    // `constants.pkl` join the root (see `torchscript_constants`).
    let constants = zip.find("constants.pkl");
    let pkl_entry = zip.find("data.pkl").ok_or_else(|| {
        Error::Format(FormatError::MissingRecord {
            name: "data.pkl".into(),
        })
    })?;
    let byteorder = match zip.find("byteorder") {
        None => ByteOrder::Little,
        Some(e) => match zip.read_to_vec(e)?.as_slice() {
            b"little" => ByteOrder::Little,
            b"big" => ByteOrder::Big,
            other => {
                return Err(Error::Format(FormatError::BadObject {
                    context: "byteorder record",
                    expected: "'little' or 'big'",
                    found: String::from_utf8_lossy(&other[..other.len().min(16)]).into_owned(),
                }))
            }
        },
    };
    // A big-endian file's storages are byte-swapped as they are made, so
    // they are read then too, as are records checked as they are read.
    let batch = byteorder == ByteOrder::Little && !options.verify_crc;
    let records = if batch {
        records
    } else {
        records.read_as_made()
    };
    let mut src = ZipSource::new(zip, records, options.verify_crc);
    let mut hooks = TorchHooks::new(&mut src, options, byteorder, false);
    hooks.reserve(storages);
    hooks.foreign.torchscript = constants.is_some();
    let mut pickled = unpickle_entry(zip, pkl_entry, &mut hooks, &options.pickle_limits)
        .map_err(|e| e.in_entry("data.pkl"))?;
    // The hooks' tables by key go before the records are read: with many
    // small tensors, they are a tenth of the peak.
    let data_len = pkl_entry.size;
    let mut objects = hooks.finish(&mut pickled)?;
    let Tables {
        mut records,
        mut ordered,
        mut classes,
        mut state,
    } = hooks.into_tables();
    if let Some(entry) = constants {
        src.dir = "constants";
        let mut hooks = TorchHooks::new(&mut src, options, byteorder, false);
        hooks.foreign.torchscript = true;
        let mut c = unpickle_entry(zip, entry, &mut hooks, &options.pickle_limits)
            .map_err(|e| e.in_entry("constants.pkl"))?;
        let c_objects = hooks.finish(&mut c)?;
        let c_tables = hooks.into_tables();
        for mut r in c_tables.records {
            r.key = format!("constants/{}", r.key).into();
            records.push(r);
        }
        // The two graphs together, held to what both streams may build.
        let max_nodes = options
            .pickle_limits
            .for_stream(usize::try_from(data_len.saturating_add(entry.size)).unwrap_or(usize::MAX))
            .max_nodes;
        let offset = append_graph(&mut pickled.graph, c.graph, max_nodes)?;
        let (map, at) = (shift(offset), |id: NodeId| NodeId(id.0 + offset));
        let mut c_root = c.root;
        map(&mut c_root);
        ordered.extend(c_tables.ordered.into_iter().map(at));
        classes.extend(c_tables.classes.into_iter().map(|(id, c)| (at(id), c)));
        for (id, mut v) in c_tables.state {
            map(&mut v);
            state.insert(at(id), v);
        }
        for (id, mut o) in c_objects {
            map(&mut o.args);
            if let Some(s) = &mut o.state {
                map(s);
            }
            objects.insert(at(id), o);
        }
        torchscript_constants(&mut pickled.graph, &mut pickled.root, c_root);
    }
    if let Some(e) = src.failed.take() {
        return Err(e);
    }
    parallel::fill_parallel(zip, &src.records.take_batch())?;
    let mut ckpt = check_views(Checkpoint {
        format: if constants.is_some() {
            Format::TorchScript
        } else {
            Format::TorchZip
        },
        byteorder,
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

/// Runs the pickle `entry` holds through `hooks`. Where the archive is
/// local and the entry stored (as `torch.save` writes it), the pickle is
/// read as the machine goes (`unpickle_reader`): a state dict of many small
/// tensors has a pickle of about 100 bytes a tensor, a tenth of the load's
/// peak were it held whole beside the objects it builds. Otherwise (by URL,
/// where each read is a request, or compressed) it is read whole first.
fn unpickle_entry<R: ReadAt, H: pickle::Hooks<Ext = Object, Error = Error>>(
    zip: &ZipReader<R>,
    entry: &zip::Entry,
    hooks: &mut H,
    limits: &pickle::Limits,
) -> Result<pickle::Pickled<Object>> {
    // By URL the local header is not even read here: `read_to_vec` reads it.
    let stored = match zip.source().read_cost() {
        ReadCost::Local => zip.stored_reader(entry)?,
        _ => None,
    };
    match stored {
        Some(reader) => {
            let len = usize::try_from(entry.size).map_err(|_| {
                Error::from(zip::ZipError::RecordTooLarge {
                    name: zip.name(entry).into(),
                    size: entry.size,
                    max: usize::MAX as u64,
                })
            })?;
            pickle::unpickle_reader(len, || Ok(reader.clone()), hooks, limits)
        }
        _ => pickle::unpickle(&zip.read_to_vec(entry)?, hooks, limits),
    }
}

/// Moves a value of an appended graph by `offset` nodes (see [`append_graph`]).
fn shift(offset: u32) -> impl Fn(&mut Value<Object>) {
    move |v| {
        if let Value::Node(id) = v {
            *id = NodeId(id.0.saturating_add(offset));
        }
    }
}

/// Appends every node of `from` to `into`, each moved by the returned
/// offset (`from`'s node `i` is `into`'s node `i + offset`).
///
/// # Errors
/// When `into` would hold more nodes than the pickle limits allow.
fn append_graph(into: &mut Graph<Object>, from: Graph<Object>, max_nodes: usize) -> Result<u32> {
    if into.len().saturating_add(from.len()) > max_nodes.min(u32::MAX as usize - 1) {
        return Err(Error::Checkpoint(CheckpointError::LimitExceeded {
            limit: crate::Limit::PickleNodes,
            value: into.len().saturating_add(from.len()) as u64,
            max: max_nodes as u64,
        }));
    }
    let offset = into.len() as u32;
    let move_by = shift(offset);
    for (_, node) in from.iter() {
        let mut node = node.clone();
        node.values_mut().for_each(&move_by);
        into.add(node);
    }
    Ok(offset)
}

/// A TorchScript archive's `constants.pkl` (a tuple of tensors, which the
/// code names `CONSTANTS.c0` …) joins the root as its entry `"CONSTANTS"`
/// when it is not empty: the root is a TorchScript module, an inert object.
fn torchscript_constants(
    graph: &mut Graph<Object>,
    root: &mut Value<Object>,
    constants: Value<Object>,
) {
    let empty = matches!(
        constants.as_node().and_then(|id| graph.try_get(id)),
        Some(Node::Tuple(t)) if t.is_empty()
    );
    if empty {
        return;
    }
    let entry = (Value::str("CONSTANTS"), constants);
    match root.as_node().and_then(|id| graph.try_get_mut(id)) {
        Some(Node::Dict(d)) => d.push(entry),
        _ => {
            let id = graph.dict(vec![(Value::str("data"), root.clone()), entry]);
            *root = Value::Node(id);
        }
    }
}

/// A torch zip archive whose storages read their records on first use, through
/// the archive reader they share.
/// A later read names the file and the record, since it happens long after the load.
pub(crate) fn load_lazy<R: ReadAt + 'static>(
    source: R,
    path: &Path,
    options: &LoadOptions,
) -> Result<Checkpoint> {
    let zip = Arc::new(ZipReader::new(source, &zip_limits(options))?);
    let verify_crc = options.verify_crc;
    let path: Arc<Path> = Arc::from(path);
    let make = |entry: &&zip::Entry| -> Fetch {
        let (zip, entry, path) = (zip.clone(), (*entry).clone(), path.clone());
        // A deflated record read in windows is inflated once and kept until its
        // last window is read (windows come in order), not once per window.
        let inflated: Mutex<Option<Arc<Vec<u8>>>> = Mutex::new(None);
        // A stored record's data offset, once its local header is read.
        let data_at: OnceLock<u64> = OnceLock::new();
        Arc::new(move |from: u64, dst: &mut [u8]| {
            let mut read = || -> Result<()> {
                let stored = entry.method == zip::Method::Stored && !verify_crc;
                if stored {
                    read_stored(&zip, &entry, &data_at, from, dst)?;
                } else if from == 0 && dst.len() as u64 == entry.size {
                    zip.read_into(&entry, dst)?;
                    if verify_crc {
                        zip.check_crc(&entry)?;
                    }
                } else {
                    // Deflated (or CRC-checked) records are read whole, then cut.
                    let mut kept = inflated.lock().unwrap_or_else(PoisonError::into_inner);
                    let all = match &*kept {
                        Some(all) => all.clone(),
                        None => {
                            let all = Arc::new(zip.read_to_vec(&entry)?);
                            if verify_crc {
                                zip.check_crc(&entry)?;
                            }
                            all
                        }
                    };
                    let last = from.saturating_add(dst.len() as u64) >= entry.size;
                    *kept = (!last).then(|| all.clone());
                    drop(kept);
                    let window = usize::try_from(from)
                        .ok()
                        .and_then(|f| all.get(f..f.checked_add(dst.len())?))
                        .ok_or(Error::Storage(StorageError::StorageRange {
                            offset: from as usize,
                            len: dst.len(),
                            nbytes: Vec::len(&all),
                        }))?;
                    dst.copy_from_slice(window);
                }
                Ok(())
            };
            read().in_entry(zip.name(&entry)).in_file(&*path)
        })
    };
    let records = Records::with_fetch(Mode::of(options), &make);
    load_zip_archive(&zip, options, records)
}

/// Bytes `from..` of a stored record into `dst`, whatever the source: the
/// first read fetches the record's local header in one batch with the data
/// (in an object store, one request), the data read at the offset
/// PyTorch's writer gives it ([`ZipReader::likely_data_offset`]), and keeps
/// the offset the header gives in `data_at`; where the two differ, the data
/// is read again there. Later windows are one positional read each.
fn read_stored<R: ReadAt>(
    zip: &ZipReader<R>,
    entry: &zip::Entry,
    data_at: &OnceLock<u64>,
    from: u64,
    dst: &mut [u8],
) -> Result<()> {
    let io = |(_, e): (usize, std::io::Error)| Error::Io(e);
    let inside = from
        .checked_add(dst.len() as u64)
        .is_some_and(|end| end <= entry.compressed_size);
    if !inside {
        return Err(Error::Storage(StorageError::StorageRange {
            offset: from as usize,
            len: dst.len(),
            nbytes: entry.compressed_size as usize,
        }));
    }
    // The source as it is now, asked once a read has failed (not before
    // each, a `statx` per record): a file cut short since the load is a
    // record past its end, named as such, not a short read.
    let past_end = |at: u64| {
        let len = zip.source().len();
        match at.checked_add(entry.compressed_size) {
            Some(end) if end <= len => Ok(()),
            _ => Err(Error::from(zip::ZipError::DataOutOfBounds {
                name: zip.name(entry).into(),
                offset: at,
                size: entry.compressed_size,
                len,
            })),
        }
    };
    let at = match (data_at.get(), zip.likely_data_offset(entry)) {
        (Some(&at), _) => at,
        (None, Some(guess)) => {
            let mut header = vec![0; ZipReader::<R>::local_header_len(entry)];
            let mut reads = [
                (entry.local_header_offset, &mut header[..]),
                (guess.saturating_add(from), &mut *dst),
            ];
            if let Err(e) = zip.source().read_batch_at(&mut reads) {
                past_end(guess)?;
                return Err(io(e));
            }
            let actual = zip.data_offset_in(entry, &header)?;
            let _ = data_at.set(actual);
            if actual == guess {
                return Ok(());
            }
            actual
        }
        (None, None) => {
            let actual = zip.data_offset(entry)?;
            let _ = data_at.set(actual);
            actual
        }
    };
    if let Err(e) = zip.source().read_exact_at(dst, at.saturating_add(from)) {
        past_end(at)?;
        return Err(e.into());
    }
    Ok(())
}
