//! The effects layer: everything a run causes outside the host, after its
//! report is committed. Destinations and their transports (a file, HTTP
//! with the one agent), the delivery loop, pings to a monitor, and digests
//! from a language model. Each takes its own settings type; it may import
//! `core`, `store` and `guest`'s types, never `run` or `app` (see
//! ARCHITECTURE.md).

pub mod delivery;
pub mod destination;
pub mod digest;
pub mod file;
mod http;
pub mod last_look;
pub mod notify;
pub mod ping;
pub mod send;
mod sent;
pub mod telemetry;
pub mod tls;
