//! The one model of the Python values a checkpoint holds, whatever format
//! it came from:
//! - `graph`: the loaded object graph, [`Checkpoint`](super::Checkpoint)
//!   (the pickle machine's nodes, the storages, the side tables);
//! - `object`: its [`Object`](super::Object) leaves: tensors, storages,
//!   inert objects and decoded data;
//! - `kind`: the tensor kinds beside strided ones (sparse, nested,
//!   quantized);
//! - `data`: the Python data decoded from globals outside the allowlist
//!   (numpy values, `datetime`, `pathlib`, class references), the types of
//!   [`decoded`](super::decoded)'s table;
//! - `path_key`: a dict key as a step of a path; `dict_key`: one compared
//!   by Python's equality;
//! - `access`: values read by path ([`ValueRef`](super::ValueRef)), and the
//!   leaf walk;
//! - `module`: an `nn.Module` saved whole read as its state dict;
//! - `builder`: a checkpoint built from Rust values
//!   ([`CheckpointBuilder`](super::CheckpointBuilder)).

/// Implements, for a string type of a storage record with an `as_str`,
/// what reads it as that string: `Deref<Target = str>`, `AsRef<str>`, `==`
/// with a `str` and a `&str`, `Display` and `Debug`.
macro_rules! reads_as_str {
    ($t:ty) => {
        impl std::ops::Deref for $t {
            type Target = str;
            fn deref(&self) -> &str {
                self.as_str()
            }
        }

        impl AsRef<str> for $t {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl PartialEq<str> for $t {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(self.as_str(), f)
            }
        }
    };
}

/// The most bits of an int written in decimal: 14,280 bits have at most
/// 4,299 digits, under Python's own limit for `str()` and `int()` of text
/// (4,300, `sys.get_int_max_str_digits()`).
pub(crate) const DECIMAL_INT_BITS: u64 = 14_280;

/// An int as text, as every listing of values writes it (`inspect
/// --json`, a manifest's values, path steps, safetensors' values tree):
/// decimal up to 14,280 bits (4,299 digits, under Python's own limit for
/// `str()` and `int()` of text), hex (`0x…`, `-0x…`) past them, in time
/// linear in its length where decimal digits take quadratic time (4 MB
/// of a pickle's int: 9 s).
pub fn int_text(b: &num_bigint::BigInt) -> String {
    if b.bits() <= DECIMAL_INT_BITS {
        b.to_string()
    } else {
        format!("{b:#x}")
    }
}

pub(crate) mod access;
pub(crate) mod builder;
pub(crate) mod data;
pub(crate) mod dict_key;
pub(crate) mod graph;
pub(crate) mod kind;
pub(crate) mod location_tag;
pub(crate) mod module;
pub(crate) mod object;
pub(crate) mod origin;
pub(crate) mod path_key;
pub(crate) mod record_key;
pub(crate) mod trail;
