//! The guest layer: everything about the WebAssembly component and the
//! world it sees. The sandbox (engine, limits, clocks, the one run of a
//! component), the bindings (the only `bindgen!`), the data source, the
//! outbox's staging, the journal of a run, the compile cache, and the
//! guest's log and captured output. It may import `core` and `store`'s
//! types, nothing above (see ARCHITECTURE.md).

pub mod bindings;
pub mod cache;
pub mod capture;
mod clocks;
pub mod failure;
pub mod functions;
pub mod guest_log;
pub mod journal;
pub mod limits;
pub mod outbox;
pub mod sandbox;
pub mod source;
mod state;
pub mod trust;
pub mod zone;
