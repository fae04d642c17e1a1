//! Named boundaries in a run where a test can stop or kill the process, to
//! prove that a crash between any two steps costs no second effect. The
//! `jobhost` binary installs none; the test suite's own build of the command
//! line installs an implementation that reads its instructions from the
//! environment. Nothing here changes what a run does when no failpoints are
//! installed.

use std::fmt;

/// A point in a run, in the order a run reaches them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    /// The claim is committed; the guest has not started.
    AfterClaim,
    /// The guest is running: reached on each `outbox.send`.
    InGuest,
    /// The report and its messages are committed (PREPARED).
    AfterPrepare,
    /// A message is about to be sent; the claim has not been checked yet.
    BeforeSend,
    /// The destination accepted a message; the store does not know yet.
    AfterSend,
}

impl Boundary {
    /// Every boundary, in run order.
    pub const ALL: [Boundary; 5] = [
        Boundary::AfterClaim,
        Boundary::InGuest,
        Boundary::AfterPrepare,
        Boundary::BeforeSend,
        Boundary::AfterSend,
    ];

    /// The boundary's name: `after-claim`, `in-guest`, `after-prepare`,
    /// `before-send`, `after-send`.
    pub fn name(self) -> &'static str {
        match self {
            Boundary::AfterClaim => "after-claim",
            Boundary::InGuest => "in-guest",
            Boundary::AfterPrepare => "after-prepare",
            Boundary::BeforeSend => "before-send",
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
}

impl fmt::Debug for dyn Failpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Failpoints")
    }
}
