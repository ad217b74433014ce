//! A storage record's key: `"0"`, `"1"`, … in a torch zip archive, a
//! pointer string in legacy files, a path in folders of several files.

use std::borrow::Borrow;

use ecow::EcoString;

/// The key a checkpoint gives a storage (its record is `data/<key>` in a
/// torch zip archive), read as a `str`.
///
/// A key of up to 15 bytes (every record of a file of fewer than 10^15
/// storages) is held inline, without an allocation: a checkpoint of many
/// small tensors holds one a tensor. Longer keys are shared on clone.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordKey(EcoString);

// A storage record is 48 bytes with a key of two words.
#[cfg(all(target_pointer_width = "64", not(loom)))]
const _: () = assert!(std::mem::size_of::<RecordKey>() == 16);

impl RecordKey {
    /// The key as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for RecordKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for RecordKey {
    fn from(key: &str) -> Self {
        RecordKey(EcoString::from(key))
    }
}

impl From<String> for RecordKey {
    fn from(key: String) -> Self {
        RecordKey(EcoString::from(key))
    }
}

reads_as_str!(RecordKey);

#[cfg(test)]
mod tests {
    use super::*;

    /// A key reads back as the string it was made from, short or long, and
    /// compares, hashes and prints as that string.
    #[test]
    fn a_key_is_its_string() {
        use std::collections::HashSet;
        for s in [
            "",
            "0",
            "299999",
            "123456789012345",
            "1234567890123456",
            "model.layers.0.weight/0",
        ] {
            let k = RecordKey::from(s);
            assert_eq!(k.as_str(), s);
            assert_eq!(k, s);
            assert_eq!(k.to_string(), s);
            assert_eq!(format!("{k:?}"), format!("{s:?}"));
            assert_eq!(RecordKey::from(s.to_owned()), k);
            let set: HashSet<RecordKey> = [k.clone()].into();
            assert!(set.contains(s));
        }
        // Ordered as strings, as PyTorch's keys are.
        let (ten, nine) = (RecordKey::from("10"), RecordKey::from("9"));
        assert!(ten < nine);
    }
}
