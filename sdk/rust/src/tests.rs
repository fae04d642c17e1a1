//! Unit tests of the SDK, run natively (`cargo test -p jobhost-sdk`): the
//! bindings compile for the host's target too, and nothing here calls the
//! host.

mod batch;
mod fixture;
mod report;
mod zone;
