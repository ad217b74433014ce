//! Spans: ranges of files or objects that a reader reads more or less whole
//! (a distributed checkpoint's items), as windows of their own.
//!
//! The store decides how a span is served, so that a format never asks
//! which store it reads: a local file's span is a [`Window`] read in place,
//! when read; an object's spans are fetched at once, in concurrent ranged
//! requests across every object of the batch, and served from memory.

use std::io;
use std::sync::Arc;

use super::{Location, ReadAt, Window};
use crate::{Error, Result};

/// A source of bytes shared by the readers of its spans.
pub(crate) type Source = Arc<dyn ReadAt>;

/// A file or object opened for reads of its spans ([`windows`]).
#[derive(Clone)]
pub(crate) struct Opened {
    source: Source,
    /// The object, kept as itself too: a batch of spans across several
    /// objects is fetched as one ([`read_batches`](super::remote::read_batches)).
    #[cfg(feature = "remote")]
    object: Option<Arc<super::remote::RemoteObject>>,
}

impl Opened {
    /// Opens the file or object `here` ([`Location::open`]).
    ///
    /// # Errors
    /// As [`Location::open`].
    pub(crate) fn open(here: &Location) -> Result<Opened> {
        #[cfg(feature = "remote")]
        if let Some(object) = here.open_object()? {
            return Ok(Opened {
                source: object.clone(),
                object: Some(object),
            });
        }
        Ok(Opened {
            source: here.open()?,
            #[cfg(feature = "remote")]
            object: None,
        })
    }

    /// The file or object, for reads at offsets.
    pub(crate) fn source(&self) -> &Source {
        &self.source
    }
}

/// A span that failed: its index, and the error.
pub(crate) type Failed = (usize, Box<Error>);

/// `len` bytes of a file or object from `offset`.
#[derive(Clone, Copy)]
pub(crate) struct Span<'a> {
    pub file: &'a Opened,
    pub offset: u64,
    pub len: u64,
}

/// Local spans up to this size are read whole when their window is made:
/// one read, where reading a small archive in place took one for each
/// record's header and data (a DCP of a million chunks has a million such
/// items).
const SMALL_SPAN: u64 = 64 << 10;

/// One window per span, in order: a local file's span is read in place,
/// when read, or now and whole when it is small ([`SMALL_SPAN`]); the spans
/// of objects in a store are fetched now, each object's
/// coalesced by its own options, at most its `concurrency` requests in
/// flight across all of them, a large span in pieces of `max_request` bytes
/// fetched concurrently too; their windows are served from memory.
///
/// # Errors
/// The index of a span that failed, with its error: a span past its
/// source's end ([`io::ErrorKind::UnexpectedEof`]), a failed request, no
/// memory for its bytes.
pub(crate) fn windows(spans: &[Span<'_>]) -> std::result::Result<Vec<Source>, Failed> {
    let mut out: Vec<Option<Source>> = Vec::with_capacity(spans.len());
    for (i, span) in spans.iter().enumerate() {
        let window: Option<Source> = match span.file.fetched_by_request() {
            true => None,
            false if span.len <= SMALL_SPAN => {
                let mut bytes = vec![0; span.len as usize];
                span.file
                    .source
                    .read_exact_at(&mut bytes, span.offset)
                    .map_err(|e| (i, Box::new(Error::Io(e))))?;
                Some(Arc::new(bytes))
            }
            false => Some(Arc::new(Window::new(
                Arc::clone(&span.file.source),
                span.offset,
                span.len,
            ))),
        };
        out.push(window);
    }
    #[cfg(feature = "remote")]
    fetch(spans, &mut out)?;
    out.into_iter()
        .enumerate()
        .map(|(i, w)| {
            w.ok_or_else(|| {
                (
                    i,
                    Box::new(Error::Io(io::Error::other("a span not fetched"))),
                )
            })
        })
        .collect()
}

impl Opened {
    /// Whether this one's spans are fetched ahead: an object in a store
    /// that answers ranged requests.
    fn fetched_by_request(&self) -> bool {
        #[cfg(feature = "remote")]
        if self.object.is_some() {
            return self.source.read_cost() == super::ReadCost::Request;
        }
        false
    }
}

/// Fetches the spans `out` has no window for yet (objects' spans) in one
/// batch across their objects, and gives each its bytes as its window.
#[cfg(feature = "remote")]
fn fetch(spans: &[Span<'_>], out: &mut [Option<Source>]) -> std::result::Result<(), Failed> {
    use super::remote::{read_batches, ObjectReads, RemoteObject};
    // The objects of the batch, each with the indices of its spans.
    let mut objects: Vec<(&RemoteObject, Vec<usize>)> = Vec::new();
    for (i, span) in spans.iter().enumerate() {
        let Some(object) = span.file.object.as_deref().filter(|_| out[i].is_none()) else {
            continue;
        };
        let past_end = span
            .offset
            .checked_add(span.len)
            .is_none_or(|end| end > object.len());
        if past_end {
            let e = io::Error::new(io::ErrorKind::UnexpectedEof, "a span past the object's end");
            return Err((i, Box::new(Error::Io(e))));
        }
        match objects.iter_mut().find(|(o, _)| std::ptr::eq(*o, object)) {
            Some((_, these)) => these.push(i),
            None => objects.push((object, vec![i])),
        }
    }
    if objects.is_empty() {
        return Ok(());
    }
    let mut bytes: Vec<Vec<u8>> = Vec::with_capacity(spans.len());
    for (i, span) in spans.iter().enumerate() {
        let len = if out[i].is_none() { span.len } else { 0 };
        bytes.push(zeroed(len).map_err(|e| (i, Box::new(e)))?);
    }
    // Each span in pieces of at most `max_request` bytes, so that a large
    // one is fetched by concurrent requests too; each piece remembers its span.
    let mut slots: Vec<Option<&mut Vec<u8>>> = bytes.iter_mut().map(Some).collect();
    let mut owners: Vec<Vec<usize>> = Vec::with_capacity(objects.len());
    let mut reads: Vec<Vec<(u64, &mut [u8])>> = Vec::with_capacity(objects.len());
    for (object, these) in &objects {
        let piece = usize::try_from(object.max_request()).unwrap_or(usize::MAX);
        let (mut own, mut parts) = (Vec::new(), Vec::new());
        for &i in these {
            let Some(buf) = slots[i].take() else { continue };
            for (p, part) in buf.chunks_mut(piece).enumerate() {
                parts.push((spans[i].offset + (p * piece) as u64, part));
                own.push(i);
            }
        }
        owners.push(own);
        reads.push(parts);
    }
    let concurrency = objects
        .iter()
        .map(|(o, _)| o.concurrency())
        .max()
        .unwrap_or(1);
    let mut batch: Vec<ObjectReads<'_, '_, '_>> = objects
        .iter()
        .zip(reads.iter_mut())
        .map(|((object, _), parts)| (*object, &mut parts[..]))
        .collect();
    if let Err((o, r, e)) = read_batches(&mut batch, concurrency) {
        let span = owners[o].get(r).copied().unwrap_or(0);
        return Err((span, Box::new(Error::Io(e))));
    }
    drop(batch);
    drop(reads);
    for (i, held) in bytes.into_iter().enumerate() {
        if out[i].is_none() {
            out[i] = Some(Arc::new(held));
        }
    }
    Ok(())
}

/// `len` zero bytes, or an error where memory runs out.
#[cfg(feature = "remote")]
fn zeroed(len: u64) -> Result<Vec<u8>> {
    let failed = || {
        Error::Storage(crate::error::StorageError::AllocationFailed {
            nbytes: usize::try_from(len).unwrap_or(usize::MAX),
        })
    };
    let len = usize::try_from(len).map_err(|_| failed())?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len).map_err(|_| failed())?;
    bytes.resize(len, 0);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_files_spans_are_windows_onto_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = Opened::open(&Location::parse(&path)).unwrap();
        let spans = [(2, 3), (7, 3), (0, 0)].map(|(offset, len)| Span {
            file: &file,
            offset,
            len,
        });
        let windows = windows(&spans).unwrap();
        let read = |w: &Source| {
            let mut b = vec![0; w.len() as usize];
            w.read_exact_at(&mut b, 0).map(|()| b)
        };
        assert_eq!(read(&windows[0]).unwrap(), b"234");
        assert_eq!(read(&windows[1]).unwrap(), b"789");
        assert!(windows[2].is_empty());
        // A window reads nothing past its span.
        let mut b = [0; 2];
        assert!(windows[1].read_exact_at(&mut b, 2).is_err());
    }
}
