//! A storage record's location tag: where the file says the storage lived
//! when it was saved (`"cpu"`, `"cuda:0"`), read as a `str`.

use std::sync::{Arc, OnceLock};

/// The location tag a checkpoint wrote for a storage (PyTorch's
/// `location_tag`: `"cpu"`, `"cuda:0"`, `"mps"`), read as a `str`.
///
/// One word, shared on clone: a checkpoint of many small tensors holds one
/// a storage, nearly all the same tag, and a load makes the tag once for
/// all the storages that name it (`"cpu"` is one tag for the process).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LocationTag(Arc<String>);

// A storage record is 40 bytes with a tag of one word.
#[cfg(all(target_pointer_width = "64", not(loom)))]
const _: () = assert!(std::mem::size_of::<LocationTag>() == 8);

impl LocationTag {
    /// The tag as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl LocationTag {
    /// `"cpu"`, the tag of nearly every record: one for the process, so
    /// that a format making a tag a record (safetensors, DCP, a built
    /// checkpoint) allocates none.
    fn cpu() -> LocationTag {
        static CPU: OnceLock<LocationTag> = OnceLock::new();
        CPU.get_or_init(|| LocationTag(Arc::new("cpu".to_owned())))
            .clone()
    }
}

impl From<&str> for LocationTag {
    fn from(tag: &str) -> Self {
        match tag {
            "cpu" => LocationTag::cpu(),
            _ => LocationTag(Arc::new(tag.to_owned())),
        }
    }
}

impl From<String> for LocationTag {
    fn from(tag: String) -> Self {
        match tag.as_str() {
            "cpu" => LocationTag::cpu(),
            _ => LocationTag(Arc::new(tag)),
        }
    }
}

reads_as_str!(LocationTag);

#[cfg(test)]
mod tests {
    use super::*;

    /// A tag reads back, compares and prints as the string it was made
    /// from; clones share it.
    #[test]
    fn a_tag_is_its_string() {
        for s in ["cpu", "cuda:0", "privateuseone:3", ""] {
            let t = LocationTag::from(s);
            assert_eq!(t.as_str(), s);
            assert_eq!(t, s);
            assert_eq!(&*t, s);
            assert_eq!(t.to_string(), s);
            assert_eq!(format!("{t:?}"), format!("{s:?}"));
            assert_eq!(LocationTag::from(s.to_owned()), t);
            let c = t.clone();
            assert!(std::ptr::eq(c.as_str(), t.as_str()));
        }
        // Every "cpu" is one tag.
        let (a, b) = (
            LocationTag::from("cpu"),
            LocationTag::from("cpu".to_owned()),
        );
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
    }
}
