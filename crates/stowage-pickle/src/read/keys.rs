//! The key index of the dicts and sets the machine builds: where each key
//! sits, so that `SETITEM` replaces an equal key's value and `ADDITEMS`
//! skips an equal item, as Python would, without a quadratic scan.

use std::collections::HashMap;

use super::super::value::{Key, Value};

/// Where each key sits in a dict's or set's entries. Hooks may change the
/// node between opcodes, so positions are verified on use and the index is
/// rebuilt when the entry count or a looked-up key disagrees.
#[derive(Default)]
pub(super) struct KeyIndex {
    len: usize,
    map: HashMap<Key, usize>,
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

impl KeyIndex {
    fn rebuild<X, E: Entries<X> + ?Sized>(&mut self, entries: &E) {
        self.map.clear();
        for i in 0..entries.count() {
            if let Some(key) = entries.key(i).and_then(Key::of) {
                self.map.entry(key).or_insert(i);
            }
        }
        self.len = entries.count();
    }

    pub(super) fn position<X, E: Entries<X> + ?Sized>(
        &mut self,
        key: &Key,
        entries: &E,
    ) -> Option<usize> {
        if self.len != entries.count() {
            self.rebuild(entries);
        }
        let i = *self.map.get(key)?;
        if entries.key(i).and_then(Key::of).as_ref() == Some(key) {
            return Some(i);
        }
        self.rebuild(entries);
        self.map.get(key).copied()
    }

    /// Notes that an entry with `key` was appended at position `i`.
    pub(super) fn record(&mut self, key: Option<Key>, i: usize) {
        if let Some(key) = key {
            self.map.insert(key, i);
        }
        self.len = i + 1;
    }
}
