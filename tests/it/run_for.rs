//! `jobhost run --for LABEL|INSTANT`: a person runs a window they name,
//! through the same claim as a plain `run`; and `window = "month"`, run by
//! `run`, `--for`, `status` and the daemon.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

/// The reference report's config in `dir` with `top` lines before it.
fn job_config(dir: &Path, top: &str) -> PathBuf {
    report_config_with(dir, 3000, top)
}

/// `jobhost run --for TEXT` at `now`.
fn run_for(cfg: &Path, store: &Path, now: &str, text: &str) -> Run {
    let mut cmd = job_command(cfg, store, now);
    cmd.args(["--for", text]);
    to_run(cmd.output().expect("jobhost runs"))
}

/// Rows of the sample data in `[start, end)`, RFC 3339.
fn rows_between(dir: &Path, start: &str, end: &str) -> i64 {
    let secs = |t: &str| t.parse::<jiff::Timestamp>().unwrap().as_second();
    rusqlite::Connection::open(dir.join("sales.db"))
        .unwrap()
        .query_row(
            "SELECT count(*) FROM sales WHERE ts >= ?1 AND ts < ?2",
            [secs(start), secs(end)],
            |row| row.get(0),
        )
        .unwrap()
}

fn delivered(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("out.jsonl"))
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

/// Each stored window's key and state, newest first.
fn states(store: &Path) -> Vec<(String, String)> {
    history(store)
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(want: &[(&str, &str)]) -> Vec<(String, String)> {
    want.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_closed_window_named_by_its_label_runs_once_and_then_answers_done() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 3000);
    let store = dir.path().join("s.db");
    let first = run_for(&cfg, &store, "2026-11-10T00:05:00Z", "2026-11-03");
    let r = first.receipt();
    assert_eq!(
        (first.code, r["event"].as_str()),
        (0, Some("ran")),
        "{}",
        first.stderr
    );
    assert_eq!(r["key"], "daily-report:2026-11-03");
    assert_eq!(r["now"], "2026-11-10T00:05:00Z", "--now keeps its meaning");
    assert_eq!(r["window"]["start"], "2026-11-03T00:00:00Z");
    assert_eq!(r["window"]["end"], "2026-11-04T00:00:00Z");
    let rows = rows_between(dir.path(), "2026-11-03T00:00:00Z", "2026-11-04T00:00:00Z");
    assert!(rows > 0);
    assert_eq!(
        r["stats"]["rows"], rows,
        "the named window's rows, no others"
    );
    assert_eq!(delivered(dir.path()), 1);
    // Named again: the same claim as a plain run answers that it is done.
    let again = run_for(&cfg, &store, "2026-11-10T00:06:00Z", "2026-11-03");
    assert_eq!(
        (again.code, again.event()),
        (0, "skipped".to_string()),
        "{}",
        again.stderr
    );
    assert_eq!(again.receipt()["key"], "daily-report:2026-11-03");
    assert_eq!(delivered(dir.path()), 1, "nothing is sent twice");
    // A plain run still runs the newest due window.
    let plain = run_job(&cfg, &store, "2026-11-10T00:07:00Z");
    assert_eq!(
        plain.receipt()["key"],
        "daily-report:2026-11-09",
        "{}",
        plain.stderr
    );
    assert_eq!(
        states(&store),
        pairs(&[
            ("daily-report:2026-11-09", "DONE"),
            ("daily-report:2026-11-03", "DONE")
        ])
    );
}

#[test]
fn a_window_that_has_not_closed_is_refused_saying_when_it_closes() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let store = dir.path().join("s.db");
    let open = run_for(&cfg, &store, "2026-11-10T00:05:00Z", "2026-11-10");
    assert_eq!(open.code, 2, "{}", open.stderr);
    let r = open.receipt();
    assert_eq!(r["event"], "failed");
    assert_eq!(r["error"]["kind"], "invalid-input", "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("--for")
            && msg.contains("has not closed")
            && msg.contains("closes at 2026-11-11T00:00:00Z"),
        "{msg}"
    );
    assert!(
        open.stderr.contains("closes at 2026-11-11T00:00:00Z"),
        "{}",
        open.stderr
    );
    assert_eq!(open.stderr.lines().count(), 1, "one line: {}", open.stderr);
    // An instant in the future is refused the same way.
    let later = run_for(&cfg, &store, "2026-11-10T00:05:00Z", "2026-11-12T08:00:00Z");
    assert_eq!(later.code, 2, "{}", later.stderr);
    assert!(
        later.stderr.contains("closes at 2026-11-13T00:00:00Z"),
        "{}",
        later.stderr
    );
    assert!(
        !store.exists(),
        "nothing was claimed, the store was not even opened"
    );
    assert_eq!(delivered(dir.path()), 0);
}

#[test]
fn a_label_that_names_no_window_of_the_job_is_refused_with_an_example() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let store = dir.path().join("s.db");
    for text in ["2026-W45", "2026-02-30", "2026-11", "yesterday"] {
        let bad = run_for(&cfg, &store, "2026-11-10T00:05:00Z", text);
        assert_eq!(bad.code, 2, "{text}: {}", bad.stderr);
        let msg = bad.receipt()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            msg.contains(&format!("--for `{text}`")) && msg.contains("`2026-11-09`"),
            "{text}: names the flag and a valid label: {msg}"
        );
        assert_eq!(bad.stderr.lines().count(), 1, "{}", bad.stderr);
    }
    assert!(!store.exists());
}

#[test]
fn a_window_the_daemon_skipped_runs_when_named() {
    let dir = scratch();
    let cfg = job_config(dir.path(), "catch_up = \"latest\"");
    let store = dir.path().join("s.db");
    for (from, until) in [
        ("2026-11-05T00:30:00Z", "2026-11-05T01:00:00Z"),
        ("2026-11-09T00:30:00Z", "2026-11-09T01:00:00Z"),
    ] {
        let d = to_run(
            daemon_command(&[&cfg], s(&store), from, until)
                .output()
                .unwrap(),
        );
        assert_eq!(d.code, 0, "{}", d.stderr);
    }
    assert_eq!(
        states(&store),
        pairs(&[
            ("daily-report:2026-11-08", "DONE"),
            ("daily-report:2026-11-07", "SKIPPED"),
            ("daily-report:2026-11-06", "SKIPPED"),
            ("daily-report:2026-11-05", "SKIPPED"),
            ("daily-report:2026-11-04", "DONE"),
        ])
    );
    let before = delivered(dir.path());
    let run = run_for(&cfg, &store, "2026-11-09T02:00:00Z", "2026-11-06");
    let r = run.receipt();
    assert_eq!(
        (run.code, r["event"].as_str()),
        (0, Some("ran")),
        "{}",
        run.stderr
    );
    assert_eq!(r["key"], "daily-report:2026-11-06");
    assert_eq!(delivered(dir.path()), before + 1);
    let now = states(&store);
    assert!(
        now.contains(&("daily-report:2026-11-06".into(), "DONE".into())),
        "{now:?}"
    );
    assert!(
        now.contains(&("daily-report:2026-11-05".into(), "SKIPPED".into())),
        "{now:?}"
    );
    assert!(
        now.contains(&("daily-report:2026-11-07".into(), "SKIPPED".into())),
        "{now:?}"
    );
}

#[test]
fn an_instant_names_the_window_that_contains_it() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 1000);
    let store = dir.path().join("s.db");
    for (text, key) in [
        // 04:30 UTC on the 5th.
        ("2026-11-04T23:30:00-05:00", "daily-report:2026-11-05"),
        // The very last instant of the 6th.
        ("2026-11-06T23:59:59.999Z", "daily-report:2026-11-06"),
        (
            "2026-11-08T00:30:00[Europe/Berlin]",
            "daily-report:2026-11-07",
        ),
    ] {
        let run = run_for(&cfg, &store, "2026-11-10T00:05:00Z", text);
        let r = run.receipt();
        assert_eq!(
            (run.code, r["event"].as_str()),
            (0, Some("ran")),
            "{text}: {}",
            run.stderr
        );
        assert_eq!(r["key"], key, "{text}");
    }
    assert_eq!(delivered(dir.path()), 3);
}

#[test]
fn a_month_job_runs_the_month_that_closed_and_refuses_one_still_open() {
    let dir = scratch();
    let cfg = job_config(
        dir.path(),
        "window = \"month\"\ntimezone = \"Europe/Berlin\"",
    );
    let store = dir.path().join("s.db");
    let run = run_job(&cfg, &store, "2026-11-30T23:05:00Z");
    let r = run.receipt();
    assert_eq!(
        (run.code, r["event"].as_str()),
        (0, Some("ran")),
        "{}",
        run.stderr
    );
    assert_eq!(r["key"], "daily-report:2026-11");
    assert_eq!(r["window"]["label"], "2026-11", "{r}");
    assert_eq!(r["window"]["start"], "2026-10-31T23:00:00Z");
    assert_eq!(r["window"]["end"], "2026-11-30T23:00:00Z");
    let rows = rows_between(dir.path(), "2026-10-31T23:00:00Z", "2026-11-30T23:00:00Z");
    assert_eq!(r["stats"]["rows"], rows, "the whole month's rows");
    // October, with its 25-hour last Sunday, named by label.
    let oct = run_for(&cfg, &store, "2026-11-30T23:06:00Z", "2026-10");
    let r = oct.receipt();
    assert_eq!(
        (oct.code, r["key"].as_str()),
        (0, Some("daily-report:2026-10")),
        "{}",
        oct.stderr
    );
    assert_eq!(r["window"]["start"], "2026-09-30T22:00:00Z");
    assert_eq!(r["window"]["end"], "2026-10-31T23:00:00Z");
    let dec = run_for(&cfg, &store, "2026-11-30T23:06:00Z", "2026-12");
    assert_eq!(dec.code, 2, "{}", dec.stderr);
    assert!(
        dec.stderr.contains("closes at 2026-12-31T23:00:00Z"),
        "{}",
        dec.stderr
    );
    let day = run_for(&cfg, &store, "2026-11-30T23:06:00Z", "2026-11-03");
    assert_eq!(day.code, 2, "{}", day.stderr);
    assert!(
        day.stderr.contains("month window") && day.stderr.contains("`2026-11`"),
        "{}",
        day.stderr
    );
}

#[test]
fn a_daemon_runs_each_month_when_it_closes_and_status_agrees() {
    let dir = scratch();
    let cfg = job_config(
        dir.path(),
        "window = \"month\"\ntimezone = \"America/New_York\"",
    );
    let store = dir.path().join("s.db");
    let d = to_run(
        daemon_command(
            &[&cfg],
            s(&store),
            "2026-11-15T00:00:00Z",
            "2027-01-01T06:00:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(d.code, 0, "{}", d.stderr);
    let lines: Vec<Value> = d
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ran: Vec<(&str, &str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["key"].as_str().unwrap(),
                l["event"].as_str().unwrap(),
                l["window"]["end"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        ran,
        [
            // A fresh store starts with the newest due month.
            ("daily-report:2026-10", "ran", "2026-11-01T04:00:00Z"),
            // November ends at New York midnight, standard time.
            ("daily-report:2026-11", "ran", "2026-12-01T05:00:00Z"),
            ("daily-report:2026-12", "ran", "2027-01-01T05:00:00Z"),
        ],
        "{}",
        d.stdout
    );
    for l in &lines[1..] {
        assert_eq!(
            l["now"], l["window"]["end"],
            "run the moment it closes: {l}"
        );
    }
    let st = jobhost(&[
        "status",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2027-01-01T06:00:00Z",
        "--json",
    ]);
    assert_eq!(st.code, 0, "{}{}", st.stdout, st.stderr);
    let v: Value = serde_json::from_str(st.stdout.trim()).unwrap();
    assert_eq!(v["health"], "healthy", "{v}");
    assert_eq!(v["last_done"], "daily-report:2026-12", "{v}");
    let plan = jobhost(&[
        "plan",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2027-02-01T06:00:00Z",
        "--json",
    ]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stdout.contains("daily-report:2027-01"),
        "{}",
        plan.stdout
    );
}
