//! The core layer: what every other layer speaks in, and nothing of the
//! host's capabilities. Errors, the clock (and instants after it), windows
//! and their keys, when windows fall due, `${VAR}` expansion and the
//! redaction of what it filled in, how outside text is escaped and cut,
//! who this process is on its machine (and whether a recorded one still
//! runs), and the failpoints tests stop a run at. It imports nothing of the host
//! (see ARCHITECTURE.md).

pub mod clock;
pub mod command;
pub mod env;
pub mod error;
pub mod failpoint;
pub mod gate;
pub mod process;
pub mod redact;
pub mod schedule;
pub mod spool;
pub mod text;
pub mod window;
