//! Local time inside reports: a Python report and a Rust report count the
//! rows of the Berlin day the clocks go back (25 hours, the 02:00 hour
//! twice) by local hour with the SDKs' `window.local`, and give the same
//! 25 buckets, with no zone data in the Python component; a run of it
//! replays identically; a component built for the previous release of the
//! WIT still runs. And a report's programming error (a column the query
//! does not have) fails the window for good in both languages, a Python
//! traceback without the runtime's panic lines after it.

use std::path::{Path, PathBuf};

use crate::harness::*;

/// The Berlin day 2026-10-25: from 2026-10-24T22:00:00Z, 25 hours.
const DAY_START: i64 = 1_792_879_200;
const DAY_END: i64 = DAY_START + 25 * 3600;

/// Rows in every hour of the day: at its first second, its middle and its
/// last second, and `h % 3` more (so the counts tell the hours apart), plus
/// one row either side of the day, which the query leaves out.
fn events_db(dir: &Path) -> PathBuf {
    let path = dir.join("events.db");
    let db = rusqlite::Connection::open(&path).unwrap();
    db.execute_batch("CREATE TABLE events (id INTEGER PRIMARY KEY, ts INTEGER NOT NULL)")
        .unwrap();
    let mut ts = vec![DAY_START - 1, DAY_END];
    for h in 0..25 {
        let hour = DAY_START + h * 3600;
        ts.extend([hour, hour + 1799, hour + 3599]);
        ts.extend((0..h % 3).map(|i| hour + 600 + i));
    }
    for t in ts {
        db.execute("INSERT INTO events (ts) VALUES (?1)", [t])
            .unwrap();
    }
    path
}

/// The 25 local hours of the day as RFC 3339, worked out by hand: two
/// hours at +02:00, 02:00 at +02:00 and again at +01:00, then the rest.
const HOURS: [&str; 25] = [
    "2026-10-25T00:00:00+02:00",
    "2026-10-25T01:00:00+02:00",
    "2026-10-25T02:00:00+02:00",
    "2026-10-25T02:00:00+01:00",
    "2026-10-25T03:00:00+01:00",
    "2026-10-25T04:00:00+01:00",
    "2026-10-25T05:00:00+01:00",
    "2026-10-25T06:00:00+01:00",
    "2026-10-25T07:00:00+01:00",
    "2026-10-25T08:00:00+01:00",
    "2026-10-25T09:00:00+01:00",
    "2026-10-25T10:00:00+01:00",
    "2026-10-25T11:00:00+01:00",
    "2026-10-25T12:00:00+01:00",
    "2026-10-25T13:00:00+01:00",
    "2026-10-25T14:00:00+01:00",
    "2026-10-25T15:00:00+01:00",
    "2026-10-25T16:00:00+01:00",
    "2026-10-25T17:00:00+01:00",
    "2026-10-25T18:00:00+01:00",
    "2026-10-25T19:00:00+01:00",
    "2026-10-25T20:00:00+01:00",
    "2026-10-25T21:00:00+01:00",
    "2026-10-25T22:00:00+01:00",
    "2026-10-25T23:00:00+01:00",
];

/// A day job in Europe/Berlin over `events.db` with `component` and `query`.
fn job(dir: &Path, tag: &str, component: &Path, query: &str) -> PathBuf {
    let path = dir.join(format!("{tag}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"job = "signups"
component = "{}"
window = "day"
timezone = "Europe/Berlin"
max_attempts = 3

[source]
path = "events.db"
query = "{query}"

[limits]
memory_mib = 128
timeout_seconds = 30
"#,
            component.display()
        ),
    )
    .unwrap();
    path
}

const QUERY: &str = "SELECT ts FROM events WHERE ts >= :start AND ts < :end ORDER BY ts";

/// The morning after, in Berlin: the day of 2026-10-25 has closed.
const NOW: &str = "2026-10-26T06:00:00Z";

#[test]
fn python_and_rust_reports_bucket_the_day_the_clocks_go_back_into_the_same_25_local_hours() {
    let dir = scratch();
    events_db(dir.path());
    let expected: Vec<String> = HOURS
        .iter()
        .enumerate()
        .map(|(h, hour)| format!("{hour} {}", 3 + h % 3))
        .collect();
    let mut summaries = Vec::new();
    for (tag, component) in [
        ("rust", &guests().local_hours),
        ("python", &python_guests().local_hours),
    ] {
        let cfg = job(dir.path(), tag, component, QUERY);
        let store = dir.path().join(format!("{tag}.db"));
        let run = run_job(&cfg, &store, NOW);
        let r = run.receipt();
        assert_eq!(
            (run.code, r["event"].as_str(), r["key"].as_str()),
            (0, Some("ran"), Some("signups:2026-10-25")),
            "{tag}: {}\n{}",
            run.stdout,
            run.stderr
        );
        let summary = r["report"]["summary"].as_str().unwrap().to_string();
        let lines: Vec<&str> = summary.lines().collect();
        assert_eq!(lines, expected, "{tag}: the 25 local hours and their rows");
        summaries.push(summary);

        // The run replays identically: the zone's offsets are the same.
        let replay = jobhost(&[
            "replay",
            "signups:2026-10-25",
            "--store",
            s(&store),
            "--component",
            s(component),
        ]);
        assert_eq!(
            replay.code, 0,
            "{tag}: {}\n{}",
            replay.stdout, replay.stderr
        );
        assert!(
            replay.stdout.contains("identical"),
            "{tag}: {}",
            replay.stdout
        );
    }
    assert_eq!(summaries[0], summaries[1], "byte for byte");
    let python_app = root().join("tests/guests/python-local-hours");
    let vendored: Vec<_> = std::fs::read_dir(&python_app)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "__pycache__")
        .collect();
    assert_eq!(
        vendored,
        ["app.py"],
        "no zone data beside the Python report"
    );
}

#[test]
fn a_component_built_for_the_previous_release_of_the_wit_runs_unchanged() {
    let dir = scratch();
    sales_db(dir.path(), 300);
    let cfg = config(
        dir.path(),
        &format!(
            r#"job = "daily-report"
component = "{}"

[source]
path = "sales.db"
query = "SELECT ts, amount FROM sales WHERE ts >= :start AND ts < :end"

[destinations.digest]
type = "file"
path = "out.jsonl"
"#,
            guests().past_world.display()
        ),
    );
    let run = run_job(&cfg, dir.path().join("s.db"), "2026-11-05T00:05:00Z");
    let r = ran(&run);
    let summary = r["report"]["summary"].as_str().unwrap();
    assert!(
        summary.ends_with("rows in daily-report:2026-11-04 (built for 0.1.0)"),
        "{summary}"
    );
    let sent = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert!(sent.contains("built for 0.1.0"), "{sent}");
}

#[test]
fn a_column_the_query_lacks_fails_the_window_for_good_in_both_languages() {
    let dir = scratch();
    events_db(dir.path());
    // `ts` renamed: both reports ask for a column the batch does not have.
    let query = "SELECT ts AS created_at FROM events WHERE ts >= :start AND ts < :end";
    for (tag, component) in [
        ("rust", &guests().local_hours),
        ("python", &python_guests().local_hours),
    ] {
        let cfg = job(dir.path(), tag, component, query);
        let store = dir.path().join(format!("{tag}.db"));
        let run = run_job(&cfg, &store, NOW);
        let r = run.receipt();
        assert_eq!(
            (run.code, r["event"].as_str()),
            (1, Some("failed")),
            "{tag}: {}\n{}",
            run.stdout,
            run.stderr
        );
        assert_eq!(r["error"]["kind"], "guest-trap", "{tag}: {r}");
        assert_eq!(r["error"]["retryable"], false, "{tag}: {r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("the batch has no column `ts` (its columns: `created_at`)"),
            "{tag}: {message}"
        );
        // The next run, even when a retry would be due, does not run it.
        let again = run_job(&cfg, &store, "2026-10-26T09:00:00Z");
        let r = again.receipt();
        assert_eq!(
            (again.code, r["event"].as_str()),
            (0, Some("skipped")),
            "{tag}: {}\n{}",
            again.stdout,
            again.stderr
        );
        let rows = history(&store);
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0]["attempt"], 1, "{tag}: never retried: {rows:?}");
    }
}

#[test]
fn a_python_traceback_is_shown_without_the_runtime_panic_after_it() {
    let dir = scratch();
    events_db(dir.path());
    let query = "SELECT ts AS created_at FROM events WHERE ts >= :start AND ts < :end";
    let cfg = job(dir.path(), "python", &python_guests().local_hours, query);
    let run = run_job(&cfg, dir.path().join("s.db"), NOW);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("Traceback (most recent call last):")
            && run
                .stderr
                .contains("ColumnNotFound: the batch has no column `ts`"),
        "{}",
        run.stderr
    );
    for noise in [
        "panicked at",
        "Python function threw an unexpected exception",
        "RUST_BACKTRACE",
    ] {
        assert!(!run.stderr.contains(noise), "{noise}:\n{}", run.stderr);
    }
    // A Rust report's own panic message stays.
    let cfg = job(dir.path(), "rust", &guests().local_hours, query);
    let run = run_job(&cfg, dir.path().join("r.db"), NOW);
    assert!(
        run.stderr.contains("panicked at") && run.stderr.contains("no column `ts`"),
        "{}",
        run.stderr
    );
}
