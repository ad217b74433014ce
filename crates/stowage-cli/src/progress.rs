//! Progress bars on stderr (`indicatif`) for work that can take more than
//! about a second: reading, hashing and writing tensor bytes. They are drawn
//! only when stderr is a terminal and `--quiet` was not given; otherwise every
//! bar is hidden and costs nothing.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

static QUIET: AtomicBool = AtomicBool::new(false);

/// Below this many bytes the work is quick enough to go without a bar.
const MIN_BYTES: u64 = 64 << 20;

/// Turns every bar off (the global `--quiet`).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// True when bars may be drawn: stderr is a terminal and `--quiet` is off.
pub fn enabled() -> bool {
    !QUIET.load(Ordering::Relaxed) && std::io::stderr().is_terminal()
}

/// A bar over `total` bytes, `message` beside it; hidden when bars are off
/// or the work is small.
pub fn bytes(total: u64, message: impl Into<String>) -> ProgressBar {
    if !enabled() || total < MIN_BYTES {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    let style = ProgressStyle::with_template(
        "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(message.into());
    bar
}

/// A spinner naming a step whose size is not known, with the time it has taken.
pub fn spinner(message: impl Into<String>) -> ProgressBar {
    if !enabled() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(message.into());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// A spinner for a read; once `received` (this run's bytes received from
/// object stores) grows, it also shows the bytes fetched, updated as they
/// come.
pub fn fetching(message: String, received: impl Fn() -> u64 + Send + 'static) -> ProgressBar {
    let bar = spinner(message.clone());
    if bar.is_hidden() {
        return bar;
    }
    let shown = bar.clone();
    std::thread::spawn(move || {
        let start = received();
        while !shown.is_finished() {
            let got = received().saturating_sub(start);
            if got > 0 {
                shown.set_message(format!("{message}: {} fetched", indicatif::HumanBytes(got)));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    bar
}
