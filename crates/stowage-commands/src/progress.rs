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
    /// The step is over: the bar goes away.
    fn finish(&self);
}

/// One step under way. Clones drive the same step.
#[derive(Clone, Default)]
pub struct Bar(Option<Arc<dyn Ticks>>);

impl Bar {
    /// A bar that `ticks` draws.
    pub fn new(ticks: impl Ticks + 'static) -> Bar {
        Bar(Some(Arc::new(ticks)))
    }

    /// A bar that shows nothing.
    pub fn hidden() -> Bar {
        Bar(None)
    }

    /// `n` more bytes are done.
    pub fn inc(&self, n: u64) {
        if let Some(t) = &self.0 {
            t.inc(n);
        }
    }

    /// The step is over.
    pub fn finish_and_clear(&self) {
        if let Some(t) = &self.0 {
            t.finish();
        }
    }
}

/// Shows nothing.
pub(crate) struct Hidden;

impl Progress for Hidden {}
