//! Writing an object: a multipart upload that `write` fills, completed only
//! once `write` has succeeded, so a failed or interrupted save leaves no
//! object under the URL (and an earlier one untouched).
//!
//! Parts are what a store bills for until the upload is completed or
//! aborted, so an upload that will not be completed is aborted: when `write`
//! or a part fails, when completing fails, and when the process is ended by
//! a signal meanwhile. For that last case the upload of a cloud store (S3,
//! GCS, Azure) is registered with [`remove_temporaries`](crate::io::remove_temporaries)
//! by its id, through the store's [`MultipartStore`], so the signal's
//! handler can abort it from its own thread. A process killed outright
//! (`SIGKILL`) leaves its parts to the bucket's lifecycle rule
//! (S3's `AbortIncompleteMultipartUpload`; Azure discards uncommitted
//! blocks after 7 days), as no later process can know its id.

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path as ObjectPath;
use object_store::{MultipartId, PutPayload};
use tokio::task::{AbortHandle, JoinHandle};

use super::{
    block_on, count, fail, in_url, open_with_parts, runtime, Counters, Meter, RemoteFailure,
    RemoteOptions, PART_SIZE,
};
use crate::error::ErrorContext;
use crate::io::pending::Pending;
use crate::{Error, Result};

/// Parts sent at once.
const IN_FLIGHT: usize = 4;

/// How long an abort may take before it is given up (the upload is not
/// visible either way; only its parts stay billed).
const ABORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Writes the object `url` with a multipart upload that `write` fills.
/// Errors come wrapped in [`Error::InFile`] naming the URL.
pub(crate) fn upload(
    url: &str,
    options: &RemoteOptions,
    write: impl FnOnce(&mut dyn io::Write) -> Result<()>,
) -> Result<()> {
    let failed = |failure: RemoteFailure| in_url(url, fail(url, None, failure));
    let (store, parts, path) = open_with_parts(url, options).map_err(failed)?;
    let meter = options.meter.as_ref().map(Meter::counters);
    let Some(parts) = parts else {
        return upload_unregistered(url, store.as_ref(), &path, meter, write);
    };
    runtime().map_err(failed)?;
    count(meter, 1, 0, 0);
    let id = block_on(parts.create_multipart(&path))
        .map_err(failed)?
        .map_err(|e| failed(e.into()))?;
    let upload = Arc::new(Started {
        parts,
        path,
        id,
        sending: Mutex::new(Vec::new()),
    });
    let pending = Pending::new({
        let upload = Arc::clone(&upload);
        move || upload.abort()
    });
    let mut out = Parts {
        upload: Arc::clone(&upload),
        url,
        buf: Vec::new(),
        next: 0,
        in_flight: VecDeque::new(),
        done: Vec::new(),
        written: 0,
    };
    let sent = write(&mut out).and_then(|()| out.finish());
    let total = out.written;
    let done = match sent {
        Ok(done) => done,
        Err(e) => {
            // Parts still in flight finish or fail on their own; none is
            // kept once the upload is aborted.
            drop(pending);
            upload.abort();
            return Err(match e {
                e @ Error::InFile { .. } => e,
                e => e.in_file(url),
            });
        }
    };
    // The parts, then the request that completes the upload.
    count(meter, done.len() as u64 + 1, 0, total);
    // Completed under the registry's lock: a signal's abort comes wholly
    // before (and this step is refused) or after (and finds it done).
    let completed = pending.step(|| {
        block_on(
            upload
                .parts
                .complete_multipart(&upload.path, &upload.id, done),
        )
        .map_err(failed)?
        .map_err(|e| failed(e.into()))
    });
    drop(pending);
    if let Err(e) = completed {
        upload.abort();
        return Err(e);
    }
    Ok(())
}

/// A multipart upload begun, by its id.
struct Started {
    parts: Arc<dyn MultipartStore>,
    path: ObjectPath,
    id: MultipartId,
    /// The parts' requests, cancelled before an abort: a part still being
    /// sent when the upload is aborted may be stored after it (S3 says to
    /// abort again then), and some servers refuse the abort meanwhile.
    sending: Mutex<Vec<AbortHandle>>,
}

impl Started {
    /// Cancels the parts in flight and aborts the upload, best effort: a
    /// few tries within [`ABORT_TIMEOUT`].
    fn abort(&self) {
        for part in self
            .sending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            part.abort();
        }
        let tries = async {
            for _ in 0..3 {
                if self
                    .parts
                    .abort_multipart(&self.path, &self.id)
                    .await
                    .is_ok()
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        // The timer is made inside the runtime, which drives it.
        let _ = block_on(async { tokio::time::timeout(ABORT_TIMEOUT, tries).await });
    }
}

/// The `Write` end of an upload: a part goes out each time [`PART_SIZE`]
/// bytes have been written, at most [`IN_FLIGHT`] at once.
struct Parts<'a> {
    upload: Arc<Started>,
    url: &'a str,
    buf: Vec<u8>,
    /// The next part's index.
    next: usize,
    in_flight: VecDeque<JoinHandle<object_store::Result<PartId>>>,
    /// The parts sent, in order.
    done: Vec<PartId>,
    /// Bytes written so far.
    written: u64,
}

impl Parts<'_> {
    /// Sends the buffered bytes as the next part, after waiting for room.
    fn send(&mut self) -> io::Result<()> {
        while self.in_flight.len() >= IN_FLIGHT {
            self.wait_one()?;
        }
        let bytes = Bytes::from(std::mem::take(&mut self.buf));
        let (upload, index) = (Arc::clone(&self.upload), self.next);
        self.next += 1;
        let rt = runtime().map_err(|f| fail(self.url, None, f))?;
        let part = rt.spawn(async move {
            let payload = PutPayload::from(bytes);
            upload
                .parts
                .put_part(&upload.path, &upload.id, index, payload)
                .await
        });
        let mut sending = self
            .upload
            .sending
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        sending.retain(|p| !p.is_finished());
        sending.push(part.abort_handle());
        drop(sending);
        self.in_flight.push_back(part);
        Ok(())
    }

    /// Waits for the oldest part in flight.
    fn wait_one(&mut self) -> io::Result<()> {
        let Some(part) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let url = self.url;
        match block_on(part) {
            Ok(Ok(Ok(id))) => {
                self.done.push(id);
                Ok(())
            }
            Ok(Ok(Err(e))) => Err(fail(url, None, e.into())),
            Ok(Err(joined)) => Err(io::Error::other(format!(
                "{url}: the upload of part {} ended without a result: {joined}",
                self.done.len() + 1
            ))),
            Err(failure) => Err(fail(url, None, failure)),
        }
    }

    /// Sends what is buffered (one part at least: an empty object is one
    /// empty part) and waits for every part.
    fn finish(&mut self) -> Result<Vec<PartId>> {
        if !self.buf.is_empty() || self.next == 0 {
            self.send()?;
        }
        while !self.in_flight.is_empty() {
            self.wait_one()?;
        }
        Ok(std::mem::take(&mut self.done))
    }
}

impl io::Write for Parts<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(PART_SIZE);
        }
        let n = buf.len().min(PART_SIZE - self.buf.len());
        self.buf.extend_from_slice(&buf[..n]);
        self.written += n as u64;
        if self.buf.len() == PART_SIZE {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An upload through a store without a [`MultipartStore`] (`file://`;
/// `http(s)://` refuses uploads): `object_store`'s own multipart writer,
/// aborted on failure but not registered for a signal.
fn upload_unregistered(
    url: &str,
    store: &dyn object_store::ObjectStore,
    path: &ObjectPath,
    meter: Option<&Counters>,
    write: impl FnOnce(&mut dyn io::Write) -> Result<()>,
) -> Result<()> {
    let failed = |failure: RemoteFailure| in_url(url, fail(url, None, failure));
    let rt = runtime().map_err(failed)?;
    count(meter, 1, 0, 0);
    let started = block_on(store.put_multipart(path))
        .map_err(failed)?
        .map_err(|e| failed(e.into()))?;
    let mut out = Unregistered {
        parts: object_store::WriteMultipart::new_with_chunk_size(started, PART_SIZE),
        rt,
        url,
        written: 0,
    };
    let written = write(&mut out);
    let (parts, total) = (out.parts, out.written);
    match written {
        Ok(()) => {
            let n = total.div_ceil(PART_SIZE as u64).max(1);
            count(meter, n + 1, 0, total);
            block_on(parts.finish())
                .map_err(failed)?
                .map_err(|e| failed(e.into()))?;
            Ok(())
        }
        Err(e) => {
            // Best effort: the upload was never completed, so nothing is
            // visible under the key either way; aborting frees its parts.
            let _ = block_on(parts.abort());
            Err(match e {
                e @ Error::InFile { .. } => e,
                e => e.in_file(url),
            })
        }
    }
}

/// The `Write` end of an [`upload_unregistered`].
struct Unregistered<'a> {
    parts: object_store::WriteMultipart,
    rt: &'static tokio::runtime::Runtime,
    url: &'a str,
    written: u64,
}

impl io::Write for Unregistered<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        {
            let _enter = self.rt.enter();
            self.parts.write(buf);
        }
        self.written += buf.len() as u64;
        let url = self.url;
        match block_on(self.parts.wait_for_capacity(IN_FLIGHT)) {
            Ok(Ok(())) => Ok(buf.len()),
            Ok(Err(e)) => Err(fail(url, None, e.into())),
            Err(failure) => Err(fail(url, None, failure)),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
