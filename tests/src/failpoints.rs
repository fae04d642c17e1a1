//! The failpoints of the test suite's command line: stop or kill the real
//! process at a named boundary of a run, as told by `JOBHOST_TEST_FAILPOINT`.

use std::sync::atomic::{AtomicU32, Ordering};

use std::time::Duration;

use jobhost::core::clock::Clock;
use jobhost::core::failpoint::{Boundary, Failpoints};

/// What to do at the boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL: the process dies on the spot, as in a power cut or OOM kill.
    Kill,
    /// SIGSTOP: the process freezes until SIGCONT, as in a long GC pause or
    /// a suspended VM.
    Stop,
    /// SIGSTOP, and after SIGCONT the run's clock moves this far on: a
    /// pause of that long as the run's (virtual) clock sees it.
    Pause(Duration),
}

/// `<boundary>[@<n>]:<action>`, the action `kill`, `stop` or
/// `pause=<seconds>`.
#[derive(Debug)]
pub struct EnvFailpoints {
    at: Boundary,
    nth: u32,
    action: Action,
    seen: AtomicU32,
}

impl EnvFailpoints {
    /// The failpoint named by `JOBHOST_TEST_FAILPOINT`, if any.
    ///
    /// # Errors
    ///
    /// A malformed value.
    pub fn from_env() -> Result<Option<EnvFailpoints>, String> {
        match std::env::var("JOBHOST_TEST_FAILPOINT") {
            Ok(v) if !v.is_empty() => Self::parse(&v).map(Some),
            _ => Ok(None),
        }
    }

    /// Parses `<boundary>[@<n>]:kill|stop|pause=<seconds>`.
    ///
    /// # Errors
    ///
    /// A malformed value.
    pub fn parse(v: &str) -> Result<EnvFailpoints, String> {
        let bad = || {
            format!(
                "invalid JOBHOST_TEST_FAILPOINT `{v}`: use <boundary>[@<n>]:kill|stop|pause=<seconds>"
            )
        };
        let (point, action) = v.split_once(':').ok_or_else(bad)?;
        let (name, nth) = match point.split_once('@') {
            Some((name, n)) => (name, n.parse().map_err(|_| bad())?),
            None => (point, 1),
        };
        Ok(EnvFailpoints {
            at: Boundary::parse(name).ok_or_else(bad)?,
            nth,
            action: match action.split_once('=') {
                None if action == "kill" => Action::Kill,
                None if action == "stop" => Action::Stop,
                Some(("pause", secs)) => {
                    Action::Pause(Duration::from_secs(secs.parse().map_err(|_| bad())?))
                }
                _ => return Err(bad()),
            },
            seen: AtomicU32::new(0),
        })
    }
}

impl EnvFailpoints {
    /// The action to take at `at`, when this is the time.
    fn due(&self, at: Boundary) -> Option<Action> {
        (at == self.at && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.nth)
            .then_some(self.action)
    }
}

fn signal_self(action: Action) {
    let signal = match action {
        Action::Kill => libc::SIGKILL,
        Action::Stop | Action::Pause(_) => libc::SIGSTOP,
    };
    // SAFETY: signalling our own process; no memory is involved.
    unsafe {
        libc::kill(libc::getpid(), signal);
    }
}

impl Failpoints for EnvFailpoints {
    fn reached(&self, at: Boundary) {
        if let Some(action) = self.due(at) {
            signal_self(action);
        }
    }

    fn reached_on(&self, at: Boundary, clock: &dyn Clock) {
        if let Some(action) = self.due(at) {
            signal_self(action);
            if let Action::Pause(d) = action {
                clock.sleep(d);
            }
        }
    }
}
