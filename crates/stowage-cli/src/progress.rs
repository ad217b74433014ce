//! Progress bars on stderr (`indicatif`) for the commands' long steps
//! (reading, hashing, comparing and writing tensor bytes): the command
//! line's [`Progress`](stowage_commands::Progress). They are drawn only when
//! stderr is a terminal and `--quiet` was not given; otherwise every bar is
//! hidden and costs nothing.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use stowage_commands::{Bar, Progress, Ticks};

/// Below this many bytes the work is quick enough to go without a bar.
const MIN_BYTES: u64 = 64 << 20;

/// The bars of one run.
#[derive(Debug)]
pub struct Bars {
    /// Whether bars are drawn: stderr is a terminal and `--quiet` is off.
    draw: bool,
}

impl Bars {
    /// The bars of a run with `--quiet` given or not.
    pub fn new(quiet: bool) -> Bars {
        Bars {
            draw: !quiet && std::io::stderr().is_terminal(),
        }
    }

    fn spinner_bar(&self, message: String) -> ProgressBar {
        if !self.draw {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(message);
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    }
}

/// An indicatif bar as the commands drive it.
struct Drawn(ProgressBar);

impl Ticks for Drawn {
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

impl Progress for Bars {
    /// A bar over `total` bytes, `message` beside it; hidden when bars are
    /// off or the work is small.
    fn bytes(&self, total: u64, message: String) -> Bar {
        if !self.draw || total < MIN_BYTES {
            return Bar::hidden();
        }
        let bar = ProgressBar::new(total);
        let style = ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_message(message);
        Bar::new(Drawn(bar))
    }

    /// A spinner naming a step whose size is not known, with the time it
    /// has taken.
    fn spinner(&self, message: String) -> Bar {
        if !self.draw {
            return Bar::hidden();
        }
        Bar::new(Drawn(self.spinner_bar(message)))
    }

    /// A spinner for a read; once `received` (this run's bytes received
    /// from object stores) grows, it also shows the bytes fetched, updated
    /// as they come.
    fn reading(&self, message: String, received: Box<dyn Fn() -> u64 + Send>) -> Bar {
        if !self.draw {
            return Bar::hidden();
        }
        let bar = self.spinner_bar(message.clone());
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
        Bar::new(Drawn(bar))
    }
}
