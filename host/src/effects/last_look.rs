//! The last look before a send: whether the lease the store last confirmed
//! may have run out since, judged on the run's monotonic clock (which
//! counts while the process is stopped or the machine suspended) just
//! before a request's first byte is written. A store round trip can say a
//! claim is ours, but a process paused after hearing so (or while waiting
//! for the answer) may wake up past its lease; this look, a few
//! microseconds of the process's own code before the write, is what stops
//! it sending then. For HTTP it is taken inside the connection
//! ([`LookConnector`]): after connecting (and any TLS handshake), before
//! each write of the request (ureq writes its head and its body apart, and
//! a pause can fall between them: the rest is then cut short, and the
//! destination holds a request that never ended).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::SignedDuration;
use ureq::unversioned::transport::{Buffers, ConnectionDetails, Connector, NextTimeout, Transport};

use crate::core::clock::Clock;

/// What is kept back from a confirmed lease: a tenth of it, at least 1 s
/// (SQLite keeps lease times in whole seconds, and clocks may tick at
/// slightly different rates), but never more than half of it.
pub fn margin(lease: Duration) -> Duration {
    (lease / 10).max(Duration::from_secs(1)).min(lease / 2)
}

/// When the store last confirmed the claim, on the run's monotonic clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Confirmed {
    /// The reading taken before the request to the store went out, so that
    /// the store's latency counts against the lease, never for it.
    pub asked_at: Duration,
    /// How much of the lease the store said was left (the whole lease
    /// after a renewal).
    pub left: Duration,
}

impl Confirmed {
    /// A check that found `left` of the lease (negative once it ran out),
    /// asked at `asked_at`.
    pub fn checked(asked_at: Duration, left: SignedDuration) -> Confirmed {
        Confirmed {
            asked_at,
            left: Duration::try_from(left).unwrap_or(Duration::ZERO),
        }
    }

    /// The reading after which no send may start: `margin` before the
    /// lease may have run out. `None`: none may start at all.
    pub fn send_by(&self, margin: Duration) -> Option<Duration> {
        let budget = self.left.checked_sub(margin)?;
        Some(self.asked_at.saturating_add(budget))
    }
}

/// The look itself: a deadline and the clock it is read on, cheap to clone
/// and free of borrows, so that a connection can take it with it.
#[derive(Clone)]
pub struct LastLook {
    send_by: Option<Duration>,
    now: Arc<dyn Fn() -> Duration + Send + Sync>,
}

impl std::fmt::Debug for LastLook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LastLook")
            .field("send_by", &self.send_by)
            .finish_non_exhaustive()
    }
}

impl LastLook {
    /// The look for a send under `confirmed`, keeping `margin` back, read
    /// on `clock`.
    pub fn new(confirmed: Confirmed, margin: Duration, clock: &dyn Clock) -> LastLook {
        LastLook {
            send_by: confirmed.send_by(margin),
            now: clock.monotonic_source(),
        }
    }

    /// Whether a send may start now.
    pub fn allows(&self) -> bool {
        self.send_by.is_some_and(|by| (self.now)() < by)
    }
}

/// Why a send was withheld at the last look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("withheld before writing: the lease may have run out since the store last confirmed it")]
pub struct Withheld;

/// Why a request was cut short after its first bytes went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "cut short: the lease may have run out while the request was being written (the process \
     was paused), so the rest of it was not sent"
)]
pub struct CutShort;

/// A connector, last in ureq's chain, whose connections take the
/// [`LastLook`] set for the next send before their first write. The look
/// is set by the one sender that owns the agent, before each request.
#[derive(Debug, Clone, Default)]
pub struct LookConnector {
    next: Arc<Mutex<Option<LastLook>>>,
}

impl LookConnector {
    /// Sets the look the next connection takes (`None`: no look).
    pub fn set(&self, look: Option<LastLook>) {
        *self
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = look;
    }
}

impl Connector<Box<dyn Transport>> for LookConnector {
    type Out = LookTransport;

    fn connect(
        &self,
        _: &ConnectionDetails,
        chained: Option<Box<dyn Transport>>,
    ) -> Result<Option<LookTransport>, ureq::Error> {
        let look = self
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        Ok(chained.map(|inner| LookTransport {
            inner,
            look,
            wrote: false,
        }))
    }
}

/// A connection that takes its look before each write.
#[derive(Debug)]
pub struct LookTransport {
    inner: Box<dyn Transport>,
    look: Option<LastLook>,
    /// Whether any of the request went out.
    wrote: bool,
}

impl Transport for LookTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        self.inner.buffers()
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        if self.look.as_ref().is_some_and(|l| !l.allows()) {
            return Err(ureq::Error::Other(if self.wrote {
                Box::new(CutShort)
            } else {
                Box::new(Withheld)
            }));
        }
        self.wrote = true;
        self.inner.transmit_output(amount, timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        self.inner.await_input(timeout)
    }

    fn is_open(&mut self) -> bool {
        self.inner.is_open()
    }

    fn is_tls(&self) -> bool {
        self.inner.is_tls()
    }
}

/// Whether a ureq error is a send withheld at the last look.
pub fn withheld(e: &ureq::Error) -> bool {
    matches!(e, ureq::Error::Other(inner) if inner.is::<Withheld>())
}

/// Whether a ureq error is a request cut short at a later look.
pub fn cut_short(e: &ureq::Error) -> bool {
    matches!(e, ureq::Error::Other(inner) if inner.is::<CutShort>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::VirtualClock;

    fn clock() -> VirtualClock {
        VirtualClock::new("2026-11-09T00:05:00Z".parse().unwrap())
    }

    #[test]
    fn the_margin_is_a_tenth_of_the_lease_at_least_a_second_at_most_half() {
        assert_eq!(margin(Duration::from_secs(600)), Duration::from_secs(60));
        assert_eq!(margin(Duration::from_secs(3)), Duration::from_secs(1));
        assert_eq!(margin(Duration::from_secs(2)), Duration::from_secs(1));
        assert_eq!(margin(Duration::from_secs(1)), Duration::from_millis(500));
    }

    #[test]
    fn a_send_may_start_until_the_margin_before_the_confirmed_lease_runs_out() {
        let clock = clock();
        let lease = Duration::from_secs(10);
        let asked = clock.monotonic();
        // The store took 2 s to answer: that counts against the lease.
        clock.sleep(Duration::from_secs(2));
        let look = LastLook::new(
            Confirmed {
                asked_at: asked,
                left: lease,
            },
            margin(lease),
            &clock,
        );
        assert!(look.allows());
        clock.sleep(Duration::from_millis(6_999));
        assert!(look.allows(), "8.999 s after asking, 1 s margin");
        clock.sleep(Duration::from_millis(1));
        assert!(!look.allows(), "9 s after asking: the lease may run out");
    }

    #[test]
    fn a_check_that_found_little_or_nothing_left_allows_no_send() {
        let clock = clock();
        let asked = clock.monotonic();
        let little = Confirmed::checked(asked, SignedDuration::from_millis(900));
        assert!(!LastLook::new(little, Duration::from_secs(1), &clock).allows());
        let ran_out = Confirmed::checked(asked, SignedDuration::from_secs(-5));
        assert_eq!(ran_out.left, Duration::ZERO);
        assert!(!LastLook::new(ran_out, Duration::ZERO, &clock).allows());
    }

    /// A connection that takes whatever it is given.
    #[derive(Debug)]
    struct Open {
        buffers: ureq::unversioned::transport::LazyBuffers,
    }

    impl Transport for Open {
        fn buffers(&mut self) -> &mut dyn Buffers {
            &mut self.buffers
        }

        fn transmit_output(&mut self, _: usize, _: NextTimeout) -> Result<(), ureq::Error> {
            Ok(())
        }

        fn await_input(&mut self, _: NextTimeout) -> Result<bool, ureq::Error> {
            Ok(false)
        }

        fn is_open(&mut self) -> bool {
            true
        }
    }

    /// A connection behind the look.
    fn connection(look: LastLook) -> LookTransport {
        LookTransport {
            inner: Box::new(Open {
                buffers: ureq::unversioned::transport::LazyBuffers::new(64, 64),
            }),
            look: Some(look),
            wrote: false,
        }
    }

    #[test]
    fn a_connection_writes_nothing_once_the_lease_may_have_run_out() {
        let clock = clock();
        let confirmed = Confirmed {
            asked_at: clock.monotonic(),
            left: Duration::from_secs(10),
        };
        let look = LastLook::new(confirmed, Duration::from_secs(1), &clock);
        // Paused before the first byte: withheld, nothing written.
        clock.sleep(Duration::from_secs(9));
        let mut late = connection(look.clone());
        let err = late
            .transmit_output(10, NextTimeout::default())
            .unwrap_err();
        assert!(withheld(&err), "{err}");
        // Paused between the head and the body: the body is cut short.
        let clock = self::clock();
        let look = LastLook::new(
            Confirmed {
                asked_at: clock.monotonic(),
                left: Duration::from_secs(10),
            },
            Duration::from_secs(1),
            &clock,
        );
        let mut paused = connection(look);
        paused.transmit_output(10, NextTimeout::default()).unwrap();
        clock.sleep(Duration::from_secs(9));
        let err = paused
            .transmit_output(10, NextTimeout::default())
            .unwrap_err();
        assert!(cut_short(&err), "{err}");
    }

    #[test]
    fn a_withheld_send_is_told_apart_from_other_errors() {
        assert!(withheld(&ureq::Error::Other(Box::new(Withheld))));
        assert!(!withheld(&ureq::Error::ConnectionFailed));
        assert!(cut_short(&ureq::Error::Other(Box::new(CutShort))));
        assert!(!withheld(&ureq::Error::Other(Box::new(CutShort))));
    }
}
