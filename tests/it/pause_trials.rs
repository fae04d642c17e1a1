//! Owners frozen (SIGSTOP, from outside, at a random instant of their
//! delivery) past a short lease while another process takes their window
//! over: once let go (SIGCONT), the frozen owner must begin no send. (A
//! request it had begun to write when frozen, its last look passed, ends
//! when it goes on: a destination refuses it by its fence header.)
//! Four cases: SQLite and PostgreSQL, at-least-once and at-most-once
//! destinations. Leases here are real (2 s, on the host's clock for SQLite
//! and the database's for PostgreSQL), so the trials wait them out.
//!
//! CI runs a few trials per case; `just pause-trials` runs many
//! (`JOBHOST_PAUSE_TRIALS`, default 3) and prints a line per case with the
//! trials, the owners that sent after the takeover and the time taken.
//! `JOBHOST_PAUSE_TRIALS_BIN` puts another build of the command line on
//! trial (an older revision's `jobhost-under-test`, for a comparison).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jobhost_tests::sink::Sink;
use rand::{RngExt, SeedableRng};

use crate::crashes::{Backend, Claims};
use crate::effects::http_config;
use crate::harness::*;

/// The window every trial runs.
const NOW: &str = "2026-11-09T00:05:00Z";

/// How many trials each case runs.
fn trials() -> u32 {
    std::env::var("JOBHOST_PAUSE_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// The command line on trial.
fn binary() -> OsString {
    std::env::var_os("JOBHOST_PAUSE_TRIALS_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_jobhost-under-test").into())
}

/// `jobhost run` of the window on the host's real clock (no virtual
/// time: the leases must run out for real).
fn run_command(cfg: &Path, store: &Claims) -> Command {
    let mut cmd = Command::new(binary());
    cmd.current_dir(root())
        .args(["run", "--config", s(cfg), "--now", NOW, "--store"])
        .arg(store.arg())
        .env("JOBHOST_CACHE_DIR", cache_dir())
        .env_remove("JOBHOST_STORE")
        .env_remove("JOBHOST_REQUIRE_DURABLE_STORE")
        .env_remove("JOBHOST_TEST_VIRTUAL_TIME")
        .env_remove("JOBHOST_TEST_FAILPOINT")
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Two HTTP destinations in `mode` (two messages), a 2 s lease.
fn trial_config(dir: &Path, sink: &Sink, mode: &str) -> PathBuf {
    let timing = "timeout_seconds = 1\nbackoff_seconds = 0.2\nmax_backoff_seconds = 0.5";
    http_config(
        dir,
        "max_attempts = 100\n[limits]\ntimeout_seconds = 1\nlease_seconds = 2",
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\n{timing}\n\
             delivery = \"{mode}\"\n\
             [destinations.audit]\ntype = \"http\"\nurl = \"{}\"\n{timing}\n\
             delivery = \"{mode}\"\n",
            sink.url("/digest"),
            sink.url("/audit"),
        ),
    )
}

/// Sends under fence 1 (the frozen owner's claim) begun at `after` or
/// later: a request whose first bytes came before it was under way when
/// the owner was frozen (its last look passed before the freeze), and is
/// not one sent after the takeover.
fn first_fence_sends_begun(sink: &Sink, after: Instant) -> usize {
    sink.requests()
        .iter()
        .filter(|q| q.header("jobhost-fence") == Some("1") && q.began >= after)
        .count()
}

/// Whether `child` has ended.
fn ended(child: &mut Child) -> bool {
    child.try_wait().ok().flatten().is_some()
}

/// Whether `child` is stopped (its state in `/proc` is `T`); `None` once
/// it has ended.
fn stopped(child: &mut Child) -> Option<bool> {
    if ended(child) {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap_or_default();
    Some(
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('T')),
    )
}

/// What the trials of one case came to.
#[derive(Debug, Default)]
struct Tally {
    /// Trials whose owner was frozen in its delivery.
    trials: u32,
    /// Of those, owners that sent after the takeover.
    sent_after_takeover: u32,
    /// Owners that had finished before the freeze landed (not counted).
    missed: u32,
    /// Owners frozen holding SQLite's write lock (not counted).
    held_the_lock: u32,
}

/// How one trial went.
enum Trial {
    /// The owner had finished before the freeze landed.
    Missed,
    /// The owner was frozen inside a SQLite write transaction: it holds the
    /// whole store's write lock, so nobody can take anything over until it
    /// goes on (and then it finds its claim intact).
    HoldsTheLock,
    /// The window was taken over; whether the owner sent after that.
    TakenOver { sent_after: bool },
}

/// Whether a process holds the SQLite store's write lock now.
fn write_locked(store: &Claims) -> bool {
    let Claims::Sqlite(path) = store else {
        return false;
    };
    let Ok(mut conn) = rusqlite::Connection::open(path) else {
        return false;
    };
    let _ = conn.busy_timeout(Duration::ZERO);
    conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .is_err()
}

/// One trial: the owner is frozen `delay` after the sink saw its first
/// request, the window is taken over once its lease ran out, and the owner
/// is let go.
fn trial(backend: Backend, mode: &str, delay: Duration, test: &str) -> Trial {
    let sink = Sink::start();
    let dir = scratch();
    let store = Claims::new(backend, dir.path(), test).expect("checked by the caller");
    let cfg = trial_config(dir.path(), &sink, mode);
    let mut owner = run_command(&cfg, &store).spawn().expect("spawn the owner");
    let deadline = Instant::now() + Duration::from_secs(60);
    while sink.requests().is_empty() {
        if ended(&mut owner) {
            let out = owner.wait_with_output().expect("wait");
            panic!(
                "the owner ended before sending: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        assert!(Instant::now() < deadline, "the owner never sent");
        std::thread::sleep(Duration::from_micros(200));
    }
    std::thread::sleep(delay);
    signal(&owner, libc::SIGSTOP);
    loop {
        match stopped(&mut owner) {
            None => return Trial::Missed,
            Some(true) => break,
            Some(false) => std::thread::sleep(Duration::from_micros(200)),
        }
    }
    if write_locked(&store) {
        resume(owner);
        return Trial::HoldsTheLock;
    }
    // Taken over once the lease has run out (busy until then).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = to_run(run_command(&cfg, &store).output().expect("jobhost runs"));
        let r = run.receipt();
        if r["reason"] == "busy" {
            assert!(Instant::now() < deadline, "the lease never ran out: {r}");
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        // A frozen owner that had delivered everything left the window
        // DONE: nothing was taken over, and the trial does not count.
        if r["reason"] == "done" {
            resume(owner);
            return Trial::Missed;
        }
        assert!(
            matches!(
                r["event"].as_str(),
                Some("resumed" | "ran" | "abandoned" | "failed")
            ),
            "the taker: {r}\n{}",
            run.stderr
        );
        assert_eq!(r["fence"], 2, "the taker holds the next fence: {r}");
        break;
    }
    // The owner has been frozen since before the taker's claim: anything
    // it begins to send from here on was begun after the takeover.
    let let_go = Instant::now();
    let woke = resume(owner);
    let sent_after = first_fence_sends_begun(&sink, let_go) > 0;
    if sent_after {
        // What the owner said of it, for a person to see why.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "pause trials {backend:?} {mode}: the owner sent after the takeover; its receipt: \
             {}\n{}",
            woke.stdout.trim(),
            woke.stderr.trim()
        );
    }
    Trial::TakenOver { sent_after }
}

fn run_case(backend: Backend, mode: &str, test: &str) {
    if Claims::new(backend, scratch().path(), test).is_none() {
        return;
    }
    warm_up(backend, mode, test);
    let span = aimed_span(backend, mode, test);
    let mut rng = rand::rngs::StdRng::seed_from_u64(rand::random());
    let started = Instant::now();
    let mut tally = Tally::default();
    let wanted = trials();
    while tally.trials < wanted {
        let delay = Duration::from_micros(rng.random_range(0..span));
        match trial(backend, mode, delay, test) {
            Trial::Missed => tally.missed += 1,
            Trial::HoldsTheLock => tally.held_the_lock += 1,
            Trial::TakenOver { sent_after } => {
                tally.trials += 1;
                tally.sent_after_takeover += u32::from(sent_after);
            }
        }
        assert!(
            tally.missed + tally.held_the_lock <= 10 * wanted + 10,
            "most freezes did not lead to a takeover: {tally:?}"
        );
    }
    // One line a person reads (stderr straight to the descriptor: libtest
    // captures `eprintln!` of passing tests).
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr().lock(),
        "pause trials {backend:?} {mode}: {} trials, {} sent after the takeover; not counted: \
         {} missed (the owner had finished), {} frozen holding SQLite's write lock; {:.1} s \
         (freezes aimed within {} us of the first send)",
        tally.trials,
        tally.sent_after_takeover,
        tally.missed,
        tally.held_the_lock,
        started.elapsed().as_secs_f64(),
        span
    );
    assert_eq!(
        tally.sent_after_takeover, 0,
        "a frozen owner sent after its window was taken over: {tally:?}"
    );
}

/// One run so that the component is compiled and cached before timing.
fn warm_up(backend: Backend, mode: &str, test: &str) {
    let sink = Sink::start();
    let dir = scratch();
    let store = Claims::new(backend, dir.path(), test).expect("checked by the caller");
    let cfg = trial_config(dir.path(), &sink, mode);
    let run = to_run(run_command(&cfg, &store).output().expect("jobhost runs"));
    assert_eq!(run.event(), "ran", "{}", run.stderr);
}

/// The span the freezes are aimed at: from the first request's arrival to
/// the second's in undisturbed runs (the median of three), with a quarter
/// more so that some land after it.
fn aimed_span(backend: Backend, mode: &str, test: &str) -> u64 {
    let mut gaps: Vec<u64> = (0..3)
        .map(|_| {
            let sink = Sink::start();
            let dir = scratch();
            let store = Claims::new(backend, dir.path(), test).expect("checked by the caller");
            let cfg = trial_config(dir.path(), &sink, mode);
            let run = to_run(run_command(&cfg, &store).output().expect("jobhost runs"));
            assert_eq!(run.event(), "ran", "{}", run.stderr);
            let requests = sink.requests();
            assert_eq!(requests.len(), 2, "the probe sent both messages");
            let gap = requests[1].arrived.duration_since(requests[0].arrived);
            gap.as_micros() as u64
        })
        .collect();
    gaps.sort_unstable();
    (gaps[1] * 5 / 4).max(1)
}

#[test]
fn a_frozen_at_least_once_owner_on_sqlite_sends_nothing_after_a_takeover() {
    run_case(
        Backend::Sqlite,
        "at-least-once",
        "pause_trials::a_frozen_at_least_once_owner_on_sqlite_sends_nothing_after_a_takeover",
    );
}

#[test]
fn a_frozen_at_most_once_owner_on_sqlite_sends_nothing_after_a_takeover() {
    run_case(
        Backend::Sqlite,
        "at-most-once",
        "pause_trials::a_frozen_at_most_once_owner_on_sqlite_sends_nothing_after_a_takeover",
    );
}

#[test]
fn a_frozen_at_least_once_owner_on_postgres_sends_nothing_after_a_takeover() {
    run_case(
        Backend::Postgres,
        "at-least-once",
        "pause_trials::a_frozen_at_least_once_owner_on_postgres_sends_nothing_after_a_takeover",
    );
}

#[test]
fn a_frozen_at_most_once_owner_on_postgres_sends_nothing_after_a_takeover() {
    run_case(
        Backend::Postgres,
        "at-most-once",
        "pause_trials::a_frozen_at_most_once_owner_on_postgres_sends_nothing_after_a_takeover",
    );
}
