//! `jobhost plan`: which due windows would run, which missed ones would be
//! skipped and why, and the next window to come due, without running
//! anything; and the job's delay, which `run` honours too.

use std::path::Path;

use serde_json::Value;

use crate::harness::*;

/// The reference report with `extra` config lines at the top.
fn job_with(dir: &Path, extra: &str) -> std::path::PathBuf {
    report_config_with(dir, 100, extra)
}

/// `plan --json` lines: (key, decision, detail).
fn plan(cfg: &Path, store: &Path, now: &str, more: &[&str]) -> Vec<(String, String, String)> {
    let mut args = vec![
        "plan",
        "--config",
        s(cfg),
        "--store",
        s(store),
        "--now",
        now,
        "--json",
    ];
    args.extend_from_slice(more);
    let run = jobhost(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (
                v["key"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("daily-report:")
                    .to_string(),
                v["decision"].as_str().unwrap().to_string(),
                v["detail"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn decisions(p: &[(String, String, String)]) -> Vec<(&str, &str)> {
    p.iter().map(|(k, d, _)| (k.as_str(), d.as_str())).collect()
}

#[test]
fn a_fresh_store_plans_only_the_newest_due_window_and_is_not_created() {
    let dir = scratch();
    let cfg = job_with(dir.path(), "");
    let store = dir.path().join("state").join("s.db");
    let p = plan(&cfg, &store, "2026-11-09T00:05:00Z", &[]);
    assert_eq!(
        decisions(&p),
        [("2026-11-08", "run"), ("2026-11-09", "next")],
        "no back-fill without --since"
    );
    assert!(!store.exists(), "planning created nothing");
    assert!(!dir.path().join("out.jsonl").exists(), "and ran nothing");
}

#[test]
fn after_an_outage_every_missed_window_is_decided_by_the_jobs_policy() {
    for (policy, want) in [
        (
            "catch_up = \"all\"\nmax_catch_up = 2",
            vec!["skip", "skip", "skip", "run", "run"],
        ),
        (
            "catch_up = \"latest\"",
            vec!["skip", "skip", "skip", "skip", "run"],
        ),
        (
            "catch_up = \"none\"",
            vec!["skip", "skip", "skip", "skip", "run"],
        ),
    ] {
        let dir = scratch();
        let cfg = job_with(dir.path(), policy);
        let store = dir.path().join("s.db");
        // The job last ran for the 3rd; the host was down until the 9th.
        let ran = run_job(&cfg, &store, "2026-11-04T00:05:00Z");
        assert_eq!(ran.event(), "ran", "{}", ran.stderr);
        let p = plan(&cfg, &store, "2026-11-09T00:05:00Z", &[]);
        let keys: Vec<&str> = p.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "2026-11-04",
                "2026-11-05",
                "2026-11-06",
                "2026-11-07",
                "2026-11-08",
                "2026-11-09"
            ],
            "{policy}: every window of the gap, once"
        );
        let got: Vec<&str> = p[..5].iter().map(|(_, d, _)| d.as_str()).collect();
        assert_eq!(got, want, "{policy}");
        assert_eq!(p[5].1, "next");
        assert!(
            p.iter()
                .filter(|(_, d, _)| d == "skip")
                .all(|(_, _, why)| why.contains("missed")),
            "{policy}: every skip says why: {p:?}"
        );
        // Planning is read-only: the store still holds the one run.
        assert_eq!(history(&store).len(), 1);
    }
}

#[test]
fn since_reaches_back_and_shows_what_the_store_already_holds() {
    let dir = scratch();
    let cfg = job_with(dir.path(), "catch_up = \"all\"\nmax_catch_up = 10");
    let store = dir.path().join("s.db");
    let ran = run_job(&cfg, &store, "2026-11-07T00:05:00Z");
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    let p = plan(
        &cfg,
        &store,
        "2026-11-09T00:05:00Z",
        &["--since", "2026-11-05T00:00:00Z"],
    );
    assert_eq!(
        decisions(&p),
        [
            ("2026-11-05", "run"),
            ("2026-11-06", "recorded"),
            ("2026-11-07", "run"),
            ("2026-11-08", "run"),
            ("2026-11-09", "next")
        ]
    );
    assert_eq!(p[1].2, "DONE");
}

#[test]
fn a_delay_holds_a_closed_window_back_in_plan_and_in_run() {
    let dir = scratch();
    let cfg = job_with(dir.path(), "delay_seconds = 3600");
    let store = dir.path().join("s.db");
    // At 00:30 the 8th has closed but is not due until 01:00.
    let p = plan(&cfg, &store, "2026-11-09T00:30:00Z", &[]);
    assert_eq!(
        decisions(&p),
        [("2026-11-07", "run"), ("2026-11-08", "next")]
    );
    let text = jobhost(&[
        "plan",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2026-11-09T00:30:00Z",
    ]);
    assert!(
        text.stdout.contains("daily-report:2026-11-08")
            && text.stdout.contains("due 2026-11-09T01:00:00Z"),
        "{}",
        text.stdout
    );
    let run = run_job(&cfg, &store, "2026-11-09T00:30:00Z");
    assert_eq!(
        run.receipt()["key"],
        "daily-report:2026-11-07",
        "{}",
        run.stdout
    );
    let run = run_job(&cfg, &store, "2026-11-09T01:00:00Z");
    assert_eq!(
        run.receipt()["key"],
        "daily-report:2026-11-08",
        "{}",
        run.stdout
    );
}

#[test]
fn bad_schedule_settings_and_times_are_refused_naming_them() {
    let dir = scratch();
    for (extra, says) in [
        (
            "catch_up = \"sometimes\"",
            "invalid `catch_up = \"sometimes\"`",
        ),
        ("max_catch_up = 0", "invalid `max_catch_up = 0`"),
        (
            "delay_seconds = 99999999",
            "invalid `delay_seconds = 99999999`",
        ),
        (
            "jitter_seconds = 99999999",
            "invalid `jitter_seconds = 99999999`",
        ),
    ] {
        let cfg = job_with(dir.path(), extra);
        let run = jobhost(&["plan", "--config", s(&cfg), "--now", "2026-11-09T00:05:00Z"]);
        assert_eq!(run.code, 2, "{extra}: {}", run.stderr);
        assert!(run.stderr.contains(says), "{extra}: {}", run.stderr);
        let run = run_job(&cfg, dir.path().join("s.db"), "2026-11-09T00:05:00Z");
        assert_eq!(run.code, 2, "{extra}: run refuses it too");
    }
    let cfg = job_with(dir.path(), "");
    let run = jobhost(&[
        "plan",
        "--config",
        s(&cfg),
        "--since",
        "2026-11-01T00:00:00",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("invalid --since"), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}
