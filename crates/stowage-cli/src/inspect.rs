//! `stowage inspect FILE [--json]`: the arguments, then the library's
//! [`inspect`](stowage_commands::inspect::inspect) printed as a table or as
//! its JSON (`docs/cli-contract.md`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use stowage_commands::inspect::{inspect, InspectOptions};
use stowage_commands::Context;

use crate::Failure;

/// Arguments of `inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(help = concat!("The checkpoint: ", inputs!()))]
    file: PathBuf,
    /// Print one JSON object instead of a table
    #[arg(long)]
    json: bool,
    /// With --json: read only the pickle and the archive's directory (fake tensors): no tensor bytes are read and `sha256` is null
    #[arg(long)]
    no_hash: bool,
}

/// Runs `inspect`. The table needs no tensor bytes: without `--json`
/// nothing is hashed.
pub fn run(args: Args, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let options = InspectOptions::default().with_hashes(args.json && !args.no_hash);
    let inspection = inspect(&args.file, cx, &options)?;
    if args.json {
        inspection.write_json(out)?;
    } else {
        inspection.write_text(out)?;
    }
    Ok(ExitCode::SUCCESS)
}
