//! A run killed (SIGKILL of the real process) at every boundary, and at
//! random instants, and a run frozen (SIGSTOP) past its lease: after the
//! next invocations every window is delivered, the sink saw exactly the
//! expected idempotency keys with one body each, and the cursor never
//! moved ahead of a DONE run.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use jobhost_tests::pg::Scratch;
use jobhost_tests::sink::Sink;
use rand::{RngExt, SeedableRng};

use crate::effects::{distinct_keys, http_config};
use crate::harness::*;

/// Where a trial keeps its claims.
///
/// - SQLite measures leases on the host's clock, virtual in these tests: a
///   `--now` 15 s later than a dead run's takes it over at once.
/// - PostgreSQL measures them on the database's clock, which no test can
///   move: a trial there uses a 3 s lease and lets it run out for real
///   (waiting while the window answers `busy`).
pub enum Claims {
    /// A SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL schema of the trial's own.
    Postgres(Scratch),
}

impl Claims {
    /// A store of `backend`'s kind for a trial in `dir`; `None` when the
    /// PostgreSQL tests are not configured (the skip is reported).
    pub fn new(backend: Backend, dir: &Path, test: &str) -> Option<Claims> {
        Some(match backend {
            Backend::Sqlite => Claims::Sqlite(dir.join("s.db")),
            Backend::Postgres => Claims::Postgres(Scratch::new(test)?),
        })
    }

    /// The `--store` value.
    pub fn arg(&self) -> OsString {
        match self {
            Claims::Sqlite(p) => p.clone().into_os_string(),
            Claims::Postgres(s) => s.url().into(),
        }
    }

    /// The `[limits]` of a crash trial: leases short enough to expire
    /// between invocations.
    fn limits(&self) -> &'static str {
        match self {
            Claims::Sqlite(_) => "timeout_seconds = 5\nlease_seconds = 10",
            Claims::Postgres(_) => "timeout_seconds = 2\nlease_seconds = 3",
        }
    }

    /// A destination's timing, within the lease.
    fn send_timing(&self) -> &'static str {
        match self {
            Claims::Sqlite(_) => "timeout_seconds = 2\nmax_backoff_seconds = 1",
            Claims::Postgres(_) => "timeout_seconds = 1\nmax_backoff_seconds = 0.5",
        }
    }

    /// Whether leases run out only in real time.
    fn real_leases(&self) -> bool {
        matches!(self, Claims::Postgres(_))
    }

    /// The cursor rows, read straight from the store: (run key, cursor,
    /// run state, cursor the run proposed). Empty before the store exists.
    fn cursor_rows(&self) -> Vec<CursorRow> {
        let query = |runs: &str, cursors: &str| {
            format!(
                "SELECT c.key, c.cursor, r.state, r.report_cursor
                 FROM {cursors} c LEFT JOIN {runs} r ON r.key = c.key"
            )
        };
        match self {
            Claims::Sqlite(store) => {
                if !store.exists() {
                    return Vec::new(); // killed before the store was created
                }
                let conn = rusqlite::Connection::open_with_flags(
                    store,
                    rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
                )
                .expect("the store opens");
                let has_schema = conn.query_row(
                    "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'cursors')",
                    [],
                    |r| r.get::<_, bool>(0),
                );
                let has_schema = match has_schema {
                    // Killed while switching a new file to WAL: its first
                    // page is in a rollback journal that only a writer
                    // rolls back; nothing was ever claimed in it.
                    Err(rusqlite::Error::SqliteFailure(f, _))
                        if f.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK
                            && store.with_extension("db-journal").exists() =>
                    {
                        false
                    }
                    other => other.expect("the store reads"),
                };
                if !has_schema {
                    return Vec::new(); // killed while creating the store
                }
                let mut stmt = conn
                    .prepare(&query("runs", "cursors"))
                    .expect("the cursor query");
                stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                    .and_then(|rows| rows.collect())
                    .expect("the cursors read")
            }
            Claims::Postgres(scratch) => {
                let mut c = scratch.client();
                let has_schema: bool = c
                    .query_one("SELECT to_regclass('jobhost_cursors') IS NOT NULL", &[])
                    .expect("the store reads")
                    .get(0);
                if !has_schema {
                    return Vec::new();
                }
                c.query(&query("jobhost_runs", "jobhost_cursors"), &[])
                    .expect("the cursors read")
                    .iter()
                    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
                    .collect()
            }
        }
    }
}

/// The backends a trial runs on.
#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Two HTTP destinations (two messages a window), short leases so a later
/// invocation can take a dead run over, and attempts enough for many crashes.
fn crash_config(dir: &Path, sink: &Sink, audit_mode: &str, claims: &Claims) -> PathBuf {
    let timing = claims.send_timing();
    http_config(
        dir,
        &format!("max_attempts = 100\n[limits]\n{}", claims.limits()),
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\n{timing}\n\
             [destinations.audit]\ntype = \"http\"\nurl = \"{}\"\n{timing}\n\
             delivery = \"{audit_mode}\"\n",
            sink.url("/digest"),
            sink.url("/audit"),
        ),
    )
}

/// `--now` for window `day` (1 = 2026-11-08), `step` invocations later: 15 s
/// apart, longer than the SQLite trials' 10 s lease, so each may take over
/// the last.
fn now_for(day: u32, step: u32) -> String {
    format!(
        "2026-11-{:02}T00:{:02}:{:02}Z",
        8 + day,
        5 + step * 15 / 60,
        step * 15 % 60
    )
}

fn spawn(cfg: &Path, store: &Claims, now: &str, failpoint: Option<&str>) -> Child {
    let mut cmd = job_command(cfg, store.arg(), now);
    cmd.env("JOBHOST_TEST_VIRTUAL_TIME", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(f) = failpoint {
        cmd.env("JOBHOST_TEST_FAILPOINT", f);
    }
    cmd.spawn().expect("spawn jobhost")
}

/// One invocation without failpoints, to its end.
fn invoke(cfg: &Path, store: &Claims, now: &str) -> Run {
    to_run(spawn(cfg, store, now, None).wait_with_output().unwrap())
}

/// One invocation that is not turned away as `busy`: on a store with real
/// leases, a dead run's lease is waited out first.
fn invoke_past_leases(cfg: &Path, store: &Claims, now: &str) -> Run {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run = invoke(cfg, store, now);
        if !(store.real_leases() && run.receipt()["reason"] == "busy") {
            return run;
        }
        assert!(
            Instant::now() < deadline,
            "a lease never ran out: {}",
            run.stdout
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Runs invocations for window `day` without failpoints until one ends the
/// window; returns how many it took.
fn finish_window(cfg: &Path, store: &Claims, day: u32, mut step: u32) -> u32 {
    for _ in 0..5 {
        step += 1;
        let run = invoke_past_leases(cfg, store, &now_for(day, step));
        assert_cursor_behind_done(store);
        if matches!(run.event().as_str(), "ran" | "resumed") || run.receipt()["reason"] == "done" {
            assert_eq!(run.code, 0, "{}", run.stderr);
            return step;
        }
    }
    panic!("window {day} did not finish in 5 invocations");
}

/// A cursor row: its run's key, the cursor, the run's state and the cursor
/// the run proposed.
type CursorRow = (String, Option<String>, Option<String>, Option<String>);

/// The job's cursor, if it has one, points at a DONE run and is the cursor
/// that run proposed; returns the run's key.
fn assert_cursor_behind_done(store: &Claims) -> Option<String> {
    let rows = store.cursor_rows();
    assert!(rows.len() <= 1, "one job, one cursor: {rows:?}");
    let (key, cursor, state, proposed) = rows.into_iter().next()?;
    assert_eq!(
        state.as_deref(),
        Some("DONE"),
        "the cursor moved to {key}, which is not done"
    );
    assert_eq!(cursor, proposed, "the cursor is the one {key} proposed");
    Some(key)
}

fn expected_keys(days: u32) -> BTreeSet<String> {
    (1..=days)
        .flat_map(|d| (1..=2).map(move |n| format!("daily-report:2026-11-{:02}#{n}", 7 + d)))
        .collect()
}

fn warm_cache() {
    let warm = scratch();
    let cfg = report_config(warm.path(), 100);
    let run = run_job(&cfg, warm.path().join("w.db"), "2026-11-09T00:05:00Z");
    assert_eq!(run.event(), "ran", "{}", run.stderr);
}

/// Each crash trial, once per backend.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test] fn $name() { super::$name(super::Backend::Sqlite); })*
        }
        mod postgres {
            $(#[test] fn $name() { super::$name(super::Backend::Postgres); })*
        }
    };
}

on_both_backends!(
    a_kill_at_any_boundary_costs_no_second_effect_and_no_lost_window,
    a_kill_during_an_at_most_once_send_abandons_the_run_instead_of_resending,
    a_stalled_owner_cannot_write_or_send_after_a_takeover,
    an_owner_paused_past_its_lease_after_its_last_check_sends_nothing_after_the_takeover,
    a_killed_owner_is_taken_over_at_once_on_its_machine_without_waiting_for_its_lease,
    a_stopped_owner_keeps_its_window_until_its_lease_runs_out,
    only_a_record_of_this_machine_whose_process_has_ended_lets_a_live_lease_be_taken_over,
    random_kills_over_many_trials_lose_no_window_and_duplicate_no_effect,
);

fn a_kill_at_any_boundary_costs_no_second_effect_and_no_lost_window(backend: Backend) {
    warm_cache();
    for boundary in [
        "after-claim",
        "in-guest",
        "after-prepare",
        "before-send",
        "before-send@2",
        "after-send",
        "after-send@2",
    ] {
        let sink = Sink::start();
        let dir = scratch();
        let Some(store) = Claims::new(
            backend,
            dir.path(),
            "crashes::postgres::a_kill_at_any_boundary_costs_no_second_effect_and_no_lost_window",
        ) else {
            return;
        };
        let cfg = crash_config(dir.path(), &sink, "at-least-once", &store);
        let killed = spawn(
            &cfg,
            &store,
            &now_for(1, 0),
            Some(&format!("{boundary}:kill")),
        )
        .wait_with_output()
        .unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&killed.status),
            Some(9),
            "{boundary}: the failpoint killed the process"
        );
        assert!(
            killed.stdout.is_empty(),
            "a killed process printed no receipt"
        );
        assert_cursor_behind_done(&store);
        finish_window(&cfg, &store, 1, 0);
        assert_eq!(
            distinct_keys(&sink),
            expected_keys(1),
            "{boundary}: every message arrived under its own key"
        );
        let h = &history(store.arg())[0];
        assert_eq!(h["state"], "DONE", "{boundary}: {h}");
        assert_eq!(h["delivered"], 2);
        if boundary.starts_with("after-send") {
            assert!(
                sink.requests().len() > 2,
                "{boundary}: the message whose receipt was lost was resent (with its key)"
            );
        } else {
            assert_eq!(
                sink.requests().len(),
                2,
                "{boundary}: nothing was sent twice"
            );
        }
    }
}

fn a_kill_during_an_at_most_once_send_abandons_the_run_instead_of_resending(backend: Backend) {
    warm_cache();
    let sink = Sink::start();
    let dir = scratch();
    let Some(store) = Claims::new(
        backend,
        dir.path(),
        "crashes::postgres::a_kill_during_an_at_most_once_send_abandons_the_run_instead_of_resending",
    ) else {
        return;
    };
    let cfg = crash_config(dir.path(), &sink, "at-most-once", &store);
    // `audit` sorts first, so its message is #1 and the first send.
    let killed = spawn(&cfg, &store, &now_for(1, 0), Some("after-send:kill"))
        .wait_with_output()
        .unwrap();
    assert!(killed.status.code().is_none(), "killed");
    let next = invoke_past_leases(&cfg, &store, &now_for(1, 1));
    let r = next.receipt();
    assert_eq!(r["event"], "abandoned", "{}", next.stderr);
    assert_eq!(r["messages"][0]["destination"], "audit");
    assert_eq!(r["messages"][0]["status"], "abandoned");
    assert_eq!(
        sink.requests().len(),
        1,
        "the uncertain message was not sent again"
    );
    assert_eq!(history(store.arg())[0]["state"], "ABANDONED");
}

fn a_stalled_owner_cannot_write_or_send_after_a_takeover(backend: Backend) {
    warm_cache();
    for boundary in ["after-claim", "after-prepare", "before-send"] {
        let sink = Sink::start();
        let dir = scratch();
        let Some(store) = Claims::new(
            backend,
            dir.path(),
            "crashes::postgres::a_stalled_owner_cannot_write_or_send_after_a_takeover",
        ) else {
            return;
        };
        let cfg = crash_config(dir.path(), &sink, "at-least-once", &store);
        let stalled = spawn(
            &cfg,
            &store,
            &now_for(1, 0),
            Some(&format!("{boundary}:stop")),
        );
        wait_until_stopped(&stalled, boundary);

        // Its lease has run out (by the next invocation's clock, or by the
        // database's): taken over.
        let taker = invoke_past_leases(&cfg, &store, &now_for(1, 1));
        let tr = taker.receipt();
        assert!(
            matches!(tr["event"].as_str(), Some("ran" | "resumed")),
            "{boundary}: {tr}\n{}",
            taker.stderr
        );
        assert_eq!(tr["fence"], 2);
        let sent_by_taker = sink.requests().len();
        assert_eq!(sent_by_taker, 2);

        // The stalled owner wakes up: it must notice and stop.
        let woke = resume(stalled);
        let wr = woke.receipt();
        assert_eq!(
            (woke.code, wr["event"].as_str()),
            (1, Some("failed")),
            "{boundary}: {wr}"
        );
        assert_eq!(wr["error"]["kind"], "lease-lost", "{boundary}: {wr}");
        assert_eq!(
            sink.requests().len(),
            sent_by_taker,
            "{boundary}: no send after the takeover"
        );
        let h = &history(store.arg())[0];
        assert_eq!(
            (h["state"].as_str(), h["fence"].as_i64()),
            (Some("DONE"), Some(2)),
            "{h}"
        );
    }
}

/// A pause after the last check of the claim, before the request goes out,
/// longer than the lease: by the time the owner goes on, another process
/// has taken the window over. The last look before the request's first
/// byte (on the run's clock, which the pause moved on) withholds it, the
/// owner goes back to the store and finds its claim lost: the fencing
/// endpoint sees nothing stale.
fn an_owner_paused_past_its_lease_after_its_last_check_sends_nothing_after_the_takeover(
    backend: Backend,
) {
    warm_cache();
    let sink = Sink::start();
    sink.refuse_stale_fences();
    let dir = scratch();
    let Some(store) = Claims::new(
        backend,
        dir.path(),
        "crashes::postgres::an_owner_paused_past_its_lease_after_its_last_check_sends_nothing_after_the_takeover",
    ) else {
        return;
    };
    let cfg = crash_config(dir.path(), &sink, "at-least-once", &store);
    let stalled = spawn(&cfg, &store, &now_for(1, 0), Some("in-send:pause=15"));
    wait_until_stopped(&stalled, "in-send");
    let taker = invoke_past_leases(&cfg, &store, &now_for(1, 1));
    let tr = taker.receipt();
    assert_eq!(tr["event"], "resumed", "{tr}\n{}", taker.stderr);
    assert_eq!(tr["fence"], 2);
    let woke = resume(stalled);
    let wr = woke.receipt();
    assert_eq!(wr["error"]["kind"], "lease-lost", "{wr}\n{}", woke.stderr);
    let requests = sink.requests();
    assert!(
        requests.iter().all(|q| !q.stale),
        "the paused owner sent nothing after the takeover: {requests:?}"
    );
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert!(
        requests
            .iter()
            .all(|q| q.header("jobhost-fence") == Some("2")),
        "{requests:?}"
    );
    let h = &history(store.arg())[0];
    assert_eq!(
        (h["state"].as_str(), h["fence"].as_i64()),
        (Some("DONE"), Some(2)),
        "{h}"
    );
}

/// A job whose lease is far longer than any test: a dead owner's window is
/// free at once only if its process is known to be gone.
fn long_lease_config(dir: &Path, sink: &Sink) -> PathBuf {
    http_config(
        dir,
        "max_attempts = 100\n[limits]\ntimeout_seconds = 5\nlease_seconds = 600",
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntimeout_seconds = 2\n\
             [destinations.audit]\ntype = \"http\"\nurl = \"{}\"\ntimeout_seconds = 2\n",
            sink.url("/digest"),
            sink.url("/audit"),
        ),
    )
}

/// The run's window, killed on its second send (the first delivered and
/// recorded), with a 10 minute lease; returns the killed process's pid.
fn killed_mid_delivery(cfg: &Path, store: &Claims) -> u32 {
    let child = spawn(cfg, store, &now_for(1, 0), Some("before-send@2:kill"));
    let pid = child.id();
    let killed = child.wait_with_output().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&killed.status),
        Some(9),
        "the failpoint killed the process"
    );
    pid
}

fn a_killed_owner_is_taken_over_at_once_on_its_machine_without_waiting_for_its_lease(
    backend: Backend,
) {
    warm_cache();
    let sink = Sink::start();
    let dir = scratch();
    let Some(store) = Claims::new(
        backend,
        dir.path(),
        "crashes::postgres::a_killed_owner_is_taken_over_at_once_on_its_machine_without_waiting_for_its_lease",
    ) else {
        return;
    };
    let cfg = long_lease_config(dir.path(), &sink);
    let pid = killed_mid_delivery(&cfg, &store);
    // The same instant on the run's clock (and seconds later on the
    // database's): the lease has nearly 10 minutes to go.
    let next = invoke(&cfg, &store, &now_for(1, 0));
    let r = next.receipt();
    assert_eq!(r["event"], "resumed", "{r}\n{}", next.stderr);
    assert_eq!(r["fence"], 2, "{r}");
    assert_eq!(r["took_over"]["because"], "owner-gone", "{r}");
    assert_eq!(r["took_over"]["fence"], 1, "{r}");
    let from = r["took_over"]["from"].as_str().unwrap_or_default();
    assert!(from.contains(&format!(":{pid}:")), "{from} is pid {pid}");
    assert_eq!(
        distinct_keys(&sink),
        expected_keys(1),
        "each message arrived under its own key"
    );
    let requests = sink.requests();
    assert_eq!(requests.len(), 2, "one delivery of each: {requests:?}");
    let h = &history(store.arg())[0];
    assert_eq!(
        (
            h["state"].as_str(),
            h["fence"].as_i64(),
            h["delivered"].as_i64()
        ),
        (Some("DONE"), Some(2), Some(2)),
        "{h}"
    );
}

fn a_stopped_owner_keeps_its_window_until_its_lease_runs_out(backend: Backend) {
    warm_cache();
    let sink = Sink::start();
    let dir = scratch();
    let Some(store) = Claims::new(
        backend,
        dir.path(),
        "crashes::postgres::a_stopped_owner_keeps_its_window_until_its_lease_runs_out",
    ) else {
        return;
    };
    let cfg = long_lease_config(dir.path(), &sink);
    let stalled = spawn(&cfg, &store, &now_for(1, 0), Some("before-send@2:stop"));
    wait_until_stopped(&stalled, "before-send@2");
    let next = invoke(&cfg, &store, &now_for(1, 0));
    let r = next.receipt();
    assert_eq!(r["reason"], "busy", "a stopped process still runs: {r}");
    assert_eq!(r["fence"], 1);
    let woke = resume(stalled);
    assert_eq!(woke.receipt()["event"], "ran", "{}", woke.stderr);
    assert_eq!(sink.requests().len(), 2);
}

/// Rewrites what the window's owner recorded of its process.
fn rewrite_record(store: &Claims, record: Option<&serde_json::Value>) {
    let text = record.map(|r| r.to_string());
    match store {
        Claims::Sqlite(path) => {
            rusqlite::Connection::open(path)
                .unwrap()
                .execute("UPDATE runs SET owner_process = ?1", [&text])
                .unwrap();
        }
        Claims::Postgres(scratch) => {
            scratch
                .client()
                .execute("UPDATE jobhost_runs SET owner_process = $1", &[&text])
                .unwrap();
        }
    }
}

/// What the window's owner recorded of its process.
fn record(store: &Claims) -> serde_json::Value {
    let text: String = match store {
        Claims::Sqlite(path) => rusqlite::Connection::open(path)
            .unwrap()
            .query_row("SELECT owner_process FROM runs", [], |r| r.get(0))
            .unwrap(),
        Claims::Postgres(scratch) => scratch
            .client()
            .query_one("SELECT owner_process FROM jobhost_runs", &[])
            .unwrap()
            .get(0),
    };
    serde_json::from_str(&text).expect("the record is JSON")
}

/// The start time (`/proc/<pid>/stat`, field 22) of a live process.
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

fn only_a_record_of_this_machine_whose_process_has_ended_lets_a_live_lease_be_taken_over(
    backend: Backend,
) {
    warm_cache();
    let sink = Sink::start();
    let dir = scratch();
    let Some(store) = Claims::new(
        backend,
        dir.path(),
        "crashes::postgres::only_a_record_of_this_machine_whose_process_has_ended_lets_a_live_lease_be_taken_over",
    ) else {
        return;
    };
    let cfg = long_lease_config(dir.path(), &sink);
    let pid = killed_mid_delivery(&cfg, &store);
    let dead = record(&store);
    assert_eq!(dead["pid"], pid, "{dead}");
    // A live process stands in for the owner, under its own start time.
    let mut live = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .unwrap();
    let live_start = start_time(live.id());
    let with = |field: &str, value: serde_json::Value| {
        let mut r = dead.clone();
        r[field] = value;
        r
    };
    let live_owner = {
        let mut r = with("pid", live.id().into());
        r["start"] = live_start.into();
        r
    };
    let kept = [
        ("a live process", Some(live_owner.clone())),
        ("another boot", Some(with("boot_id", "another-boot".into()))),
        (
            "another pid namespace",
            Some(with(
                "pid_ns",
                (dead["pid_ns"].as_u64().unwrap() + 1).into(),
            )),
        ),
        ("another host", Some(with("host", "another-host".into()))),
        (
            "another owner's record",
            Some(with("owner", "host:1:earlier".into())),
        ),
        ("no record (an older jobhost)", None),
    ];
    for (what, r) in &kept {
        rewrite_record(&store, r.as_ref());
        let next = invoke(&cfg, &store, &now_for(1, 0));
        let got = next.receipt();
        assert_eq!(got["reason"], "busy", "{what}: {got}\n{}", next.stderr);
    }
    // The live process's pid, under another start time: it was reused.
    let mut reused = live_owner;
    reused["start"] = (live_start + 1).into();
    rewrite_record(&store, Some(&reused));
    let next = invoke(&cfg, &store, &now_for(1, 0));
    let got = next.receipt();
    let _ = live.kill();
    let _ = live.wait();
    assert_eq!(
        got["event"], "resumed",
        "a reused pid: {got}\n{}",
        next.stderr
    );
    assert_eq!(got["took_over"]["because"], "owner-gone");
    assert_eq!(sink.requests().len(), 2, "one delivery of each");
}

fn random_kills_over_many_trials_lose_no_window_and_duplicate_no_effect(backend: Backend) {
    warm_cache();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    // How long an undisturbed run takes here, to aim the kills inside it.
    let probe_sink = Sink::start();
    let probe = scratch();
    let Some(probe_store) = Claims::new(
        backend,
        probe.path(),
        "crashes::postgres::random_kills_over_many_trials_lose_no_window_and_duplicate_no_effect",
    ) else {
        return;
    };
    let probe_cfg = crash_config(probe.path(), &probe_sink, "at-least-once", &probe_store);
    // Later runs are timed (the first also creates the store), and the
    // quickest counts: one slowed by a busy machine would aim the kills
    // past the end of most runs.
    let run = invoke(&probe_cfg, &probe_store, &now_for(1, 0));
    assert_eq!(run.event(), "ran", "{}", run.stderr);
    let span = (2..=4)
        .map(|day| {
            let started = Instant::now();
            let run = invoke(&probe_cfg, &probe_store, &now_for(day, 0));
            assert_eq!(run.event(), "ran", "{}", run.stderr);
            started.elapsed().as_micros() as u64
        })
        .min()
        .unwrap_or(1);

    // On PostgreSQL every killed claim holds its window for a real lease, so
    // fewer trials, each kill aimed at a window whose lease has run out.
    let (trials, days, kills_per_day) = match backend {
        Backend::Sqlite => (4, 3, 4),
        Backend::Postgres => (2, 2, 3),
    };
    let mut kills = 0;
    for trial in 0..trials {
        let sink = Sink::start();
        let dir = scratch();
        let store = Claims::new(backend, dir.path(), "crashes::postgres::random_kills_over_many_trials_lose_no_window_and_duplicate_no_effect")
            .expect("configured above");
        let cfg = crash_config(dir.path(), &sink, "at-least-once", &store);
        for day in 1..=days {
            let mut step = 0;
            // A few killed invocations per window, then one in peace.
            for _ in 0..kills_per_day {
                if store.real_leases() {
                    wait_out_leases(&store);
                }
                let mut child = spawn(&cfg, &store, &now_for(day, step), None);
                std::thread::sleep(Duration::from_micros(rng.random_range(0..span * 5 / 4)));
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                kills += usize::from(out.status.code().is_none());
                assert_cursor_behind_done(&store);
                step += 1;
            }
            finish_window(&cfg, &store, day, step);
        }
        assert_eq!(
            distinct_keys(&sink),
            expected_keys(days),
            "trial {trial}: exactly the expected keys, one body each"
        );
        let h = history(store.arg());
        assert!(
            h.iter().all(|r| r["state"] == "DONE"),
            "trial {trial}: {h:?}"
        );
        // The newest window's cursor is the job's.
        assert_eq!(
            assert_cursor_behind_done(&store).as_deref(),
            Some(&*format!("daily-report:2026-11-{:02}", 7 + days)),
            "trial {trial}"
        );
    }
    assert!(
        kills > trials * days as usize,
        "most invocations were really killed ({kills})"
    );
}

/// Waits until no run in the store holds a live lease (by the database's
/// clock).
fn wait_out_leases(store: &Claims) {
    let Claims::Postgres(scratch) = store else {
        return;
    };
    let mut c = scratch.client();
    let exists: bool = c
        .query_one("SELECT to_regclass('jobhost_runs') IS NOT NULL", &[])
        .unwrap()
        .get(0);
    if !exists {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM jobhost_runs
                            WHERE state IN ('CLAIMED', 'PREPARED') AND lease_expires_at > now())",
            &[],
        )
        .unwrap()
        .get::<_, bool>(0)
    {
        assert!(Instant::now() < deadline, "a lease never ran out");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_file_destination_is_never_uncertain_after_a_kill_between_append_and_record() {
    warm_cache();
    for mode in ["at-least-once", "at-most-once"] {
        let dir = scratch();
        let cfg = http_config(
            dir.path(),
            "[limits]\ntimeout_seconds = 5\nlease_seconds = 10",
            &format!(
                "[destinations.digest]\ntype = \"file\"\npath = \"out.jsonl\"\ndelivery = \"{mode}\"\n"
            ),
        );
        let store = Claims::Sqlite(dir.path().join("s.db"));
        // Killed after the line was appended and synced, before the store knew.
        let killed = spawn(&cfg, &store, &now_for(1, 0), Some("after-send:kill"))
            .wait_with_output()
            .unwrap();
        assert!(killed.status.code().is_none(), "{mode}: killed");
        let next = invoke(&cfg, &store, &now_for(1, 1));
        let r = next.receipt();
        assert_eq!(r["event"], "resumed", "{mode}: {}", next.stderr);
        assert_eq!(r["messages"][0]["detail"], "already in file", "{mode}: {r}");
        let text = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 1, "{mode}: appended once: {text}");
    }
}

#[test]
fn with_a_fixed_now_and_a_real_clock_a_dead_claim_stays_live_for_its_real_lease() {
    warm_cache();
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let store = dir.path().join("s.db");
    // No virtual time: `--now` fixes the window, leases run on the host's
    // clock. The owner is stopped, not killed: a killed one on this
    // machine would be taken over at once, whatever its lease.
    let stalled = command(
        &root(),
        &[
            "run",
            "--config",
            s(&cfg),
            "--store",
            s(&store),
            "--now",
            "2026-11-09T00:05:00Z",
        ],
    )
    .env("JOBHOST_TEST_FAILPOINT", "after-claim:stop")
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    wait_until_stopped(&stalled, "after-claim");
    // A day later by `--now`, but seconds later in fact: the claim is live.
    let next = jobhost(&[
        "run",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2026-11-09T23:00:00Z",
    ]);
    let r = next.receipt();
    assert_eq!(r["reason"], "busy", "{}", next.stderr);
    assert_eq!(r["fence"], 1);
    let mut stalled = stalled;
    let _ = stalled.kill();
    let _ = stalled.wait();
}
