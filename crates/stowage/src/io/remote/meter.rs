//! What remote reads and writes transfer: per object, per [`Meter`] (one
//! call's loads and saves), and for the whole process ([`totals`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::RemoteOptions;

/// Bytes and requests a transfer took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transfer {
    /// Requests sent (`HEAD`, ranged `GET`s, upload parts and their commit).
    pub requests: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Bytes sent (uploads).
    pub bytes_sent: u64,
    /// Objects fetched whole because their server ignores `Range` requests
    /// (each in the one `GET` that opened it).
    pub whole_gets: u64,
    /// Store clients built (one per store a load or save reaches: a bucket,
    /// an account's container, an HTTP server).
    pub stores: u64,
}

/// A count of the transfers of the loads and saves whose options carry it
/// ([`RemoteOptions::with_meter`]): what one command or call transferred,
/// whatever else the process transfers meanwhile. Clones count into the
/// same total.
#[derive(Clone, Debug, Default)]
pub struct Meter(Arc<Counters>);

impl Meter {
    /// A meter at zero.
    pub fn new() -> Meter {
        Meter::default()
    }

    /// What was transferred through this meter so far.
    pub fn transfer(&self) -> Transfer {
        self.0.snapshot()
    }

    pub(super) fn counters(&self) -> &Counters {
        &self.0
    }
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) requests: AtomicU64,
    pub(super) received: AtomicU64,
    pub(super) sent: AtomicU64,
    pub(super) whole_gets: AtomicU64,
    pub(super) stores: AtomicU64,
    /// The meter these counts are also for (an object's, from its options).
    pub(super) meter: Option<Meter>,
}

impl Counters {
    /// Counters of an object opened with `options`.
    pub(super) fn for_options(options: &RemoteOptions) -> Counters {
        Counters {
            meter: options.meter.clone(),
            ..Counters::default()
        }
    }

    pub(super) fn snapshot(&self) -> Transfer {
        Transfer {
            requests: self.requests.load(Ordering::Relaxed),
            bytes_received: self.received.load(Ordering::Relaxed),
            bytes_sent: self.sent.load(Ordering::Relaxed),
            whole_gets: self.whole_gets.load(Ordering::Relaxed),
            stores: self.stores.load(Ordering::Relaxed),
        }
    }
}

static TOTALS: Counters = Counters {
    requests: AtomicU64::new(0),
    received: AtomicU64::new(0),
    sent: AtomicU64::new(0),
    whole_gets: AtomicU64::new(0),
    stores: AtomicU64::new(0),
    meter: None,
};

/// What every remote object of this process has transferred so far.
pub fn totals() -> Transfer {
    TOTALS.snapshot()
}

/// `local`, the meter it counts for, and the process's totals.
pub(super) fn counted(local: Option<&Counters>) -> impl Iterator<Item = &Counters> {
    let meter = local.and_then(|c| c.meter.as_ref()).map(Meter::counters);
    local.into_iter().chain(meter).chain([&TOTALS])
}

/// Counts requests and their bytes on an object (or a meter), on its meter
/// and in the totals.
pub(super) fn count(local: Option<&Counters>, requests: u64, received: u64, sent: u64) {
    for c in counted(local) {
        c.requests.fetch_add(requests, Ordering::Relaxed);
        c.received.fetch_add(received, Ordering::Relaxed);
        c.sent.fetch_add(sent, Ordering::Relaxed);
    }
}
