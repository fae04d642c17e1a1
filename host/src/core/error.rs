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

    /// The receipt's `error.kind` for this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Input(_) => ErrorKind::InvalidInput,
            Error::Store(_) => ErrorKind::Store,
            Error::LeaseLost(_) => ErrorKind::LeaseLost,
            Error::Source(_) => ErrorKind::Source,
            Error::Delivery(_) => ErrorKind::Delivery,
            Error::Host(_) => ErrorKind::Host,
        }
    }
}

/// Why a run failed, as a receipt's `error.kind` names it: a stable name a
/// monitor can match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    /// Bad flags, config, component, store path or URL; nothing claimed.
    InvalidInput,
    /// The claim store could not be read or written.
    Store,
    /// Another process took the run over.
    LeaseLost,
    /// The data source failed.
    Source,
    /// A message could not be delivered.
    Delivery,
    /// The host's own resources failed.
    Host,
    /// The component returned an error.
    GuestError,
    /// The component trapped (a panic, an invalid instruction).
    GuestTrap,
    /// The component ran past its time limit.
    GuestTimeout,
    /// The component ran past its memory limit.
    GuestMemory,
    /// The component's report was over its size limit.
    GuestOutput,
    /// The run's journal reached its limit.
    JournalLimit,
    /// A replay's component asked for what the journal does not hold.
    ReplayDivergence,
    /// The host gave up on the window (its attempts ran out).
    Abandoned,
}

impl ErrorKind {
    /// The kind's name, as receipts write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidInput => "invalid-input",
            ErrorKind::Store => "store",
            ErrorKind::LeaseLost => "lease-lost",
            ErrorKind::Source => "source",
            ErrorKind::Delivery => "delivery",
            ErrorKind::Host => "host",
            ErrorKind::GuestError => "guest-error",
            ErrorKind::GuestTrap => "guest-trap",
            ErrorKind::GuestTimeout => "guest-timeout",
            ErrorKind::GuestMemory => "guest-memory",
            ErrorKind::GuestOutput => "guest-output",
            ErrorKind::JournalLimit => "journal-limit",
            ErrorKind::ReplayDivergence => "replay-divergence",
            ErrorKind::Abandoned => "abandoned",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
