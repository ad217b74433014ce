//! Devices: where a storage's bytes live, as PyTorch names them.
//!
//! stowage keeps the bytes of every non-meta storage in host memory; a
//! storage tagged `cuda:0` still reports `cuda:0` (see the crate docs).

use crate::error::TensorError;
use std::fmt;
use std::str::FromStr;

use crate::Error;

macro_rules! device_types {
    ($($variant:ident = $name:literal),* $(,)?) => {
        /// A device type, as PyTorch spells it in location strings.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum DeviceType { $(
            #[doc = concat!("`", $name, "`")]
            $variant,
        )* }

        impl DeviceType {
            /// PyTorch's name for the device type.
            pub fn name(self) -> &'static str {
                match self { $(DeviceType::$variant => $name,)* }
            }
            /// Every device type stowage knows.
            pub const ALL: &'static [DeviceType] = &[$(DeviceType::$variant),*];
        }
    };
}

device_types! {
    Cpu = "cpu", Cuda = "cuda", Mps = "mps", Meta = "meta", Hpu = "hpu", Xpu = "xpu",
    Mtia = "mtia", Xla = "xla", Ipu = "ipu", Hip = "hip", Ve = "ve", Lazy = "lazy",
    Vulkan = "vulkan", Maia = "maia", Fpga = "fpga", PrivateUse1 = "privateuseone",
}

/// A device: a type and an optional index (`cuda:1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    /// The device type.
    pub kind: DeviceType,
    /// The index, if one was given.
    pub index: Option<u32>,
}

impl Device {
    /// The host: `cpu`.
    pub const CPU: Device = Device {
        kind: DeviceType::Cpu,
        index: None,
    };
    /// The meta device: metadata only, no bytes.
    pub const META: Device = Device {
        kind: DeviceType::Meta,
        index: None,
    };

    /// A CUDA device with an index.
    pub fn cuda(index: u32) -> Device {
        Device {
            kind: DeviceType::Cuda,
            index: Some(index),
        }
    }
    /// True for the cpu device.
    pub fn is_cpu(&self) -> bool {
        self.kind == DeviceType::Cpu
    }
    /// True for CUDA devices.
    pub fn is_cuda(&self) -> bool {
        self.kind == DeviceType::Cuda
    }
    /// True for the meta device.
    pub fn is_meta(&self) -> bool {
        self.kind == DeviceType::Meta
    }
}

impl Default for Device {
    fn default() -> Self {
        Device::CPU
    }
}

impl fmt::Display for Device {
    /// Prints as PyTorch does: `cpu`, `cuda:0`, `mps`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "{}:{}", self.kind.name(), i),
            None => f.write_str(self.kind.name()),
        }
    }
}

impl FromStr for Device {
    type Err = Error;
    /// Parses a PyTorch device string: `cpu`, `meta`, `cuda`, `cuda:0`, `xpu:1`.
    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = || Error::Tensor(TensorError::InvalidDevice { text: s.to_owned() });
        let (name, index) = match s.split_once(':') {
            Some((n, i)) => {
                let digits_ok = !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit());
                // PyTorch rejects leading zeros ("cuda:01") and signs.
                if !digits_ok || (i.len() > 1 && i.starts_with('0')) {
                    return Err(bad());
                }
                (n, Some(i.parse::<u32>().map_err(|_| bad())?))
            }
            None => (s, None),
        };
        let kind = DeviceType::ALL
            .iter()
            .copied()
            .find(|k| k.name() == name)
            .ok_or_else(bad)?;
        Ok(Device { kind, index })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_like_pytorch() {
        for s in [
            "cpu", "meta", "cuda", "cuda:0", "mps", "hpu", "xpu:1", "cuda:12",
        ] {
            assert_eq!(s.parse::<Device>().unwrap().to_string(), s);
        }
        assert_eq!("cuda:3".parse::<Device>().unwrap(), Device::cuda(3));
        assert!("cuda:3".parse::<Device>().unwrap().is_cuda());
        for bad in [
            "", "gpu", "cuda:", "cuda:-1", "cuda:01", "cuda:x", "cuda:0:1",
        ] {
            assert!(bad.parse::<Device>().is_err(), "{bad}");
        }
    }
}
