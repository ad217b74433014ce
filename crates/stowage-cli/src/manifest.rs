//! `stowage manifest SRC [-o FILE]`: the arguments, then the library's
//! [`manifest`](stowage_commands::manifest::manifest) printed as JSON, or
//! written to FILE whole or not at all (`docs/cli-contract.md`,
//! `docs/manifest.md`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use stowage_commands::manifest::{manifest, write_file, ManifestOptions};
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
    /// Write it as an in-toto statement in OpenSSF Model Signing's v1.0 layout, one resource
    /// per tensor, for a DSSE signer to sign as it is
    #[arg(long)]
    oms: bool,
    /// With --oms: the model's name in the statement's subject (default: SRC's file or
    /// folder name)
    #[arg(long, requires = "oms")]
    name: Option<String>,
}

/// Runs `manifest`.
pub fn run(args: Args, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let m = manifest(&args.file, cx, &ManifestOptions::default())?;
    let write = |out: &mut dyn Write| -> std::io::Result<()> {
        if args.oms {
            let name = args.name.clone().unwrap_or_else(|| model_name(&args.file));
            serde_json::to_writer(&mut *out, &m.to_oms_statement(&name))?;
            writeln!(out)
        } else {
            m.write_json(out)
        }
    };
    match &args.output {
        None => write(out)?,
        Some(path) => write_file(path, cx, write)?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The model's name a statement's subject gets: the last part of SRC's
/// path or URL (a folder's name for a folder).
fn model_name(src: &std::path::Path) -> String {
    let text = src.to_string_lossy();
    text.trim_end_matches('/')
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or("model")
        .to_owned()
}
