//! `stowage scan PATH… [--json | --format text|json|sarif]`: the globals every pickle in each file
//! names, each with its verdict, as the CLI contract specifies
//! (`docs/cli-contract.md`); the work is `stowage::checkpoint::scan`, the
//! text `stowage_commands::scan`'s.
//!
//! Without `--json`, per file: `FILE: <kind>, N pickles, M globals (K unsafe)`
//! then one line per global, `  <verdict>  module.name ×count`, and
//! `FILE: error: …` where something could not be read (also on stderr, as
//! `stowage: FILE: …`); a line naming the unsafe globals that only import a
//! class (and that `--inert` reads the file); then a summary line.
//! Exit 0 when nothing is unsafe, 1 when something is (with `--fail-on
//! code`, only when something runs code), 2 when a file could not be read
//! (this wins over 1: the scan is incomplete).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use stowage_commands::Context;

use crate::Failure;

/// Arguments of `scan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Files or folders (scanned recursively) to read
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Print one JSON object: {"files": [{"path", "globals": [{"module", "name", "verdict", "risk", "count"}], "error"}]}
    /// (the same as `--format json`)
    #[arg(long, conflicts_with = "format")]
    json: bool,
    /// What to print: text, the JSON of `--json`, or a SARIF 2.1.0 log (one
    /// result per unsafe global, for GitHub code scanning)
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// What exits 1: any unsafe global, or only one that runs code (an
    /// unsafe global that only imports a class, as a whole-model save names
    /// them, then exits 0)
    #[arg(long, value_enum, default_value_t = FailOn::Unsafe)]
    fail_on: FailOn,
}

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// Lines for people
    Text,
    /// One JSON object, as `--json`
    Json,
    /// A SARIF 2.1.0 log
    Sarif,
}

/// `--fail-on`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum FailOn {
    /// An unsafe global that runs commands or code (`"risk": "code"`)
    Code,
    /// Any unsafe global
    Unsafe,
}

/// Runs `scan`.
///
/// # Errors
/// Writing the output.
pub fn run(args: Args, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let report = stowage_commands::scan::scan(&args.paths, cx);
    for f in report.files.iter().filter(|f| f.error.is_some()) {
        if let Some(e) = &f.error {
            let _ = writeln!(
                std::io::stderr().lock(),
                "stowage: {}: {}",
                f.path.display(),
                stowage::one_line(e)
            );
        }
    }
    match if args.json { Format::Json } else { args.format } {
        Format::Text => stowage_commands::scan::write_text(&report, out)?,
        Format::Json => writeln!(out, "{}", report.to_json())?,
        Format::Sarif => writeln!(out, "{}", report.to_sarif())?,
    }
    let fails = match args.fail_on {
        FailOn::Unsafe => report.is_unsafe(),
        FailOn::Code => report.runs_code(),
    };
    Ok(ExitCode::from(if report.has_errors() {
        2
    } else if fails {
        1
    } else {
        0
    }))
}
