//! Support for jobhost's tests, examples and benchmarks: a deterministic
//! generator of sample sales data in the shape the reference report reads.

pub mod guests;
pub mod sample;
