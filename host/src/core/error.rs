//! The library's one error type. Callers branch on the variant: `Input` is a
//! mistake in what the user supplied (exit 2, nothing was claimed), the rest
//! are failures of a run or of the host's own resources (exit 1). Messages
//! are complete sentences fragments in the house style: lowercase, quoting the
//! culprit, and naming the fix where there is one.

use std::fmt;

/// Anything that can go wrong in the jobhost library.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The user's flags, config, component or store path are wrong. Nothing
    /// was claimed; fixing the input and running again is safe.
    #[error("{0}")]
    Input(String),
    /// The claim store could not be read or written.
    #[error("{0}")]
    Store(String),
    /// Another process took over this run (its lease expired); this process
    /// must stop without writing or delivering anything.
    #[error("{0}")]
    LeaseLost(String),
    /// The data source failed while running its query.
    #[error("{0}")]
    Source(String),
    /// Delivering a staged message failed.
    #[error("{0}")]
    Delivery(String),
    /// Anything else on the host side (I/O on the host's own files).
    #[error("{0}")]
    Host(String),
}

impl Error {
    /// A bad-input error, built from anything displayable.
    pub fn input(msg: impl fmt::Display) -> Error {
        Error::Input(msg.to_string())
    }

    /// A store error with context: ``context: cause``.
    pub fn store(context: impl fmt::Display, cause: impl fmt::Display) -> Error {
        Error::Store(format!("{context}: {cause}"))
    }

    /// The process exit code this error maps to: 2 for bad input, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input(_) => 2,
            _ => 1,
        }
    }

    /// A short stable name for the receipt's `error.kind` field.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Input(_) => "invalid-input",
            Error::Store(_) => "store",
            Error::LeaseLost(_) => "lease-lost",
            Error::Source(_) => "source",
            Error::Delivery(_) => "delivery",
            Error::Host(_) => "host",
        }
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
