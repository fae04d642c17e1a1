//! Ping URLs: a monitor hears when a run starts, succeeds or fails, from
//! `jobhost run` and from the daemon alike; a monitor that fails never
//! changes a run's outcome, and its credentials appear nowhere.

use std::path::{Path, PathBuf};

use jobhost_tests::sink::{Reply, Sink};
use serde_json::Value;

use crate::harness::*;

/// The monitor's secret part of its URLs, from the environment.
const UUID: &str = "5f0c3e2a-9d41-4b7e-a1c6-secret-uuid";

/// `cfg` with a `[ping]` table pointing at `sink` (`${HC_UUID}` in each
/// URL), plus `extra` lines in the table.
fn with_pings(cfg: &Path, sink: &Sink, extra: &str) -> PathBuf {
    let text = std::fs::read_to_string(cfg).unwrap();
    let base = sink.url("/ping/${HC_UUID}");
    std::fs::write(
        cfg,
        format!(
            "{text}\n[ping]\nstart = \"{base}/start\"\nsuccess = \"{base}\"\nfailure = \"{base}/fail\"\n{extra}\n"
        ),
    )
    .unwrap();
    cfg.to_path_buf()
}

/// `jobhost run` in virtual time with the monitor's secret set.
fn run(cfg: &Path, store: &Path, now: &str) -> Run {
    to_run(
        job_command(cfg, store, now)
            .env("HC_UUID", UUID)
            .output()
            .unwrap(),
    )
}

/// The pings the monitor received: (which, body).
fn pings(sink: &Sink) -> Vec<(String, String)> {
    let prefix = format!("/ping/{UUID}");
    sink.requests()
        .iter()
        .filter_map(|r| {
            let rest = r.path.strip_prefix(&prefix)?;
            let which = match rest {
                "/start" => "start",
                "" => "success",
                "/fail" => "failure",
                other => panic!("unexpected ping path {other}"),
            };
            Some((
                which.to_string(),
                String::from_utf8_lossy(&r.body).into_owned(),
            ))
        })
        .collect()
}

#[test]
fn a_run_pings_start_then_success_and_a_window_already_done_pings_nothing() {
    let sink = Sink::start();
    let dir = scratch();
    let cfg = with_pings(&report_config(dir.path(), 100), &sink, "");
    let store = dir.path().join("s.db");
    let first = run(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(first.code, 0, "{}", first.stderr);
    let r = first.receipt();
    assert_eq!(r["event"], "ran");
    assert_eq!(r["pings"]["start"]["status"], "sent");
    assert_eq!(r["pings"]["start"]["http_status"], 200);
    assert_eq!(r["pings"]["success"]["status"], "sent");
    assert!(r["pings"].get("failure").is_none(), "{r}");
    assert_eq!(
        pings(&sink),
        [
            (
                "start".to_string(),
                "start daily-report:2026-11-08 attempt 1".to_string()
            ),
            (
                "success".to_string(),
                "ran daily-report:2026-11-08".to_string()
            ),
        ],
        "in order, and never the report's contents"
    );
    let again = run(&cfg, &store, "2026-11-09T00:10:00Z");
    assert_eq!(again.receipt()["reason"], "done");
    assert!(again.receipt().get("pings").is_none());
    assert_eq!(pings(&sink).len(), 2, "a skip is not a run: no ping");
    for out in [&first.stdout, &first.stderr, &again.stdout] {
        assert!(!out.contains(UUID), "the monitor's secret leaked: {out}");
    }

    // The daemon runs windows through the same path: it pings too.
    let out = to_run(
        daemon_command(
            &[&cfg],
            s(&store),
            "2026-11-10T00:30:00Z",
            "2026-11-10T01:00:00Z",
        )
        .env("HC_UUID", UUID)
        .output()
        .unwrap(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let p = pings(&sink);
    assert_eq!(p.len(), 4, "{p:?}");
    assert_eq!(p[3].1, "ran daily-report:2026-11-09");
}

#[test]
fn a_failed_run_pings_failure_with_its_error() {
    let sink = Sink::start();
    sink.script("/digest", &[Reply::Status(400)]);
    let dir = scratch();
    let cfg = crate::effects::http_config(
        dir.path(),
        "",
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntimeout_seconds = 2\n",
            sink.url("/digest")
        ),
    );
    let cfg = with_pings(&cfg, &sink, "");
    let store = dir.path().join("s.db");
    let failed = run(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    assert_eq!(failed.receipt()["pings"]["failure"]["status"], "sent");
    let p = pings(&sink);
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!(p[0].0, "start");
    assert_eq!(p[1].0, "failure");
    assert!(
        p[1].1
            .starts_with("failed daily-report:2026-11-08: delivery: destination `digest`")
            && p[1].1.contains("400"),
        "{}",
        p[1].1
    );
}

#[test]
fn a_monitor_that_fails_or_cannot_be_reached_never_changes_the_run() {
    let sink = Sink::start();
    let path = format!("/ping/{UUID}");
    sink.script(
        &path,
        &[Reply::Status(500), Reply::Status(503), Reply::Status(502)],
    );
    let dir = scratch();
    let cfg = with_pings(&report_config(dir.path(), 100), &sink, "tries = 3");
    let store = dir.path().join("s.db");
    let ran = run(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let r = ran.receipt();
    assert_eq!(r["event"], "ran");
    let success = &r["pings"]["success"];
    assert_eq!(success["status"], "failed");
    assert_eq!(success["attempts"], 3, "tried three times");
    assert_eq!(success["http_status"], 502);
    assert_eq!(
        history(&store)[0]["state"],
        "DONE",
        "the run is done all the same"
    );
    assert!(
        ran.stderr.contains("ping `success`")
            && ran.stderr.contains("/ping/${HC_UUID}")
            && ran.stderr.contains("the run itself is not affected"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains(UUID) && !ran.stdout.contains(UUID));

    // Nothing listening at all: the same, after its tries.
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{text}\n[ping]\nsuccess = \"http://127.0.0.1:9/${{HC_UUID}}\"\ntries = 2\n"),
    )
    .unwrap();
    let store = dir.path().join("s.db");
    let ran = run(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let r: Value = ran.receipt();
    assert_eq!(r["event"], "ran");
    assert_eq!(r["pings"]["success"]["status"], "failed");
    assert_eq!(r["pings"]["success"]["attempts"], 2);
    assert!(
        r["pings"]["success"]["detail"]
            .as_str()
            .unwrap()
            .contains("http://127.0.0.1:9/${HC_UUID}"),
        "{r}"
    );
    assert!(!ran.stdout.contains(UUID) && !ran.stderr.contains(UUID));
}

#[test]
fn a_ping_url_whose_variable_is_unset_is_bad_input_before_anything_runs() {
    let sink = Sink::start();
    let dir = scratch();
    let cfg = with_pings(&report_config(dir.path(), 100), &sink, "");
    let store = dir.path().join("s.db");
    let run = to_run(
        job_command(&cfg, &store, "2026-11-09T00:05:00Z")
            .env_remove("HC_UUID")
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    let msg = run.receipt()["error"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        msg.contains("`ping.start`") && msg.contains("set HC_UUID"),
        "{msg}"
    );
    assert!(!store.exists(), "nothing was created");
    assert!(sink.requests().is_empty());
}
