//! The content digests of what a save writes, taken from the bytes as the
//! writer passes them to the file: a manifest of a conversion's output with
//! no second read (`stowage convert --manifest`).
//!
//! The writers feed it in the order they write: the torch zip writer a
//! storage at a time (each tensor that is a contiguous range of it takes
//! its range), the safetensors writer a tensor at a time, the DCP writer a
//! chunk at a time (a tensor whose chunks are its rows in order takes them
//! in turn). The hashing runs on threads of its own, a few windows behind
//! the writer, each tensor on one of them (a SHA-256 is a sequence), on
//! the very buffers written: a window read from the source is handed over
//! whole and comes back to the writer's pool once hashed, a
//! DCP chunk's compact copy is hashed where it lies. Only bytes that stay
//! the caller's (a storage in memory, which it may change once the save
//! returns) are copied, and those of a small window (a small tensor's),
//! into the batch of messages that carries them. A tensor the writer
//! cannot give in order (a transposed view, a DCP chunk of columns) is not
//! fed; [`WrittenDigests::finish`] leaves it out, and the caller hashes it
//! by reading the output.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use foldhash::HashMap;

use super::{sha256x16, sha256x2};
use crate::checkpoint::value::graph::{dotted, Checkpoint, TensorObject};
use crate::storage::BytesRef;
use crate::UntypedStorage;

/// The most bytes of one message to a hashing thread.
const PIECE: usize = 4 << 20;
/// Batches queued for one hashing thread before the writer waits: at most
/// this many in flight (and three more), each holding at most a [`PIECE`]
/// or [`BATCH_BYTES`], so about 64 MiB where windows are large. Several
/// threads share twice as many ([`WrittenDigests::new`]): a thread's queue
/// holds a large tensor's bytes while the next tensor goes to the next
/// thread.
const QUEUED: usize = 16;
/// The most messages sent to a hashing thread at once. Each send may wake
/// it (a futex call each side when it sleeps), which for small tensors
/// cost more than hashing them: their messages go in batches.
const BATCH: usize = 64;
/// A batch is sent once the bytes its messages hold reach this.
const BATCH_BYTES: usize = 1 << 20;
/// Bytes of a tensor up to this many are copied into the batch that
/// carries them ([`Message::Copied`]): for a small tensor, one copy costs
/// less than a buffer of its own handed over and given back (most of what
/// a save of many small tensors spent on its digests).
const COPIED: usize = 16 << 10;
/// The most hashing threads: each hashes about 2 GB/s, more than a writer
/// copies with this many.
const MOST_HASHERS: usize = 8;
/// The most bytes a hashing thread holds back to hash beside others
/// ([`hash_message`]): sixteen 2 MiB windows, no more than a queue holds.
const HELD_BYTES: usize = 32 << 20;

/// Whether a writer whose bytes are hashed computes its CRC-32 on a thread
/// of its own (the torch zip writer's large records), with `cores` cores:
/// beyond two, where the hashing threads leave it one. On two, the hashing
/// threads take both, and one more thread would only wait.
pub(crate) fn crc_thread_beside_hashing(cores: usize) -> bool {
    cores > 2
}

/// How many threads hash what a save writes, with `cores` cores: one a core,
/// but for the core of the writer's CRC-32 where it has a thread
/// ([`crc_thread_beside_hashing`]); eight at most. The writer's own thread
/// is one more: it waits for the disk or for a full queue much of the
/// time, and a save from memory writes far faster than one core hashes
/// (`save_256MiB_of_2MiB_tensors` in `benches/digest.rs`: 134 ms on two
/// threads against 172 on one, on two cores). A tensor's bytes go to one of
/// them in order; the tensors are dealt out as many at a time as a core
/// hashes at once, to the thread with the least left to hash
/// ([`Running::deal`]).
fn hashers_for(cores: usize) -> usize {
    let crc = usize::from(crc_thread_beside_hashing(cores));
    cores.saturating_sub(crc).clamp(1, MOST_HASHERS)
}

/// Collects the SHA-256 of each written tensor's logical elements (the
/// `sha256` of a content manifest and of `inspect --json`) from the bytes a
/// save writes, hashing them on threads of their own while the save goes on.
///
/// Give a clone to the save ([`SaveOptions::with_digests`](crate::SaveOptions::with_digests),
/// [`ShardOptions::with_digests`](crate::checkpoint::sharded::ShardOptions::with_digests),
/// [`DcpSaveOptions::with_digests`](crate::checkpoint::dcp::DcpSaveOptions::with_digests)),
/// then call [`finish`](Self::finish).
///
/// ```
/// use stowage::checkpoint::content::WrittenDigests;
/// use stowage::{Checkpoint, SaveOptions, Tensor};
///
/// let w = Tensor::from_vec(vec![1.0f32, 2.0], &[2])?;
/// let ckpt = Checkpoint::from_state_dict(vec![("w".to_owned(), w)]);
/// let dir = tempfile::tempdir()?;
/// let digests = WrittenDigests::new();
/// let options = SaveOptions::default().with_digests(digests.clone());
/// stowage::save_with(&dir.path().join("m.pt"), &ckpt, &options)?;
/// let written = digests.finish();
/// assert_eq!(written["w"].len(), 8);
/// // The SHA-256 of the eight bytes of 1.0 and 2.0 as little-endian float32.
/// assert_eq!(
///     hex::encode(written["w"].sha256()),
///     stowage::checkpoint::content::sha256(&ckpt.tensors()?[0].1, |_| ())?
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct WrittenDigests {
    inner: Arc<Inner>,
}

struct Inner {
    /// `None` once finished (or where no hashing thread could start).
    state: Mutex<Option<Running>>,
    /// Each hashing thread's batch being gathered, by the index
    /// [`Running::route`] gives; `None` once finished. Locked apart from
    /// `state`, and held while a full batch is sent: batches reach a thread
    /// in the order their messages came, while a writer waiting for one
    /// thread's full queue holds up no other.
    outboxes: Vec<Mutex<Option<Outbox>>>,
}

struct Running {
    /// The hashing threads ([`hash_messages`]), at least one.
    threads: Vec<JoinHandle<Digests>>,
    /// Which of them hashes each tensor begun, by name: all its bytes go to
    /// the one that took its [`Message::Begin`], in order.
    routes: HashMap<Arc<str>, usize>,
    /// How many are dealt to one thread in a row: as many as it hashes at
    /// once ([`sha256x16::width`]), of at most [`HELD_BYTES`] together.
    group: usize,
    /// How many tensors, and bytes, the group being dealt has.
    in_group: (usize, u64),
    /// The thread the last tensor was dealt to (the last thread before
    /// any is, so that the first group goes to the first on a tie).
    last: usize,
    /// The bytes each thread has yet to hash: added as they are posted,
    /// taken off once hashed.
    loads: Vec<Arc<AtomicUsize>>,
    /// Buffers the hashing threads are done with, for the writer to fill again.
    spare: Receiver<Vec<u8>>,
    /// Those taken from `spare`, the last given back on top.
    pool: Vec<Vec<u8>>,
    /// Where a buffer handed over goes back to ([`Pooled`]).
    home: Sender<Vec<u8>>,
    /// Names written once under another name (one object at two paths).
    aliases: Vec<(String, String)>,
}

/// A hashing thread's queue, and the messages gathered for it.
struct Outbox {
    to: SyncSender<Batch>,
    batch: Vec<Message>,
    /// The bytes of `batch`'s [`Message::Copied`].
    copies: Vec<u8>,
    /// The bytes the messages of `batch` hold ([`Post::weight`]).
    weight: usize,
    /// The bytes the thread has yet to hash, `batch` included
    /// ([`Running::loads`]).
    load: Arc<AtomicUsize>,
}

/// What a hashing thread gives: each tensor's digest, by name.
type Digests = Vec<(Arc<str>, WrittenDigest)>;

/// Messages for a hashing thread.
struct Batch {
    messages: Vec<Message>,
    /// The bytes copied into it ([`Message::Copied`]).
    copies: Vec<u8>,
    /// The bytes its messages hold: taken off the thread's load once they
    /// are hashed.
    weight: usize,
}

impl Outbox {
    /// Sends the batch gathered, if any; false once the thread is gone.
    fn flush(&mut self) -> bool {
        if self.batch.is_empty() {
            return true;
        }
        let batch = Batch {
            messages: std::mem::replace(&mut self.batch, Vec::with_capacity(BATCH)),
            copies: std::mem::take(&mut self.copies),
            weight: std::mem::take(&mut self.weight),
        };
        self.to.send(batch).is_ok()
    }
}

/// A message for the hashing thread `to` ([`Running::route`]).
struct Post<'a> {
    to: usize,
    what: Posted<'a>,
    /// The bytes it keeps from being freed or reused until hashed: what
    /// bounds a batch ([`BATCH_BYTES`]).
    weight: usize,
}

enum Posted<'a> {
    Message(Message),
    /// A tensor's next bytes, to copy into the batch ([`COPIED`]).
    Copy(Arc<str>, &'a [u8]),
}

impl Running {
    /// The hashing thread that hashes `name` ([`deal`](Self::deal) it out
    /// where it has none yet).
    fn route(&mut self, name: &Arc<str>) -> usize {
        self.deal(name, 0)
    }

    /// The hashing thread that hashes `name`, of `len` bytes, dealing it
    /// out where it has none yet: [`group`](Self::group) tensors to a
    /// thread, as the writer begins them, so that each thread has as many
    /// to hash at once as it can ([`hash_messages`]), but no more bytes
    /// than a thread holds back to gather them ([`HELD_BYTES`]: larger
    /// tensors come a piece after another, each hashed alone, and are
    /// dealt one at a time); each group to the thread with the fewest bytes
    /// left to hash, the next in turn where they tie. A thread given a
    /// large tensor, or sharing its core with the writer, is then not given
    /// as much more as the others and left hashing alone at the end.
    fn deal(&mut self, name: &Arc<str>, len: u64) -> usize {
        if let Some(&k) = self.routes.get(name) {
            return k;
        }
        let (tensors, bytes) = self.in_group;
        let k = if tensors > 0 && tensors < self.group && bytes + len <= HELD_BYTES as u64 {
            self.in_group = (tensors + 1, bytes + len);
            self.last
        } else {
            self.in_group = (1, len);
            let n = self.threads.len();
            (self.last + 1..self.last + 1 + n)
                .map(|k| k % n)
                .min_by_key(|&k| self.loads[k].load(Ordering::Relaxed))
                .unwrap_or(0)
        };
        self.last = k;
        self.routes.insert(name.clone(), k);
        k
    }
}

enum Message {
    /// A tensor's bytes begin: its logical length.
    Begin(Arc<str>, u64),
    /// Its next bytes.
    Bytes(Arc<str>, Piece),
    /// Its next bytes, these of the batch's [`copies`](Batch::copies).
    Copied(Arc<str>, Range<usize>),
}

/// Some bytes of a tensor, where they lie.
enum Piece {
    /// A range of a buffer the writer filled and handed over.
    Buffer(Arc<Pooled>, Range<usize>),
    /// A range of the bytes copied into a batch ([`Message::Copied`]).
    Copied(Arc<Vec<u8>>, Range<usize>),
    /// A range of a storage only the save holds (a compact copy it made),
    /// read under its shared lock.
    Storage(UntypedStorage, Range<usize>),
}

impl Piece {
    /// Runs `f` on the bytes; `None` where a storage no longer has them.
    fn with<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        match self {
            Piece::Buffer(buf, range) => buf.bytes.get(range.clone()).map(f),
            Piece::Copied(copies, range) => copies.get(range.clone()).map(f),
            Piece::Storage(storage, range) => storage.bytes().ok()?.get(range.clone()).map(f),
        }
    }

    /// How many bytes it holds.
    fn len(&self) -> usize {
        match self {
            Piece::Buffer(_, range) | Piece::Copied(_, range) | Piece::Storage(_, range) => {
                range.len()
            }
        }
    }

    /// Its storage's id, for one in a storage; 0 for any other.
    fn storage_id(&self) -> usize {
        match self {
            Piece::Storage(storage, _) => storage.id(),
            _ => 0,
        }
    }

    /// Whether both lie in one storage: never read under two of its locks
    /// at once, which a writer waiting between them would deadlock.
    fn shares_storage(&self, other: &Piece) -> bool {
        match (self, other) {
            (Piece::Storage(a, _), Piece::Storage(b, _)) => a.id() == b.id(),
            _ => false,
        }
    }
}

/// A buffer handed to the hashing threads, back in the writer's pool
/// ([`Running::spare`]) once the last piece of it is hashed.
struct Pooled {
    bytes: Vec<u8>,
    home: Sender<Vec<u8>>,
}

impl Drop for Pooled {
    fn drop(&mut self) {
        // The writer may be gone; the buffer is then freed.
        let _ = self.home.send(std::mem::take(&mut self.bytes));
    }
}

#[derive(Default)]
struct Slot {
    hash: sha256x2::Sha256,
    expected: u64,
    /// Bytes hashed: short of `expected` where a piece could not be read.
    fed: u64,
    /// Begun more than once (written twice under one name): not trusted.
    twice: bool,
}

/// One tensor's digest, from the bytes written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenDigest {
    sha256: [u8; 32],
    len: u64,
}

impl WrittenDigest {
    /// SHA-256 of the tensor's logical elements.
    pub fn sha256(&self) -> [u8; 32] {
        self.sha256
    }

    /// How many bytes were hashed: the tensor's logical length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for WrittenDigests {
    fn default() -> Self {
        Self::new()
    }
}

/// A hashing thread: each tensor's bytes as the writer sends them, by
/// name. Where the CPU hashes several messages at once (`width` of them,
/// [`sha256x16::width`]), pieces wait for those of other tensors to be
/// hashed beside them ([`hash_message`]). Gives the digest of each tensor
/// begun once and fed all its bytes.
fn hash_messages(from_writer: &Receiver<Batch>, load: &AtomicUsize, width: usize) -> Digests {
    let mut slots: HashMap<Arc<str>, Slot> = HashMap::default();
    let mut held = Vec::with_capacity(width);
    for batch in from_writer.iter() {
        let copies = Arc::new(batch.copies);
        for message in batch.messages {
            hash_message(&mut slots, &mut held, width, message, &copies);
        }
        load.fetch_sub(batch.weight, Ordering::Relaxed);
    }
    // The writer is done: the pieces held go as they are.
    feed_held(&mut slots, &mut held);
    // Each digest finished here, on the threads, not by `finish`.
    slots
        .into_iter()
        .filter(|(_, s)| !s.twice && s.fed == s.expected)
        .map(|(name, s)| {
            let digest = WrittenDigest {
                sha256: s.hash.finalize(),
                len: s.fed,
            };
            (name, digest)
        })
        .collect()
}

/// A piece of a named tensor's bytes.
type Named = (Arc<str>, Piece);

/// Hashes one message of [`hash_messages`] (`copies`, its batch's), or
/// holds its piece until `width` pieces of as many tensors are held, to
/// hash them at once. A piece of a tensor already held, one in a storage
/// one held lies in, or one past [`HELD_BYTES`], first sends those held on
/// as they are.
fn hash_message(
    slots: &mut HashMap<Arc<str>, Slot>,
    held: &mut Vec<Named>,
    width: usize,
    message: Message,
    copies: &Arc<Vec<u8>>,
) {
    let (name, piece) = match message {
        Message::Begin(name, len) => {
            if held.iter().any(|(h, _)| *h == name) {
                feed_held(slots, held);
            }
            let slot = slots.entry(name).or_default();
            slot.twice |= slot.expected != 0 || slot.fed != 0;
            slot.expected = len;
            return;
        }
        Message::Bytes(name, piece) => (name, piece),
        Message::Copied(name, range) => (name, Piece::Copied(copies.clone(), range)),
    };
    if width == 1 {
        return feed(slots, (name, piece));
    }
    let bytes: usize = held.iter().map(|(_, p)| p.len()).sum();
    if bytes + piece.len() > HELD_BYTES
        || held
            .iter()
            .any(|(h, p)| *h == name || p.shares_storage(&piece))
    {
        feed_held(slots, held);
    }
    held.push((name, piece));
    if held.len() >= width {
        feed_held(slots, held);
    }
}

/// Hashes the pieces held, each of another tensor and storage: sixteen at
/// once where they are and none is small ([`sha256x16::AT_LEAST`]), else in
/// pairs.
fn feed_held(slots: &mut HashMap<Arc<str>, Slot>, held: &mut Vec<Named>) {
    if held.iter().all(|(_, p)| p.len() >= sha256x16::AT_LEAST) {
        match <[Named; sha256x16::LANES]>::try_from(std::mem::take(held)) {
            Ok(sixteen) => return feed_sixteen(slots, sixteen),
            Err(fewer) => *held = fewer,
        }
    }
    let mut pieces = held.drain(..);
    while let Some(a) = pieces.next() {
        match pieces.next() {
            Some(b) => feed_both(slots, a, b),
            None => feed(slots, a),
        }
    }
}

/// Hashes one piece of a tensor's bytes alone.
fn feed(slots: &mut HashMap<Arc<str>, Slot>, (name, piece): Named) {
    let slot = slots.entry(name).or_default();
    if let Some(n) = piece.with(|bytes| {
        slot.hash.update(bytes);
        bytes.len()
    }) {
        slot.fed += n as u64;
    }
}

/// Hashes pieces of two tensors side by side; each alone where one of
/// them cannot be read, so that only its own tensor is left out.
fn feed_both(slots: &mut HashMap<Arc<str>, Slot>, a: Named, b: Named) {
    slots.entry(a.0.clone()).or_default();
    slots.entry(b.0.clone()).or_default();
    if let [Some(sa), Some(sb)] = slots.get_disjoint_mut([&a.0, &b.0]) {
        let both = a.1.with(|x| {
            b.1.with(|y| {
                sha256x2::update_both(&mut sa.hash, x, &mut sb.hash, y);
                sa.fed += x.len() as u64;
                sb.fed += y.len() as u64;
            })
        });
        if both.flatten().is_some() {
            return;
        }
    }
    feed(slots, a);
    feed(slots, b);
}

/// Hashes pieces of sixteen tensors, in as many storages, side by side:
/// as many bytes of each as the shortest has at once, the rest in pairs.
/// Each alone where one of them cannot be read, so that only its own
/// tensor is left out.
fn feed_sixteen(slots: &mut HashMap<Arc<str>, Slot>, pieces: [Named; sha256x16::LANES]) {
    for (name, _) in &pieces {
        slots.entry(name.clone()).or_default();
    }
    let hashed = {
        // The storages' shared locks, taken in the order of their ids.
        let mut order: [usize; sha256x16::LANES] = std::array::from_fn(|i| i);
        order.sort_by_key(|&i| pieces[i].1.storage_id());
        let mut locks: [Option<BytesRef>; sha256x16::LANES] = Default::default();
        for i in order {
            if let Piece::Storage(storage, _) = &pieces[i].1 {
                locks[i] = storage.bytes().ok();
            }
        }
        let data: [Option<&[u8]>; sha256x16::LANES] = std::array::from_fn(|i| match &pieces[i].1 {
            Piece::Buffer(buf, range) => buf.bytes.get(range.clone()),
            Piece::Copied(copies, range) => copies.get(range.clone()),
            Piece::Storage(_, range) => locks[i].as_deref()?.get(range.clone()),
        });
        let names = pieces.each_ref().map(|(name, _)| name);
        let hashes: Option<Vec<&mut Slot>> = slots.get_disjoint_mut(names).into_iter().collect();
        match hashes.and_then(|h| <[&mut Slot; sha256x16::LANES]>::try_from(h).ok()) {
            Some(hashes) if data.iter().all(Option::is_some) => {
                hash_sixteen(hashes, data.map(Option::unwrap_or_default));
                true
            }
            _ => false,
        }
    };
    if !hashed {
        for piece in pieces {
            feed(slots, piece);
        }
    }
}

/// [`feed_sixteen`]'s hashing, once every piece's bytes are at hand.
fn hash_sixteen(mut slots: [&mut Slot; sha256x16::LANES], data: [&[u8]; sha256x16::LANES]) {
    let common = data.iter().map(|d| d.len()).min().unwrap_or(0);
    let lanes = slots.each_mut().map(|s| &mut s.hash);
    sha256x16::update_lanes(lanes, data.map(|d| &d[..common]));
    let mut rest: Vec<(&mut Slot, &[u8])> = Vec::new();
    for (slot, d) in slots.into_iter().zip(data) {
        slot.fed += d.len() as u64;
        if d.len() > common {
            rest.push((slot, &d[common..]));
        }
    }
    for pair in rest.chunks_mut(2) {
        if let [(a, x), (b, y)] = pair {
            sha256x2::update_both(&mut a.hash, x, &mut b.hash, y);
        } else {
            for (a, x) in pair {
                a.hash.update(x);
            }
        }
    }
}

impl fmt::Debug for WrittenDigests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WrittenDigests(..)")
    }
}

impl WrittenDigests {
    /// A collector, its hashing threads started: one a core but for the
    /// writer's CRC-32 (two on two cores, seven on eight, eight at most). Where
    /// no thread can be started it collects nothing
    /// ([`finish`](Self::finish) gives no digest, and a manifest hashes
    /// what was written by reading it).
    pub fn new() -> WrittenDigests {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::with_threads(hashers_for(cores))
    }

    /// A collector with `n` hashing threads (one where `n` is 0): fewer
    /// where the cores are wanted for other work, more to measure.
    pub fn with_threads(n: usize) -> WrittenDigests {
        Self::with_threads_and_width(n, sha256x16::width())
    }

    /// [`with_threads`](Self::with_threads), each thread hashing `width`
    /// tensors at once (1, 2 or [`sha256x16::LANES`]).
    fn with_threads_and_width(n: usize, width: usize) -> WrittenDigests {
        let n = n.max(1);
        let queued = if n == 1 {
            QUEUED
        } else {
            (2 * QUEUED / n).max(2)
        };
        let mut outboxes = Vec::with_capacity(n);
        let mut threads = Vec::with_capacity(n);
        let mut loads = Vec::with_capacity(n);
        for i in 0..n {
            let (to, from_writer) = mpsc::sync_channel::<Batch>(queued);
            let load = Arc::new(AtomicUsize::new(0));
            let left = load.clone();
            let thread = std::thread::Builder::new().name(format!("stowage-digests-{i}"));
            let Ok(thread) = thread.spawn(move || hash_messages(&from_writer, &left, width)) else {
                break;
            };
            threads.push(thread);
            loads.push(load.clone());
            outboxes.push(Mutex::new(Some(Outbox {
                to,
                batch: Vec::with_capacity(BATCH),
                copies: Vec::new(),
                weight: 0,
                load,
            })));
        }
        let (home, spare) = mpsc::channel::<Vec<u8>>();
        let last = threads.len().saturating_sub(1);
        let running = (!threads.is_empty()).then(|| Running {
            threads,
            routes: HashMap::default(),
            in_group: (0, 0),
            group: width,
            last,
            loads,
            spare,
            pool: Vec::new(),
            home,
            aliases: Vec::new(),
        });
        WrittenDigests {
            inner: Arc::new(Inner {
                state: Mutex::new(running),
                outboxes,
            }),
        }
    }

    /// Runs `f` on the running state; `None` once finished.
    fn with<R>(&self, f: impl FnOnce(&mut Running) -> R) -> Option<R> {
        let mut state = self
            .inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.as_mut().map(f)
    }

    /// Posts the messages `f` gives, each to the hashing thread of its
    /// tensor, in order. The state is locked only while `f` runs (choosing
    /// their threads): a writer waiting for a full queue holds no lock of it
    /// (another save with a clone goes on).
    fn send<'a, P: IntoIterator<Item = Post<'a>>>(&self, f: impl FnOnce(&mut Running) -> P) {
        for post in self.with(f).into_iter().flatten() {
            if !self.post(post) {
                return;
            }
        }
    }

    /// Adds a message to its thread's batch, sending the batch when it is
    /// full ([`BATCH`], [`BATCH_BYTES`]); false once the thread is gone.
    fn post(&self, post: Post<'_>) -> bool {
        let Some(outbox) = self.inner.outboxes.get(post.to) else {
            return false;
        };
        let mut outbox = outbox.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(o) = outbox.as_mut() else {
            return false;
        };
        // A batch holds at most `BATCH_BYTES`, or one message that holds
        // more (after those that hold nothing: a tensor's beginning goes
        // with its first bytes).
        if o.weight > 0 && o.weight + post.weight > BATCH_BYTES && !o.flush() {
            return false;
        }
        let message = match post.what {
            Posted::Message(message) => message,
            Posted::Copy(name, bytes) => {
                if o.copies.capacity() == 0 {
                    // Room for a batch of as many bytes a message, at most
                    // what a batch holds.
                    o.copies.reserve((BATCH * bytes.len()).min(BATCH_BYTES));
                }
                let at = o.copies.len();
                o.copies.extend_from_slice(bytes);
                Message::Copied(name, at..o.copies.len())
            }
        };
        o.batch.push(message);
        o.weight += post.weight;
        o.load.fetch_add(post.weight, Ordering::Relaxed);
        if o.batch.len() >= BATCH || o.weight >= BATCH_BYTES {
            return o.flush();
        }
        true
    }

    /// The tensor written as `name` begins; its logical elements are `len`
    /// bytes, fed next with [`bytes`](Self::bytes).
    pub(crate) fn begin(&self, name: &Arc<str>, len: u64) {
        self.send(|r| {
            [Post {
                to: r.deal(name, len),
                what: Posted::Message(Message::Begin(name.clone(), len)),
                weight: 0,
            }]
        });
    }

    /// The next bytes of the tensor written as `name`, copied: for bytes
    /// others may change once written (a storage the caller holds). A few
    /// go into the batch that carries them ([`COPIED`]), more a piece at a
    /// time into buffers the hashing threads give back.
    pub(crate) fn bytes(&self, name: &Arc<str>, bytes: &[u8]) {
        if bytes.len() <= COPIED {
            self.send(|r| {
                [Post {
                    to: r.route(name),
                    what: Posted::Copy(name.clone(), bytes),
                    weight: bytes.len(),
                }]
            });
            return;
        }
        for piece in bytes.chunks(PIECE) {
            let mut buf = self.buffer(piece.len());
            buf.clear();
            buf.extend_from_slice(piece);
            self.hand_over(buf, [(name, 0..piece.len())]);
        }
    }

    /// A buffer to fill with `n` bytes and hand over ([`window`](Self::window),
    /// [`storage_window`](Self::storage_window)): the last the hashing
    /// threads gave back (the likeliest still in the CPU's cache) of those
    /// that hold `n` bytes and not many times more (a small tensor's bytes
    /// in a window's buffer would keep it from the pool while batched), as
    /// it was; else an empty one.
    fn buffer(&self, n: usize) -> Vec<u8> {
        let fits = |b: &Vec<u8>| (n..=n.saturating_mul(4).max(64 << 10)).contains(&b.capacity());
        self.with(|r| {
            r.pool.extend(r.spare.try_iter());
            let i = r.pool.iter().rposition(fits)?;
            Some(r.pool.swap_remove(i))
        })
        .flatten()
        .unwrap_or_default()
    }

    /// `window`, just written, is the next bytes of the tensor written as
    /// `name`: handed over whole, hashed where it lies.
    #[cfg(feature = "safetensors")]
    pub(crate) fn window(&self, name: &Arc<str>, window: Vec<u8>) {
        let len = window.len();
        self.hand_over(window, [(name, 0..len)]);
    }

    /// Hands `buf` to the hashing threads, each range of it the next bytes
    /// of its tensor: hashed where they lie, then `buf` goes back to the
    /// pool once the last of them is done with it. A small `buf`'s ranges
    /// are copied into their batches instead ([`COPIED`]), and `buf` goes
    /// back to the pool at once.
    fn hand_over<'a>(
        &self,
        buf: Vec<u8>,
        parts: impl IntoIterator<Item = (&'a Arc<str>, Range<usize>)>,
    ) {
        if buf.len() <= COPIED {
            self.send(|r| {
                let copy = |(name, range): (&Arc<str>, Range<usize>)| Post {
                    to: r.route(name),
                    weight: range.len(),
                    what: Posted::Copy(name.clone(), &buf[range]),
                };
                parts.into_iter().map(copy).collect::<Vec<_>>()
            });
            self.with(|r| r.pool.push(buf));
            return;
        }
        self.send(|r| {
            // The first message holds the whole buffer, the others their part.
            let mut held = buf.capacity();
            let buf = Arc::new(Pooled {
                bytes: buf,
                home: r.home.clone(),
            });
            let mut messages = Vec::new();
            for (name, range) in parts {
                let to = r.route(name);
                for piece in pieces(range) {
                    let weight = std::mem::take(&mut held).max(piece.len());
                    let piece = Piece::Buffer(buf.clone(), piece);
                    messages.push(Post {
                        to,
                        what: Posted::Message(Message::Bytes(name.clone(), piece)),
                        weight,
                    });
                }
            }
            messages
        });
    }

    /// The bytes `range` of `storage` are the next of the tensor written as
    /// `name`, hashed where they lie, with no copy. Only for a storage the
    /// save made and no one else holds (a compact copy): the hashing thread
    /// reads it after the writer has moved on.
    pub(crate) fn stored(&self, name: &Arc<str>, storage: &UntypedStorage, range: Range<usize>) {
        self.send(|r| {
            let to = r.route(name);
            pieces(range).map(move |piece| Post {
                to,
                weight: piece.len(),
                what: Posted::Message(Message::Bytes(
                    name.clone(),
                    Piece::Storage(storage.clone(), piece),
                )),
            })
        });
    }

    /// `name` names the same object as `written`, written once under that
    /// name (a tensor at two paths): it gets the same digest.
    pub(crate) fn alias(&self, name: &str, written: &str) {
        if name != written {
            self.with(|r| r.aliases.push((name.to_owned(), written.to_owned())));
        }
    }

    /// Each tensor's digest, by the name it was written under (its dotted
    /// path): those whose every byte the save fed, in order. A tensor the
    /// writer could not feed in order, or fed in part (a save that failed),
    /// is left out. Later saves with a clone feed nothing.
    pub fn finish(&self) -> BTreeMap<String, WrittenDigest> {
        let running = self
            .inner
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(Running {
            threads, aliases, ..
        }) = running
        else {
            return BTreeMap::new();
        };
        // A thread only hashes: it ends when its queue's sender is gone,
        // once the batch gathered for it is sent. Each tensor went to one
        // of them, so their names are disjoint.
        for outbox in &self.inner.outboxes {
            let mut outbox = outbox.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(mut o) = outbox.take() {
                o.flush();
            }
        }
        let mut out: BTreeMap<String, WrittenDigest> = threads
            .into_iter()
            .flat_map(|thread| thread.join().unwrap_or_default())
            .map(|(name, digest)| (name.to_string(), digest))
            .collect();
        for (name, written) in aliases {
            if let Some(d) = out.get(&written).cloned() {
                out.entry(name).or_insert(d);
            }
        }
        out
    }

    /// For the torch zip writer: which byte ranges of each storage are the
    /// logical elements of a tensor of `ckpt`, by storage
    /// ([`UntypedStorage::id`](crate::UntypedStorage::id)). A tensor at
    /// several paths is fed once, its other names aliased. `None` when the
    /// tensors cannot be listed (paths past the walk limit): nothing is fed.
    pub(crate) fn storage_ranges(&self, ckpt: &Checkpoint) -> Option<StorageRanges> {
        let tensors = ckpt.tensors().ok()?;
        let mut ranges = Vec::with_capacity(tensors.len());
        let mut first: HashMap<*const TensorObject, Arc<str>> = HashMap::default();
        for (path, object) in tensors {
            let name: Arc<str> = dotted(&path).into();
            if let Some(written) = first.get(&std::ptr::from_ref(object)) {
                self.alias(&name, written);
                continue;
            }
            first.insert(std::ptr::from_ref(object), name.clone());
            if let Some((start, len)) = super::logical_range(object) {
                ranges.push(TensorRange {
                    storage: object.tensor.untyped_storage().id(),
                    name,
                    start,
                    len,
                });
            }
        }
        Some(StorageRanges::new(ranges))
    }

    /// For the torch zip writer: the storage `storage_id` is about to be
    /// written; each tensor on it begins.
    pub(crate) fn begin_storage(&self, ranges: &StorageRanges, storage_id: usize) {
        for r in ranges.on(storage_id) {
            self.begin(&r.name, r.len as u64);
        }
    }

    /// For the torch zip writer: `bytes` of the storage `storage_id` at byte
    /// `at`, written in order; each tensor whose range they meet takes a
    /// copy of its part (the storage is the caller's).
    pub(crate) fn storage_bytes(
        &self,
        ranges: &StorageRanges,
        storage_id: usize,
        at: usize,
        bytes: &[u8],
    ) {
        for (name, part) in ranges.parts(storage_id, at, bytes.len()) {
            self.bytes(name, &bytes[part]);
        }
    }

    /// For the torch zip writer: `window` holds the bytes of the storage
    /// `storage_id` from byte `at`, just written; it is handed over whole,
    /// each tensor whose range it meets hashing its part where it lies.
    pub(crate) fn storage_window(
        &self,
        ranges: &StorageRanges,
        storage_id: usize,
        at: usize,
        window: Vec<u8>,
    ) {
        let len = window.len();
        self.hand_over(window, ranges.parts(storage_id, at, len));
    }
}

/// A buffer of `n` bytes for a writer to read a window into: the digests'
/// ([`WrittenDigests::buffer`]) when it is handed to them once written,
/// else `kept`, the writer's own from one window to the next. Its bytes are
/// whatever it held before.
pub(crate) fn window_buffer(
    digests: Option<&WrittenDigests>,
    kept: &mut Vec<u8>,
    n: usize,
) -> crate::Result<Vec<u8>> {
    let mut buf = match digests {
        Some(d) => d.buffer(n),
        None => std::mem::take(kept),
    };
    if buf.capacity() < n {
        // A failed allocation is an error here, not an abort.
        buf = crate::storage::zeroed_bytes(n)?;
    }
    buf.resize(n, 0);
    Ok(buf)
}

/// `range` cut into ranges of at most [`PIECE`] bytes.
fn pieces(range: Range<usize>) -> impl Iterator<Item = Range<usize>> {
    range
        .clone()
        .step_by(PIECE)
        .map(move |from| from..(from + PIECE).min(range.end))
}

/// The tensors' ranges of each storage ([`WrittenDigests::storage_ranges`]),
/// by storage (one list, not a list per storage: a checkpoint of many
/// small tensors has as many storages).
pub(crate) struct StorageRanges(Vec<TensorRange>);

impl StorageRanges {
    /// `ranges` by storage, each storage's in the order given.
    fn new(mut ranges: Vec<TensorRange>) -> StorageRanges {
        ranges.sort_by_key(|r| r.storage);
        StorageRanges(ranges)
    }

    /// The tensors' ranges of the storage `storage_id`.
    fn on(&self, storage_id: usize) -> &[TensorRange] {
        let from = self.0.partition_point(|r| r.storage < storage_id);
        let to = from + self.0[from..].partition_point(|r| r.storage == storage_id);
        &self.0[from..to]
    }

    /// Each tensor on the storage `storage_id` that the bytes `at..at + len`
    /// meet, with the part of them that is its, counted from `at`.
    fn parts(
        &self,
        storage_id: usize,
        at: usize,
        len: usize,
    ) -> impl Iterator<Item = (&Arc<str>, Range<usize>)> {
        self.on(storage_id).iter().filter_map(move |r| {
            let from = r.start.max(at);
            let to = (r.start + r.len).min(at + len);
            (from < to).then(|| (&r.name, from - at..to - at))
        })
    }
}

struct TensorRange {
    /// Its storage's [`id`](UntypedStorage::id).
    storage: usize,
    name: Arc<str>,
    start: usize,
    len: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    use crate::checkpoint::content::sha256x16::LANES;

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(13) ^ seed).collect()
    }

    /// Pieces of several tensors, interleaved as the torch zip writer feeds
    /// the tensors of one storage window by window, some longer than a
    /// piece, some empty: each digest is the tensor's own, whichever pieces
    /// were hashed beside one another and by whichever thread.
    #[test]
    fn interleaved_pieces_hash_as_each_tensor_alone() {
        for (hashers, width) in [(1, 1), (1, 2), (3, 2), (1, LANES), (3, LANES)] {
            interleaved_pieces(hashers, width);
        }
    }

    fn interleaved_pieces(hashers: usize, width: usize) {
        let mb = 1 << 20;
        let (a, b, c) = (bytes(10 * mb, 1), bytes(100, 2), bytes(5 * mb + 3, 3));
        let names: Vec<Arc<str>> = ["a", "b", "c", "empty"].map(Arc::from).into();
        let d = WrittenDigests::with_threads_and_width(hashers, width);
        for (name, len) in names.iter().zip([a.len(), b.len(), c.len(), 0]) {
            d.begin(name, len as u64);
        }
        d.bytes(&names[0], &a[..mb]);
        d.bytes(&names[1], &b);
        d.bytes(&names[0], &a[mb..9 * mb]);
        d.bytes(&names[2], &c[..2 * mb + 1]);
        d.bytes(&names[0], &a[9 * mb..]);
        d.bytes(&names[2], &c[2 * mb + 1..]);
        let out = d.finish();
        for (name, data) in [("a", &a), ("b", &b), ("c", &c), ("empty", &Vec::new())] {
            let want: [u8; 32] = sha2::Sha256::digest(data).into();
            let at = format!("{name} ({hashers} threads, {width} at once)");
            assert_eq!(out[name].sha256(), want, "{at}");
            assert_eq!(out[name].len(), data.len() as u64, "{at}");
        }
    }

    /// A tensor begun twice (two tensors written under one name) is left
    /// out, its second beginning dealt to the thread of its first; a tensor
    /// fed short is left out; the others keep their digests.
    #[test]
    fn a_name_begun_twice_or_fed_short_is_left_out() {
        for hashers in [1, 2, 3] {
            let names: Vec<Arc<str>> = ["a", "b", "c"].map(Arc::from).into();
            let d = WrittenDigests::with_threads(hashers);
            d.begin(&names[0], 3);
            d.bytes(&names[0], b"abc");
            d.begin(&names[1], 2);
            d.bytes(&names[1], b"xy");
            d.begin(&names[0], 3);
            d.bytes(&names[0], b"def");
            d.begin(&names[2], 4);
            d.bytes(&names[2], b"abc");
            let out = d.finish();
            assert_eq!(out.keys().collect::<Vec<_>>(), ["b"], "{hashers} threads");
            let want: [u8; 32] = sha2::Sha256::digest(b"xy").into();
            assert_eq!(out["b"].sha256(), want);
        }
    }

    /// Small tensors fed a few bytes at a time by two writers at once (two
    /// saves sharing the digests), their messages batched: each digest is
    /// the tensor's own, whichever batch and thread its pieces went in.
    #[test]
    fn small_tensors_from_two_writers_at_once_hash_as_each_alone() {
        for (hashers, width) in [(1, 2), (3, 2), (3, LANES)] {
            let d = WrittenDigests::with_threads_and_width(hashers, width);
            let data = |w: usize, i: usize| bytes(40 + i % 50, (w * 7 + i) as u8);
            std::thread::scope(|s| {
                for w in 0..2 {
                    let d = d.clone();
                    s.spawn(move || {
                        for i in 0..600 {
                            let name: Arc<str> = format!("w{w}.t{i}").into();
                            let bytes = data(w, i);
                            d.begin(&name, bytes.len() as u64);
                            for piece in bytes.chunks(16) {
                                d.bytes(&name, piece);
                            }
                        }
                    });
                }
            });
            let out = d.finish();
            assert_eq!(out.len(), 1200, "{hashers} threads");
            for w in 0..2 {
                for i in 0..600 {
                    let want: [u8; 32] = sha2::Sha256::digest(data(w, i)).into();
                    let got = &out[&format!("w{w}.t{i}")];
                    assert_eq!(got.sha256(), want, "w{w}.t{i} ({hashers} threads)");
                }
            }
        }
    }

    /// A small tensor's copy does not take a window's buffer given back to
    /// the pool (it would hold it while its batch gathers); a window does.
    #[test]
    fn a_small_copy_takes_a_buffer_its_size() {
        let d = WrittenDigests::with_threads(1);
        let big = Vec::<u8>::with_capacity(8 << 20);
        d.with(|r| r.pool.push(big));
        assert_eq!(
            d.buffer(100).capacity(),
            0,
            "a small copy gets a new buffer"
        );
        assert!(
            d.buffer(3 << 20).capacity() >= 8 << 20,
            "a window reuses it"
        );
        d.finish();
    }

    /// Windows of a few bytes (a storage of small tensors) are copied into
    /// their batches, beside a window handed over whole, a tensor's range
    /// across windows of both kinds and several tensors' in one: each
    /// digest is the tensor's own, and a small window's buffer is back in
    /// the pool at once.
    #[test]
    fn small_windows_copied_into_batches_hash_as_each_tensor_alone() {
        for (hashers, width) in [(1, 2), (3, 2), (3, LANES)] {
            let data = bytes(3 * COPIED + 7, 5);
            let cuts = [0, 100, 200, 250, COPIED + 10, data.len()];
            let tensors: Vec<TensorRange> = cuts
                .windows(2)
                .enumerate()
                .map(|(i, c)| TensorRange {
                    storage: 1,
                    name: format!("t{i}").into(),
                    start: c[0],
                    len: c[1] - c[0],
                })
                .collect();
            let ranges = StorageRanges::new(tensors);
            let d = WrittenDigests::with_threads_and_width(hashers, width);
            d.begin_storage(&ranges, 1);
            let mut at = 0;
            for n in [150, COPIED, data.len() - 150 - COPIED] {
                let mut buf = d.buffer(n);
                buf.clear();
                buf.extend_from_slice(&data[at..at + n]);
                d.storage_window(&ranges, 1, at, buf);
                if n <= COPIED {
                    let pooled = d.with(|r| r.pool.iter().any(|b| b.capacity() >= n));
                    assert_eq!(pooled, Some(true), "a window of {n} bytes is back");
                }
                at += n;
            }
            let out = d.finish();
            for (i, c) in cuts.windows(2).enumerate() {
                let want: [u8; 32] = sha2::Sha256::digest(&data[c[0]..c[1]]).into();
                assert_eq!(
                    out[&format!("t{i}")].sha256(),
                    want,
                    "t{i} ({hashers} threads)"
                );
            }
        }
    }

    /// The ranges of several storages, given in any order: each storage's
    /// are its own, in the order given.
    #[test]
    fn each_storage_has_its_own_ranges_in_order() {
        let range = |storage, name: &str| TensorRange {
            storage,
            name: name.into(),
            start: 0,
            len: 1,
        };
        let given = [(3, "a"), (1, "b"), (3, "c"), (2, "d"), (3, "e")];
        let ranges = StorageRanges::new(given.iter().map(|&(s, n)| range(s, n)).collect());
        let on = |id| -> Vec<&str> { ranges.on(id).iter().map(|r| &*r.name).collect() };
        assert_eq!(on(3), ["a", "c", "e"]);
        assert_eq!(on(1), ["b"]);
        assert_eq!(on(2), ["d"]);
        assert!(on(0).is_empty() && on(5).is_empty());
    }

    /// Tensors are dealt out two to a thread, in the order they begin, so
    /// that each thread has a pair to hash at once; a tensor begun again
    /// stays with its thread.
    #[test]
    fn tensors_are_dealt_out_in_pairs() {
        let d = WrittenDigests::with_threads_and_width(3, 2);
        let names = ["a", "b", "c", "d", "e", "f", "g", "a", "c"];
        let routes = d.with(|r| names.map(|n| r.route(&Arc::from(n)))).unwrap();
        assert_eq!(routes, [0, 0, 1, 1, 2, 2, 0, 0, 1]);
        d.finish();
        // Sixteen at a time where a core hashes sixteen at once.
        let d = WrittenDigests::with_threads_and_width(2, LANES);
        let routes: Vec<usize> = d
            .with(|r| {
                (0..40)
                    .map(|i| r.route(&Arc::from(format!("t{i}"))))
                    .collect()
            })
            .unwrap();
        let want: Vec<usize> = (0..40).map(|i| i / LANES % 2).collect();
        assert_eq!(routes, want);
        d.finish();
        // No more bytes to a group than a thread holds back: 12 MiB
        // tensors two at a time, 24 MiB ones (and a tensor begun again) one
        // at a time.
        let d = WrittenDigests::with_threads_and_width(3, LANES);
        let mb = 1 << 20;
        let sizes = [12 * mb, 12 * mb, 12 * mb, 24 * mb, 24 * mb, 24 * mb, 0];
        let names = ["a", "b", "c", "d", "e", "f", "d"];
        let routes = d
            .with(|r| {
                let mut to = names.iter().zip(sizes);
                [(); 7].map(|()| {
                    let (n, len) = to.next().unwrap();
                    r.deal(&Arc::from(*n), len)
                })
            })
            .unwrap();
        assert_eq!(routes, [0, 0, 1, 2, 0, 1, 2]);
        d.finish();
    }

    /// A thread with many bytes left to hash (a large tensor, or a core
    /// shared with the writer) is passed over when pairs are dealt; the
    /// others take them in turn.
    #[test]
    fn pairs_go_to_the_threads_with_the_least_left_to_hash() {
        let d = WrittenDigests::with_threads_and_width(3, 2);
        let routes = d
            .with(|r| {
                r.loads[0].store(1 << 30, Ordering::Relaxed);
                let routes = ["a", "b", "c", "d", "e", "f"].map(|n| r.route(&Arc::from(n)));
                r.loads[0].store(0, Ordering::Relaxed);
                routes
            })
            .unwrap();
        assert_eq!(routes, [1, 1, 2, 2, 1, 1]);
        d.finish();
    }

    /// The writer's CRC-32 keeps a core beyond two; the others hash, one
    /// at least, eight at most.
    #[test]
    fn hashing_threads_take_every_core_but_the_crcs() {
        let got: Vec<usize> = [1, 2, 3, 4, 8, 16, 64].map(hashers_for).into();
        assert_eq!(got, [1, 2, 2, 3, 7, 8, 8]);
        let crc: Vec<bool> = [1, 2, 3, 4].map(crc_thread_beside_hashing).into();
        assert_eq!(crc, [false, false, true, true]);
    }

    /// Windows handed over whole (two tensors' ranges in one, a tensor's
    /// range across several) and ranges of a storage hashed where they
    /// lie, interleaved: each digest is the tensor's own.
    #[test]
    fn windows_and_storages_handed_over_hash_as_each_tensor_alone() {
        for (hashers, width) in [(1, 2), (3, 2), (1, LANES)] {
            windows_and_storages(hashers, width);
        }
    }

    fn windows_and_storages(hashers: usize, width: usize) {
        let mb = 1 << 20;
        let data = bytes(9 * mb + 5, 7);
        let split = 3 * mb + 1;
        let ranges = StorageRanges::new(vec![
            TensorRange {
                storage: 1,
                name: "x".into(),
                start: 0,
                len: split,
            },
            TensorRange {
                storage: 1,
                name: "y".into(),
                start: split,
                len: data.len() - split,
            },
        ]);
        let z = bytes(6 * mb + 3, 9);
        let storage = crate::Tensor::from_vec(z.clone(), &[z.len()])
            .unwrap()
            .untyped_storage()
            .clone();
        let name: Arc<str> = "z".into();
        let d = WrittenDigests::with_threads_and_width(hashers, width);
        d.begin_storage(&ranges, 1);
        d.begin(&name, z.len() as u64);
        for (i, window) in data.chunks(2 * mb).enumerate() {
            let mut buf = d.buffer(window.len());
            buf.clear();
            buf.extend_from_slice(window);
            d.storage_window(&ranges, 1, i * 2 * mb, buf);
            match i {
                1 => d.stored(&name, &storage, 0..2 * mb),
                3 => d.stored(&name, &storage, 2 * mb..z.len()),
                _ => {}
            }
        }
        let out = d.finish();
        for (name, data) in [("x", &data[..split]), ("y", &data[split..]), ("z", &z[..])] {
            let want: [u8; 32] = sha2::Sha256::digest(data).into();
            assert_eq!(out[name].sha256(), want, "{name} ({hashers} threads)");
            assert_eq!(out[name].len(), data.len() as u64, "{name}");
        }
    }

    /// Sixteen tensors at once a thread: windows handed over (of unequal
    /// lengths, so that the rest of each goes in pairs), ranges of storages
    /// hashed where they lie (two ranges of one storage among them, never
    /// held at once), and windows too large to hold sixteen of
    /// ([`HELD_BYTES`]), on one thread and on three; each digest is the
    /// tensor's own.
    #[test]
    fn sixteen_tensors_at_once_hash_as_each_alone() {
        let kb = 1 << 10;
        let mut tensors: Vec<(Arc<str>, Vec<u8>)> = (0..40)
            .map(|i| {
                let n = sha256x16::AT_LEAST + 3 * kb * (i % 9) + i;
                (format!("w{i}").into(), bytes(n, i as u8))
            })
            .collect();
        for i in 0..12 {
            tensors.push((format!("big{i}").into(), bytes(3 << 20, 100 + i as u8)));
        }
        let shared = bytes(64 * kb, 9);
        let storage = crate::Tensor::from_vec(shared.clone(), &[shared.len()])
            .unwrap()
            .untyped_storage()
            .clone();
        let spans = [(0, 20 * kb), (20 * kb, 44 * kb)];
        for hashers in [1, 3] {
            let d = WrittenDigests::with_threads_and_width(hashers, LANES);
            for (k, (name, data)) in tensors.iter().enumerate() {
                d.begin(name, data.len() as u64);
                let mut buf = d.buffer(data.len());
                buf.clear();
                buf.extend_from_slice(data);
                d.hand_over(buf, [(name, 0..data.len())]);
                if k % 10 == 3 {
                    let (at, n) = spans[k / 10 % 2];
                    let name: Arc<str> = format!("s{k}").into();
                    d.begin(&name, n as u64);
                    d.stored(&name, &storage, at..at + n);
                }
            }
            let out = d.finish();
            for (name, data) in &tensors {
                let want: [u8; 32] = sha2::Sha256::digest(data).into();
                assert_eq!(out[&**name].sha256(), want, "{name} ({hashers} threads)");
            }
            for k in (0..tensors.len()).filter(|k| k % 10 == 3) {
                let (at, n) = spans[k / 10 % 2];
                let want: [u8; 32] = sha2::Sha256::digest(&shared[at..at + n]).into();
                assert_eq!(
                    out[&format!("s{k}")].sha256(),
                    want,
                    "s{k} ({hashers} threads)"
                );
            }
        }
    }
}
