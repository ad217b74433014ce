//! The digests of many tensors on every core ([`digest_all`]): what
//! `stowage manifest`, `inspect --json` and a verified eager load compute.
//!
//! SHA-256 is sequential within a message, so the work is shared out by
//! tensor: largest first, one thread per core, each taking the next tensor
//! as it finishes one. Where the CPU hashes two messages at once
//! ([`sha256x2`]), each thread hashes two tensors side by side, window
//! against window, and a tensor that ends mid-window leaves the rest of its
//! partner's window to be paired with the next tensor.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::{sha256x2, Reader};
use crate::checkpoint::value::graph::TensorObject;

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
    let width = if sha256x2::interleaves() { 2 } else { 1 };
    digest_on(objects, &progress, threads, width)
}

/// [`digest_all`] on at most `threads` threads, each hashing `width`
/// tensors (1 or 2) at a time.
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
    let mut lanes: [Option<Lane>; 2] = [None, None];
    loop {
        for lane in lanes.iter_mut().take(width) {
            fill(lane, &mut take, slots, progress);
        }
        match &mut lanes {
            [Some(a), Some(b)] => {
                let n = a.pending().len().min(b.pending().len());
                let ((ha, da), (hb, db)) = (a.next(n), b.next(n));
                sha256x2::update_both(ha, da, hb, db);
            }
            [Some(a), None] | [None, Some(a)] => {
                let (h, d) = a.next(a.pending().len());
                h.update(d);
            }
            [None, None] => break,
        }
    }
}

/// Gives `lane` bytes to hash: its tensor's next window, or when that
/// tensor is done (its digest set) the next tensor's; empty when `take`
/// has none left.
fn fill<'o>(
    lane: &mut Option<Lane>,
    take: &mut impl FnMut() -> Option<(usize, &'o TensorObject)>,
    slots: &[Slot],
    progress: &impl Fn(u64),
) {
    loop {
        let l = match lane {
            Some(l) => l,
            None => {
                let Some((slot, object)) = take() else { return };
                match Reader::new(object) {
                    Ok(reader) => lane.insert(Lane::new(slot, reader)),
                    Err(e) => {
                        let _ = slots[slot].set(Err(e));
                        continue;
                    }
                }
            }
        };
        if !l.pending().is_empty() {
            return;
        }
        let slot = l.slot;
        match l.reader.fill() {
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

/// A tensor being hashed: its reader, the window read last and how much of
/// it is hashed.
struct Lane {
    slot: usize,
    reader: Reader,
    hash: sha256x2::Sha256,
    filled: usize,
    used: usize,
}

impl Lane {
    fn new(slot: usize, reader: Reader) -> Lane {
        Lane {
            slot,
            reader,
            hash: sha256x2::Sha256::default(),
            filled: 0,
            used: 0,
        }
    }

    /// The bytes of the last window not hashed yet.
    fn pending(&self) -> &[u8] {
        self.reader.window(self.used..self.filled)
    }

    /// The next `n` pending bytes, counted as hashed, with the hash to feed
    /// them to.
    fn next(&mut self, n: usize) -> (&mut sha256x2::Sha256, &[u8]) {
        let from = self.used;
        self.used += n;
        (&mut self.hash, self.reader.window(from..self.used))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;

    fn bytes(n: usize, seed: u8) -> TensorObject {
        let values: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
        TensorObject::new(Tensor::from_vec(values, &[n]).unwrap())
    }

    /// On one thread, two lanes: the first tensor's second window (100
    /// bytes) ends while its partner has most of a window left, which is
    /// then paired with the next tensor, shorter still; each digest is
    /// `sha2`'s alone, and with one lane too.
    #[test]
    fn a_window_left_over_pairs_with_the_next_tensor() {
        let mb = 1 << 20;
        let objects = [
            bytes(8 * mb + 100, 1),
            bytes(4 * mb, 2),
            bytes(4 * mb, 3),
            bytes(4 * mb - 1, 4),
            bytes(mb, 5),
            bytes(100, 6),
            bytes(0, 7),
        ];
        let given: Vec<Option<&TensorObject>> = objects.iter().map(Some).collect();
        for width in [1, 2] {
            let got = digest_on(&given, &|_| (), 1, width);
            for (o, d) in objects.iter().zip(got) {
                let want = super::super::digest(o, |_| ()).unwrap();
                assert_eq!(d.unwrap(), Some(want), "{} bytes", o.tensor.nbytes());
            }
        }
    }
}
