//! The `jobhost` command line, built inside the test package so that its
//! integration tests can spawn it as a real process. Unlike the `jobhost`
//! binary, it reads two test-only switches from its environment:
//!
//! - `JOBHOST_TEST_VIRTUAL_TIME=1`: waits (delivery backoff) advance the
//!   run's clock instead of sleeping.
//! - `JOBHOST_TEST_FAILPOINT=<boundary>[@<n>]:<action>`: at the `n`th time
//!   (default the first) the run reaches `<boundary>` (`after-claim`,
//!   `in-guest`, `after-prepare`, `before-send`, `after-send`), `kill`
//!   sends the process SIGKILL and `stop` sends it SIGSTOP.

use std::sync::Arc;

use jobhost::run::Runtime;
use jobhost_tests::failpoints::EnvFailpoints;

fn main() {
    let failpoints = match EnvFailpoints::from_env() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("jobhost-under-test: {e}");
            std::process::exit(2);
        }
    };
    let runtime = Runtime {
        virtual_time: std::env::var_os("JOBHOST_TEST_VIRTUAL_TIME").is_some_and(|v| v == "1"),
        failpoints: failpoints.map(|f| Arc::new(f) as Arc<_>),
        ..Runtime::default()
    };
    std::process::exit(jobhost::app::cli::main_with(&runtime));
}
