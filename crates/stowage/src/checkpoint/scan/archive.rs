//! Zip archives: every member of every archive, whatever its name or
//! layout, archives inside archives included.
//!
//! A loader keeps PyTorch's layout (one root folder, `data.pkl`); a scanner
//! must not, since what matters is what any reader of the file could
//! unpickle. So each member is judged by its content: a zip (scanned in
//! turn, to [`MAX_DEPTH`]), the legacy stream, a `.npy` (the pickle of an
//! object array), or a pickle (a member whose name ends in `.pkl` always;
//! any other when its first bytes [look like one](super::stream::looks_like_a_pickle)).
//! Text and the like are left out after a look at their first [`SNIFF`]
//! bytes. The one exception is a torch save's storage records
//! (`<root>/data/<number>`, stored): tensor bytes every loader reads raw,
//! not looked at, since a look costs a read per tensor.

use super::npy;
use super::stream::{Trust, SNIFF};
use super::{Content, Scanner};
use crate::checkpoint::zip::{Entry, Method, ZipLimits, ZipReader};
use crate::error::{CheckpointError, ErrorContext};
use crate::io::{ReadAt, Window};
use crate::{Error, Result};

/// The largest `.pkl` member read along with its neighbours.
const WHOLE: u64 = 1 << 16;

/// How deep archives inside archives are followed.
pub(super) const MAX_DEPTH: usize = crate::Limit::ZipNesting.default_value() as usize;

impl Scanner<'_> {
    /// Every member of the zip archive `source`, or of each archive when
    /// several are stored back to back; records named `{prefix}{member}`.
    pub(super) fn scan_zip(
        &mut self,
        source: &dyn ReadAt,
        prefix: &str,
        depth: usize,
    ) -> Result<()> {
        let limits = ZipLimits {
            max_entries: self.options.max_records,
            max_record_to_vec: self.options.max_pickle_bytes,
        };
        match ZipReader::new_lenient(source, &limits) {
            Ok(zip) => self.scan_archive(&zip, prefix, depth),
            Err(e) => {
                // Archives back to back (a distributed checkpoint's `.distcp`
                // holds one `torch.save` output per item): each ends with its
                // own end record.
                let mut found = false;
                let mut start = 0;
                let base = self.base;
                for end in archive_ends(source)? {
                    let part = Window::new(source, start, end - start);
                    if let Ok(zip) = ZipReader::new_lenient(&part as &dyn ReadAt, &limits) {
                        found = true;
                        self.base = base.map(|b| b + start);
                        let scanned = self.scan_archive(&zip, prefix, depth);
                        self.base = base;
                        scanned?;
                    }
                    start = end;
                }
                if found {
                    Ok(())
                } else {
                    Err(e.into())
                }
            }
        }
    }

    /// Every member of an opened archive; every member is looked at even
    /// after one fails, and the first failure is returned.
    fn scan_archive(
        &mut self,
        zip: &ZipReader<&dyn ReadAt>,
        prefix: &str,
        depth: usize,
    ) -> Result<()> {
        let rooted = !zip.root().is_empty();
        let torch_save = rooted && zip.find("data.pkl").is_some();
        if depth == 0 {
            self.torch_layout |= torch_save || (rooted && zip.find("constants.pkl").is_some());
        }
        let storages = format!("{}/data/", zip.root());
        // The storages of a torch save (`<root>/data/<key>`, stored, the key
        // a number as `torch.save` writes it) are tensor bytes that every
        // loader reads raw; a look at each costs a read per tensor (a scan of
        // 4,000 tensors took 1.7x as long). Every other member is looked at.
        let storage = |entry: &Entry| {
            torch_save
                && entry.method == Method::Stored
                && !entry.encrypted
                && zip
                    .name(entry)
                    .strip_prefix(&storages)
                    .is_some_and(|key| !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()))
        };
        let members: Vec<&Entry> = zip
            .entries()
            .iter()
            .filter(|e| {
                let folder = zip.name(e).ends_with('/') && e.size == 0;
                !folder && !storage(e)
            })
            .collect();
        self.members += members.len();
        if self.members > self.options.max_records {
            return Err(Error::Checkpoint(CheckpointError::LimitExceeded {
                limit: crate::Limit::Records,
                value: self.members as u64,
                max: self.options.max_records as u64,
            }));
        }
        // A small `.pkl` is read whole with its neighbours; any other member
        // its first bytes.
        let wanted: Vec<(&Entry, usize)> = members
            .iter()
            .map(|&e| {
                let whole = zip.name(e).ends_with(".pkl") && e.size <= WHOLE;
                (e, if whole { e.size as usize } else { SNIFF })
            })
            .collect();
        let heads = zip.read_heads(&wanted);
        let mut first_error = None;
        for (entry, head) in members.into_iter().zip(heads) {
            let name = format!("{prefix}{}", zip.name(entry));
            let scanned = head
                .map_err(Error::from)
                .and_then(|head| self.scan_member(zip, entry, &head, &name, depth));
            if let Err(e) = scanned {
                let e = match e {
                    e @ Error::InRecord { .. } => e,
                    e => e.in_entry(name.clone()),
                };
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// One member: a look at its first bytes, then, when it may hold a
    /// pickle, all of it.
    fn scan_member(
        &mut self,
        zip: &ZipReader<&dyn ReadAt>,
        entry: &Entry,
        head: &[u8],
        name: &str,
        depth: usize,
    ) -> Result<()> {
        let is_pkl = zip.name(entry).ends_with(".pkl");
        let content = match Content::of(head) {
            Some(c) => c,
            None if is_pkl || super::stream::may_be_a_pickle(&self.disassemble(head)) => {
                Content::Pickle
            }
            // Tensor data, text: no pickle.
            None => return Ok(()),
        };
        if content == Content::Zip && depth >= MAX_DEPTH {
            return Err(Error::Checkpoint(CheckpointError::LimitExceeded {
                limit: crate::Limit::ZipNesting,
                value: depth as u64 + 1,
                max: MAX_DEPTH as u64,
            }));
        }
        // A stored member is read where it lies; a deflated one (or one
        // flagged as encrypted, which must be checked whole) is inflated
        // into memory, within `max_pickle_bytes` held at a time in all.
        let stored = entry.method == Method::Stored && !entry.encrypted;
        let data_offset = if stored {
            Some(zip.data_offset(entry)?)
        } else {
            None
        };
        let base = self.base;
        self.base = base.zip(data_offset).map(|(b, o)| b + o);
        let result = match data_offset {
            // Read whole already (a small member).
            _ if head.len() as u64 == entry.size => {
                self.scan_content(&head, content, name, depth, is_pkl)
            }
            Some(at) => {
                let part = Window::new(*zip.source(), at, entry.size);
                self.scan_content(&part, content, name, depth, is_pkl)
            }
            None => self.scan_inflated(zip, entry, content, name, depth, is_pkl),
        };
        self.base = base;
        result
    }

    /// A member that is not stored plainly, inflated into memory.
    fn scan_inflated(
        &mut self,
        zip: &ZipReader<&dyn ReadAt>,
        entry: &Entry,
        content: Content,
        name: &str,
        depth: usize,
        is_pkl: bool,
    ) -> Result<()> {
        let held = self.held.saturating_add(entry.size);
        if held > self.options.max_pickle_bytes {
            return Err(Error::Checkpoint(CheckpointError::LimitExceeded {
                limit: crate::Limit::PickleBytes,
                value: held,
                max: self.options.max_pickle_bytes,
            }));
        }
        let data = zip.read_to_vec(entry)?;
        self.held = held;
        let result = self.scan_content(&data, content, name, depth, is_pkl);
        self.held -= entry.size;
        result
    }

    /// The pickles of a member whose content is `content`.
    fn scan_content(
        &mut self,
        source: &dyn ReadAt,
        content: Content,
        name: &str,
        depth: usize,
        is_pkl: bool,
    ) -> Result<()> {
        let pickles = |i: usize| match i {
            1 => name.to_owned(),
            i => format!("{name} (pickle {i})"),
        };
        match content {
            Content::Zip => self.scan_zip(source, &format!("{name}!"), depth + 1),
            Content::Legacy => self.scan_legacy(source, &format!("{name}!")),
            Content::Npy => match npy::pickle_offset(source)? {
                Some(at) => self.scan_pickles(source, at, Trust::Pickle, &pickles, None),
                None => Ok(()),
            },
            // A safetensors look-alike whose header is no JSON object may be
            // a pickle made to pass for one.
            Content::Safetensors if Content::Safetensors.confirm(source).is_some() => Ok(()),
            Content::Pickle | Content::Safetensors => {
                let trust = if is_pkl { Trust::Pickle } else { Trust::Maybe };
                self.scan_pickles(source, 0, trust, &pickles, None)
            }
        }
    }
}

/// The end of each end-of-central-directory record in `source` (its
/// signature, 18 more bytes and its comment), in file order, read in chunks.
fn archive_ends(source: &dyn ReadAt) -> Result<Vec<u64>> {
    const SIG: &[u8] = b"PK\x05\x06";
    const CHUNK: u64 = 1 << 20;
    let len = source.len();
    let mut ends = Vec::new();
    let mut pos = 0u64;
    while pos < len {
        let n = CHUNK.min(len - pos);
        let mut buf = vec![0u8; n as usize];
        source.read_exact_at(&mut buf, pos)?;
        for i in buf
            .windows(4)
            .enumerate()
            .filter(|(_, w)| *w == SIG)
            .map(|(i, _)| i)
        {
            let at = pos + i as u64;
            let mut comment = [0u8; 2];
            if at + 22 <= len && source.read_exact_at(&mut comment, at + 20).is_ok() {
                let end = at + 22 + u64::from(u16::from_le_bytes(comment));
                if end <= len && ends.last().is_none_or(|&e| e <= at) {
                    ends.push(end);
                }
            }
        }
        // Overlap by three bytes so a signature across chunks is found.
        pos += if n == CHUNK { n - 3 } else { n };
    }
    Ok(ends)
}
