//! `stowage manifest SRC [-o FILE]`: the arguments, then the library's
//! [`manifest`](stowage_commands::manifest::manifest) printed as JSON, or
//! written to FILE whole or not at all (`docs/cli-contract.md`,
//! `docs/manifest.md`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use stowage_commands::manifest::{manifest, ManifestOptions};
use stowage_commands::Context;

use crate::Failure;

/// Arguments of `manifest`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(help = concat!("The checkpoint: ", inputs!()))]
    file: PathBuf,
    /// Write the manifest to FILE (replacing it only once complete) instead of stdout
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Runs `manifest`.
pub fn run(args: Args, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let m = manifest(&args.file, cx, &ManifestOptions::default())?;
    let Some(path) = args.output else {
        m.write_json(out)?;
        return Ok(ExitCode::SUCCESS);
    };
    // A sibling, renamed over FILE once written: a failure leaves FILE as it was.
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(
        ".{}.stowage-{}",
        name.as_deref().unwrap_or("manifest"),
        std::process::id()
    ));
    let written = (|| -> Result<(), Failure> {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        m.write_json(&mut file)?;
        file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    Ok(ExitCode::SUCCESS)
}
