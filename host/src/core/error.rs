//! The library's one error type. Callers branch on the variant: `Input` is a
//! mistake in what the user supplied (exit 2, nothing was claimed), the rest
//! are failures of a run or of the host's own resources (exit 1). Messages
//! are complete sentences fragments in the house style: lowercase, quoting the
//! culprit, and naming the fix where there is one.

use std::fmt;

/// Anything that can go wrong in the jobhost library. The variant is the
/// class of failure (it decides the exit code and the receipt's
/// `error.kind`); its [`Message`] is what went wrong, with the lower-level
/// error that caused it when there is one.
///
/// `{}` shows the message; `{:#}` shows it with its causes, each after a
/// `: `, as every place that tells a person (stderr, a receipt, a log
/// line, the store's error column) writes it. [`source`] gives the causes
/// as values, for code that branches on them.
///
/// [`source`]: std::error::Error::source
#[derive(Debug)]
pub enum Error {
    /// The user's flags, config, component or store path are wrong. Nothing
    /// was claimed; fixing the input and running again is safe.
    Input(Message),
    /// The claim store could not be read or written.
    Store(Message),
    /// Another process took over this run (its lease expired); this process
    /// must stop without writing or delivering anything.
    LeaseLost(Message),
    /// The data source failed while running its query.
    Source(Message),
    /// Delivering a staged message failed.
    Delivery(Message),
    /// Anything else on the host side (I/O on the host's own files).
    Host(Message),
}

/// An error's own text, and the error underneath it.
#[derive(Debug)]
pub struct Message {
    text: String,
    cause: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Message {
    /// The text, without its causes.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl From<String> for Message {
    fn from(text: String) -> Message {
        Message { text, cause: None }
    }
}

impl From<&str> for Message {
    fn from(text: &str) -> Message {
        Message::from(text.to_string())
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message().text)?;
        if f.alternate() {
            let mut next = std::error::Error::source(self);
            while let Some(cause) = next {
                write!(f, ": {cause}")?;
                next = cause.source();
            }
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.message()
            .cause
            .as_deref()
            .map(|c| c as &(dyn std::error::Error + 'static))
    }
}

impl Error {
    /// A bad-input error, built from anything displayable.
    pub fn input(msg: impl fmt::Display) -> Error {
        Error::Input(msg.to_string().into())
    }

    /// A host error, built from anything displayable.
    pub fn host(msg: impl fmt::Display) -> Error {
        Error::Host(msg.to_string().into())
    }

    /// A store error with context: ``context: cause``.
    pub fn store(context: impl fmt::Display, cause: impl fmt::Display) -> Error {
        Error::Store(format!("{context}: {cause}").into())
    }

    /// The same error, caused by `cause` (kept as its [`source`]).
    ///
    /// [`source`]: std::error::Error::source
    #[must_use]
    pub fn because(mut self, cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Error {
        self.message_mut().cause = Some(cause.into());
        self
    }

    /// The same error, its message preceded by `context` (`job `x`: ...`),
    /// its class and cause kept.
    #[must_use]
    pub fn within(mut self, context: impl fmt::Display) -> Error {
        let m = self.message_mut();
        m.text = format!("{context}: {}", m.text);
        self
    }

    /// What went wrong, without the class.
    pub fn message(&self) -> &Message {
        match self {
            Error::Input(m)
            | Error::Store(m)
            | Error::LeaseLost(m)
            | Error::Source(m)
            | Error::Delivery(m)
            | Error::Host(m) => m,
        }
    }

    fn message_mut(&mut self) -> &mut Message {
        match self {
            Error::Input(m)
            | Error::Store(m)
            | Error::LeaseLost(m)
            | Error::Source(m)
            | Error::Delivery(m)
            | Error::Host(m) => m,
        }
    }

    /// The error and its causes in one line, as `{:#}` writes it.
    pub fn chain(&self) -> String {
        format!("{self:#}")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alternate_form_keeps_every_cause_and_source_gives_them_as_values() {
        let io = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "pipe closed");
        let e = Error::host("cannot write to standard output").because(io);
        assert_eq!(e.to_string(), "cannot write to standard output");
        assert_eq!(
            format!("{e:#}"),
            "cannot write to standard output: pipe closed"
        );
        assert_eq!(e.chain(), format!("{e:#}"));
        let io = std::error::Error::source(&e)
            .and_then(|c| c.downcast_ref::<std::io::Error>())
            .expect("the cause, as a value");
        assert_eq!(io.kind(), std::io::ErrorKind::BrokenPipe);
        // An error without a cause reads the same either way.
        let plain = Error::input("bad flag");
        assert_eq!(format!("{plain:#}"), "bad flag");
        assert_eq!(plain.exit_code(), 2);
    }

    #[test]
    fn causes_nest_in_order() {
        let inner = Error::store("store `s.db`", "disk full");
        let outer = Error::host("cannot finish the run").because(inner);
        assert_eq!(
            outer.chain(),
            "cannot finish the run: store `s.db`: disk full"
        );
    }

    #[test]
    fn context_keeps_the_class_and_the_cause() {
        let io = std::io::Error::other("no such file");
        let e = Error::input("cannot read `r.wasm`")
            .because(io)
            .within("job `sales`");
        assert_eq!(e.exit_code(), 2);
        assert_eq!(e.chain(), "job `sales`: cannot read `r.wasm`: no such file");
    }
}
