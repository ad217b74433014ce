//! `stowage`: the command line of the stowage library. The binary's `main`
//! calls [`main`]; the commands' logic is the `stowage-commands` crate's,
//! which the Python package calls too, so both give the same results from
//! one implementation.
//!
//! [`main`] is thin, as in ripgrep and candle: parse the arguments, call
//! the command, print its result, turn the outcome into an exit status, and
//! print an error once, as
//! one line on stderr (`stowage: <error>: <cause>`). The library's warnings
//! (`stowage::warn`, through the `log` facade) print as
//! `stowage: warning: <message>`.
//!
//! Exit statuses, as the contract gives them: 0 success; 1 the command ran
//! and the answer is "no" (`diff` found differences, `verify` a defect); 2
//! a usage error (clap's own status for those), an input that could not be
//! read or was refused, or any other failure (OUT cannot be written). A reader that
//! goes away (`stowage demo | head`) is not an error: output stops and the
//! status is 0.
//!
//! Each subcommand is one module with a `clap::Args` struct named `Args` and
//! `fn run(args: Args, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure>`
//! (the [`Context`] holds the parsed global options, `--quiet` among them as
//! the progress bars it draws), listed once in the `subcommands!` invocation below.

use std::error::Error as StdError;
use stowage::CheckpointError;

// How every error reads on one line (the library's, for its JSON too).
use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;
pub(crate) use stowage::one_line;

use clap::{Parser, Subcommand};

use stowage_commands::{CommandError, Context};

mod logger;
mod progress;

/// Declares the subcommand modules, the [`Command`] enum and its dispatch.
///
/// Each entry is `Variant(module)`, preceded by its doc comment (the
/// command's help line); adding a subcommand is one entry plus its module.
macro_rules! subcommands {
    ($($(#[$attr:meta])* $variant:ident($module:ident)),+ $(,)?) => {
        $(mod $module;)+

        /// The subcommands.
        #[derive(Debug, Subcommand)]
        enum Command {
            $($(#[$attr])* $variant($module::Args),)+
        }

        impl Command {
            /// Runs the subcommand in `cx`, writing its output to `out`.
            fn run(self, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
                match self {
                    $(Command::$variant(args) => $module::run(args, cx, out),)+
                }
            }
        }
    };
}

/// The kinds of checkpoint a command reads, for each input's help text:
/// `#[arg(help = concat!("The checkpoint: ", inputs!()))]`.
macro_rules! inputs {
    () => {
        "a torch zip, torch legacy or safetensors file (detected by content), a folder or \
         *.index.json of a sharded set, a distributed checkpoint folder, or a URL (s3://, gs://, \
         az://, http(s)://, file://; a folder's URL ends in /)"
    };
}

subcommands! {
    /// Walk through PyTorch's storage model, step by step, with the PyTorch code for each step
    Demo(demo),
    /// List what a checkpoint holds: tensors, dtypes, layouts and storage sharing
    Inspect(inspect),
    /// Rewrite a checkpoint as torch zip (.pt, .pth, .bin) or safetensors (.safetensors), keeping sharing
    Convert(convert),
    /// Compare two checkpoints tensor by tensor: presence, dtype, shape, values and storage sharing
    Diff(diff),
    /// Write a checkpoint's content manifest: each tensor's digest, the values' digest, a root digest; the same in every format
    Manifest(manifest),
    /// Check a checkpoint without trusting it: archive, CRCs, records, tensor bounds, allowed globals
    Verify(verify),
    /// List the globals every pickle in each file names, with a verdict: allowed, decoded or unsafe
    Scan(scan),
    /// Time the library's load of a checkpoint, or its save of what the checkpoint holds
    Bench(bench),
}

/// PyTorch's tensor storage model and checkpoint format, without libtorch.
#[derive(Debug, Parser)]
#[command(name = "stowage", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Draw no progress bars (they are drawn on stderr, only when it is a terminal)
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Never refuse a global: build an inert object (module, name, arguments,
    /// state) for each one outside PyTorch's weights_only allowlist, and decode
    /// the known data types (numpy, argparse.Namespace, datetime, pathlib …).
    /// Nothing is ever imported or called
    #[arg(long, global = true)]
    inert: bool,
    /// Accept MODULE.NAME as PyTorch's add_safe_globals would (repeatable):
    /// decoded as data when stowage knows it, else an inert object; never called
    #[arg(long = "allow-global", value_name = "MODULE.NAME", global = true)]
    allow_global: Vec<String>,
    /// Set a limit on what reading a checkpoint may cost (repeatable; over the
    /// environment's STOWAGE_LIMITS): paths, records, pickle-bytes,
    /// storage-bytes, pickle-nodes, pickle-memo, pickle-stack, pickle-depth.
    /// An error that hits one names it
    #[arg(long = "limit", value_name = "NAME=N", global = true, value_parser = stowage::Limit::parse_setting)]
    limit: Vec<(stowage::Limit, u64)>,
}

/// Exit status 2: a usage error, an input that could not be read or was
/// refused, or any other failure. Status 1 is kept for an answer of "no"
/// (`diff` found differences, `verify` a defect), which the subcommands
/// return as their [`ExitCode`]: a script reading 1 as "differs" must never
/// see it for a command that did not run to its answer.
const FAILED: u8 = 2;

/// An error that ends a subcommand: printed once on stderr, exit status 2.
///
/// `?` converts [`stowage::Error`] and [`io::Error`] (an error writing the
/// output).
#[derive(Debug)]
pub struct Failure {
    error: Box<dyn StdError + Send + Sync + 'static>,
}

impl Failure {
    /// An input that could not be read or was refused.
    pub fn input(error: stowage::Error) -> Failure {
        Failure {
            error: Box::new(error),
        }
    }

    /// A usage error with the message `message`.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::msg(message)
    }

    /// A failure with the message `message`.
    pub fn msg(message: impl Into<String>) -> Failure {
        Failure {
            error: message.into().into(),
        }
    }
}

impl From<stowage::Error> for Failure {
    fn from(error: stowage::Error) -> Failure {
        Failure::input(error)
    }
}

impl From<CommandError> for Failure {
    fn from(error: CommandError) -> Failure {
        match error {
            CommandError::Input(e) => Failure::input(e),
            CommandError::Output(e) => Failure::from(e),
            e => Failure::msg(e.to_string()),
        }
    }
}

impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Failure {
        Failure {
            error: Box::new(error),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&one_line(&*self.error))?;
        match hint(&*self.error) {
            Some(hint) => write!(f, " ({hint})"),
            None => Ok(()),
        }
    }
}

/// What to do next about an error, in the command line's words: the
/// library's errors name no flags.
fn hint(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = at {
        // A wrapper's cause is its `Box<Error>` field, seen as the box.
        let ours = e
            .downcast_ref::<stowage::Error>()
            .or_else(|| e.downcast_ref::<Box<stowage::Error>>().map(|b| &**b));
        match ours {
            Some(stowage::Error::Checkpoint(CheckpointError::GlobalNotAllowed { .. })) => {
                return Some(
                    "`stowage scan` lists every global the file names; `--inert` reads it without importing or running anything"
                        .into(),
                );
            }
            Some(stowage::Error::Checkpoint(CheckpointError::NotSaveable { .. })) => {
                return Some("--drop-objects leaves such values out".into());
            }
            _ => {}
        }
        at = e.source();
    }
    None
}

/// Standard output that remembers whether the reader has gone away.
struct Stdout<W> {
    inner: W,
    closed: bool,
}

impl<W: Write> Stdout<W> {
    fn note<T>(&mut self, result: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &result {
            if e.kind() == io::ErrorKind::BrokenPipe {
                self.closed = true;
            }
        }
        result
    }
}

impl<W: Write> Write for Stdout<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let result = self.inner.write(buf);
        self.note(result)
    }
    fn flush(&mut self) -> io::Result<()> {
        let result = self.inner.flush();
        self.note(result)
    }
}

/// Runs the parsed command line, writing to `out`.
///
/// # Errors
/// The subcommand's [`Failure`], or a failure to flush the output.
fn run(cli: Cli, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    let cx = Context::default()
        .with_inert(cli.inert)
        .with_allow_globals(cli.allow_global)
        .with_limits(cli.limit)
        .with_progress(std::sync::Arc::new(progress::Bars::new(cli.quiet)));
    let status = cli.command.run(&cx, out)?;
    out.flush()?;
    Ok(status)
}

/// Set, in the signal handler itself, when SIGINT, SIGTERM or SIGHUP
/// arrives: from then on the process ends by that signal, never otherwise.
static SIGNALLED: std::sync::LazyLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::LazyLock::new(Default::default);

/// SIGINT, SIGTERM and SIGHUP end the process as they would anyway, but
/// only after the temporaries of a save in progress are removed (and, after
/// a folder's exchange, the target's own folders put back), so an
/// interrupted `convert` leaves nothing behind. A `SIGKILL` cannot be
/// caught: the next save to the same target removes what it left.
fn end_cleanly_on_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    const SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];
    for signal in SIGNALS {
        if signal_hook::flag::register(signal, SIGNALLED.clone()).is_err() {
            return;
        }
    }
    let Ok(mut signals) = signal_hook::iterator::Signals::new(SIGNALS) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            stowage::io::remove_temporaries();
            // Ended by the signal itself, as without this handler.
            let _ = signal_hook::low_level::emulate_default_handler(signal);
            std::process::exit(128 + signal);
        }
    });
}

/// Once a signal has arrived, the thread that ends the process by it does:
/// the command neither reports the save it interrupted as failed nor ends
/// with a status of its own.
fn wait_if_signalled() {
    while SIGNALLED.load(std::sync::atomic::Ordering::SeqCst) {
        std::thread::park();
    }
}

/// The `stowage` command line: parses the process's arguments, runs the
/// command, prints its error once on stderr, and returns the exit status.
/// Installs the warning logger and the handlers of SIGINT, SIGTERM and
/// SIGHUP that undo a save in progress before the process ends.
pub fn main() -> ExitCode {
    logger::install();
    end_cleanly_on_signals();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // Help and version go to stdout with status 0, usage errors to
            // stderr with status 2. A closed stream is no reason to panic.
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(FAILED));
        }
    };
    let mut out = Stdout {
        inner: io::BufWriter::new(io::stdout().lock()),
        closed: false,
    };
    let result = run(cli, &mut out);
    wait_if_signalled();
    if out.closed {
        return ExitCode::SUCCESS;
    }
    match result {
        Ok(status) => status,
        Err(failure) => {
            let _ = writeln!(io::stderr().lock(), "stowage: {failure}");
            ExitCode::from(FAILED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapped(io::Error);
    impl fmt::Display for Wrapped {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("reading model.pt")
        }
    }
    impl StdError for Wrapped {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn error_chain_is_one_line_without_repeats() {
        let e = Wrapped(io::Error::new(io::ErrorKind::NotFound, "no such\nfile"));
        assert_eq!(one_line(&e), "reading model.pt: no such file");
        let io = stowage::Error::Io(io::Error::new(io::ErrorKind::NotFound, "not found"));
        let f = Failure::from(io);
        assert_eq!(f.to_string(), "not found");
    }

    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_reader_is_noticed() {
        let mut out = Stdout {
            inner: Closed,
            closed: false,
        };
        let cli = Cli::try_parse_from(["stowage", "demo"]).unwrap();
        assert!(run(cli, &mut out).is_err());
        assert!(out.closed);
    }

    #[test]
    fn clap_definition_is_valid() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
        let e = Cli::try_parse_from(["stowage", "nosuchcommand"]).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }
}
