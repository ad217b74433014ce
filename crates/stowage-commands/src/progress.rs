//! The progress of a command's long steps (reading, hashing, comparing,
//! writing), for a caller that shows it: the command line draws bars on a
//! terminal; by default nothing is shown, at no cost.

use std::sync::Arc;

/// How a caller is told of a command's long steps. Every method has a
/// default that shows nothing.
pub trait Progress: Send + Sync {
    /// A step over `total` bytes, named by `message`.
    fn bytes(&self, total: u64, message: String) -> Bar {
        let _ = (total, message);
        Bar::hidden()
    }

    /// A step whose size is not known.
    fn spinner(&self, message: String) -> Bar {
        let _ = message;
        Bar::hidden()
    }

    /// A checkpoint being read; `received` tells the bytes this run has
    /// received from object stores so far, as they come.
    fn reading(&self, message: String, received: Box<dyn Fn() -> u64 + Send>) -> Bar {
        let _ = received;
        self.spinner(message)
    }
}

/// What a [`Bar`] drives: told the bytes done, and when the step ends.
pub trait Ticks: Send + Sync {
    /// `n` more bytes are done.
    fn inc(&self, n: u64);
    /// The step is over: the bar goes away. Called at least once: by
    /// [`Bar::finish_and_clear`], and when the last clone of the bar is
    /// dropped (a step that ends by an error ends its bar too).
    fn finish(&self);
}

/// Finishes its step when the last clone of its bar goes.
struct Step(Box<dyn Ticks>);

impl Drop for Step {
    fn drop(&mut self) {
        self.0.finish();
    }
}

/// One step under way. Clones drive the same step; the step ends when
/// [`finish_and_clear`](Bar::finish_and_clear) is called or the last clone
/// is dropped.
#[derive(Clone, Default)]
pub struct Bar(Option<Arc<Step>>);

impl Bar {
    /// A bar that `ticks` draws.
    pub fn new(ticks: impl Ticks + 'static) -> Bar {
        Bar(Some(Arc::new(Step(Box::new(ticks)))))
    }

    /// A bar that shows nothing.
    pub fn hidden() -> Bar {
        Bar(None)
    }

    /// `n` more bytes are done.
    pub fn inc(&self, n: u64) {
        if let Some(step) = &self.0 {
            step.0.inc(n);
        }
    }

    /// The step is over.
    pub fn finish_and_clear(&self) {
        if let Some(step) = &self.0 {
            step.0.finish();
        }
    }
}

/// Shows nothing.
pub(crate) struct Hidden;

impl Progress for Hidden {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Default)]
    struct Counted {
        done: AtomicU64,
        finished: AtomicU64,
    }

    struct Shared(Arc<Counted>);

    impl Ticks for Shared {
        fn inc(&self, n: u64) {
            self.0.done.fetch_add(n, Ordering::Relaxed);
        }
        fn finish(&self) {
            self.0.finished.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A step that ends by an error (its bar dropped, never finished by
    /// hand) still takes its bar away, once the last clone goes.
    #[test]
    fn a_bar_ends_when_its_last_clone_is_dropped() {
        let counted = Arc::new(Counted::default());
        let bar = Bar::new(Shared(counted.clone()));
        let tick = bar.clone();
        tick.inc(3);
        bar.inc(4);
        drop(bar);
        assert_eq!(counted.finished.load(Ordering::Relaxed), 0);
        drop(tick);
        assert_eq!(counted.finished.load(Ordering::Relaxed), 1);
        assert_eq!(counted.done.load(Ordering::Relaxed), 7);
        // A hidden bar does nothing, and costs nothing.
        Bar::hidden().inc(1);
        Bar::hidden().finish_and_clear();
    }
}
