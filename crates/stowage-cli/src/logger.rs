//! The command line's logger: the library's warnings (the `log` facade, see
//! `stowage::warn`) printed to stderr, one line each, as
//! `stowage: warning: <message>`.
//!
//! A dozen lines of `log::Log` rather than `env_logger`: the command line
//! needs no filters, colours or timestamps, only the warnings, and the
//! dependency would bring a dozen crates for that.

use std::io::Write;

use log::{Level, LevelFilter, Log, Metadata, Record};

/// Prints records of level `Warn` and above to stderr.
struct Stderr;

impl Log for Stderr {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= Level::Warn
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            let level = label(record.level());
            // As for the error line: a closed stderr is no reason to panic.
            let _ = writeln!(
                std::io::stderr().lock(),
                "stowage: {level}: {}",
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

/// How a level reads in the line: the contract's `warning`, not `log`'s
/// `WARN`.
fn label(level: Level) -> &'static str {
    match level {
        Level::Error => "error",
        Level::Warn => "warning",
        Level::Info => "info",
        Level::Debug => "debug",
        Level::Trace => "trace",
    }
}

/// Installs the logger for the process (once; later calls change nothing).
pub fn install() {
    static LOGGER: Stderr = Stderr;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(LevelFilter::Warn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_warnings_and_errors_are_enabled() {
        let at = |level| Metadata::builder().level(level).target("stowage").build();
        assert!(Stderr.enabled(&at(Level::Warn)));
        assert!(Stderr.enabled(&at(Level::Error)));
        assert!(!Stderr.enabled(&at(Level::Info)));
    }

    #[test]
    fn a_warning_reads_as_the_contract_says() {
        assert_eq!(label(Level::Warn), "warning");
        assert_eq!(label(Level::Error), "error");
    }
}
