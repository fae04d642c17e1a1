//! Support for jobhost's tests, examples and benchmarks: a deterministic
//! generator of sample sales data in the shape the reference report reads,
//! an HTTP sink that records what jobhost sends, and the failpoints of the
//! test build of the command line, a PostgreSQL schema per test, the
//! benchmarks' statistics, skips (a failure under CI when a server or
//! tool is missing), the pinned Python tools the SDK tests run, and the
//! linker script that keeps the skip path's code together.

#[cfg(test)]
mod build_link;
pub mod failpoints;
pub mod guests;
pub mod hot_text;
pub mod native;
pub mod netns;
pub mod pg;
pub mod process;
pub mod sample;
pub mod sink;
pub mod skip;
pub mod stats;
pub mod tools;
