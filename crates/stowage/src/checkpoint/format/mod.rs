//! The checkpoint formats, one module each with the same shape (`load`, and
//! `save` where stowage writes the format): `torch.save`'s zip and legacy
//! files, safetensors; and the folder layouts built on them, Hugging Face
//! sharded sets (each shard a file of the formats above) and PyTorch
//! Distributed Checkpoints.

pub mod dcp;
pub(crate) mod parts;
#[cfg(feature = "safetensors")]
pub mod safetensors;
pub mod sharded;
pub(crate) mod torch_legacy;
pub(crate) mod torch_zip;
