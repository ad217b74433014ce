//! What a remote read or write reports when it fails: [`RemoteFailure`],
//! inside a [`RemoteError`] that names the object and the range.

use crate::error::ErrorContext;
use std::io;
use std::ops::Range;
use std::sync::Arc;

use crate::Error;

/// What failed in a remote read or write.
#[derive(Debug, thiserror::Error)]
pub enum RemoteFailure {
    /// The store's error: not found, permission denied (403), a timeout, a
    /// connection refused after the retries, ….
    #[error(transparent)]
    Store(#[from] object_store::Error),
    /// The text is not a URL.
    #[error(transparent)]
    Url(#[from] url::ParseError),
    /// The server answered a range request with another number of bytes.
    #[error("the server sent {found} bytes where {expected} were asked for")]
    ShortRange {
        /// Bytes asked for.
        expected: u64,
        /// Bytes received.
        found: u64,
    },
    /// The object changed after it was opened: a read asked for the version
    /// it was opened at (`If-Match` its ETag) and the store has another, so
    /// bytes of two versions are never mixed.
    #[error("the object changed while it was being read (it was opened at ETag {e_tag})")]
    Changed {
        /// The ETag the object had when it was opened.
        e_tag: String,
    },
    /// The read runs past the end of the object.
    #[error("the object holds {len} bytes")]
    PastEnd {
        /// The object's length.
        len: u64,
    },
    /// The server ignores `Range` requests (it answered a ranged `GET` with
    /// the whole object), and the object is larger than a whole `GET` may
    /// fetch
    /// ([`RemoteOptions::with_max_whole_get`](super::RemoteOptions::with_max_whole_get)).
    #[error(
        "the server ignores Range requests, and the object ({len} bytes) is larger than the \
         {max} bytes fetched whole from such a server (STOWAGE_REMOTE_MAX_WHOLE_GET)"
    )]
    NoRange {
        /// The object's length, as the server gave it.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The runtime that runs the requests could not be started.
    #[error("could not start the I/O runtime: {0}")]
    Runtime(Arc<io::Error>),
}

/// A remote read or write that failed, with the object's URL and the byte
/// range asked for (none for `HEAD` and uploads). Reads surface it inside an
/// [`io::Error`]; its text names the range, and the loader's
/// [`Error::InFile`] names the URL.
#[derive(Debug, thiserror::Error)]
#[error("{}{failure}", range_text(.range))]
pub struct RemoteError {
    /// The object's URL.
    pub url: String,
    /// The bytes asked for.
    pub range: Option<Range<u64>>,
    /// What went wrong.
    #[source]
    pub failure: RemoteFailure,
}

fn range_text(range: &Option<Range<u64>>) -> String {
    match range {
        Some(r) => format!("bytes {}..{}: ", r.start, r.end),
        None => String::new(),
    }
}

impl RemoteError {
    pub(super) fn into_io(self) -> io::Error {
        let kind = match &self.failure {
            RemoteFailure::Store(object_store::Error::NotFound { .. }) => io::ErrorKind::NotFound,
            RemoteFailure::Store(
                object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. },
            ) => io::ErrorKind::PermissionDenied,
            RemoteFailure::ShortRange { .. } | RemoteFailure::PastEnd { .. } => {
                io::ErrorKind::UnexpectedEof
            }
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, self)
    }
}

/// A failure as an [`io::Error`] carrying a [`RemoteError`].
pub(super) fn fail(url: &str, range: Option<Range<u64>>, failure: RemoteFailure) -> io::Error {
    RemoteError {
        url: url.to_owned(),
        range,
        failure,
    }
    .into_io()
}

/// An I/O error on `url`, as the loaders report it.
pub(super) fn in_url(url: &str, e: io::Error) -> Error {
    Error::Io(e).in_file(url)
}
