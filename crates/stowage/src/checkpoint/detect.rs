//! What a source holds, from its content (never its name), and its load by
//! that format: the one dispatch from bytes to a format's reader, for a
//! file, an object or bytes in memory.

use crate::checkpoint::format::{torch_legacy, torch_zip};
use crate::checkpoint::options::LoadOptions;
use crate::checkpoint::records::Mode;
#[cfg(feature = "safetensors")]
use crate::checkpoint::records::Records;
use crate::checkpoint::value::graph::{Checkpoint, Format};
use crate::error::{CheckpointError, FormatError};
use crate::io::ReadAt;
use crate::{Error, Result};

/// Loads a checkpoint held in memory (PyTorch's `torch.load(io.BytesIO(...))`).
///
/// # Errors
/// As [`load`](crate::load), without the file name.
pub fn load_bytes(bytes: &[u8], options: &LoadOptions) -> Result<Checkpoint> {
    let mut ckpt = load_from(bytes, options, Mode::of(options))?;
    ckpt.max_paths = options.max_paths;
    Ok(ckpt)
}

/// The kind of checkpoint `source` holds, from its content (never its name).
///
/// # Errors
/// [`FormatError::NotACheckpoint`] for empty or unrecognised files and the `PYTORCH1`
/// preview format, [`CheckpointError::UnsupportedFormat`] for PyTorch ≤ 0.3 tar files, I/O errors.
pub fn detect_format<R: ReadAt>(source: &R) -> Result<Format> {
    let len = source.len();
    let mut head = [0u8; 16];
    let n = len.min(16) as usize;
    source.read_exact_at(&mut head[..n], 0)?;
    let head = &head[..n];
    if head.starts_with(b"PK\x03\x04") {
        return Ok(Format::TorchZip);
    }
    if head.starts_with(b"PYTORCH1") {
        return Err(Error::Format(FormatError::NotACheckpoint {
            detail: "an unsupported archive format from the preview release (PYTORCH1)".into(),
        }));
    }
    if torch_legacy::is_legacy(head) {
        return Ok(Format::TorchLegacy);
    }
    if len >= 265 {
        let mut ustar = [0u8; 5];
        source.read_exact_at(&mut ustar, 257)?;
        if &ustar == b"ustar" {
            return Err(Error::Checkpoint(CheckpointError::UnsupportedFormat {
                format: "tar (PyTorch 0.3 and older)",
            }));
        }
    }
    if n >= 9 && head[8] == b'{' {
        return Ok(Format::Safetensors);
    }
    if len == 0 {
        return Err(Error::Format(FormatError::NotACheckpoint {
            detail: "the file is empty".into(),
        }));
    }
    Err(Error::Format(FormatError::NotACheckpoint {
        detail: format!("unrecognised leading bytes {:02x?}", &head[..n.min(8)]),
    }))
}

/// Loads what `source` holds, in `mode`, by its format's reader.
pub(crate) fn load_from<R: ReadAt>(
    source: R,
    options: &LoadOptions,
    mode: Mode,
) -> Result<Checkpoint> {
    match detect_format(&source)? {
        Format::TorchZip | Format::TorchScript => torch_zip::load(source, options, mode),
        Format::TorchLegacy => torch_legacy::load(&source, options, mode),
        Format::Safetensors => load_safetensors(&source, options, mode),
    }
}

fn load_safetensors<R: ReadAt>(
    source: &R,
    options: &LoadOptions,
    mode: Mode,
) -> Result<Checkpoint> {
    #[cfg(feature = "safetensors")]
    return crate::checkpoint::format::safetensors::load(source, options, Records::new(mode));
    #[cfg(not(feature = "safetensors"))]
    {
        let _ = (source, options, mode);
        Err(Error::Checkpoint(CheckpointError::FeatureDisabled {
            feature: "safetensors",
            what: "safetensors files",
        }))
    }
}
