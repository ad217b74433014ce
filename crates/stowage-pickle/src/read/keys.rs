//! The key index of the dicts and sets the machine builds: where each key
//! sits, so that `SETITEM` replaces an equal key's value and `ADDITEMS`
//! skips an equal item, as Python would, without a quadratic scan.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::super::value::{Key, Value};
use super::tuples::Tuples;

/// Where each key sits in a dict's or set's entries: a table of positions,
/// hashed by the key the entry at each position holds, so a state dict's
/// index costs a few bytes an entry and no copy of its keys (4, and the
/// table's control byte: a state dict of 300,000 tensors keeps 2.6 MB of
/// index to its pickle's end). Hooks may change the node between opcodes,
/// so positions are verified on use: a position the table gives for a key
/// whose entry holds another key, which the table does not index there,
/// was changed by a hook, and the index is rebuilt then, and when the entry
/// count disagrees.
#[derive(Default)]
pub(super) struct KeyIndex {
    len: usize,
    /// The position of each indexed entry.
    table: HashTable<u32>,
    hasher: foldhash::fast::RandomState,
}

/// The keys of a dict's or set's entries.
pub(super) trait Entries<X> {
    fn count(&self) -> usize;
    fn key(&self, i: usize) -> Option<&Value<X>>;
}

impl<X> Entries<X> for [(Value<X>, Value<X>)] {
    fn count(&self) -> usize {
        self.len()
    }
    fn key(&self, i: usize) -> Option<&Value<X>> {
        self.get(i).map(|(k, _)| k)
    }
}

impl<X> Entries<X> for [Value<X>] {
    fn count(&self) -> usize {
        self.len()
    }
    fn key(&self, i: usize) -> Option<&Value<X>> {
        self.get(i)
    }
}

/// The key of entry `i`, if it has one (a tuple as its canonical node).
fn key_at<'a, X: 'a, E: Entries<X> + ?Sized>(
    entries: &'a E,
    i: u32,
    tuples: &Tuples,
) -> Option<Key<'a>> {
    entries.key(i as usize).and_then(|v| tuples.key(v))
}

impl KeyIndex {
    /// The most entries an index holds: positions are `u32`s (a dict that
    /// long would hold 300 GB of entries).
    pub(super) const MAX_ENTRIES: usize = u32::MAX as usize;

    fn hash(&self, key: &Key) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Indexes every entry anew (the first of equal keys), with room for
    /// one more at least: a table rebuilt when full doubles its buckets.
    fn rebuild<X, E: Entries<X> + ?Sized>(&mut self, entries: &E, tuples: &Tuples) {
        let count = entries.count().min(Self::MAX_ENTRIES);
        // The old table goes before the new one is made: never both at once.
        drop(std::mem::take(&mut self.table));
        self.table = HashTable::with_capacity(count.saturating_add(1).max(8));
        for i in 0..count as u32 {
            if let Some(key) = key_at(entries, i, tuples) {
                if self.find(&key, entries, tuples).is_err() {
                    self.insert(&key, i, entries, tuples);
                }
            }
        }
        self.len = entries.count();
    }

    /// The position of `key`; where it is not indexed, whether a position
    /// that claims its hash now holds another key (stale).
    fn find<X, E: Entries<X> + ?Sized>(
        &self,
        key: &Key,
        entries: &E,
        tuples: &Tuples,
    ) -> Result<u32, bool> {
        let hash = self.hash(key);
        let mut stale = false;
        for &i in self.table.iter_hash(hash) {
            match key_at(entries, i, tuples) {
                Some(k) if k == *key => return Ok(i),
                // Another key where the table looked for `key`'s: a key
                // the table indexes at `i` under its own hash (its hash
                // shares bits with `key`'s), or one a hook put there.
                Some(k) => stale |= !self.indexes(&k, i),
                None => stale = true,
            }
        }
        Err(stale)
    }

    /// Whether the table holds position `i` under `key`'s hash.
    fn indexes(&self, key: &Key, i: u32) -> bool {
        self.table.find(self.hash(key), |&at| at == i).is_some()
    }

    /// Indexes `key` at position `i`, growing the table by rebuilding it
    /// from the entries (so a grown table holds no stale positions).
    fn insert<X, E: Entries<X> + ?Sized>(
        &mut self,
        key: &Key,
        i: u32,
        entries: &E,
        tuples: &Tuples,
    ) {
        let hash = self.hash(key);
        let hasher = &self.hasher;
        self.table.insert_unique(hash, i, |&at| {
            key_at(entries, at, tuples).map_or(0, |k| hasher.hash_one(&k))
        });
    }

    /// Whether the index holds the `count` entries of its node, as it does
    /// unless a hook changed their number.
    pub(super) fn in_step(&self, count: usize) -> bool {
        self.len == count
    }

    /// Takes in the entries a hook added (rebuilds where the count
    /// disagrees), so that [`in_step`](Self::in_step) holds after it.
    pub(super) fn sync<X, E: Entries<X> + ?Sized>(&mut self, entries: &E, tuples: &Tuples) {
        if self.len != entries.count() {
            self.rebuild(entries, tuples);
        }
    }

    pub(super) fn position<X, E: Entries<X> + ?Sized>(
        &mut self,
        key: &Key,
        entries: &E,
        tuples: &Tuples,
    ) -> Option<usize> {
        self.sync(entries, tuples);
        match self.find(key, entries, tuples) {
            Ok(i) => Some(i as usize),
            Err(false) => None,
            Err(true) => {
                self.rebuild(entries, tuples);
                self.find(key, entries, tuples).ok().map(|i| i as usize)
            }
        }
    }

    /// Notes that an entry was appended at position `i` of `entries`, its
    /// last, `i` below [`MAX_ENTRIES`](Self::MAX_ENTRIES).
    pub(super) fn record<X, E: Entries<X> + ?Sized>(
        &mut self,
        i: usize,
        entries: &E,
        tuples: &Tuples,
    ) {
        if self.len != i {
            // Entries a hook added before this one: all are taken in anew.
            self.rebuild(entries, tuples);
            return;
        }
        let Some(key) = key_at(entries, i as u32, tuples) else {
            self.len = i + 1;
            return;
        };
        if self.table.len() == self.table.capacity() {
            self.rebuild(entries, tuples);
            return;
        }
        self.insert(&key, i as u32, entries, tuples);
        self.len = i + 1;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn key(v: &Value<()>) -> Key<'_> {
        Key::of(v).expect("a key")
    }

    /// Appended keys are found at their positions across the table's
    /// growth; a key moved by a hook is found where it went; a key a hook
    /// replaced is no longer there.
    #[test]
    fn positions_follow_the_entries() {
        let (mut index, mut entries) = (KeyIndex::default(), Vec::<Value<()>>::new());
        let tuples = Tuples::default();
        for i in 0..1000 {
            let k = Value::Int(i * 7);
            assert_eq!(index.position(&key(&k), &entries[..], &tuples), None);
            entries.push(k);
            index.record(i as usize, &entries[..], &tuples);
        }
        for i in 0..1000 {
            assert_eq!(
                index.position(&key(&Value::Int(i * 7)), &entries[..], &tuples),
                Some(i as usize)
            );
        }
        // A hook swaps two entries and replaces a third, keeping the count.
        entries.swap(3, 500);
        entries[10] = Value::str("new");
        assert_eq!(
            index.position(&key(&Value::Int(3 * 7)), &entries[..], &tuples),
            Some(500)
        );
        assert_eq!(
            index.position(&key(&Value::Int(500 * 7)), &entries[..], &tuples),
            Some(3)
        );
        assert_eq!(
            index.position(&key(&Value::Int(10 * 7)), &entries[..], &tuples),
            None
        );
        // A hook appends: the count disagrees, and the index is rebuilt.
        let s: Arc<str> = Arc::from("late");
        entries.push(Value::Str(s.clone()));
        assert_eq!(
            index.position(&key(&Value::Str(s)), &entries[..], &tuples),
            Some(1000)
        );
    }

    /// Of equal keys a hook left in the entries, the first is the one found.
    #[test]
    fn the_first_of_equal_keys_wins() {
        let (mut index, tuples) = (KeyIndex::default(), Tuples::default());
        let entries = [Value::<()>::Int(1), Value::Int(2), Value::Int(1)];
        assert_eq!(
            index.position(&key(&entries[2]), &entries[..], &tuples),
            Some(0)
        );
    }
}
