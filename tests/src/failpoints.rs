//! The failpoints of the test suite's command line: stop or kill the real
//! process at a named boundary of a run, as told by `JOBHOST_TEST_FAILPOINT`.

use std::sync::atomic::{AtomicU32, Ordering};

use jobhost::core::failpoint::{Boundary, Failpoints};

/// What to do at the boundary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// SIGKILL: the process dies on the spot, as in a power cut or OOM kill.
    Kill,
    /// SIGSTOP: the process freezes until SIGCONT, as in a long GC pause or
    /// a suspended VM.
    Stop,
}

/// `<boundary>[@<n>]:<action>`.
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

    /// Parses `<boundary>[@<n>]:<action>`.
    ///
    /// # Errors
    ///
    /// A malformed value.
    pub fn parse(v: &str) -> Result<EnvFailpoints, String> {
        let bad =
            || format!("invalid JOBHOST_TEST_FAILPOINT `{v}`: use <boundary>[@<n>]:kill|stop");
        let (point, action) = v.split_once(':').ok_or_else(bad)?;
        let (name, nth) = match point.split_once('@') {
            Some((name, n)) => (name, n.parse().map_err(|_| bad())?),
            None => (point, 1),
        };
        Ok(EnvFailpoints {
            at: Boundary::parse(name).ok_or_else(bad)?,
            nth,
            action: match action {
                "kill" => Action::Kill,
                "stop" => Action::Stop,
                _ => return Err(bad()),
            },
            seen: AtomicU32::new(0),
        })
    }
}

impl Failpoints for EnvFailpoints {
    fn reached(&self, at: Boundary) {
        if at != self.at || self.seen.fetch_add(1, Ordering::SeqCst) + 1 != self.nth {
            return;
        }
        let signal = match self.action {
            Action::Kill => libc::SIGKILL,
            Action::Stop => libc::SIGSTOP,
        };
        // SAFETY: signalling our own process; no memory is involved.
        unsafe {
            libc::kill(libc::getpid(), signal);
        }
    }
}
