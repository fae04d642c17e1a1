//! jobhost runs a report job exactly once per time window. A native host
//! owns the clock, the durable claim store, the data source and delivery;
//! the report logic runs as a sandboxed WebAssembly component that sees only
//! what the host hands it through the `jobhost:report` WIT world.
//!
//! The modules follow the data flow of one run (see `job`): configuration,
//! clock and window, claim store, sandbox and guest, outbox delivery, receipt.

pub mod cli;
pub mod config;
pub mod core;
pub mod daemon;
pub mod effects;
pub mod guest;
pub mod job;
pub mod plan;
pub mod receipt;
pub mod replay;
pub mod status;
pub mod store;

pub use crate::core::error::{Error, Result};
