//! Tensors made while the file is still being read.
//!
//! The framework's price of a tensor (torch's `_from_dlpack`, half of the
//! walk that builds a loaded checkpoint's Python objects) needs the GIL,
//! as the whole walk does, so after a load nothing can share it out. A
//! load of a `torch.save` archive does not need the GIL: it runs on a
//! thread of its own and hands over each storage as it makes it
//! ([`LoadOptions::with_on_storage`]), and this thread, the GIL held, makes
//! each storage's tensor over its address meanwhile (its bytes are read by
//! the time the load returns, and no Python code sees the tensor before).
//! The walk then takes a storage's premade tensor for its first tensor
//! ([`Converter::premade`](crate::convert::Converter::premade)).

use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex};

use dlpark::ffi::DLDataType;
use pyo3::prelude::*;
use stowage::{Checkpoint, DType, LoadOptions, UntypedStorage};

use crate::convert::{Made, Storages};
use crate::storage::{dlpack_type, StorageBuffer};

/// The smallest file loaded this way: a smaller one holds too few
/// storages to pay for the thread.
pub const MIN_FILE: u64 = 1 << 20;

/// Storages handed over together: a message each would cost more than
/// the tensor.
const BATCH: usize = 256;

/// Batches in flight at most: the loader waits for this thread beyond.
const IN_FLIGHT: usize = 64;

/// A storage handed over, its dtype, and that dtype's DLPack type.
type HandedOver = (UntypedStorage, DType, DLDataType);

/// The storages made since the last batch was sent, and where batches go.
struct Handover {
    pending: Mutex<Vec<HandedOver>>,
    to: SyncSender<Vec<HandedOver>>,
}

impl Handover {
    fn made(&self, storage: &UntypedStorage, dtype: DType) {
        let Some(element) = dlpack_type(dtype) else {
            return;
        };
        let Ok(mut pending) = self.pending.lock() else {
            return;
        };
        pending.push((storage.clone(), dtype, element));
        if pending.len() >= BATCH {
            // Not received only when this thread is gone (it panicked).
            let _ = self.to.send(std::mem::take(&mut *pending));
        }
    }

    /// Sends what is pending, then an empty batch: the end.
    fn finish(&self) {
        let pending = match self.pending.lock() {
            Ok(mut pending) => std::mem::take(&mut *pending),
            Err(_) => Vec::new(),
        };
        if !pending.is_empty() {
            let _ = self.to.send(pending);
        }
        let _ = self.to.send(Vec::new());
    }
}

/// Runs `load` with `options` on a thread of its own, making each storage's
/// tensor with `from_dlpack` (the adapter's `dlpack_view`) on this thread as
/// the load hands the storages over. The GIL is released while this thread
/// waits for them and while it takes their locks.
pub fn load<F>(
    py: Python<'_>,
    options: LoadOptions,
    from_dlpack: &Bound<'_, PyAny>,
    load: F,
) -> (stowage::Result<Checkpoint>, Storages)
where
    F: FnOnce(&LoadOptions) -> stowage::Result<Checkpoint> + Send,
{
    let (to, from) = sync_channel(IN_FLIGHT);
    let handover = Arc::new(Handover {
        pending: Mutex::new(Vec::new()),
        to,
    });
    let options = {
        let handover = Arc::clone(&handover);
        options.with_on_storage(move |storage, dtype| handover.made(storage, dtype))
    };
    let mut premade = Storages::default();
    let loaded = std::thread::scope(|scope| {
        let loader = scope.spawn(move || {
            let loaded = load(&options);
            handover.finish();
            loaded
        });
        let mut from = from;
        loop {
            // A batch's storages wait for the loader's reads of them (their
            // locks) with the GIL released, as the batch itself does. (The
            // receiver goes with the closure: it may not be shared.)
            let (back, batch) = py.detach(move || {
                // The end: an empty batch, or the loader gone.
                let batch = from.recv().ok().filter(|b| !b.is_empty()).map(|batch| {
                    batch
                        .into_iter()
                        .filter_map(|(storage, dtype, element)| {
                            ready(storage).map(|b| (b, dtype, element))
                        })
                        .collect::<Vec<_>>()
                });
                (from, batch)
            });
            from = back;
            let Some(batch) = batch else {
                break;
            };
            for (buffer, dtype, element) in batch {
                let id = buffer.storage_id();
                // A storage whose tensor cannot be made here is made by the
                // walk, as without this thread.
                let made = buffer
                    .into_dlpack(py, element)
                    .and_then(|capsule| from_dlpack.call1((capsule,)));
                if let Ok(tensor) = made {
                    premade.insert(id, Made::Premade(dtype, tensor.unbind()));
                }
            }
        }
        // Nothing more is received: a send after this fails, not waits.
        // (Joined without the GIL, which nothing the loader does may then
        // wait for.)
        drop(from);
        py.detach(|| loader.join()).unwrap_or_else(|_| {
            Err(stowage::Error::Io(std::io::Error::other(
                "the loading thread panicked",
            )))
        })
    });
    (loaded, premade)
}

/// The storage's bytes as a buffer, where it has whole bytes in memory.
fn ready(storage: UntypedStorage) -> Option<StorageBuffer> {
    if !storage.has_data() || storage.nbytes() == 0 {
        return None;
    }
    StorageBuffer::new(storage).ok()
}
