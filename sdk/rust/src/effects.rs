//! The run's effects: staging messages with [`send`], and diagnostics
//! through [`log`].

#![forbid(unsafe_code)]

use crate::Error;
use crate::bindings::jobhost::report::outbox;

/// Stages `body` for the destination called `destination`, to be sent with
/// the MIME `content_type` (for example `application/json`) once the run
/// has been committed. Returns the message's sequence number within the
/// run, from 1; its idempotency key is `<window key>#<sequence number>`.
///
/// Nothing is staged when it fails: the error (kind
/// [`Other`](crate::ErrorKind::Other)) says which WIT `send-error` it was,
/// in its message and as [`Error::send_error`].
pub fn send(destination: &str, body: impl AsRef<[u8]>, content_type: &str) -> Result<u32, Error> {
    outbox::send(destination, body.as_ref(), content_type).map_err(Error::from_send)
}

/// Diagnostics, shown on the host's standard error with the job's name and
/// the level. A message never fails the run: past the job's log size limit
/// the host drops it (and says how many it dropped).
pub mod log {
    use crate::bindings::jobhost::report::log::{Level, emit};

    /// Fine-grained tracing.
    pub fn trace(message: impl AsRef<str>) {
        emit(Level::Trace, message.as_ref());
    }

    /// Details useful when debugging.
    pub fn debug(message: impl AsRef<str>) {
        emit(Level::Debug, message.as_ref());
    }

    /// Normal progress.
    pub fn info(message: impl AsRef<str>) {
        emit(Level::Info, message.as_ref());
    }

    /// Something unexpected that does not stop the run.
    pub fn warn(message: impl AsRef<str>) {
        emit(Level::Warn, message.as_ref());
    }

    /// A failure.
    pub fn error(message: impl AsRef<str>) {
        emit(Level::Error, message.as_ref());
    }
}
