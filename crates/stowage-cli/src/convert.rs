//! `stowage convert IN OUT`: rewrite a checkpoint in the format OUT's
//! extension names (`.pt`, `.pth`, `.bin`, `.ckpt`: torch zip; `.safetensors`).
//! OUT is written to a temporary file beside it and renamed into place.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::Failure;

/// Arguments of `convert`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The checkpoint to read (any format `inspect` reads)
    input: PathBuf,
    /// Where to write it: .pt/.pth/.bin (torch zip) or .safetensors
    output: PathBuf,
}

enum Target {
    TorchZip,
    Safetensors,
}

fn target(path: &Path) -> Option<Target> {
    match path.extension()?.to_str()? {
        "pt" | "pth" | "bin" | "ckpt" => Some(Target::TorchZip),
        "safetensors" => Some(Target::Safetensors),
        _ => None,
    }
}

/// A spinner on stderr naming the current step, only when stderr is a terminal.
fn spinner() -> Option<ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg} {elapsed}").unwrap_or_else(|_| ProgressStyle::default_spinner()));
    bar.enable_steady_tick(Duration::from_millis(100));
    Some(bar)
}

/// Runs `convert`.
pub fn run(args: Args, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let Some(kind) = target(&args.output) else {
        return Err(Failure::usage(format!(
            "convert: cannot tell the output format from {} (use .pt, .pth, .bin, .ckpt or .safetensors)",
            args.output.display()
        )));
    };
    let bar = spinner();
    if let Some(b) = &bar {
        b.set_message(format!("reading {}", args.input.display()));
    }
    let ckpt = stowage::load(&args.input).map_err(Failure::input)?;
    if let Some(b) = &bar {
        b.set_message(format!("writing {}", args.output.display()));
    }
    let written = match kind {
        Target::TorchZip => stowage::save(&args.output, &ckpt),
        Target::Safetensors => stowage::serialize::safetensors::save(&args.output, &ckpt),
    };
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    written.map_err(|e| match e {
        // An input the target format cannot hold is refused input (exit 2).
        e @ stowage::Error::AtPath { .. } => Failure::input(e),
        // The library names the file it was writing; naming it again would repeat it.
        e @ stowage::Error::InFile { .. } => Failure::from(e),
        e => Failure::from(stowage::Error::InFile {
            path: args.output.clone(),
            source: Box::new(e),
        }),
    })?;
    let _ = out;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_format_follows_the_extension() {
        for ext in ["pt", "pth", "bin", "ckpt"] {
            let path = PathBuf::from(format!("out.{ext}"));
            assert!(matches!(target(&path), Some(Target::TorchZip)), "{ext}");
        }
        assert!(matches!(
            target(Path::new("out.safetensors")),
            Some(Target::Safetensors)
        ));
        for path in ["out", "out.txt", "out.pt.gz"] {
            assert!(target(Path::new(path)).is_none(), "{path}");
        }
    }
}
