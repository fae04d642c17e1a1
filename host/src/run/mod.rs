//! The `run` layer: one run of one job as its phases (`phases`), what a run
//! is given (`job::Job`, [`Runtime`]) and what it gives back (`receipt`),
//! and the commands built on runs and the store: the scheduling `daemon`,
//! `plan`, `status` and `replay`. It may import `core`, `store`, `guest`
//! and `effects`; nothing here knows the config file or the command line
//! (see ARCHITECTURE.md).

mod answer;
pub mod board;
pub mod check;
pub mod daemon;
mod finish;
pub mod job;
pub mod liveness;
pub mod needs;
pub mod notices;
mod open;
pub mod operate;
pub mod outputs;
pub mod phases;
pub mod plan;
pub mod reads;
pub mod receipt;
pub mod replay;
pub mod status;
pub mod verbs;
pub mod verify;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use jiff::Timestamp;

use crate::core::clock::{Clock, FixedClock, SystemClock, VirtualClock};
use crate::core::failpoint::Failpoints;
use crate::effects::digest::Wanted;
use crate::guest::sandbox::Sandbox;
pub use finish::make_deferred_digest;
pub use job::Job;
pub use open::{refuse_ephemeral_store, say_local_destinations, store_created};
pub use phases::{Asked, Preclaimed, run, run_asked, run_claimed, run_for, run_window};
use receipt::Receipt;

/// A finished invocation: the receipt to print and the exit code.
#[derive(Debug)]
pub struct Outcome {
    /// The receipt.
    pub receipt: Receipt,
    /// 0 ran/resumed/skipped, 1 failed or abandoned, 2 bad input.
    pub exit_code: i32,
    /// The digest still to make, when the runtime defers digests (see
    /// [`make_deferred_digest`]).
    pub digest: Option<DeferredDigest>,
}

impl Outcome {
    /// The outcome of an invocation refused before it got to run: `error`
    /// in a receipt of its own.
    pub fn refused(error: &crate::Error) -> Outcome {
        let mut receipt = Receipt::new(receipt::Event::Failed);
        receipt.fail(error.kind(), error.chain(), None);
        Outcome {
            receipt,
            exit_code: error.exit_code(),
            digest: None,
        }
    }
}

/// A DONE run's digest, left for later so that a slow model holds up no
/// other run.
#[derive(Debug, Clone)]
pub struct DeferredDigest {
    /// The run.
    pub wanted: Wanted,
    /// The run's clock reading.
    pub at: Timestamp,
}

/// What a run takes from its surroundings besides its job: the instant it
/// runs at and the test hooks. The default is what the `jobhost` binary
/// uses for a plain `jobhost run`: the system clock and no failpoints.
#[derive(Debug, Default, Clone)]
pub struct Runtime {
    /// A fixed clock reading (`--now`, or the daemon's clock when it starts
    /// a run); `None`: the system clock.
    pub now: Option<Timestamp>,
    /// Waits advance the clock instead of sleeping (tests).
    pub virtual_time: bool,
    /// Stops at named boundaries (tests).
    pub failpoints: Option<Arc<dyn Failpoints>>,
    /// Set when the process is asked to stop (the daemon's signal
    /// handler): a delivery waiting to send again lets its claim go instead.
    pub stop: Option<&'static AtomicBool>,
    /// Leave a DONE run's digest in the outcome instead of making it (the
    /// daemon makes digests beside its runs).
    pub defer_digests: bool,
    /// The compile cache's racy window, when not its default (tests: a
    /// component file written just now is remembered without waiting for
    /// it to age).
    pub racy_window: Option<std::time::Duration>,
    /// The engine and linker every run made with this runtime shares (see
    /// [`Runtime::sharing_sandbox`]: the daemon and `backfill`, which run
    /// many windows); `None`: each run builds its own, as a one-shot
    /// `jobhost run` does for its one run (and only once it knows the
    /// window needs its component).
    pub sandbox: Option<Arc<Sandbox>>,
    /// How long a run of a window whose upstream windows are not all DONE
    /// waits for them (`run --wait`), looking again every second, before
    /// it answers `waiting`; `None`: it answers at once.
    pub wait_for_needs: Option<std::time::Duration>,
}

impl Runtime {
    /// This runtime, reading `now` as its fixed instant.
    pub fn at(&self, now: Option<Timestamp>) -> Runtime {
        Runtime {
            now,
            ..self.clone()
        }
    }

    /// This runtime with a sandbox every run made with it shares: its own
    /// if it has one, else one built now.
    ///
    /// # Errors
    ///
    /// `Error::Host` if wasmtime cannot be configured on this machine;
    /// `Error::Input` for a bad `JOBHOST_COMPILER`.
    pub fn sharing_sandbox(&self) -> crate::core::error::Result<Runtime> {
        let sandbox = match &self.sandbox {
            Some(s) => s.clone(),
            None => Arc::new(Sandbox::new()?),
        };
        Ok(Runtime {
            sandbox: Some(sandbox),
            ..self.clone()
        })
    }

    /// The sandbox a run uses: the shared one, else one of its own.
    ///
    /// # Errors
    ///
    /// As [`Sandbox::new`].
    pub fn sandbox(&self) -> crate::core::error::Result<Arc<Sandbox>> {
        match &self.sandbox {
            Some(s) => Ok(s.clone()),
            None => Ok(Arc::new(Sandbox::new()?)),
        }
    }

    /// The clock an invocation reads: a fixed one at `now`, the system's
    /// without one, a virtual one (starting at `now`) with virtual time.
    pub fn clock(&self) -> Box<dyn Clock> {
        match (self.now, self.virtual_time) {
            (start, true) => Box::new(VirtualClock::new(start.unwrap_or_else(Timestamp::now))),
            (Some(t), false) => Box::new(FixedClock(t)),
            (None, false) => Box::new(SystemClock),
        }
    }
}

/// `<host>:<pid>:<start nanos>`: unique per process, readable in `history`.
pub fn owner_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!("{host}:{}:{nanos:08x}", std::process::id())
}
