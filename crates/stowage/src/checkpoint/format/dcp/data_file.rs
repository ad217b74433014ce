//! One rank's data file of a DCP, and the items written into it: each a
//! `torch.save` archive or bytes, compressed as one zstd frame when asked.

#[cfg(not(feature = "zstd"))]
use crate::error::CheckpointError;
use crate::error::ErrorContext;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::metadata::StorageInfo;
use super::write::rank_file_name;
use super::DcpSaveOptions;
use crate::checkpoint::format::torch_zip::save_to_writer;
use crate::checkpoint::options::SaveOptions;
use crate::checkpoint::value::graph::Checkpoint;
use crate::io::Location;
use crate::{Error, Result};

/// A data file written in order, item after item: the one writer of DCP
/// items, behind [`write_items`] (a StorageWriter's file) and the library's
/// own saves (every rank's file open at once, filled leaf by leaf).
pub(super) struct ItemWriter<W: Write> {
    name: String,
    out: W,
    at: u64,
    zstd: bool,
    /// Another thread hashes what is written (the DCP's digests).
    hashed_beside: bool,
}

impl ItemWriter<BufWriter<File>> {
    /// Creates the file of rank `rank` at `path`; `hashed_beside` when the
    /// save's digests hash the chunks written into it.
    pub(super) fn create(
        path: &Path,
        rank: usize,
        zstd: bool,
        hashed_beside: bool,
    ) -> Result<Self> {
        let out = BufWriter::with_capacity(crate::io::WRITE_BUFFER, File::create(path)?);
        let mut writer = ItemWriter::new(rank_file_name(rank), out, zstd);
        writer.hashed_beside = hashed_beside;
        Ok(writer)
    }

    /// Flushes the file and gives it back.
    pub(super) fn close(self) -> Result<File> {
        self.out.into_inner().map_err(|e| Error::Io(e.into_error()))
    }
}

impl<W: Write> ItemWriter<W> {
    /// Writes the items of the data file `name` (as `.metadata` names it)
    /// to `out`.
    fn new(name: String, out: W, zstd: bool) -> Self {
        ItemWriter {
            name,
            out,
            at: 0,
            zstd,
            hashed_beside: false,
        }
    }

    /// Writes one item straight into the file: an archive is saved into it
    /// as it is made (PyTorch names the in-memory archive `archive`), no copy
    /// held, so memory stays that of the largest tensor chunk. Returns where
    /// it lies.
    pub(super) fn put(&mut self, item: DataItem<'_>) -> Result<StorageInfo> {
        let (length, transforms) = put_item(&mut self.out, item, self.zstd, self.hashed_beside)?;
        let info = StorageInfo {
            relative_path: self.name.clone(),
            offset: self.at,
            length,
            transforms,
        };
        self.at += length;
        Ok(info)
    }
}

/// Writes one item to `out`, compressed as one zstd frame when `zstd`;
/// returns its length as stored and its transforms, as `.metadata` records
/// them.
fn put_item<W: Write>(
    out: &mut W,
    item: DataItem<'_>,
    zstd: bool,
    hashed_beside: bool,
) -> Result<(u64, Vec<String>)> {
    fn raw<W: Write>(out: &mut W, item: DataItem<'_>, hashed_beside: bool) -> Result<()> {
        match item {
            DataItem::Archive(ckpt) => {
                let options = SaveOptions {
                    hashed_beside,
                    ..SaveOptions::default()
                };
                save_to_writer(out, "archive", ckpt, &options).map(drop)
            }
            DataItem::Bytes(bytes) => Ok(out.write_all(bytes)?),
        }
    }
    let mut counted = Counted {
        inner: out,
        written: 0,
    };
    if !zstd {
        raw(&mut counted, item, hashed_beside)?;
        return Ok((counted.written, Vec::new()));
    }
    #[cfg(feature = "zstd")]
    {
        // zstd's default level, as PyTorch's `ZStandard` extension uses.
        let mut encoder = zstd::stream::write::Encoder::new(&mut counted, 3)?;
        encoder.include_checksum(true)?;
        raw(&mut encoder, item, hashed_beside)?;
        encoder.finish()?;
        Ok((counted.written, transforms(true)))
    }
    #[cfg(not(feature = "zstd"))]
    Err(Error::Checkpoint(CheckpointError::FeatureDisabled {
        feature: "zstd",
        what: "zstd-compressed DCP items",
    }))
}

/// The transforms `.metadata` records of an item, compressed or not.
pub(super) fn transforms(zstd: bool) -> Vec<String> {
    if zstd {
        vec!["stream.zstd/1".to_owned()]
    } else {
        Vec::new()
    }
}

/// A writer that counts the bytes written through it.
struct Counted<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One item of a data file written by [`write_items`].
#[non_exhaustive]
#[derive(Clone, Copy)]
pub enum DataItem<'a> {
    /// A checkpoint saved as `torch.save` saves it: an archive of its own
    /// (a tensor chunk, as `FileSystemWriter` stores it).
    Archive(&'a Checkpoint),
    /// Bytes stored as they are (DCP's `BYTE_IO` items, or a whole file
    /// such as `.metadata`).
    Bytes(&'a [u8]),
}

/// Writes `items` back to back as the data file at `location` (a local
/// path or an object-store URL), whole or not at all: a local file through a
/// temporary renamed over it, an object by a multipart upload committed only
/// when every item is written. Returns where each item lies, as
/// `.metadata` records it (`relative_path` is the file's name).
///
/// This is a [`StorageWriter`]'s `write_data` for one rank: each rank writes
/// its own file; the coordinator writes `.metadata` (one [`DataItem::Bytes`])
/// only after every rank's file is complete, so a failure never leaves a
/// `.metadata` that names missing data.
///
/// [`StorageWriter`]: https://pytorch.org/docs/stable/distributed.checkpoint.html
///
/// # Errors
/// What saving an item gives, naming its index; the file system's or the
/// store's errors, naming `location`.
pub fn write_items(
    location: &Location,
    items: &[DataItem<'_>],
    options: &DcpSaveOptions,
) -> Result<Vec<StorageInfo>> {
    let name = location.file_name().unwrap_or_default().to_owned();
    let mut infos = Vec::with_capacity(items.len());
    location.create(options.sync, None, |out| {
        let out = BufWriter::with_capacity(crate::io::WRITE_BUFFER, out);
        let mut writer = ItemWriter::new(name, out, options.zstd);
        for (i, item) in items.iter().enumerate() {
            infos.push(
                writer
                    .put(*item)
                    .map_err(|e| e.in_entry(format!("item {i}")))?,
            );
        }
        writer.out.flush()?;
        Ok(())
    })?;
    Ok(infos)
}

/// An item's size as `FileSystemWriter` weighs it (`_item_size`): an
/// archive's tensors' bytes, or the bytes themselves.
fn item_size(item: &DataItem<'_>) -> u64 {
    match item {
        DataItem::Archive(c) => c.tensors().map_or(0, |ts| {
            ts.iter().map(|(_, t)| t.tensor.nbytes() as u64).sum()
        }),
        DataItem::Bytes(b) => b.len() as u64,
    }
}

/// `items` split over `files` files as PyTorch's `FileSystemWriter` splits
/// a rank's items (`_split_by_size_and_type`): the bytes items in turn, then
/// the archives largest first, each to the file with the fewest bytes so
/// far; one file holds them all in their order. Each file's items are
/// indices into `items`, in the order written.
fn buckets(items: &[DataItem<'_>], files: usize) -> Vec<Vec<usize>> {
    if files <= 1 {
        return vec![(0..items.len()).collect()];
    }
    let mut buckets = vec![Vec::new(); files];
    let mut sizes = vec![0u64; files];
    let (bytes, archives): (Vec<usize>, Vec<usize>) =
        (0..items.len()).partition(|&i| matches!(items[i], DataItem::Bytes(_)));
    for (k, i) in bytes.into_iter().enumerate() {
        buckets[k % files].push(i);
    }
    let mut archives: Vec<(usize, u64)> = archives
        .into_iter()
        .map(|i| (i, item_size(&items[i])))
        .collect();
    // Largest first; among equals, in the order given (a stable sort).
    archives.sort_by_key(|&(_, size)| std::cmp::Reverse(size));
    for (i, size) in archives {
        let lightest = (0..files).min_by_key(|&k| sizes[k]).unwrap_or(0);
        buckets[lightest].push(i);
        sizes[lightest] += size;
    }
    buckets.retain(|b| !b.is_empty());
    buckets
}

/// Writes one rank's `items` as data files in `folder`, named
/// `{prefix}{n}.distcp`: at most `files` of them, the items split over them
/// by size as PyTorch's `FileSystemWriter(thread_count=files)` splits them,
/// the files written at once, each whole or not at all ([`write_items`]).
/// Returns where each item lies, in the order of `items`.
///
/// This is a [`StorageWriter`]'s `write_data` for one rank, as
/// `stowage.dcp.StorageWriter` calls it.
///
/// [`StorageWriter`]: https://pytorch.org/docs/stable/distributed.checkpoint.html
///
/// # Errors
/// As [`write_items`], for the first file that fails.
pub fn write_rank(
    folder: &Location,
    prefix: &str,
    items: &[DataItem<'_>],
    files: usize,
    options: &DcpSaveOptions,
) -> Result<Vec<StorageInfo>> {
    let buckets = buckets(items, files);
    let written: Vec<Result<Vec<StorageInfo>>> = std::thread::scope(|s| {
        let handles: Vec<_> = buckets
            .iter()
            .enumerate()
            .map(|(n, bucket)| {
                let at = folder.join(&format!("{prefix}{n}.distcp"));
                let mine: Vec<DataItem<'_>> = bucket.iter().map(|&i| items[i]).collect();
                s.spawn(move || write_items(&at, &mine, options))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(Error::Io(std::io::Error::other("a writer thread panicked")))
                })
            })
            .collect()
    });
    let mut placed: Vec<Option<StorageInfo>> = vec![None; items.len()];
    for (bucket, infos) in buckets.iter().zip(written) {
        for (&i, info) in bucket.iter().zip(infos?) {
            placed[i] = Some(info);
        }
    }
    Ok(placed.into_iter().flatten().collect())
}

#[cfg(test)]
mod split_tests {
    use super::*;
    use crate::Tensor;

    /// As `_split_by_size_and_type`: bytes in turn, then archives largest
    /// first to the lightest file; one file keeps the order given.
    #[test]
    fn items_are_split_as_file_system_writer_splits_them() {
        let archive = |n: usize| {
            Checkpoint::from_state_dict([("t", Tensor::from_vec(vec![0u8; n], &[n]).unwrap())])
        };
        let (a, b, c) = (archive(10), archive(30), archive(20));
        let items = [
            DataItem::Archive(&a),
            DataItem::Bytes(b"x"),
            DataItem::Archive(&b),
            DataItem::Bytes(b"y"),
            DataItem::Archive(&c),
        ];
        assert_eq!(buckets(&items, 1), vec![vec![0, 1, 2, 3, 4]]);
        // Bytes 1 → file 0, 3 → file 1; then 30 → 0, 20 → 1, 10 → 1.
        assert_eq!(buckets(&items, 2), vec![vec![1, 2], vec![3, 4, 0]]);
        // Empty files are not written.
        assert_eq!(buckets(&items[..1], 4), vec![vec![0]]);
    }
}
