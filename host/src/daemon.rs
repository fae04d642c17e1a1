//! `jobhost daemon`: one process that runs every job's due windows at the
//! right moments, through the same path as `jobhost run`. At each wake-up
//! it plans each job (see `plan`): windows to run are run, one after
//! another; missed windows the job's catch-up policy skips are reported as
//! skipped; unfinished runs (a retry whose backoff has passed, a dead
//! owner's expired claim, a committed report still to deliver) are run
//! again. Then it sleeps until the earliest moment any job needs it.
//!
//! Several daemons on one store need no leader: each window's claim lets
//! one of them run it, and the others skip it. The clock is injected, so
//! tests advance time instead of sleeping. A stop request (SIGTERM or
//! SIGINT) is honoured between runs: the run in progress finishes within
//! its own time limit, nothing new is claimed, and the daemon returns.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use crate::clock::{Clock, rfc3339};
use crate::config::Config;
use crate::error::Result;
use crate::job::{self, Runtime};
use crate::plan::{self, What};
use crate::store::{self, ClaimStore, RunRecord, RunState};
use crate::window::Window;

/// How the daemon runs.
pub struct Options<'a> {
    /// The daemon's clock; every run it starts reads its `now` from it.
    pub clock: &'a dyn Clock,
    /// What each run takes besides its config (test hooks).
    pub runtime: &'a Runtime,
    /// On the first wake-up, also consider every window from this instant.
    pub since: Option<Timestamp>,
    /// Return once the next wake-up would be after this instant.
    pub until: Option<Timestamp>,
    /// Set by a signal handler: stop between runs.
    pub stop: &'a AtomicBool,
    /// The longest single sleep, so a stop request is seen promptly.
    pub sleep_slice: Duration,
}

/// Runs the daemon over `configs` until `until` passes or a stop is
/// requested, writing one JSON line per run (its receipt) or skipped
/// window to `out`.
///
/// # Errors
///
/// `Error::Store` when a store cannot be planned over; a failed run is a
/// receipt, not an error.
pub fn run(configs: &[Config], opts: &Options<'_>, out: &mut dyn Write) -> Result<()> {
    let mut since = opts.since;
    // Per job, the end of the newest window decided in this process: a
    // skipped window is not recorded in the store, so without this it would
    // be decided again at every wake-up.
    let mut decided_until: Vec<Option<Timestamp>> = vec![None; configs.len()];
    loop {
        if opts.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        let now = opts.clock.now();
        let mut wake: Option<Timestamp> = None;
        let mut earliest = |t: Timestamp| wake = Some(wake.map_or(t, |w| w.min(t)));
        for (i, config) in configs.iter().enumerate() {
            let (todo, next) = match work(config, opts.clock, now, since, decided_until[i]) {
                Ok(w) => w,
                Err(e) => {
                    // One job's store failing stops none of the others.
                    eprintln!(
                        "jobhost: error: job `{}`: {e}; trying again in a minute",
                        config.job
                    );
                    earliest(crate::delivery::after(now, Duration::from_secs(60)));
                    continue;
                }
            };
            earliest(next);
            let mut ran_any = false;
            for item in todo {
                if opts.stop.load(Ordering::SeqCst) {
                    return Ok(());
                }
                match item {
                    Work::Run(window) => {
                        decided_until[i] = decided_until[i].max(Some(window.end));
                        let mut at_now = config.clone();
                        at_now.now = Some(opts.clock.now());
                        let outcome = job::run_window(&at_now, Some(&window), opts.runtime);
                        let _ = writeln!(out, "{}", outcome.receipt.to_json_line());
                        ran_any = true;
                    }
                    Work::Skip(window, why) => {
                        decided_until[i] = decided_until[i].max(Some(window.end));
                        let line = serde_json::json!({
                            "event": "skipped",
                            "reason": "catch-up",
                            "job": config.job.as_str(),
                            "key": window.key().as_str(),
                            "now": rfc3339(now),
                            "detail": why,
                        });
                        let _ = writeln!(out, "{line}");
                    }
                    Work::Later(t) => earliest(t),
                }
            }
            if ran_any {
                // A run may have failed and left a retry, or found a window
                // busy: look again when that is due, not at the next window.
                match store::open(&config.store)
                    .and_then(|mut s| unfinished(config, s.as_mut(), opts.clock, now))
                {
                    Ok(items) => items.iter().for_each(|w| {
                        if let Work::Later(t) = w {
                            earliest(*t);
                        } else {
                            earliest(crate::delivery::after(now, Duration::from_secs(1)));
                        }
                    }),
                    Err(e) => eprintln!("jobhost: error: job `{}`: {e}", config.job),
                }
            }
        }
        since = None;
        let Some(wake) = wake else { return Ok(()) };
        if opts.until.is_some_and(|u| wake > u) {
            return Ok(());
        }
        sleep_until(opts, wake);
    }
}

/// One thing to do for a job at a wake-up.
enum Work {
    /// Run this window.
    Run(Window),
    /// Skip this missed window, for this reason.
    Skip(Window, String),
    /// Wake up again at this instant (a retry or a lease runs out then).
    Later(Timestamp),
}

/// What `config`'s job needs at `now`, and when its next window is due.
fn work(
    config: &Config,
    clock: &dyn Clock,
    now: Timestamp,
    since: Option<Timestamp>,
    decided_until: Option<Timestamp>,
) -> Result<(Vec<Work>, Timestamp)> {
    let schedule = config.schedule();
    let mut store = store::open(&config.store)?;
    // Unfinished runs first: they are older than anything newly due.
    let mut todo = unfinished(config, store.as_mut(), clock, now)?;
    let plan = plan::plan_after(config, now, since, decided_until, Some(store.as_mut()))?;
    drop(store);
    let mut next = schedule.next_due(now)?.1;
    for e in plan.entries {
        match e.what {
            What::Run
                if !todo
                    .iter()
                    .any(|w| matches!(w, Work::Run(r) if r.key() == e.window.key())) =>
            {
                todo.push(Work::Run(e.window));
            }
            What::Run | What::Recorded(_) => {}
            What::Skip(why) => todo.push(Work::Skip(e.window, why)),
            What::Next => next = e.due,
        }
    }
    Ok((todo, next))
}

/// The job's unfinished runs: to run now (a retry whose backoff passed, a
/// dead owner's expired claim, a committed report to deliver), or a later
/// moment to look again. Leases and retry times are judged on the store's
/// clock as the host sees it (`lease_now`), and a wait is capped at one
/// lease, so a clock that disagrees cannot make the daemon oversleep.
fn unfinished(
    config: &Config,
    store: &mut dyn ClaimStore,
    clock: &dyn Clock,
    now: Timestamp,
) -> Result<Vec<Work>> {
    let mut rows: Vec<RunRecord> = store
        .history(Some(config.job.as_str()))?
        .into_iter()
        .filter(|r| {
            matches!(r.state, RunState::Claimed | RunState::Prepared)
                || (r.state == RunState::Failed && r.retry_at.is_some())
        })
        .collect();
    rows.reverse();
    let lease_now = clock.lease_now();
    let mut todo = Vec::new();
    for r in rows {
        let ready = r.retry_at.unwrap_or(r.lease_until);
        let window = Window::containing(&config.job, config.window, &config.zone, r.window_start)?;
        if window.key() != r.key {
            // The job's window or zone changed since: not this config's to run.
            continue;
        }
        if ready <= lease_now {
            todo.push(Work::Run(window));
        } else {
            let wait = lease_now.duration_until(ready) + SignedDuration::from_secs(1);
            let wait = Duration::try_from(wait)
                .unwrap_or(config.lease)
                .min(config.lease);
            todo.push(Work::Later(crate::delivery::after(now, wait)));
        }
    }
    Ok(todo)
}

/// Sleeps on the daemon's clock until `wake`, in slices, watching for a
/// stop request.
fn sleep_until(opts: &Options<'_>, wake: Timestamp) {
    loop {
        if opts.stop.load(Ordering::SeqCst) {
            return;
        }
        let left = opts.clock.now().duration_until(wake);
        if left <= SignedDuration::ZERO {
            return;
        }
        let left = Duration::try_from(left).unwrap_or(Duration::MAX);
        opts.clock.sleep(left.min(opts.sleep_slice));
    }
}

/// Set by the first SIGTERM or SIGINT.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    if STOP.swap(true, Ordering::SeqCst) {
        // A second signal: exit at once. Only async-signal-safe calls here.
        // SAFETY: `_exit` ends the process without running any Rust code.
        unsafe { libc::_exit(130) };
    }
}

/// Installs SIGTERM and SIGINT handlers: the first asks the daemon to stop
/// between runs, a second exits at once. Returns the flag they set.
pub fn stop_on_signals() -> &'static AtomicBool {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: installing a handler that only touches an atomic and
        // calls `_exit`, both async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as usize;
            // Reads and writes of the run in progress go on, not EINTR.
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
    &STOP
}

/// A real clock shifted to start at a given instant (`jobhost daemon
/// --now`, for demonstrations): it advances in real time.
#[derive(Debug)]
pub struct ShiftedClock {
    offset: SignedDuration,
}

impl ShiftedClock {
    /// A clock that reads `start` now.
    pub fn starting_at(start: Timestamp) -> ShiftedClock {
        ShiftedClock {
            offset: Timestamp::now().duration_until(start),
        }
    }
}

impl Clock for ShiftedClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
            .checked_add(self.offset)
            .unwrap_or(Timestamp::MAX)
    }

    fn sleep(&self, d: Duration) {
        std::thread::sleep(d);
    }
}
