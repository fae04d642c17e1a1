//! The `jobhost` command line, built inside the test package so that its
//! integration tests can spawn it as a real process. Unlike the `jobhost`
//! binary, it reads test-only switches from its environment:
//!
//! - `JOBHOST_TEST_VIRTUAL_TIME=1`: waits (delivery backoff) advance the
//!   run's clock instead of sleeping.
//! - `JOBHOST_TEST_FAILPOINT=<boundary>[@<n>]:<action>`: at the `n`th time
//!   (default the first) the run reaches `<boundary>` (`after-claim`,
//!   `in-guest`, `after-prepare`, `before-send`, `in-send`, `after-send`),
//!   `kill` sends the process SIGKILL and `stop` sends it SIGSTOP;
//!   `pause=<seconds>` sends it SIGSTOP and, once it goes on, moves the
//!   run's clock that far on (delivery's boundaries; elsewhere as `stop`).
//! - `JOBHOST_TEST_PEAK_FILE=<path>`: when the command returns, its peak
//!   resident set (`VmHWM`, in KiB) is written to `<path>`. This is the
//!   process's own: the peak the kernel reports to a parent (`ru_maxrss`)
//!   is at least the parent's own peak when it spawned the child, because
//!   it is carried over from the memory the child had before `exec`, so a
//!   large test process would hide a small child.
//! - `JOBHOST_TEST_RACY_WINDOW_MS=<ms>`: the compile cache's racy window
//!   (default 2000): a component file changed within it has its digest
//!   computed on every run rather than remembered. A test sets 0 to have a
//!   file it just wrote remembered without waiting for it to age.

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
    let racy_window = match std::env::var("JOBHOST_TEST_RACY_WINDOW_MS") {
        Ok(ms) => match ms.parse() {
            Ok(ms) => Some(std::time::Duration::from_millis(ms)),
            Err(_) => {
                eprintln!(
                    "jobhost-under-test: JOBHOST_TEST_RACY_WINDOW_MS={ms:?} is not a number of milliseconds"
                );
                std::process::exit(2);
            }
        },
        Err(_) => None,
    };
    let runtime = Runtime {
        racy_window,
        virtual_time: std::env::var_os("JOBHOST_TEST_VIRTUAL_TIME").is_some_and(|v| v == "1"),
        failpoints: failpoints.map(|f| Arc::new(f) as Arc<_>),
        ..Runtime::default()
    };
    let code = jobhost::app::cli::main_with(&runtime);
    if let Some(path) = std::env::var_os("JOBHOST_TEST_PEAK_FILE") {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let peak = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .map(|v| v.trim().trim_end_matches("kB").trim().to_string())
            .unwrap_or_default();
        if let Err(e) = std::fs::write(&path, peak) {
            eprintln!("jobhost-under-test: cannot write the peak to JOBHOST_TEST_PEAK_FILE: {e}");
        }
    }
    std::process::exit(code);
}
