//! `/livez`, the daemon's liveness: 200 while the daemon's loop is within
//! the time it gave itself (its next wake-up, or a run's lease, plus a
//! minute), 503 once it is late, with no token and no store read; on
//! `jobhost serve`, which has no loop, the same as `/healthz`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use jobhost::app::config::{JobConfig, RunFlags};
use jobhost::core::clock::Clock;
use jobhost::run::liveness::Heartbeat;

use crate::dashboard::{get, serve};
use crate::harness::*;

#[test]
fn a_daemon_that_sleeps_until_its_next_window_is_live_without_a_token() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 20);
    let db = dir.path().join("s.db");
    let token = dir.path().join("token");
    std::fs::write(&token, "0123456789abcdef0123456789abcdef\n").unwrap();
    // Real time from --now: the daemon runs the due window, then sleeps
    // until the next day's.
    let srv = serve(&[
        "daemon",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        "2026-11-09T00:05:00Z",
        "--token-file",
        s(&token),
    ]);
    let live = get(&srv.addr, "/livez", &[]);
    assert_eq!(live.status, 200, "{}", live.body);
    assert!(live.body.starts_with("ok"), "{}", live.body);
    // The pages themselves still want the token.
    assert_eq!(get(&srv.addr, "/", &[]).status, 401);
}

#[test]
fn serve_without_a_daemon_answers_livez_as_healthz() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 20);
    let db = dir.path().join("s.db");
    let srv = serve(&["serve", "--config", s(&cfg), "--store", s(&db)]);
    let (live, health) = (
        get(&srv.addr, "/livez", &[]),
        get(&srv.addr, "/healthz", &[]),
    );
    assert_eq!((live.status, live.body.as_str()), (200, "ok\n"));
    assert_eq!((health.status, health.body), (live.status, live.body));
}

/// A clock the test moves, whose `sleep` returns only when the test lets
/// it: a loop asleep in it past its wake-up time is a stuck scheduler.
struct Gate {
    now: Mutex<Timestamp>,
    /// How many sleeps the test has let end.
    released: Mutex<u32>,
    wake: Condvar,
    /// Told each time the loop starts a sleep.
    asleep: Mutex<mpsc::Sender<()>>,
    slept: Mutex<u32>,
}

impl Gate {
    fn set(&self, t: Timestamp) {
        *self.now.lock().unwrap() = t;
    }

    /// Lets the current sleep end.
    fn release(&self) {
        *self.released.lock().unwrap() += 1;
        self.wake.notify_all();
    }
}

/// Stops the daemon and lets every sleep end when dropped, so that a
/// failed assertion ends the test instead of leaving the loop asleep.
struct Unblock<'a> {
    gate: &'a Gate,
    stop: &'a AtomicBool,
}

impl Drop for Unblock<'_> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        *self.gate.released.lock().unwrap_or_else(|e| e.into_inner()) = u32::MAX;
        self.gate.wake.notify_all();
    }
}

impl Clock for Gate {
    fn now(&self) -> Timestamp {
        *self.now.lock().unwrap()
    }

    fn sleep(&self, d: Duration) {
        let before = self.now();
        let n = {
            let mut slept = self.slept.lock().unwrap();
            *slept += 1;
            *slept
        };
        let _ = self.asleep.lock().unwrap().send(());
        let mut released = self.released.lock().unwrap();
        while *released < n {
            released = self.wake.wait(released).unwrap();
        }
        drop(released);
        let woke = jobhost::core::clock::after(before, d);
        let mut now = self.now.lock().unwrap();
        *now = (*now).max(woke);
    }
}

/// The instant after `expected back by ` in a `/livez` answer.
fn back_by(body: &str) -> Timestamp {
    body.split("expected back by ")
        .nth(1)
        .unwrap_or_else(|| panic!("{body}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_daemon_loop_stuck_past_its_wake_up_fails_livez_until_it_wakes() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 20);
    let db = dir.path().join("s.db");
    let job = JobConfig::load(&RunFlags {
        config: Some(cfg),
        store: Some(db.clone()),
        cache_dir: Some(cache_dir()),
        ..RunFlags::default()
    })
    .and_then(|c| c.job(&|_: &str| None))
    .unwrap();
    let (tx, asleep) = mpsc::channel();
    let gate = Arc::new(Gate {
        now: Mutex::new("2026-11-09T00:05:00Z".parse().unwrap()),
        released: Mutex::new(0),
        wake: Condvar::new(),
        asleep: Mutex::new(tx),
        slept: Mutex::new(0),
    });
    let heartbeat = Arc::new(Heartbeat::default());
    let seen = gate.clone();
    let server = jobhost::app::serve::start(jobhost::app::serve::Settings {
        jobs: jobhost::app::serve::fixed(Vec::new()),
        listen: "127.0.0.1:0".parse().unwrap(),
        tokens: Default::default(),
        actions: None,
        clock: Arc::new(move || seen.now()),
        daemon: None,
        liveness: Some(heartbeat.clone()),
    })
    .unwrap();
    let addr = server.addr.to_string();
    let stop = AtomicBool::new(false);
    let runtime = jobhost::run::Runtime::default();
    let out: jobhost::run::daemon::Output = Arc::new(Mutex::new(std::io::sink()));
    let opts = jobhost::run::daemon::Options {
        clock: gate.as_ref(),
        runtime: &runtime,
        since: None,
        until: None,
        stop: &stop,
        sleep_slice: Duration::MAX,
        observer: None,
        heartbeat: Some(&heartbeat),
        receipt: jobhost::run::receipt::ReceiptLevel::Full,
        max_concurrent_runs: std::num::NonZeroUsize::MIN,
    };
    let wait_asleep = || {
        asleep
            .recv_timeout(Duration::from_secs(120))
            .expect("the daemon's loop goes to sleep")
    };
    std::thread::scope(|scope| {
        let daemon = scope.spawn(|| {
            jobhost::run::daemon::run(&mut vec![std::sync::Arc::new(job.clone())], &opts, &out)
        });
        let unblock = Unblock {
            gate: &gate,
            stop: &stop,
        };

        // It ran the due window and sleeps until the next one.
        wait_asleep();
        let live = get(&addr, "/livez", &[]);
        assert_eq!(live.status, 200, "{}", live.body);
        assert!(
            live.body.starts_with("ok: sleeping until 2026-11-10T"),
            "{}",
            live.body
        );

        // Its wake-up and the minute after it pass, and the loop is still
        // asleep: stuck.
        let by = back_by(&live.body);
        gate.set(jobhost::core::clock::after(by, Duration::from_secs(1)));
        let stuck = get(&addr, "/livez", &[]);
        assert_eq!(stuck.status, 503, "{}", stuck.body);
        assert!(stuck.body.starts_with("stuck: "), "{}", stuck.body);
        assert!(stuck.body.contains("restart"), "{}", stuck.body);

        // It wakes, runs the next window, sleeps again: live again.
        gate.release();
        wait_asleep();
        let again = get(&addr, "/livez", &[]);
        assert_eq!(again.status, 200, "{}", again.body);
        assert!(back_by(&again.body) > by, "{}", again.body);

        drop(unblock);
        daemon.join().unwrap().unwrap();
    });
    // It ran the window due at the start, then the next one.
    let keys: Vec<String> = history(&db)
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
}
