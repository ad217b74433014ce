//! The options of remote reads and writes: timeouts, retries, concurrency,
//! coalescing, further store options, and the meter they count into.

use std::time::Duration;

use super::meter::Meter;
use super::store::StoreCache;

/// Largest single range request of a batch, by default.
pub(super) const MAX_REQUEST: u64 = 16 << 20;
/// Reads of a batch closer than this are fetched in one request, by default.
pub(super) const COALESCE_GAP: u64 = 64 << 10;
/// Largest object fetched whole from a server that ignores `Range`, by default.
const MAX_WHOLE_GET: u64 = 1 << 30;

/// Timeouts, retries and concurrency of remote reads and writes.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct RemoteOptions {
    /// Longest a whole request may take, from connecting to the last byte.
    pub(crate) timeout: Duration,
    /// Longest connecting may take.
    pub(crate) connect_timeout: Duration,
    /// Retries of a failed request (server errors, dropped connections,
    /// timeouts; never a 4xx answer such as 403 or 404).
    pub(crate) retries: usize,
    /// Longest a request may be retried for, from its first try.
    pub(crate) retry_timeout: Duration,
    /// Most range requests in flight at once in a batch.
    pub(crate) concurrency: usize,
    /// Reads of a batch whose gap is at most this many bytes are fetched in
    /// one request (the gap's bytes are fetched and dropped). Default 64 KiB.
    pub(crate) coalesce_gap: u64,
    /// Largest request a batch's coalescing makes, in bytes (a single read
    /// larger than this is still one request). Default 16 MiB. Bounds the
    /// memory in flight: about `concurrency × max_request`.
    pub(crate) max_request: u64,
    /// Largest object fetched whole, in one `GET`, from a server that ignores
    /// `Range` requests. Default 1 GiB.
    pub(crate) max_whole_get: u64,
    /// More `object_store` configuration, as `(key, value)` pairs
    /// (`("aws_endpoint", "http://127.0.0.1:9000")`), applied after the environment;
    /// a key the URL's store does not know makes opening fail, naming it.
    pub(crate) store_options: Vec<(String, String)>,
    /// What the objects opened with these options count their transfers
    /// into, beside the process's [`totals`](super::totals).
    pub(crate) meter: Option<Meter>,
    /// The store clients built for these options and their clones (one
    /// load's objects), one per store: a client holds a connection pool and
    /// a credential chain, so a set of many files shares one. A builder
    /// that changes what a client is built with starts an empty cache.
    pub(super) stores: StoreCache,
}

impl Default for RemoteOptions {
    /// A minute a request, 5 s to connect, 3 retries within 30 s, 16
    /// requests in flight, 64 KiB gaps coalesced, 16 MiB requests at most,
    /// objects of up to 1 GiB fetched whole from a server without `Range`.
    fn default() -> Self {
        RemoteOptions {
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            retries: 3,
            retry_timeout: Duration::from_secs(30),
            concurrency: 16,
            coalesce_gap: COALESCE_GAP,
            max_request: MAX_REQUEST,
            max_whole_get: MAX_WHOLE_GET,
            store_options: Vec::new(),
            meter: None,
            stores: StoreCache::default(),
        }
    }
}

impl RemoteOptions {
    /// Longest a whole request may take, from connecting to the last byte.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.stores = StoreCache::default();
        self
    }

    /// Longest connecting may take.
    pub fn with_connect_timeout(mut self, connect_timeout: Duration) -> Self {
        self.connect_timeout = connect_timeout;
        self.stores = StoreCache::default();
        self
    }

    /// Retries of a failed request (server errors, dropped connections,
    /// timeouts; never a 4xx answer such as 403 or 404).
    pub fn with_retries(mut self, retries: usize) -> Self {
        self.retries = retries;
        self.stores = StoreCache::default();
        self
    }

    /// Longest a request may be retried for, from its first try.
    pub fn with_retry_timeout(mut self, retry_timeout: Duration) -> Self {
        self.retry_timeout = retry_timeout;
        self.stores = StoreCache::default();
        self
    }

    /// Most range requests in flight at once in a batch.
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// Reads of a batch whose gap is at most this many bytes are fetched in
    /// one request (the gap's bytes are fetched and dropped). Default 64 KiB.
    pub fn with_coalesce_gap(mut self, coalesce_gap: u64) -> Self {
        self.coalesce_gap = coalesce_gap;
        self
    }

    /// Largest request a batch's coalescing makes, in bytes (a single read
    /// larger than this is still one request). Default 16 MiB. Bounds the
    /// memory in flight: about `concurrency × max_request`.
    pub fn with_max_request(mut self, max_request: u64) -> Self {
        self.max_request = max_request;
        self
    }

    /// Largest object fetched whole, in one `GET` held in memory, from a
    /// server that ignores `Range` requests (it answers a ranged `GET` with
    /// the whole object); a larger one is refused. Default 1 GiB.
    pub fn with_max_whole_get(mut self, bytes: u64) -> Self {
        self.max_whole_get = bytes;
        self
    }

    /// More `object_store` configuration, as `(key, value)` pairs
    /// (`("aws_endpoint", "http://127.0.0.1:9000")`), applied after the environment;
    /// a key the URL's store does not know makes opening fail, naming it.
    pub fn with_store_options<I, K, V>(mut self, options: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.store_options
            .extend(options.into_iter().map(|(k, v)| (k.into(), v.into())));
        self.stores = StoreCache::default();
        self
    }

    /// Counts every request and byte of the objects opened with these
    /// options into `meter` too (as well as into the process's
    /// [`totals`](super::totals)), so that one call's transfer can be told
    /// apart from the rest of the process's.
    pub fn with_meter(mut self, meter: Meter) -> Self {
        self.meter = Some(meter);
        self
    }

    /// Most range requests in flight at once in a batch.
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// The defaults, with `STOWAGE_REMOTE_TIMEOUT` (seconds, fractions allowed),
    /// `STOWAGE_REMOTE_CONNECT_TIMEOUT`, `STOWAGE_REMOTE_RETRIES`,
    /// `STOWAGE_REMOTE_RETRY_TIMEOUT`, `STOWAGE_REMOTE_CONCURRENCY`,
    /// `STOWAGE_REMOTE_COALESCE_GAP`, `STOWAGE_REMOTE_MAX_REQUEST` and
    /// `STOWAGE_REMOTE_MAX_WHOLE_GET` (bytes) read from the environment where
    /// set and valid.
    pub fn from_env() -> Self {
        let secs = |name: &str| {
            std::env::var(name)
                .ok()?
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s > 0.0)
                .map(Duration::from_secs_f64)
        };
        let count = |name: &str| std::env::var(name).ok()?.parse::<usize>().ok();
        let d = RemoteOptions::default();
        RemoteOptions {
            timeout: secs("STOWAGE_REMOTE_TIMEOUT").unwrap_or(d.timeout),
            connect_timeout: secs("STOWAGE_REMOTE_CONNECT_TIMEOUT").unwrap_or(d.connect_timeout),
            retries: count("STOWAGE_REMOTE_RETRIES").unwrap_or(d.retries),
            retry_timeout: secs("STOWAGE_REMOTE_RETRY_TIMEOUT").unwrap_or(d.retry_timeout),
            concurrency: count("STOWAGE_REMOTE_CONCURRENCY")
                .filter(|&c| c > 0)
                .unwrap_or(d.concurrency),
            coalesce_gap: count("STOWAGE_REMOTE_COALESCE_GAP").map_or(d.coalesce_gap, |n| n as u64),
            max_request: count("STOWAGE_REMOTE_MAX_REQUEST")
                .filter(|&n| n > 0)
                .map_or(d.max_request, |n| n as u64),
            max_whole_get: count("STOWAGE_REMOTE_MAX_WHOLE_GET")
                .map_or(d.max_whole_get, |n| n as u64),
            store_options: d.store_options,
            meter: d.meter,
            stores: d.stores,
        }
    }
}
