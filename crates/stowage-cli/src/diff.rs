//! `stowage diff A B [--json] [--atol X] [--rtol X] [--ignore-sharing]`: the
//! arguments, then the library's [`diff`](stowage_commands::diff::diff)
//! printed as lines or as its JSON (`docs/cli-contract.md`). Exit 0 when
//! nothing differs, 1 when something does, 2 when either file cannot be
//! read.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use stowage_commands::diff::{diff, DiffOptions};
use stowage_commands::Context;

use crate::Failure;

/// Arguments of `diff`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(help = concat!("The first checkpoint (\"A\"): ", inputs!()))]
    a: PathBuf,
    /// The second checkpoint ("B"), of any kind "A" may be
    b: PathBuf,
    /// Print one JSON object `{"same": bool, "differences": [...]}` instead of lines
    #[arg(long)]
    json: bool,
    /// Absolute tolerance for floating-point tensors and values (torch.allclose's atol)
    #[arg(long, value_name = "X", value_parser = tolerance)]
    atol: Option<f64>,
    /// Relative tolerance for floating-point tensors and values (torch.allclose's rtol)
    #[arg(long, value_name = "X", value_parser = tolerance)]
    rtol: Option<f64>,
    /// Do not compare which tensors share a storage
    #[arg(long)]
    ignore_sharing: bool,
    /// Compare by content instead, whatever the names and formats: the tensors identical,
    /// changed, moved to other names, only on one side, and the bytes B shares with A
    #[arg(long, conflicts_with_all = ["atol", "rtol", "ignore_sharing"])]
    content: bool,
}

/// A tolerance: a finite number, zero or more.
fn tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{s:?} is not a finite number >= 0")),
    }
}

/// Runs `diff`.
pub fn run(args: Args, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    if args.content {
        let report = stowage_commands::content_diff::content_diff(&args.a, &args.b, cx)?;
        if args.json {
            serde_json::to_writer(&mut *out, &report).map_err(std::io::Error::from)?;
            writeln!(out)?;
        } else {
            report.write_text(out)?;
        }
        return Ok(if report.is_same() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    let mut options = DiffOptions::default().with_ignore_sharing(args.ignore_sharing);
    if args.atol.is_some() || args.rtol.is_some() {
        options = options.with_tolerance(args.atol.unwrap_or(0.0), args.rtol.unwrap_or(0.0))?;
    }
    let report = diff(&args.a, &args.b, cx, &options)?;
    if args.json {
        serde_json::to_writer(&mut *out, &report).map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else {
        report.write_text(out)?;
    }
    Ok(if report.is_same() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
