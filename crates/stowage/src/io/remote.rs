//! Checkpoints in object storage: an object (`s3://`, `gs://`, `az://`,
//! `abfs://`, `http(s)://`, `file://`) read at offsets with range requests,
//! and written with a multipart upload that is committed only when complete.
//!
//! Reading: [`RemoteObject`] is a [`ReadAt`] over one object. Opening it is
//! one ranged `GET` of its first 64 KiB, which gives its length too (a `HEAD`
//! only for an empty object); that block and the last 256 KiB (fetched on
//! first use) are kept (NOTE [remote tail cache]); every other read is one
//! ranged `GET`.
//! Batches of reads ([`ReadAt::read_batch_at`]) are coalesced and sent
//! concurrently, with a bounded number of requests in flight, each at most
//! 16 MiB, so memory beyond the destination buffers stays bounded too.
//!
//! NOTE [remote tail cache]: a torch zip archive is listed from its end
//! records and central directory at the tail; its `data.pkl`, `byteorder`
//! and `.format_version` records come first in the file, as `torch.save`
//! writes them. A safetensors header is at the head. So keeping the head and
//! the tail makes listing a checkpoint of any size cost a handful of requests.
//!
//! Stores are configured as the `object_store` crate's builders read them
//! from the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`: credentials,
//! `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`, …), and [`RemoteOptions`] sets the
//! timeouts, retries, concurrency, coalescing and further store options; a
//! library user passes them as `LoadOptions::with_remote` to `load_with(url, …)`
//! and as `SaveOptions::with_remote` to `save_with(url, …)`. The library's API
//! stays synchronous: a tokio runtime kept inside this module runs the
//! requests.
//!
//! A server that ignores `Range` (Python's `http.server`) answers the first
//! ranged `GET` with the whole object (`200`, not `206`). That answer is
//! kept when the object is at most [`RemoteOptions::with_max_whole_get`]
//! bytes (1 GiB by default) and every read is then served from memory; a
//! larger object is refused, naming the limit. [`Transfer::whole_gets`]
//! counts the objects read so.
//!
//! Transfers are counted per object ([`RemoteObject::transfer`]) and for the
//! whole process ([`totals`]).

use std::future::Future;
use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;

use super::ReadAt;

mod error;
mod meter;
mod options;
mod store;
mod upload;

use crate::Result;
use error::{fail, in_url};
pub use error::{RemoteError, RemoteFailure};
use meter::{count, counted, Counters};
pub use meter::{totals, Meter, Transfer};
pub use options::RemoteOptions;
use store::{open_store, open_with_parts};
pub(crate) use upload::upload;

/// Bytes kept from the head of an object.
const HEAD_BLOCK: u64 = 64 << 10;
/// Bytes kept from the tail of an object.
const TAIL_BLOCK: u64 = 256 << 10;
/// Size of each part of a multipart upload (S3's minimum is 5 MiB).
const PART_SIZE: usize = 16 << 20;

/// URL schemes read through `object_store`.
const SCHEMES: [&str; 9] = [
    "s3", "s3a", "gs", "az", "adl", "azure", "abfs", "abfss", "http",
];

/// Whether `path` is a URL this module opens (`s3://…`, `gs://…`, `az://…`,
/// `abfs(s)://…`, `http(s)://…`, `file://…`) rather than a local path, and
/// the URL if so.
pub(crate) fn url_of(path: &Path) -> Option<&str> {
    let text = path.to_str()?;
    let (scheme, rest) = text.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let known = SCHEMES.contains(&scheme.as_str()) || scheme == "https" || scheme == "file";
    (known && !rest.is_empty()).then_some(text)
}

/// The runtime the requests run on, started on first use.
fn runtime() -> std::result::Result<&'static tokio::runtime::Runtime, RemoteFailure> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, Arc<io::Error>>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("stowage-remote")
                .enable_all()
                .build()
                .map_err(Arc::new)
        })
        .as_ref()
        .map_err(|e| RemoteFailure::Runtime(e.clone()))
}

/// Runs `future` to completion from synchronous code, also when called from
/// inside another tokio runtime (then on a thread of its own).
fn block_on<F>(future: F) -> std::result::Result<F::Output, RemoteFailure>
where
    F: Future + Send,
    F::Output: Send,
{
    let rt = runtime()?;
    if tokio::runtime::Handle::try_current().is_err() {
        return Ok(rt.block_on(future));
    }
    std::thread::scope(|s| match s.spawn(|| rt.block_on(future)).join() {
        Ok(out) => Ok(out),
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// One object in a store, read at offsets with range requests.
pub struct RemoteObject {
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    url: String,
    len: u64,
    /// The object's ETag when it was opened, asked for by every later read
    /// (`If-Match`); `None` where the store gives none.
    e_tag: Option<String>,
    concurrency: usize,
    coalesce_gap: u64,
    max_request: u64,
    head: OnceLock<Bytes>,
    tail: OnceLock<Bytes>,
    /// The whole object, when its server ignores `Range`: every read is
    /// served from it.
    whole: Option<Bytes>,
    counters: Counters,
}

impl std::fmt::Debug for RemoteObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteObject")
            .field("url", &self.url)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl RemoteObject {
    /// Opens the object at `url` with [`RemoteOptions::from_env`]: one ranged
    /// `GET` of its first 64 KiB, which gives its length too.
    ///
    /// # Errors
    /// [`Error::InFile`](crate::Error::InFile) naming the URL, around an
    /// [`Error::Io`](crate::Error::Io) holding a [`RemoteError`]: an invalid
    /// URL, an unknown object, a refused request.
    pub fn open(url: &str) -> Result<RemoteObject> {
        Self::open_with(url, &RemoteOptions::from_env())
    }

    /// Opens the object at `url` with `options`.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_with(url: &str, options: &RemoteOptions) -> Result<RemoteObject> {
        let failed = |failure: RemoteFailure| in_url(url, fail(url, None, failure));
        let (store, path) = open_store(url, options).map_err(failed)?;
        let counters = Counters::for_options(options);
        let first = block_on(first_block(
            &*store,
            &path,
            &counters,
            options.max_whole_get,
        ))
        .map_err(failed)?
        .map_err(|(range, e)| in_url(url, fail(url, range, e)))?;
        let head = OnceLock::new();
        let (len, e_tag, whole) = match first {
            First::Head { bytes, len, e_tag } => {
                // A short block is kept only when it is the whole object.
                if bytes.len() as u64 == len.min(HEAD_BLOCK) {
                    let _ = head.set(bytes);
                }
                (len, e_tag, None)
            }
            First::Empty { len, e_tag } => (len, e_tag, None),
            First::Whole { bytes, e_tag } => (bytes.len() as u64, e_tag, Some(bytes)),
        };
        Ok(RemoteObject {
            store,
            path,
            url: url.to_owned(),
            len,
            e_tag,
            concurrency: options.concurrency.max(1),
            coalesce_gap: options.coalesce_gap,
            max_request: options.max_request.max(1),
            head,
            tail: OnceLock::new(),
            whole,
            counters,
        })
    }

    /// The object's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The most bytes one request asks for.
    pub(crate) fn max_request(&self) -> u64 {
        self.max_request
    }

    /// The most requests in flight at once.
    pub(crate) fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// What reading this object has transferred so far (opening it included).
    pub fn transfer(&self) -> Transfer {
        self.counters.snapshot()
    }

    /// One ranged `GET` of the version opened, checked to bring exactly the
    /// bytes asked for.
    async fn fetch(&self, range: Range<u64>) -> std::result::Result<Bytes, RemoteError> {
        let asked = range.end - range.start;
        let options = object_store::GetOptions {
            range: Some(object_store::GetRange::Bounded(range.clone())),
            if_match: self.e_tag.clone(),
            ..Default::default()
        };
        let got = match self.store.get_opts(&self.path, options).await {
            Ok(answer) => answer.bytes().await,
            Err(e) => Err(e),
        };
        let received = got.as_ref().map_or(0, |b| b.len() as u64);
        count(Some(&self.counters), 1, received, 0);
        let error = |failure| RemoteError {
            url: self.url.clone(),
            range: Some(range.clone()),
            failure,
        };
        let bytes = got.map_err(|e| match (e, &self.e_tag) {
            (object_store::Error::Precondition { .. }, Some(e_tag)) => {
                error(RemoteFailure::Changed {
                    e_tag: e_tag.clone(),
                })
            }
            (e, _) => error(e.into()),
        })?;
        if bytes.len() as u64 != asked {
            return Err(error(RemoteFailure::ShortRange {
                expected: asked,
                found: bytes.len() as u64,
            }));
        }
        Ok(bytes)
    }

    fn fetch_blocking(&self, range: Range<u64>) -> io::Result<Bytes> {
        match block_on(self.fetch(range.clone())) {
            Ok(got) => got.map_err(RemoteError::into_io),
            Err(failure) => Err(fail(&self.url, Some(range), failure)),
        }
    }

    /// The cached head or tail block holding `range`, fetched on first use.
    fn cached(&self, range: &Range<u64>) -> io::Result<Option<&[u8]>> {
        if let Some(whole) = &self.whole {
            // Checked against the length, which is the whole's.
            return Ok(whole.get(range.start as usize..range.end as usize));
        }
        let head_end = self.len.min(HEAD_BLOCK);
        let tail_start = self.len.saturating_sub(TAIL_BLOCK);
        let (cell, start, end) = if range.end <= head_end {
            (&self.head, 0, head_end)
        } else if range.start >= tail_start {
            (&self.tail, tail_start, self.len)
        } else {
            return Ok(None);
        };
        let block = match cell.get() {
            Some(b) => b,
            None => {
                let fetched = self.fetch_blocking(start..end)?;
                cell.get_or_init(|| fetched)
            }
        };
        let from = (range.start - start) as usize;
        Ok(block.get(from..from + (range.end - range.start) as usize))
    }

    fn check_range(&self, offset: u64, n: usize) -> io::Result<Range<u64>> {
        match offset.checked_add(n as u64) {
            Some(end) if end <= self.len => Ok(offset..end),
            _ => Err(fail(
                &self.url,
                Some(offset..offset.saturating_add(n as u64)),
                RemoteFailure::PastEnd { len: self.len },
            )),
        }
    }
}

/// What opening an object fetched.
enum First {
    /// Its head block (all of it when shorter), its length and ETag.
    Head {
        bytes: Bytes,
        len: u64,
        e_tag: Option<String>,
    },
    /// An empty object, from a `HEAD`.
    Empty { len: u64, e_tag: Option<String> },
    /// The whole object: the server ignored `Range`.
    Whole { bytes: Bytes, e_tag: Option<String> },
}

/// Opens an object with one ranged `GET` of its head block: the object's
/// length (from the answer's `Content-Range`), its ETag and the block every
/// format's detection reads, in one request rather than a `HEAD` and a
/// `GET`. An empty object cannot answer a range (416): then, and only then,
/// a `HEAD` gives its length. A server that ignores `Range` answers with
/// the whole object: then one plain `GET` brings it, if it is at most
/// `max_whole` bytes (its `Content-Length` says so before any is read).
/// A failure names the range asked for (none for the `HEAD`).
async fn first_block(
    store: &dyn ObjectStore,
    path: &ObjectPath,
    counters: &Counters,
    max_whole: u64,
) -> std::result::Result<First, (Option<Range<u64>>, RemoteFailure)> {
    let range = 0..HEAD_BLOCK;
    let options = object_store::GetOptions {
        range: Some(object_store::GetRange::Bounded(range.clone())),
        ..Default::default()
    };
    let got = match store.get_opts(path, options).await {
        Ok(got) => got,
        Err(e) if range_refused(&e) => {
            count(Some(counters), 2, 0, 0);
            let meta = store.head(path).await.map_err(|e| (None, e.into()))?;
            return Ok(First::Empty {
                len: meta.size,
                e_tag: meta.e_tag,
            });
        }
        Err(e) if range_ignored(&e) => {
            count(Some(counters), 1, 0, 0);
            return whole_object(store, path, counters, max_whole).await;
        }
        Err(e @ object_store::Error::NotFound { .. }) => {
            count(Some(counters), 1, 0, 0);
            return Err((None, e.into()));
        }
        Err(e) => {
            count(Some(counters), 1, 0, 0);
            return Err((Some(range), e.into()));
        }
    };
    let (len, e_tag) = (got.meta.size, got.meta.e_tag.clone());
    let bytes = got.bytes().await;
    count(
        Some(counters),
        1,
        bytes.as_ref().map_or(0, |b| b.len() as u64),
        0,
    );
    Ok(First::Head {
        bytes: bytes.map_err(|e| (Some(range), e.into()))?,
        len,
        e_tag,
    })
}

/// The whole object, in one plain `GET`, from a server that ignores
/// `Range`; refused before its body is read when its `Content-Length` is
/// past `max`, and never read past `max` whatever the body brings.
async fn whole_object(
    store: &dyn ObjectStore,
    path: &ObjectPath,
    counters: &Counters,
    max: u64,
) -> std::result::Result<First, (Option<Range<u64>>, RemoteFailure)> {
    let got = store.get(path).await;
    count(Some(counters), 1, 0, 0);
    let got = got.map_err(|e| (None, e.into()))?;
    let (len, e_tag) = (got.meta.size, got.meta.e_tag.clone());
    if len > max {
        return Err((None, RemoteFailure::NoRange { len, max }));
    }
    // `len` is at most `max`, and `max` bytes were allowed in memory.
    let mut body = Vec::with_capacity(len as usize);
    let mut stream = got.into_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| (None, e.into()))?;
        count(Some(counters), 0, chunk.len() as u64, 0);
        if (body.len() + chunk.len()) as u64 > max {
            return Err((None, RemoteFailure::NoRange { len, max }));
        }
        body.extend_from_slice(&chunk);
    }
    if body.len() as u64 != len {
        return Err((
            None,
            RemoteFailure::ShortRange {
                expected: len,
                found: body.len() as u64,
            },
        ));
    }
    for c in counted(Some(counters)) {
        c.whole_gets.fetch_add(1, Ordering::Relaxed);
    }
    Ok(First::Whole {
        bytes: Bytes::from(body),
        e_tag,
    })
}

/// Whether the store answered a range request with the whole object (HTTP
/// 200, not 206: a server without `Range` support). `object_store`'s HTTP
/// store says so as `NotSupported` ("Range request not supported"), its
/// other stores as a generic error ("non-partial response"); only the text
/// tells them from other failures.
fn range_ignored(e: &object_store::Error) -> bool {
    says(
        e,
        &[
            "Range request not supported",
            "non-partial response when range requested",
        ],
    )
}

/// Whether the store refused a range as not satisfiable (HTTP 416: the
/// object is empty). `object_store` reports it as a generic error whose
/// text carries the status.
fn range_refused(e: &object_store::Error) -> bool {
    says(e, &["416", "Range Not Satisfiable"])
}

/// Whether `e` or one of its causes has one of `texts` in its message:
/// `object_store` reports some answers only as text.
fn says(e: &object_store::Error, texts: &[&str]) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        let text = c.to_string();
        if texts.iter().any(|t| text.contains(t)) {
            return true;
        }
        cause = c.source();
    }
    false
}

/// One request of a batch: the bytes it fetches and the reads it serves.
struct Request {
    range: Range<u64>,
    reads: Vec<usize>,
}

/// Sorts reads by offset and merges neighbours at most `gap` bytes apart
/// into requests of at most `max` bytes (a read larger than that is a
/// request of its own).
fn coalesce(reads: &[(u64, usize)], gap: u64, max: u64) -> Vec<Request> {
    let mut order: Vec<usize> = (0..reads.len()).filter(|&i| reads[i].1 > 0).collect();
    order.sort_by_key(|&i| reads[i].0);
    let mut requests: Vec<Request> = Vec::new();
    for i in order {
        let (start, n) = reads[i];
        let end = start.saturating_add(n as u64);
        if let Some(last) = requests.last_mut() {
            let joined_end = last.range.end.max(end);
            if start <= last.range.end.saturating_add(gap) && joined_end - last.range.start <= max {
                last.range.end = joined_end;
                last.reads.push(i);
                continue;
            }
        }
        requests.push(Request {
            range: start..end,
            reads: vec![i],
        });
    }
    requests
}

impl ReadAt for RemoteObject {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let range = self.check_range(offset, buf.len())?;
        if buf.is_empty() {
            return Ok(());
        }
        if let Some(bytes) = self.cached(&range)? {
            buf.copy_from_slice(bytes);
            return Ok(());
        }
        let bytes = self.fetch_blocking(range)?;
        buf.copy_from_slice(&bytes);
        Ok(())
    }

    fn read_cost(&self) -> super::ReadCost {
        match self.whole {
            Some(_) => super::ReadCost::Local,
            None => super::ReadCost::Request,
        }
    }

    fn read_batch_at(
        &self,
        reads: &mut [(u64, &mut [u8])],
    ) -> std::result::Result<(), (usize, io::Error)> {
        read_batches(&mut [(self, reads)], self.concurrency).map_err(|(_, i, e)| (i, e))
    }
}

/// One object's reads in a batch of several objects' ([`read_batches`]).
pub(crate) type ObjectReads<'o, 'r, 'b> = (&'o RemoteObject, &'r mut [(u64, &'b mut [u8])]);

/// Reads from several objects as one batch (a distributed checkpoint's data
/// files): each object's reads coalesced by its own options, and at most
/// `concurrency` requests in flight across all of them.
///
/// # Errors
/// The index of the object and of its read that failed, and the error (a
/// [`RemoteError`] inside).
pub(crate) fn read_batches(
    batch: &mut [ObjectReads<'_, '_, '_>],
    concurrency: usize,
) -> std::result::Result<(), (usize, usize, io::Error)> {
    for (o, (object, reads)) in batch.iter().enumerate() {
        for (i, (offset, buf)) in reads.iter().enumerate() {
            object
                .check_range(*offset, buf.len())
                .map_err(|e| (o, i, e))?;
        }
    }
    // An object fetched whole (its server ignores `Range`) is read from memory.
    for (object, reads) in batch.iter_mut() {
        if let Some(whole) = &object.whole {
            for (offset, buf) in reads.iter_mut() {
                let from = *offset as usize; // checked against the length above
                buf.copy_from_slice(&whole[from..from + buf.len()]);
            }
        }
    }
    let objects: Vec<&RemoteObject> = batch.iter().map(|(object, _)| *object).collect();
    let requests: Vec<Vec<Request>> = batch
        .iter()
        .map(|(object, reads)| {
            if object.whole.is_some() {
                return Vec::new();
            }
            let spans: Vec<(u64, usize)> = reads.iter().map(|(o, b)| (*o, b.len())).collect();
            coalesce(&spans, object.coalesce_gap, object.max_request)
        })
        .collect();
    let all: Vec<(usize, usize)> = requests
        .iter()
        .enumerate()
        .flat_map(|(o, rs)| (0..rs.len()).map(move |r| (o, r)))
        .collect();
    let work = async {
        let mut results = futures::stream::iter(all)
            .map(|(o, r)| {
                let (object, range) = (objects[o], requests[o][r].range.clone());
                async move { (o, r, object.fetch(range).await) }
            })
            .buffer_unordered(concurrency.max(1));
        while let Some((o, r, got)) = results.next().await {
            let req = &requests[o][r];
            let bytes = got.map_err(|e| (o, req.reads[0], e.into_io()))?;
            for &i in &req.reads {
                let (offset, buf) = &mut batch[o].1[i];
                let from = (*offset - req.range.start) as usize;
                buf.copy_from_slice(&bytes[from..from + buf.len()]);
            }
        }
        Ok(())
    };
    match block_on(work) {
        Ok(done) => done,
        Err(failure) => {
            let url = objects.first().map_or("", |o| o.url.as_str());
            Err((0, 0, fail(url, None, failure)))
        }
    }
}

/// The names of the objects directly inside the folder `url`
/// (`s3://bucket/run/step-100/`, with or without the trailing `/`), sorted:
/// one listing request (`list_with_delimiter`; the store pages a large
/// folder). Plain `http(s)://` servers cannot list.
///
/// # Errors
/// [`Error::InFile`](crate::Error::InFile) naming the folder's URL, around
/// an [`Error::Io`](crate::Error::Io) holding a [`RemoteError`]: an invalid
/// URL, a refused listing (403), a store that cannot list.
pub fn list(url: &str, options: &RemoteOptions) -> Result<Vec<String>> {
    let failed = |failure: RemoteFailure| in_url(url, fail(url, None, failure));
    let (store, path) = open_store(url.trim_end_matches('/'), options).map_err(failed)?;
    let listed = block_on(store.list_with_delimiter(Some(&path))).map_err(failed)?;
    count(options.meter.as_ref().map(Meter::counters), 1, 0, 0);
    let listed = listed.map_err(|e| failed(e.into()))?;
    let mut names: Vec<String> = listed
        .objects
        .iter()
        .filter_map(|o| o.location.filename().map(str::to_owned))
        .collect();
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::options::{COALESCE_GAP, MAX_REQUEST};
    use super::*;
    use crate::Error;

    #[test]
    fn urls_are_told_from_paths() {
        for url in [
            "s3://bucket/key.pt",
            "gs://b/k",
            "az://c/k",
            "abfs://c/k",
            "https://host/x.pt",
            "http://127.0.0.1:1/x",
            "file:///tmp/x.pt",
        ] {
            assert_eq!(url_of(Path::new(url)), Some(url), "{url}");
        }
        for path in [
            "model.pt",
            "/tmp/s3://x",
            "dir/file",
            "s3://",
            "ftp://host/x",
        ] {
            assert_eq!(url_of(Path::new(path)), None, "{path}");
        }
    }

    #[test]
    fn coalescing_merges_neighbours_within_limits() {
        // Two close reads merge; a far one stands alone; empty reads are dropped.
        let reads = [(100, 10), (0, 50), (10 << 20, 4), (60, 0)];
        let requests = coalesce(&reads, COALESCE_GAP, MAX_REQUEST);
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0].range, 0..110);
        assert_eq!(requests[0].reads, vec![1, 0]);
        assert_eq!(requests[1].range, (10 << 20)..(10 << 20) + 4);
        // Adjacent 16 MiB pieces stay separate requests.
        let big = [(0, 16 << 20), (16 << 20, 16 << 20)];
        assert_eq!(coalesce(&big, COALESCE_GAP, MAX_REQUEST).len(), 2);
        // Other limits: no gap bridged; everything in one request.
        assert_eq!(coalesce(&reads, 0, MAX_REQUEST).len(), 3);
        assert_eq!(coalesce(&reads, u64::MAX, u64::MAX).len(), 1);
    }

    #[test]
    fn file_urls_read_ranges_and_count_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blob.bin");
        let data: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let url = format!("file://{}", path.display());
        let object = RemoteObject::open(&url).unwrap();
        assert_eq!(object.len(), data.len() as u64);
        let mut buf = [0u8; 16];
        object.read_exact_at(&mut buf, 0).unwrap();
        object.read_exact_at(&mut buf, 100).unwrap();
        assert_eq!(&buf, &data[100..116]);
        // One GET: the head block, and the length with it.
        assert_eq!(object.transfer().requests, 1);
        assert_eq!(object.transfer().bytes_received, 64 << 10);
        let (mut a, mut b) = (vec![0u8; 1000], vec![0u8; 5000]);
        let mut reads = [(500_000u64, &mut a[..]), (300_000u64, &mut b[..])];
        object.read_batch_at(&mut reads).unwrap();
        assert_eq!(a, &data[500_000..501_000]);
        assert_eq!(b, &data[300_000..305_000]);
        let past = object.read_exact_at(&mut buf, data.len() as u64 - 4);
        let err = past.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let remote = err.get_ref().and_then(|e| e.downcast_ref::<RemoteError>());
        assert_eq!(
            remote.and_then(|r| r.range.clone()),
            Some(data.len() as u64 - 4..data.len() as u64 + 12)
        );
    }

    /// A read after the object was replaced is an error naming the change,
    /// never bytes of the new version mixed with those already read.
    #[test]
    fn a_changed_object_is_an_error_not_mixed_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("blob.bin");
        std::fs::write(&path, vec![1u8; 1 << 20]).unwrap();
        let object = RemoteObject::open(&format!("file://{}", path.display())).unwrap();
        let mut buf = [0u8; 16];
        object.read_exact_at(&mut buf, 500_000).unwrap();
        assert_eq!(buf, [1u8; 16]);
        std::fs::write(&path, vec![2u8; (1 << 20) + 1]).unwrap();
        let err = object.read_exact_at(&mut buf, 500_000).unwrap_err();
        let remote = err.get_ref().and_then(|e| e.downcast_ref::<RemoteError>());
        assert!(
            matches!(
                remote.map(|r| &r.failure),
                Some(RemoteFailure::Changed { .. })
            ),
            "{err}"
        );
        let mut reads = [(300_000u64, &mut buf[..])];
        assert!(object.read_batch_at(&mut reads).is_err());
    }

    #[test]
    fn a_missing_object_is_not_found_naming_the_url() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}/absent.pt", dir.path().display());
        let err = RemoteObject::open(&url).unwrap_err();
        let Error::InFile { path, source } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(path.to_str(), Some(url.as_str()));
        assert!(matches!(&**source, Error::Io(e) if e.kind() == io::ErrorKind::NotFound));
    }
}
