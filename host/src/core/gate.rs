//! Caps shared by every run of this process that names the same thing: a
//! data source (`[source] max_concurrent`) or a destination
//! (`[destinations.X] max_concurrent`, `max_per_second`). One process is
//! one host, so the caps hold per host: the daemon's concurrent runs, and a
//! `backfill --parallel`'s, share them.
//!
//! A gate is named by what it guards (a source's or a destination's
//! location as messages show it, never with a password) and made on first
//! use. Each caller brings its own [`Limit`]: jobs that name the same
//! source with different caps each wait until fewer than their own cap
//! hold it, so the largest cap bounds the whole. A rate is kept by giving
//! each entry a start time one interval after the last one's (a generic
//! cell rate), so starts are spread evenly, never bunched at a second's
//! edge.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use crate::core::clock::Clock;

/// How many may hold a gate at once, and how often one may enter it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limit {
    /// At most this many at once; `None`: no cap.
    pub max_concurrent: Option<u32>,
    /// At least this long between two entries' starts (a rate of one per
    /// `spacing`); `None`: no rate.
    pub spacing: Option<Duration>,
}

impl Limit {
    /// The spacing of a rate of `per_second` entries a second.
    pub fn per_second(per_second: f64) -> Option<Duration> {
        (per_second.is_finite() && per_second > 0.0)
            .then(|| Duration::try_from_secs_f64(1.0 / per_second).ok())
            .flatten()
    }
}

/// Every gate of this process, by name.
#[derive(Debug, Default)]
pub struct Gates {
    gates: Mutex<HashMap<String, Arc<Gate>>>,
}

#[derive(Debug, Default)]
struct Gate {
    state: Mutex<State>,
    left: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// How many hold the gate now.
    held: u32,
    /// The most that ever held it at once (what a test or a metric reads).
    most: u32,
    /// On the entering clock's monotonic reading: the earliest the next
    /// entry may start, under a rate.
    next_start: Option<Duration>,
}

/// Holding a gate; dropping it lets the next one in.
#[derive(Debug)]
pub struct Permit {
    gate: Arc<Gate>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut state = self
            .gate
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        state.held = state.held.saturating_sub(1);
        drop(state);
        self.gate.left.notify_all();
    }
}

impl Gates {
    /// The gates of this process.
    pub fn shared() -> &'static Gates {
        static GATES: std::sync::LazyLock<Gates> = std::sync::LazyLock::new(Gates::default);
        &GATES
    }

    fn gate(&self, name: &str) -> Arc<Gate> {
        let mut gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
        gates.entry(name.to_string()).or_default().clone()
    }

    /// Enters the gate `name` under `limit`: waits while `limit`'s cap of
    /// holders is reached, then, under a rate, on `clock` until this
    /// entry's turn. A limit of nothing enters at once (and is counted).
    pub fn enter(&self, name: &str, limit: Limit, clock: &dyn Clock) -> Permit {
        let gate = self.gate(name);
        let mut state = gate.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(cap) = limit.max_concurrent {
            while state.held >= cap.max(1) {
                state = gate
                    .left
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
        state.held += 1;
        state.most = state.most.max(state.held);
        let wait = limit.spacing.and_then(|spacing| {
            let now = clock.monotonic();
            let start = state.next_start.map_or(now, |n| n.max(now));
            state.next_start = Some(start.saturating_add(spacing));
            start.checked_sub(now).filter(|w| !w.is_zero())
        });
        drop(state);
        // The place is held while waiting for its turn, so a cap and a rate
        // together never let more in than the cap.
        if let Some(wait) = wait {
            clock.sleep(wait);
        }
        Permit { gate }
    }

    /// The most that held the gate `name` at once so far (0 for one never
    /// entered).
    pub fn most_at_once(&self, name: &str) -> u32 {
        let gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
        gates.get(name).map_or(0, |g| {
            g.state.lock().unwrap_or_else(PoisonError::into_inner).most
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::clock::VirtualClock;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn a_cap_holds_across_threads_and_every_caller_gets_in() {
        let gates = Gates::default();
        let clock = VirtualClock::new(jiff::Timestamp::UNIX_EPOCH);
        let (inside, most, done) = (AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0));
        let limit = Limit {
            max_concurrent: Some(3),
            spacing: None,
        };
        std::thread::scope(|s| {
            for _ in 0..12 {
                s.spawn(|| {
                    let _p = gates.enter("db", limit, &clock);
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(5));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        assert_eq!(done.load(Ordering::SeqCst), 12);
        assert!(most.load(Ordering::SeqCst) <= 3);
        assert!(gates.most_at_once("db") <= 3);
        assert!(gates.most_at_once("db") >= 1);
        // Another name is another gate.
        assert_eq!(gates.most_at_once("other"), 0);
    }

    #[test]
    fn a_rate_spaces_entries_evenly_on_the_callers_clock() {
        let gates = Gates::default();
        let clock = VirtualClock::new(jiff::Timestamp::UNIX_EPOCH);
        let limit = Limit {
            max_concurrent: None,
            spacing: Limit::per_second(4.0),
        };
        let start = clock.monotonic();
        let mut at = Vec::new();
        for _ in 0..5 {
            let _p = gates.enter("hook", limit, &clock);
            at.push(clock.monotonic() - start);
        }
        // 4 a second: one every 250 ms, the first at once.
        let ms: Vec<u128> = at.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, vec![0, 250, 500, 750, 1000]);
    }

    #[test]
    fn no_limit_enters_at_once_and_is_still_counted() {
        let gates = Gates::default();
        let clock = VirtualClock::new(jiff::Timestamp::UNIX_EPOCH);
        let before = clock.monotonic();
        let a = gates.enter("x", Limit::default(), &clock);
        let b = gates.enter("x", Limit::default(), &clock);
        assert_eq!(gates.most_at_once("x"), 2);
        drop((a, b));
        assert_eq!(clock.monotonic(), before, "nothing waited");
    }
}
