//! `stowage bench load|save FILE [--mmap] [--repeat N] [--json]`: times the
//! library's own load of FILE, or its save of what FILE holds, as the CLI
//! contract specifies (`docs/cli-contract.md`).
//!
//! One untimed warm-up, then N timed runs in this process. A load is timed
//! from the call to [`stowage::load`] until it returns (every storage read
//! into memory the program owns, every tensor built); dropping the result is
//! not timed. A save is [`stowage::save`] (a torch zip archive, written to a
//! temporary file, synced and renamed into place) to a file in the system's
//! temporary folder (`TMPDIR`), removed afterwards; every run after the first
//! replaces the previous run's file, as re-saving a checkpoint does.
//! `--no-sync` times the same save without the syncs (`SaveOptions::with_sync(false)`;
//! the rename stays), which is what `torch.save` does. `bytes` is
//! the sum of the storages' sizes; `gb_per_s` is `bytes / median_s / 1e9`.
//!
//! `--mmap` loads with [`stowage::load_mmap`]: a load counts as
//! done when every storage is mapped (a view into one private mapping of the
//! file) and every tensor built. The file must not change while it runs. No
//! bytes are read, so there is no bandwidth: `gb_per_s` is null, and the
//! line says what was mapped.
//!
//! `load --baselines` also times, in the same rounds as the loads, a memory
//! copy of as many bytes and a read of FILE, each into fresh memory (as a
//! load writes) and into memory written before ([`baselines`]), and prints
//! their medians and the load's median over each: a load against a memcpy
//! and a `pread`, side by side in one run.
//!
//! FILE may be a URL (`s3://…`, `http(s)://…`, …): then the JSON has a
//! `"transfer"` member as the other commands' have, the requests and bytes of
//! the whole run (the warm-up and the N timed runs: N + 1 loads), and the
//! line for people says the same per load.

mod baselines;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stowage::Checkpoint;

use stowage_commands::human;
use crate::{Context, Failure};

/// What to time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Op {
    /// `stowage::load` of FILE
    Load,
    /// `stowage::save` of what FILE holds, to a temporary file
    Save,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Load => "load",
            Op::Save => "save",
        }
    }
}

/// Arguments of `bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to time: `load` (of FILE) or `save` (of what FILE holds)
    #[arg(value_enum)]
    op: Op,
    #[arg(help = concat!("The checkpoint: ", inputs!()))]
    file: PathBuf,
    /// Load memory-mapped (`load_mmap`): storages are views into one mapping of FILE
    #[arg(long)]
    mmap: bool,
    /// Save without syncing the file to the disk (`SaveOptions::with_sync(false)`), as
    /// `torch.save` does; the default times the library's default, synced save
    #[arg(long)]
    no_sync: bool,
    /// Timed runs, after one untimed warm-up
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
    /// Print one JSON object `{"op", "mmap", "bytes", "median_s", "min_s", "gb_per_s"}`
    /// (and `"transfer"` for a URL)
    #[arg(long)]
    json: bool,
    /// `load` of a local file only: also time, in the same rounds, a copy of as many bytes
    /// and a read of FILE, into fresh memory and into memory written before, and print their
    /// medians and the load's median over each (with --json, every run's time too). Holds
    /// two buffers of FILE's size meanwhile
    #[arg(long, conflicts_with = "mmap")]
    baselines: bool,
    /// `load`: read the storages of 2 MiB or more into memory advised to use transparent huge
    /// pages (`LoadOptions::with_huge_pages`)
    #[arg(long, conflicts_with = "mmap")]
    huge_pages: bool,
}

/// A file removed when dropped.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A path in the system temporary folder no other process uses.
fn temp_path(source: &Path) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let stem = source
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem: String = stem
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .take(40)
        .collect();
    std::env::temp_dir().join(format!(
        "stowage-bench-{}-{nanos}-{stem}.pt",
        std::process::id()
    ))
}

/// The progress bar: drawn on stderr when it is a terminal, hidden otherwise.
fn progress(op: Op, runs: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(runs), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed})") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(format!("{} (warm-up)", op.name()));
    bar
}

/// The median of a non-empty list of durations (the mean of the middle two
/// for an even count), in seconds.
fn median(times: &mut [Duration]) -> f64 {
    times.sort();
    let n = times.len();
    if n == 0 {
        return 0.0;
    }
    if n % 2 == 1 {
        times[n / 2].as_secs_f64()
    } else {
        (times[n / 2 - 1].as_secs_f64() + times[n / 2].as_secs_f64()) / 2.0
    }
}

/// A float as JSON (`null` when not finite).
fn number(v: f64) -> String {
    serde_json::to_string(&v).unwrap_or_else(|_| "null".into())
}

/// Runs `bench`.
pub fn run(args: Args, cx: &Context, out: &mut dyn Write) -> Result<ExitCode, Failure> {
    // The global options (--inert, --allow-global) and the environment's
    // remote settings apply, as to every other command.
    let options = cx.load_options().with_huge_pages(args.huge_pages);
    let load = |path: &Path| -> Result<Checkpoint, Failure> {
        if args.mmap {
            // SAFETY: the benchmark only reads FILE; the help and the module docs say it
            // must not be modified or truncated while the benchmark runs.
            unsafe { stowage::load_mmap(path, &options) }.map_err(Failure::input)
        } else {
            stowage::load_with(path, &options).map_err(Failure::input)
        }
    };
    let runs = u64::from(args.repeat);
    // Made before the warm-up load, so that the timed rounds start with the
    // memory the warm-up has just freed, as the loads after it do.
    let mut baselines = match (args.baselines, args.op) {
        (false, _) => None,
        (true, Op::Load) => Some(baselines::Baselines::new(&args.file)?),
        (true, Op::Save) => return Err(Failure::usage("--baselines times loads only")),
    };
    let bar = progress(args.op, runs + 1);
    // The warm-up load: also what a save writes, and where the byte count comes from.
    let ckpt = load(&args.file)?;
    let bytes: u64 = ckpt
        .storages()
        .iter()
        .map(|s| s.storage.nbytes() as u64)
        .sum();
    let mut times = Vec::with_capacity(args.repeat as usize);
    match args.op {
        Op::Load => {
            drop(ckpt);
            bar.inc(1);
            bar.set_message("load");
            // The caller drops what it loaded, untimed.
            let mut timed_load = || -> Result<Checkpoint, Failure> {
                let start = Instant::now();
                let loaded = load(&args.file)?;
                times.push(start.elapsed());
                Ok(std::hint::black_box(loaded))
            };
            if let Some(b) = &mut baselines {
                b.set_len(bytes)?;
            }
            for round in 0..runs {
                match &mut baselines {
                    Some(b) => b.round(round, &mut timed_load)?,
                    None => drop(timed_load()?),
                }
                bar.inc(1);
            }
            if let Some(b) = &mut baselines {
                b.release();
            }
        }
        Op::Save => {
            let target = TempFile(temp_path(&args.file));
            let options = cx.save_options().with_sync(!args.no_sync);
            let save = |ckpt: &Checkpoint| {
                stowage::save_with(&target.0, ckpt, &options).map_err(Failure::from)
            };
            save(&ckpt)?;
            bar.inc(1);
            bar.set_message("save");
            for _ in 0..runs {
                let start = Instant::now();
                save(&ckpt)?;
                times.push(start.elapsed());
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    let base = baselines.map(|b| b.finish(&times));
    let transfer = stowage_commands::transfer_json(cx);
    print(&args, out, bytes, &mut times, base, transfer)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints what was timed: one JSON object (`--json`) or lines for people,
/// with the baselines and the transfer where there are.
fn print(
    args: &Args,
    out: &mut dyn Write,
    bytes: u64,
    times: &mut [Duration],
    base: Option<baselines::Summary>,
    transfer: Option<serde_json::Value>,
) -> Result<(), Failure> {
    let runs = u64::from(args.repeat);
    let min_s = times.iter().min().map_or(0.0, Duration::as_secs_f64);
    let median_s = median(times);
    // A mapped load reads no bytes (the pages come in when first touched):
    // it has no bandwidth to report, only the time to map and build.
    let gb_per_s = if args.mmap {
        f64::NAN
    } else {
        bytes as f64 / median_s / 1e9
    };
    if args.json {
        let transfer = transfer.map_or(String::new(), |t| format!(", \"transfer\": {t}"));
        let base = base.map_or(String::new(), |b| b.json(median_s));
        writeln!(
            out,
            "{{\"op\": \"{}\", \"mmap\": {}, \"bytes\": {bytes}, \"median_s\": {}, \"min_s\": {}, \"gb_per_s\": {}{transfer}{base}}}",
            args.op.name(),
            args.mmap,
            number(median_s),
            number(min_s),
            number(gb_per_s)
        )?;
    } else {
        // A mapped load reads nothing: it says what was mapped, not a rate.
        let (mapped, rate) = if args.mmap {
            (" mapped (no bytes read)", String::new())
        } else {
            ("", format!(", {gb_per_s:.3} GB/s"))
        };
        writeln!(
            out,
            "{} {}: {} in storages{mapped}, median {:.6} s, min {:.6} s{rate} ({} runs after a warm-up)",
            args.op.name(),
            args.file.display(),
            human(bytes),
            median_s,
            min_s,
            runs
        )?;
        if let Some(b) = base {
            b.lines(out, bytes, median_s)?;
        }
        if let Some(t) = transfer {
            let loads = runs + 1;
            let per = |key: &str| t[key].as_u64().unwrap_or(0) / loads;
            writeln!(
                out,
                "transferred per load: {} requests, {} received, {} sent",
                per("requests"),
                human(per("bytes_received")),
                human(per("bytes_sent"))
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|&m| Duration::from_millis(m))
                .collect::<Vec<_>>()
        };
        assert_eq!(median(&mut ms(&[30, 10, 20])), 0.02);
        assert_eq!(median(&mut ms(&[40, 10, 20, 30])), 0.025);
        assert_eq!(number(f64::INFINITY), "null");
        assert_eq!(number(0.5), "0.5");
    }
}
