//! Named boundaries in a run where a test can stop or kill the process, to
//! prove that a crash between any two steps costs no second effect. The
//! `jobhost` binary installs none; the test suite's own build of the command
//! line installs an implementation that reads its instructions from the
//! environment. Nothing here changes what a run does when no failpoints are
//! installed.

use std::fmt;

use crate::core::clock::Clock;

/// A point in a run, in the order a run reaches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// The claim is committed; the guest has not started.
    AfterClaim,
    /// The guest is running: reached on each `outbox.send`.
    InGuest,
    /// The report and its messages are written to the store, inside the
    /// transaction that commits them, which is still open: a process paused
    /// here holds the window's row (PostgreSQL) or the store's write lock
    /// (SQLite).
    InPrepare,
    /// The report and its messages are committed (PREPARED).
    AfterPrepare,
    /// A message is about to be sent; the claim has not been checked yet.
    BeforeSend,
    /// The claim was checked (and renewed if need be); the message goes
    /// out next, unless the last look before its first byte finds that
    /// the lease may have run out since (see `effects::last_look`).
    InSend,
    /// The destination accepted a message; the store does not know yet.
    AfterSend,
}

impl Boundary {
    /// Every boundary, in run order.
    pub const ALL: [Boundary; 7] = [
        Boundary::AfterClaim,
        Boundary::InGuest,
        Boundary::InPrepare,
        Boundary::AfterPrepare,
        Boundary::BeforeSend,
        Boundary::InSend,
        Boundary::AfterSend,
    ];

    /// The boundary's name: `after-claim`, `in-guest`, `in-prepare`,
    /// `after-prepare`, `before-send`, `in-send`, `after-send`.
    pub fn name(self) -> &'static str {
        match self {
            Boundary::AfterClaim => "after-claim",
            Boundary::InPrepare => "in-prepare",
            Boundary::InGuest => "in-guest",
            Boundary::AfterPrepare => "after-prepare",
            Boundary::BeforeSend => "before-send",
            Boundary::InSend => "in-send",
            Boundary::AfterSend => "after-send",
        }
    }

    /// Parses a boundary's name.
    pub fn parse(name: &str) -> Option<Boundary> {
        Boundary::ALL.into_iter().find(|b| b.name() == name)
    }
}

impl fmt::Display for Boundary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Told each time a run reaches a boundary; may stop or kill the process.
pub trait Failpoints: Send + Sync {
    /// The run reached `at`.
    fn reached(&self, at: Boundary);

    /// The run reached `at` with `clock` at hand, which a failpoint may
    /// move on (a pause of that long, in virtual time).
    fn reached_on(&self, at: Boundary, clock: &dyn Clock) {
        let _ = clock;
        self.reached(at);
    }
}

impl fmt::Debug for dyn Failpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Failpoints")
    }
}
