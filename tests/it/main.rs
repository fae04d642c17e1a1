//! End-to-end tests of the `jobhost` binary: every test drives a real
//! process with an injected clock and inspects its receipt, its exit code,
//! its stderr and the store it leaves behind.

mod alerts;
mod bad_input;
mod browser;
mod compile;
mod compile_cache;
mod counts;
mod crashes;
mod daemon;
mod dashboard;
mod default_store;
mod deploy;
mod digest;
mod docs;
mod durable_store;
mod effects;
mod harness;
mod history;
mod holes;
mod hostile;
mod journal;
mod naive_times;
mod operate;
mod pause_trials;
mod pg_source;
mod pings;
mod plan;
mod postgres;
mod python;
mod races;
mod read_only;
mod receipt_level;
mod reference_report;
mod replay;
mod resume;
mod run_for;
mod sandbox;
mod scaffold;
mod seed_scenarios;
mod status;
mod store_contract;
mod store_faults;
mod token_file;
mod windows;
mod zones;
