//! Why a command did not reach its answer.

use stowage::checkpoint::PathKey;
use stowage::ErrorContext;

/// Why a command did not reach its answer. An answer of "no" (`diff` found
/// differences, `verify` a defect) is a result, never this.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// An input could not be read, or was refused: the library's error,
    /// naming the file and, where it has one, the tensor path.
    #[error(transparent)]
    Input(stowage::Error),
    /// Options that cannot be given together, or a value out of range.
    #[error("{0}")]
    Usage(String),
    /// Writing a result failed.
    #[error(transparent)]
    Output(#[from] std::io::Error),
    /// Any other failure (a conversion that would write nothing).
    #[error("{0}")]
    Failed(String),
}

impl CommandError {
    /// An input that could not be read or was refused.
    pub(crate) fn input(error: stowage::Error) -> CommandError {
        CommandError::Input(error)
    }

    /// An error concerning the tensor at `path`.
    pub(crate) fn at(path: &[PathKey], error: stowage::Error) -> CommandError {
        let path = stowage::checkpoint::dotted(path);
        CommandError::Input(ErrorContext::at_path(error, path))
    }

    /// A usage error with the message `message`.
    pub(crate) fn usage(message: impl Into<String>) -> CommandError {
        CommandError::Usage(message.into())
    }

    /// A failure with the message `message`.
    pub(crate) fn msg(message: impl Into<String>) -> CommandError {
        CommandError::Failed(message.into())
    }
}

impl From<stowage::Error> for CommandError {
    fn from(error: stowage::Error) -> CommandError {
        CommandError::Input(error)
    }
}
