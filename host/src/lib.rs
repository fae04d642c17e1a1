//! jobhost runs a report job exactly once per time window. A native host
//! owns the clock, the durable claim store, the data source and delivery;
//! the report logic runs as a sandboxed WebAssembly component that sees only
//! what the host hands it through the `jobhost:report` WIT world.
//!
//! The modules are layers, each importing only those before it:
//! `core` (errors, clock, windows, schedule, env, redaction, text), `store`
//! (the claim protocol and its ledger), `guest` (the sandbox), `effects`
//! (destinations, delivery, pings, digests), `run` (a run in phases, the
//! daemon, plan, status, replay) and `app` (the config file and the command
//! line). ARCHITECTURE.md at the repository's root is the map.

pub mod app;
pub mod core;
pub mod effects;
pub mod guest;
pub mod run;
pub mod store;

pub use crate::core::error::{Error, Result};
