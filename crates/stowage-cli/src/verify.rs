//! `stowage verify FILE`: the arguments, then the library's
//! [`verify`](stowage_commands::verify::verify) printed line by line
//! (`docs/cli-contract.md`). Exit 0 without defects, 1 with, 2 when the
//! file cannot be opened or read at all.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use stowage_commands::Context;

use crate::Failure;

/// Arguments of `verify`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(help = concat!("The checkpoint: ", inputs!()))]
    file: PathBuf,
    /// Check the content against this manifest (`stowage manifest`) instead: every tensor
    /// changed, missing or extra is a defect
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
}

/// Runs `verify`.
pub fn run(args: Args, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let verification = match &args.manifest {
        Some(m) => stowage_commands::verify::verify_manifest(&args.file, m, cx)?,
        None => stowage_commands::verify::verify(&args.file, cx)?,
    };
    verification.write_text(out)?;
    Ok(if verification.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
