//! The digests of many tensors on every core ([`digest_all`]): what
//! `stowage manifest`, `inspect --json` and a verified eager load compute.
//!
//! SHA-256 is sequential within a message, so the work is shared out by
//! tensor: largest first, one thread per core, each taking the next tensor
//! as it finishes one. Where the CPU hashes several messages at once, each
//! thread hashes sixteen tensors side by side ([`sha256x16`], AVX-512,
//! where it is the faster) or two ([`sha256x2`], the SHA extensions),
//! window against window: as many bytes of each as all have pending, so a
//! tensor that ends mid-window leaves the rest of its partners' windows to
//! go beside the next tensor. Sixteen go at once only while each has at
//! least [`sha256x16::AT_LEAST`] bytes pending; the rest go in pairs.
//!
//! A contiguous tensor whose storage is in memory is hashed where it lies,
//! a window at a time under the storage's shared lock (a write to it waits
//! for that window); any other is read a window at a time into a buffer
//! ([`Reader`]): a lazily loaded storage from its file, keeping nothing.
//! A thread never takes a lock it holds (two tensors of one storage are
//! hashed under one lock: a thread asking again for a shared lock it holds
//! waits behind any writer waiting for it, for ever) and takes several
//! storages' locks in the order of their ids, as every thread does.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::{logical_range, sha256x16, sha256x2, Reader, WINDOW};
use crate::checkpoint::value::graph::TensorObject;
use crate::error::StorageError;
use crate::UntypedStorage;

/// One tensor's digest, or why it has none.
type Slot = OnceLock<Result<[u8; 32], crate::Error>>;

/// The [`digest`](super::digest) of each tensor given (`None` where none is
/// given), in order, computed on every core (the module's comment says how).
/// `progress` is told each window's size, from any of the threads.
pub fn digest_all(
    objects: &[Option<&TensorObject>],
    progress: impl Fn(u64) + Sync,
) -> Vec<Result<Option<[u8; 32]>, crate::Error>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    digest_on(objects, &progress, threads, sha256x16::width())
}

/// [`digest_all`] on at most `threads` threads, each hashing `width`
/// tensors (1, 2 or [`sha256x16::LANES`]) at a time.
fn digest_on(
    objects: &[Option<&TensorObject>],
    progress: &(impl Fn(u64) + Sync),
    threads: usize,
    width: usize,
) -> Vec<Result<Option<[u8; 32]>, crate::Error>> {
    let mut order: Vec<(usize, &TensorObject)> = objects
        .iter()
        .enumerate()
        .filter_map(|(i, o)| Some((i, (*o)?)))
        .collect();
    order.sort_by_key(|(_, o)| std::cmp::Reverse(o.tensor.nbytes()));
    let threads = threads.min(order.len()).max(1);
    // Sixteen lanes a thread only where every thread has sixteen tensors:
    // with fewer, the first threads to fill their lanes would take them all
    // and leave the others idle.
    let width = if width > 2 && order.len() < threads * width {
        2
    } else {
        width
    };
    // Thread `t` starts on `order[t]`: every core has a tensor before any
    // thread takes a second one.
    let next = AtomicUsize::new(threads);
    let slots: Vec<Slot> = objects.iter().map(|_| OnceLock::new()).collect();
    let share = |t: usize| {
        let mut first = Some(t);
        let take = || {
            let k = first
                .take()
                .unwrap_or_else(|| next.fetch_add(1, Ordering::Relaxed));
            order.get(k).copied()
        };
        hash_share(take, width, &slots, progress);
    };
    std::thread::scope(|s| {
        for t in 1..threads {
            s.spawn(move || share(t));
        }
        share(0);
    });
    slots
        .into_iter()
        .map(|slot| slot.into_inner().transpose())
        .collect()
}

/// One thread's share: the tensors `take` gives, `width` at a time, each
/// one's digest (or error) set in its slot.
fn hash_share<'o>(
    mut take: impl FnMut() -> Option<(usize, &'o TensorObject)>,
    width: usize,
    slots: &[Slot],
    progress: &impl Fn(u64),
) {
    let mut lanes: Vec<Option<Lane<'o>>> = (0..width).map(|_| None).collect();
    loop {
        for lane in lanes.iter_mut() {
            fill(lane, &mut take, slots, progress);
        }
        let mut active: Vec<&mut Lane<'o>> = lanes.iter_mut().flatten().collect();
        if active.is_empty() {
            break;
        }
        let n = active.iter().map(|l| l.pending()).min().unwrap_or(0);
        match <&mut [_; sha256x16::LANES]>::try_from(active.as_mut_slice()) {
            Ok(all) if n >= sha256x16::AT_LEAST => hash_sixteen(all, n),
            _ => {
                let all = active.as_mut_slice();
                for group in all.chunks_mut(width.min(2)) {
                    if let [a, b] = group {
                        let n = a.pending().min(b.pending());
                        hash_two(a, b, n);
                    } else {
                        for a in group {
                            hash_one(a, a.pending());
                        }
                    }
                }
            }
        }
        for lane in lanes.iter_mut() {
            if let Some(e) = lane.as_mut().and_then(|l| l.failed.take()) {
                if let Some(failed) = lane.take() {
                    let _ = slots[failed.slot].set(Err(e));
                }
            }
        }
    }
}

/// Hashes the next `n` pending bytes of `lane` (on an error, its `failed`).
fn hash_one(lane: &mut Lane, n: usize) {
    let Lane {
        bytes, hash, used, ..
    } = lane;
    match bytes.with_window(*used..*used + n, |w| hash.update(w)) {
        Ok(()) => *used += n,
        Err(e) => lane.failed = Some(e),
    }
}

/// Hashes the next `n` pending bytes of `a` and of `b` at once; where a
/// window cannot be had (a storage in memory that no longer holds its
/// tensor), each alone, so that the error is its own tensor's.
fn hash_two(a: &mut Lane, b: &mut Lane, n: usize) {
    let (ra, rb) = (a.used..a.used + n, b.used..b.used + n);
    let (ha, hb) = (&mut a.hash, &mut b.hash);
    let (ba, bb) = (&a.bytes, &b.bytes);
    let both = match (ba.in_storage(), bb.in_storage()) {
        (Some((sa, wa)), Some((sb, wb))) if sa.is_same(sb) => sa
            .with_bytes(HASHING, |bytes| {
                let (x, y) = (part(bytes, wa, ra)?, part(bytes, wb, rb)?);
                sha256x2::update_both(ha, x, hb, y);
                Ok(())
            })
            .and_then(|r| r),
        (Some((sa, _)), Some((sb, _))) if sb.id() < sa.id() => bb
            .with_window(rb, |y| {
                ba.with_window(ra, |x| sha256x2::update_both(ha, x, hb, y))
            })
            .and_then(|r| r),
        _ => ba
            .with_window(ra, |x| {
                bb.with_window(rb, |y| sha256x2::update_both(ha, x, hb, y))
            })
            .and_then(|r| r),
    };
    match both {
        Ok(()) => {
            a.used += n;
            b.used += n;
        }
        Err(_) => {
            hash_one(a, n);
            hash_one(b, n);
        }
    }
}

/// Hashes the next `n` pending bytes of sixteen lanes at once, under the
/// locks of the storages in memory among them (each taken once, in the
/// order of their ids); where a window cannot be had, each alone, so that
/// the error is its own tensor's.
fn hash_sixteen(lanes: &mut [&mut Lane; sha256x16::LANES], n: usize) {
    let mut storages: Vec<&UntypedStorage> = lanes
        .iter()
        .filter_map(|l| Some(l.bytes.in_storage()?.0))
        .collect();
    storages.sort_by_key(|s| s.id());
    storages.dedup_by_key(|s| s.id());
    let mut split = lanes.each_mut().map(|l| {
        let Lane {
            bytes, hash, used, ..
        } = &mut **l;
        (&*bytes, *used, hash)
    });
    let all = with_all(&storages, &[], &mut |held| {
        let mut data = [&[][..]; sha256x16::LANES];
        for (d, &(bytes, used, _)) in data.iter_mut().zip(&split) {
            let range = used..used + n;
            *d = match bytes {
                Bytes::Read(reader) => reader.window(range),
                Bytes::InPlace {
                    storage, start, at, ..
                } => {
                    let k = storages.partition_point(|s| s.id() < storage.id());
                    part(held[k], start + at, range)?
                }
            };
        }
        sha256x16::update_lanes(split.each_mut().map(|(_, _, h)| &mut **h), data);
        Ok(())
    });
    for lane in lanes.iter_mut() {
        match all {
            Ok(()) => lane.used += n,
            Err(_) => hash_one(lane, n),
        }
    }
}

/// What [`with_all`] runs on the storages' bytes.
type WithAll<'a> = dyn FnMut(&[&[u8]]) -> Result<(), crate::Error> + 'a;

/// Runs `f` on the bytes of each of `storages`, after `held`'s, under
/// their shared locks, taken in order.
fn with_all(
    storages: &[&UntypedStorage],
    held: &[&[u8]],
    f: &mut WithAll,
) -> Result<(), crate::Error> {
    match storages.split_first() {
        None => f(held),
        Some((storage, rest)) => storage
            .with_bytes(HASHING, |bytes| {
                let mut more: Vec<&[u8]> = held.to_vec();
                more.push(bytes);
                with_all(rest, &more, f)
            })
            .and_then(|r| r),
    }
}

/// What a storage's lock is taken for, in an error.
const HASHING: &str = "hashing tensor bytes";

/// Gives `lane` bytes to hash: its tensor's next window, or when that
/// tensor is done (its digest set) the next tensor's; empty when `take`
/// has none left.
fn fill<'o>(
    lane: &mut Option<Lane<'o>>,
    take: &mut impl FnMut() -> Option<(usize, &'o TensorObject)>,
    slots: &[Slot],
    progress: &impl Fn(u64),
) {
    loop {
        let l = match lane {
            Some(l) => l,
            None => {
                let Some((slot, object)) = take() else { return };
                match Bytes::of(object) {
                    Ok(bytes) => lane.insert(Lane::new(slot, bytes)),
                    Err(e) => {
                        let _ = slots[slot].set(Err(e));
                        continue;
                    }
                }
            }
        };
        if l.pending() > 0 {
            return;
        }
        let slot = l.slot;
        match l.bytes.fill() {
            Ok(0) => {
                if let Some(done) = lane.take() {
                    let _ = slots[slot].set(Ok(done.hash.finalize()));
                }
            }
            Ok(n) => {
                (l.filled, l.used) = (n, 0);
                progress(n as u64);
                return;
            }
            Err(e) => {
                *lane = None;
                let _ = slots[slot].set(Err(e));
            }
        }
    }
}

/// A tensor being hashed: where its bytes come from, the window read last
/// and how much of it is hashed.
struct Lane<'o> {
    slot: usize,
    bytes: Bytes<'o>,
    hash: sha256x2::Sha256,
    filled: usize,
    used: usize,
    /// Why its last window could not be hashed.
    failed: Option<crate::Error>,
}

impl<'o> Lane<'o> {
    fn new(slot: usize, bytes: Bytes<'o>) -> Lane<'o> {
        Lane {
            slot,
            bytes,
            hash: sha256x2::Sha256::default(),
            filled: 0,
            used: 0,
            failed: None,
        }
    }

    /// How many bytes of the last window are not hashed yet.
    fn pending(&self) -> usize {
        self.filled - self.used
    }
}

/// A tensor's logical elements, a window at a time.
enum Bytes<'o> {
    /// Read into a buffer: from a lazily loaded storage's file, or from a
    /// contiguous copy of a strided tensor.
    Read(Reader),
    /// Where they lie, bytes `start..start + len` of a storage in memory
    /// (the tensor contiguous), read under its lock a window at a time: no
    /// copy. `at` is where the window read last begins.
    InPlace {
        storage: &'o UntypedStorage,
        start: usize,
        len: usize,
        at: usize,
        window: usize,
    },
}

impl<'o> Bytes<'o> {
    fn of(object: &'o TensorObject) -> Result<Bytes<'o>, crate::Error> {
        let storage = object.tensor.untyped_storage();
        match logical_range(object) {
            Some((start, len)) if storage.is_loaded() => Ok(Bytes::InPlace {
                storage,
                start,
                len,
                at: 0,
                window: 0,
            }),
            _ => Reader::new(object).map(Bytes::Read),
        }
    }

    /// Moves to the next window: its length, 0 at the end.
    fn fill(&mut self) -> Result<usize, crate::Error> {
        match self {
            Bytes::Read(reader) => reader.fill(),
            Bytes::InPlace {
                len, at, window, ..
            } => {
                *at += *window;
                *window = (*len - *at).min(WINDOW);
                Ok(*window)
            }
        }
    }

    /// For a tensor in place: its storage, whose lock
    /// [`with_window`](Self::with_window) takes, and where in it the window
    /// read last begins.
    fn in_storage(&self) -> Option<(&'o UntypedStorage, usize)> {
        match self {
            Bytes::Read(_) => None,
            Bytes::InPlace {
                storage, start, at, ..
            } => Some((storage, start + at)),
        }
    }

    /// Runs `f` on bytes `range` of the window read last (under the
    /// storage's shared lock for a tensor in place).
    ///
    /// # Errors
    /// [`StorageError::StorageRange`]: the storage no longer holds them.
    fn with_window<R>(
        &self,
        range: std::ops::Range<usize>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, crate::Error> {
        match self {
            Bytes::Read(reader) => Ok(f(reader.window(range))),
            Bytes::InPlace {
                storage, start, at, ..
            } => storage
                .with_bytes(HASHING, |bytes| part(bytes, start + at, range).map(f))
                .and_then(|r| r),
        }
    }
}

/// Bytes `range` of the window at `window` in a storage's whole `bytes`
/// (read under its lock).
///
/// # Errors
/// [`StorageError::StorageRange`]: the storage no longer holds them.
fn part(bytes: &[u8], window: usize, range: std::ops::Range<usize>) -> Result<&[u8], crate::Error> {
    let from = window + range.start;
    bytes
        .get(from..from + range.len())
        .ok_or(crate::Error::Storage(StorageError::StorageRange {
            offset: from,
            len: range.len(),
            nbytes: bytes.len(),
        }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use sha2::Digest;

    use crate::layout::Layout;
    use crate::{DType, Device, Tensor, UntypedStorage};

    fn values(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect()
    }

    /// A tensor of `n` bytes in memory, or on a lazily loaded storage
    /// (read a window at a time into a buffer).
    fn tensor(n: usize, seed: u8, lazy: bool) -> TensorObject {
        let data = values(n, seed);
        let t = if lazy {
            let fetch = move |at: u64, dst: &mut [u8]| {
                let at = at as usize;
                dst.copy_from_slice(&data[at..at + dst.len()]);
                Ok(())
            };
            let storage = UntypedStorage::lazy(n, Device::CPU, Arc::new(fetch));
            Tensor::from_parts(storage, DType::UInt8, Layout::contiguous(&[n]).unwrap()).unwrap()
        } else {
            Tensor::from_vec(data, &[n]).unwrap()
        };
        TensorObject::new(t)
    }

    /// On one thread, two lanes: the first tensor's second window (100
    /// bytes) ends while its partner has most of a window left, which is
    /// then paired with the next tensor, shorter still; each digest is
    /// `sha2`'s alone, with one lane too, in memory or read from a file.
    #[test]
    fn a_window_left_over_pairs_with_the_next_tensor() {
        let mb = 1 << 20;
        let sizes = [8 * mb + 100, 4 * mb, 4 * mb, 4 * mb - 1, mb, 100, 0];
        for lazy in [false, true] {
            let objects: Vec<TensorObject> = (0..)
                .zip(sizes)
                .map(|(seed, n)| tensor(n, seed, lazy))
                .collect();
            let given: Vec<Option<&TensorObject>> = objects.iter().map(Some).collect();
            for width in [1, 2] {
                let got = digest_on(&given, &|_| (), 1, width);
                for ((seed, n), d) in (0..).zip(sizes).zip(got) {
                    let want: [u8; 32] = sha2::Sha256::digest(values(n, seed)).into();
                    assert_eq!(
                        d.unwrap(),
                        Some(want),
                        "{n} bytes, lazy {lazy}, width {width}"
                    );
                }
            }
            // Nothing was read whole: the lazy storages stay unread.
            assert!(objects
                .iter()
                .all(|o| o.tensor.untyped_storage().is_loaded() != lazy));
        }
    }

    /// Tensors that are ranges of one storage in memory, hashed two or
    /// sixteen at a time by two threads while another thread keeps asking
    /// for the storage's exclusive lock: every digest is right, and the
    /// hashing ends (a thread taking the shared lock a second time, behind
    /// the waiting writer, would wait for ever).
    #[test]
    fn ranges_of_one_storage_hash_beside_a_writer_waiting_for_it() {
        let mb = 1 << 20;
        let data = values(20 * mb, 9);
        let whole = Tensor::from_vec(data.clone(), &[data.len()]).unwrap();
        let mut spans = vec![
            (0, 8 * mb + 100),
            (8 * mb + 100, 3 * mb),
            (11 * mb + 100, mb),
            (12 * mb + 100, 2 * mb - 100),
        ];
        // Enough more for sixteen lanes on each thread.
        for k in 0..32 {
            spans.push((14 * mb + k * 190_000, 150_000 + k * 1001));
        }
        let objects: Vec<TensorObject> = spans
            .iter()
            .map(|&(at, n)| TensorObject::new(whole.narrow(0, at as isize, n).unwrap()))
            .collect();
        let storage = whole.untyped_storage().clone();
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (storage, done) = (storage.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(std::sync::atomic::Ordering::Relaxed) {
                    drop(storage.bytes_mut().unwrap());
                }
            })
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let given: Vec<Option<&TensorObject>> = objects.iter().map(Some).collect();
            for round in 0..6 {
                let width = if round % 2 == 0 { 2 } else { sha256x16::LANES };
                let got: Vec<_> = digest_on(&given, &|_| (), 2, width)
                    .into_iter()
                    .map(|d| d.unwrap().unwrap())
                    .collect();
                let _ = tx.send(got);
            }
        });
        for round in 0..6 {
            let got = rx
                .recv_timeout(std::time::Duration::from_secs(60))
                .unwrap_or_else(|e| panic!("round {round}: the hashing did not end: {e}"));
            for (&(at, n), d) in spans.iter().zip(got) {
                let want: [u8; 32] = sha2::Sha256::digest(&data[at..at + n]).into();
                assert_eq!(d, want, "bytes {at}..{}", at + n);
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
    }

    /// Sixteen lanes a thread, on one thread and on two: tensors in memory
    /// (several ranges of one storage among them), read from a file, of
    /// sizes that end at every offset in a block and beside windows of
    /// every length, more tensors than lanes, a few too small for the
    /// sixteen at once; each digest is `sha2`'s alone.
    #[test]
    fn sixteen_lanes_give_each_tensor_its_own_digest() {
        let kb = 1 << 10;
        let shared = values(40 * kb + 7, 77);
        let whole = Tensor::from_vec(shared.clone(), &[shared.len()]).unwrap();
        let mut objects = Vec::new();
        let mut wants = Vec::new();
        for (k, at) in [0, 9 * kb + 3, 20 * kb, 30 * kb + 5]
            .into_iter()
            .enumerate()
        {
            let n = 10 * kb - k;
            objects.push(TensorObject::new(whole.narrow(0, at as isize, n).unwrap()));
            wants.push(sha2::Sha256::digest(&shared[at..at + n]).into());
        }
        for i in 0..36u8 {
            let n = match i {
                0 => 0,
                1 => 100,
                2 => 64,
                _ => 16 * kb + 700 * usize::from(i) + usize::from(i % 7),
            };
            objects.push(tensor(n, i, i % 3 == 0));
            wants.push(sha2::Sha256::digest(values(n, i)).into());
        }
        let given: Vec<Option<&TensorObject>> = objects.iter().map(Some).collect();
        for threads in [1, 2] {
            let got = digest_on(&given, &|_| (), threads, sha256x16::LANES);
            for (k, (d, want)) in got.into_iter().zip(&wants).enumerate() {
                assert_eq!(d.unwrap(), Some(*want), "tensor {k}, {threads} threads");
            }
        }
    }

    /// Among sixteen lanes, a tensor whose storage was shrunk under it
    /// fails alone, naming the bytes it lacks; the others are hashed.
    #[test]
    fn a_tensor_gone_from_its_storage_fails_alone_among_sixteen() {
        let n = 20 << 10;
        let objects: Vec<TensorObject> = (0..16u8).map(|i| tensor(n, i, i % 2 == 1)).collect();
        objects[4].tensor.untyped_storage().resize_(n / 2).unwrap();
        let given: Vec<Option<&TensorObject>> = objects.iter().map(Some).collect();
        let got = digest_on(&given, &|_| (), 1, sha256x16::LANES);
        for (i, d) in (0..16u8).zip(got) {
            if i == 4 {
                let e = d.unwrap_err();
                assert!(
                    matches!(e, crate::Error::Storage(StorageError::StorageRange { .. })),
                    "{e}"
                );
            } else {
                let want: [u8; 32] = sha2::Sha256::digest(values(n, i)).into();
                assert_eq!(d.unwrap(), Some(want), "tensor {i}");
            }
        }
    }
}
