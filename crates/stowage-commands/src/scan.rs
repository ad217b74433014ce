//! `scan`: the globals every pickle in each file names, each with its
//! verdict, as the CLI contract specifies for `stowage scan`
//! (`docs/cli-contract.md`). The work is the library's
//! (`stowage::checkpoint::scan`), whose [`ScanReport`] serializes itself
//! (`to_json`, `to_sarif`); here are the scan of several paths and the
//! report's text.

use std::io::Write;
use std::path::Path;

use stowage::checkpoint::scan::{scan_path, FileScan, Risk, ScanReport, Verdict};

/// Scans each path (a file, or a folder read recursively) without loading
/// anything: one report over all of them. A file that cannot be read has
/// its `error` set rather than failing the scan.
///
/// ```
/// let cx = stowage_commands::Context::default();
/// let report = stowage_commands::scan::scan(&["../stowage/tests/fixtures/state_dict.pt"], &cx);
/// assert!(!report.is_unsafe() && !report.has_errors());
/// assert_eq!(report.to_json()["files"][0]["kind"], "torch-zip");
/// ```
pub fn scan(paths: &[impl AsRef<Path>], cx: &crate::Context) -> ScanReport {
    let mut report = ScanReport::default();
    let options = cx.load_options();
    for path in paths {
        report
            .files
            .extend(scan_path(path.as_ref(), &options).files);
    }
    report
}

fn write_file(f: &FileScan, out: &mut dyn Write) -> std::io::Result<()> {
    let path = f.path.display();
    if let Some(kind) = f.kind {
        let unsafe_count = f
            .globals
            .iter()
            .filter(|g| g.verdict == Verdict::Unsafe)
            .count();
        writeln!(
            out,
            "{path}: {}, {} pickle{}, {} global{} ({unsafe_count} unsafe)",
            kind,
            f.pickles.len(),
            if f.pickles.len() == 1 { "" } else { "s" },
            f.globals.len(),
            if f.globals.len() == 1 { "" } else { "s" },
        )?;
        for g in &f.globals {
            writeln!(
                out,
                "  {:<7}  {}.{} ×{}",
                g.verdict, g.module, g.name, g.count
            )?;
        }
        let imports: Vec<String> = f
            .globals
            .iter()
            .filter(|g| g.risk == Some(Risk::Import))
            .map(|g| format!("{}.{}", g.module, g.name))
            .collect();
        if !imports.is_empty() {
            writeln!(
                out,
                "  only imports, no code: {}; `stowage inspect --inert {path}` reads the file without importing them",
                imports.join(", ")
            )?;
        }
    }
    if let Some(e) = &f.error {
        writeln!(out, "{path}: error: {}", stowage::one_line(e))?;
    }
    Ok(())
}

/// Writes the lines `stowage scan` prints for `report`: per file, `FILE:
/// <kind>, N pickles, M globals (K unsafe)`, then one line per global,
/// `  <verdict>  module.name ×count`, and `FILE: error: …` where something
/// could not be read; a line naming the unsafe globals that only import a
/// class; then a summary line.
///
/// # Errors
/// A failure to write.
pub fn write_text(report: &ScanReport, out: &mut dyn Write) -> std::io::Result<()> {
    for f in &report.files {
        write_file(f, out)?;
    }
    let unsafe_files = report.files.iter().filter(|f| f.is_unsafe()).count();
    let errors = report.files.iter().filter(|f| f.error.is_some()).count();
    writeln!(
        out,
        "{} file{} scanned: {unsafe_files} with unsafe globals, {errors} unreadable",
        report.files.len(),
        if report.files.len() == 1 { "" } else { "s" },
    )
}
