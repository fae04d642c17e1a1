//! Why a run did not produce a report: [`Error`] and its [`ErrorKind`],
//! which map onto the WIT `run-error` variants.

#![forbid(unsafe_code)]

use std::fmt;

use crate::bindings::RunError;
use crate::bindings::jobhost::report::{outbox, source};

/// Which WIT `run-error` an [`Error`] becomes when it ends the run, and so
/// whether the host will try the window again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// WIT `invalid-data`: the window's data cannot be reported on (a value
    /// out of range, a column of the wrong type). Permanent: retrying will
    /// not help until the data changes, and the host marks the receipt
    /// `retryable: false`.
    InvalidData,
    /// WIT `source-failed`: reading the data source failed (the host's
    /// source error, or a malformed batch). The host may run it again.
    SourceFailed,
    /// WIT `other`: any other failure (a bad parameter, a message that
    /// could not be staged). The host may run it again.
    Other,
    /// A mistake in the report's code or its query, which no retry mends:
    /// a column the batch does not have, a column asked for as another
    /// kind than it holds. Returned like any error, so a report may handle
    /// it (an optional column, say); when `run` returns it, the SDK's
    /// export glue stops the run with a panic carrying the message (a
    /// trap), which the host fails for good, `retryable: false`.
    Programming,
}

impl ErrorKind {
    /// The WIT case's name: `invalid-data`, `source-failed` or `other`;
    /// `programming` for the kind that ends the run as a trap instead.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::InvalidData => "invalid-data",
            ErrorKind::SourceFailed => "source-failed",
            ErrorKind::Other => "other",
            ErrorKind::Programming => "programming",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why [`send`](crate::send) staged nothing: the WIT `send-error`, as a
/// plain value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SendError {
    /// The destination is not declared in the job's configuration (the
    /// payload is the name given, cut by the host when it is long).
    UnknownDestination(String),
    /// The body is over the per-message limit, or would take the run's
    /// staged total over its limit; the payload is that limit in bytes.
    TooLarge(u64),
    /// The run has already staged the maximum number of messages, given.
    TooManyMessages(u32),
    /// The content type is empty, too long or not `type/subtype`; the
    /// payload is the content type given (cut by the host when long).
    InvalidContentType(String),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::UnknownDestination(name) => write!(f, "unknown destination `{name}`"),
            SendError::TooLarge(limit) => write!(f, "body is larger than {limit} bytes"),
            SendError::TooManyMessages(max) => {
                write!(f, "the run already staged the maximum of {max} messages")
            }
            SendError::InvalidContentType(t) => write!(f, "invalid content type `{t}`"),
        }
    }
}

impl From<outbox::SendError> for SendError {
    fn from(e: outbox::SendError) -> Self {
        match e {
            outbox::SendError::UnknownDestination(name) => SendError::UnknownDestination(name),
            outbox::SendError::TooLarge(limit) => SendError::TooLarge(limit),
            outbox::SendError::TooManyMessages(max) => SendError::TooManyMessages(max),
            outbox::SendError::InvalidContentType(t) => SendError::InvalidContentType(t),
        }
    }
}

/// A failure, for the person reading the run's receipt: a kind (which WIT
/// `run-error` it becomes) and a message.
///
/// Return it from [`Report::run`](crate::Report::run) to fail the run; the
/// host records the message. Errors the SDK makes name what went wrong
/// (the column, and the row where it can).
///
/// ```
/// use jobhost_sdk::{Error, ErrorKind};
///
/// let e = Error::invalid_data("column `amount` at row 7: amount NaN is not a finite number");
/// assert_eq!(e.kind(), ErrorKind::InvalidData);
/// assert!(!e.retryable());
/// assert_eq!(e.to_string(), "column `amount` at row 7: amount NaN is not a finite number");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    send: Option<SendError>,
}

impl Error {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            send: None,
        }
    }

    /// The window's data cannot be reported on: WIT `invalid-data`, which
    /// the host does not retry.
    pub fn invalid_data(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::InvalidData, message)
    }

    /// Reading the source failed: WIT `source-failed`.
    pub fn source_failed(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::SourceFailed, message)
    }

    /// Any other failure: WIT `other`.
    pub fn other(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Other, message)
    }

    /// A mistake in the report's code or query (see
    /// [`ErrorKind::Programming`]): the run stops for good.
    pub fn programming(message: impl Into<String>) -> Self {
        Error::new(ErrorKind::Programming, message)
    }

    /// Which WIT `run-error` this becomes.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// What went wrong, as the receipt will say it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether running the window again could help: `false` for
    /// [`ErrorKind::InvalidData`] and [`ErrorKind::Programming`], as the
    /// host decides.
    pub fn retryable(&self) -> bool {
        !matches!(self.kind, ErrorKind::InvalidData | ErrorKind::Programming)
    }

    /// The WIT `send-error` behind this error, when it came from
    /// [`send`](crate::send).
    pub fn send_error(&self) -> Option<&SendError> {
        self.send.as_ref()
    }

    /// The same error with `what` put in front of its message
    /// (`"<what>: <message>"`), keeping its kind.
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }

    /// The error for a failed `send`; its message is the send error's.
    pub(crate) fn from_send(e: outbox::SendError) -> Self {
        let send = SendError::from(e);
        Error {
            kind: ErrorKind::Other,
            message: send.to_string(),
            send: Some(send),
        }
    }

    /// The error for a WIT `source-error`: always `source-failed`.
    pub(crate) fn from_source(e: source::SourceError) -> Self {
        use source::SourceError as S;
        Error::source_failed(match e {
            S::NotConfigured => "the job declares no data source".to_owned(),
            S::QueryFailed(m) => format!("query failed: {m}"),
            S::TypeMismatch(m) => format!("type mismatch: {m}"),
            S::InvalidState(m) => format!("invalid state: {m}"),
            S::Other(m) => m,
        })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// The WIT `run-error` of an error. A [`ErrorKind::Programming`] error has
/// none of its own and becomes `other`; the export glue never returns one
/// (it panics with the message instead).
impl From<Error> for RunError {
    fn from(e: Error) -> Self {
        match e.kind {
            ErrorKind::InvalidData => RunError::InvalidData(e.message),
            ErrorKind::SourceFailed => RunError::SourceFailed(e.message),
            ErrorKind::Other | ErrorKind::Programming => RunError::Other(e.message),
        }
    }
}
