//! Bounded concurrency: a daemon runs up to `--max-concurrent-runs` jobs at
//! once, a source's `max_concurrent` and a destination's `max_concurrent`
//! and `max_per_second` hold across every job of the host that names them,
//! a guest's time limit stops only its own run when runs share the engine,
//! and `backfill --parallel` delivers what a backfill one window at a time
//! delivers (a job that keeps a cursor still runs in window order). Caps
//! are counted where they matter: on the database (its active queries) and
//! on the endpoint (its requests held unanswered at once).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jobhost_tests::pg::Scratch;
use jobhost_tests::sink::Sink;
use serde_json::Value;

use crate::harness::*;

const NOW: &str = "2026-11-09T00:30:00Z";

/// `text` as a TOML basic string.
fn toml_str(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// A job file `NAME.toml` in `dir` for the probe guest in `mode`, hourly,
/// with `rest` after its top-level keys.
fn probe_job(dir: &Path, name: &str, mode: &str, rest: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "job = \"{name}\"\nwindow = \"hour\"\ntimezone = \"UTC\"\ncomponent = {}\n\
             [params]\nmode = \"{mode}\"\n{rest}\n",
            toml_str(&guests().probe.display().to_string())
        ),
    )
    .unwrap();
    path
}

/// The receipts of a daemon's or a backfill's stdout.
fn receipts(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("event").is_some() && v.get("key").is_some())
        .collect()
}

/// Samples the server's active queries whose text holds each marker, about
/// every 10 ms, until `stop`; returns the most seen at once for each
/// marker and for all of them together.
fn sample_active(
    server: String,
    markers: &'static [&'static str],
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<(Vec<i64>, i64)> {
    std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&server, postgres::NoTls).unwrap();
        let mut most = vec![0; markers.len()];
        let mut together = 0;
        while !stop.load(Ordering::SeqCst) {
            let mut all = 0;
            for (i, m) in markers.iter().enumerate() {
                let n: i64 = c
                    .query_one(
                        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' \
                         AND pid <> pg_backend_pid() AND strpos(query, $1) > 0",
                        &[m],
                    )
                    .unwrap()
                    .get(0);
                most[i] = most[i].max(n);
                all += n;
            }
            together = together.max(all);
            std::thread::sleep(Duration::from_millis(10));
        }
        (most, together)
    })
}

#[test]
fn a_daemon_runs_up_to_its_cap_of_jobs_at_once_and_a_source_cap_holds_for_every_job_naming_it() {
    let Some(db) = Scratch::new("concurrency") else {
        return;
    };
    let mut c = db.client();
    // One row in the window each job runs (00:00 to 01:00 on 2026-11-09),
    // and a query that sleeps 0.6 s for it: long enough to be seen.
    c.batch_execute(
        "CREATE TABLE t (ts timestamptz NOT NULL);
         INSERT INTO t VALUES ('2026-11-08T23:20:00Z');",
    )
    .unwrap();
    let tmp = scratch();
    // Four jobs read source A, capped at 2; two read source B (the same
    // database under another URL, so another source), with no cap.
    let url_a = db.url();
    let url_b = format!("{}&connect_timeout=30", db.url());
    let query = |marker: &str| {
        format!(
            "SELECT ts /* {marker} */ FROM t, LATERAL (SELECT pg_sleep(0.6)) AS s \
             WHERE ts >= $1 AND ts < $2"
        )
    };
    let mut configs = Vec::new();
    for (i, (url, marker, cap)) in [
        (&url_a, "cap-src-a", "max_concurrent = 2\n"),
        (&url_a, "cap-src-a", "max_concurrent = 2\n"),
        (&url_a, "cap-src-a", "max_concurrent = 2\n"),
        (&url_a, "cap-src-a", "max_concurrent = 2\n"),
        (&url_b, "cap-src-b", ""),
        (&url_b, "cap-src-b", ""),
    ]
    .into_iter()
    .enumerate()
    {
        configs.push(probe_job(
            tmp.path(),
            &format!("reader-{i}"),
            "read-all",
            &format!(
                "[source]\ntype = \"postgres\"\nurl = {}\nquery = {}\n{cap}",
                toml_str(url),
                toml_str(&query(marker))
            ),
        ));
    }
    let store = tmp.path().join("s.db");
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_active(
        jobhost_tests::pg::configured().unwrap(),
        &["cap-src-a", "cap-src-b"],
        stop.clone(),
    );
    let refs: Vec<&Path> = configs.iter().map(PathBuf::as_path).collect();
    let run = to_run(
        daemon_command(&refs, s(&store), NOW, NOW)
            .args(["--max-concurrent-runs", "3"])
            .output()
            .unwrap(),
    );
    stop.store(true, Ordering::SeqCst);
    let (most, together) = sampler.join().unwrap();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ran = receipts(&run.stdout);
    assert_eq!(ran.len(), 6, "{}", run.stdout);
    for r in &ran {
        assert_eq!(r["event"], "ran", "{r}\n{}", run.stderr);
        let summary: Value =
            serde_json::from_str(r["report"]["summary"].as_str().unwrap()).unwrap();
        assert_eq!(summary["rows"], 1, "{r}");
    }
    assert!(most[0] <= 2, "source A is capped at 2, seen {most:?}");
    assert!(
        together <= 3,
        "3 runs at most, seen {together} queries at once"
    );
    assert!(
        together >= 2,
        "runs went on at the same time: 6 queries of 0.6 s on 3 workers, seen at most \
         {together} at once"
    );
}

/// Four jobs sending two messages each to the destination `table` (a
/// `[destinations.NAME]` table), run at once by one daemon, in real time
/// when `real_time` (a rate is kept on the daemon's clock, which virtual
/// time would move instead of waiting).
fn four_senders(table: &str, real_time: bool) -> Run {
    let tmp = scratch();
    let configs: Vec<PathBuf> = (0..4)
        .map(|i| probe_job(tmp.path(), &format!("sender-{i}"), "send-twice", table))
        .collect();
    let store = tmp.path().join("s.db");
    let refs: Vec<&Path> = configs.iter().map(PathBuf::as_path).collect();
    let mut cmd = daemon_command(&refs, s(&store), NOW, NOW);
    cmd.args(["--max-concurrent-runs", "4"]);
    if real_time {
        cmd.env_remove("JOBHOST_TEST_VIRTUAL_TIME");
    }
    let run = to_run(cmd.output().unwrap());
    assert_eq!(run.code, 0, "{}", run.stderr);
    for r in receipts(&run.stdout) {
        assert_eq!(r["event"], "ran", "{r}");
    }
    run
}

#[test]
fn sends_to_one_url_are_paced_across_every_job_that_names_it() {
    let sink = Sink::start();
    sink.answer_after(Duration::from_millis(300));
    four_senders(
        &format!(
            "[destinations.paced]\ntype = \"http\"\nurl = \"{}\"\nmax_per_second = 5\n",
            sink.url("/paced")
        ),
        true,
    );
    let paced = sink.requests();
    assert_eq!(paced.len(), 8, "4 jobs send 2 messages each");
    // Every message arrived once: its idempotency key is its own.
    let keys: std::collections::HashSet<_> =
        paced.iter().filter_map(|r| r.idempotency_key()).collect();
    assert_eq!(keys.len(), 8);
    // 5 a second: 8 sends take at least 7 spacings of 0.2 s.
    let first = paced.iter().map(|r| r.arrived).min().unwrap();
    let last = paced.iter().map(|r| r.arrived).max().unwrap();
    assert!(
        last.duration_since(first) >= Duration::from_millis(1_250),
        "8 sends at 5 a second took {:?}",
        last.duration_since(first)
    );
}

#[test]
fn a_destination_cap_holds_the_endpoint_to_that_many_requests_at_once() {
    let sink = Sink::start();
    // A slow endpoint, so that sends would pile up without the cap.
    sink.answer_after(Duration::from_millis(300));
    four_senders(
        &format!(
            "[destinations.hook]\ntype = \"http\"\nurl = \"{}\"\nmax_concurrent = 2\n",
            sink.url("/hook")
        ),
        false,
    );
    assert_eq!(sink.requests().len(), 8);
    let most = sink.most_in_flight();
    assert!(most <= 2, "capped at 2, the endpoint held {most} at once");
    assert!(
        most == 2,
        "4 jobs sending to a 0.3 s endpoint at once fill the cap of 2, seen {most}"
    );
}

#[test]
fn a_guest_time_limit_stops_only_its_own_run_when_runs_share_the_engine() {
    let tmp = scratch();
    let short = probe_job(
        tmp.path(),
        "short",
        "spin",
        "[limits]\ntimeout_seconds = 1\n",
    );
    let long = probe_job(
        tmp.path(),
        "long",
        "spin",
        "[limits]\ntimeout_seconds = 4\n",
    );
    let store = tmp.path().join("s.db");
    let started = std::time::Instant::now();
    let run = to_run(
        daemon_command(&[&short, &long], s(&store), NOW, NOW)
            .args(["--max-concurrent-runs", "2"])
            .output()
            .unwrap(),
    );
    // The long guest ran until its own limit, not until the short one's:
    // a bound the run cannot beat, not a speed.
    assert!(
        started.elapsed() >= Duration::from_secs(4),
        "the 4 s guest was stopped after {:?}",
        started.elapsed()
    );
    let ran = receipts(&run.stdout);
    assert_eq!(ran.len(), 2, "{}\n{}", run.stdout, run.stderr);
    for (job, limit) in [("short", 1), ("long", 4)] {
        let r = ran.iter().find(|r| r["job"] == job).unwrap();
        assert_eq!(r["event"], "failed", "{r}");
        assert_eq!(r["error"]["kind"], "guest-timeout", "{r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("time limit of {limit} s")),
            "{job} stops at its own limit: {message}"
        );
    }
}

/// `jobhost backfill` of `cfg` on `store` from `from` to the end of
/// 2026-11-08, `--parallel` as given.
fn backfill(cfg: &Path, store: &Path, from: &str, parallel: &str) -> Run {
    jobhost(&[
        "backfill",
        "--config",
        s(cfg),
        "--store",
        s(store),
        "--now",
        NOW,
        "--from",
        from,
        "--to",
        "2026-11-09T00:00:00Z",
        "--parallel",
        parallel,
    ])
}

/// The lines a file destination received, sorted.
fn delivered(path: &Path) -> Vec<String> {
    let mut lines: Vec<String> = std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

#[test]
fn backfill_parallel_delivers_what_one_window_at_a_time_delivers() {
    let mut outputs = Vec::new();
    for parallel in ["1", "4"] {
        let tmp = scratch();
        let cfg = probe_job(
            tmp.path(),
            "sender",
            "send-twice",
            "[destinations.out]\ntype = \"file\"\npath = \"out.jsonl\"\n",
        );
        let store = tmp.path().join("s.db");
        let run = backfill(&cfg, &store, "2026-11-08T12:00:00Z", parallel);
        assert_eq!(run.code, 0, "--parallel {parallel}: {}", run.stderr);
        assert!(
            run.stderr.contains("12 ran, 0 skipped, 0 failed"),
            "--parallel {parallel}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("keeps a cursor"), "{}", run.stderr);
        let done = history(&store)
            .iter()
            .filter(|r| r["state"] == "DONE")
            .count();
        assert_eq!(done, 12);
        outputs.push(delivered(&tmp.path().join("out.jsonl")));
    }
    assert_eq!(outputs[0].len(), 24, "12 windows, 2 messages each");
    assert_eq!(
        outputs[0], outputs[1],
        "the same messages, with the same keys"
    );
}

#[test]
fn backfill_parallel_runs_a_job_that_keeps_a_cursor_in_window_order() {
    let tmp = scratch();
    let cfg = report_config_with(tmp.path(), 2_000, "window = \"hour\"\ntimezone = \"UTC\"");
    let store = tmp.path().join("s.db");
    let run = backfill(&cfg, &store, "2026-11-08T18:00:00Z", "4");
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("keeps a cursor") && run.stderr.contains("in window order"),
        "{}",
        run.stderr
    );
    let keys: Vec<String> = receipts(&run.stdout)
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys.len(), 6, "{}", run.stdout);
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "one after another, in window order");
}

#[test]
fn bad_concurrency_flags_and_caps_are_refused_naming_them() {
    let tmp = scratch();
    let cfg = probe_job(tmp.path(), "sender", "send-twice", "");
    for (args, says) in [
        (
            vec!["daemon", "--config", s(&cfg), "--max-concurrent-runs", "0"],
            "invalid --max-concurrent-runs `0`: give a number from 1 to 1024",
        ),
        (
            vec![
                "backfill",
                "--config",
                s(&cfg),
                "--from",
                "2026-11-08",
                "--to",
                "2026-11-09",
                "--parallel",
                "many",
            ],
            "invalid --parallel `many`",
        ),
    ] {
        let run = jobhost(&args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{args:?}: {}", run.stderr);
    }
    let bad = probe_job(
        tmp.path(),
        "bad",
        "send-twice",
        "[destinations.hook]\ntype = \"http\"\nurl = \"http://127.0.0.1:9/x\"\nmax_per_second = -1\n",
    );
    let run = run_job(&bad, tmp.path().join("s.db"), NOW);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("invalid `destinations.hook.max_per_second = -1`"),
        "{}",
        run.stderr
    );
}
