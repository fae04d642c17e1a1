//! Times written without a zone are refused at the boundary, not read
//! silently in some zone: a SQLite column declared as a date or timestamp
//! is refused before the claim unless `[source] naive_timestamps` says how
//! to read its text (and then read so that a Berlin day counts Berlin's
//! rows), and every verb that takes a window refuses a date and time
//! without an offset as `--now` does. (PostgreSQL's `timestamp` and `date`
//! are in `pg_source`.)

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

/// A SQLite file `signups.db` in `dir` whose `signups.at` is declared
/// `TIMESTAMP` and holds Berlin wall times as SQLite writes them: every
/// hour at :30 of 2026-11-04, 23:30 the day before, 00:30 the day after,
/// and every half hour of 2026-10-25 (the repeated hour's wall times once
/// each); plus one integer epoch (2026-11-04T12:00:00Z, a Unix second
/// whatever the zone) and one text with its own offset.
fn signups_db(dir: &Path) -> PathBuf {
    let path = dir.join("signups.db");
    if path.exists() {
        return path;
    }
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute_batch(
        "CREATE TABLE signups (id INTEGER PRIMARY KEY, at TIMESTAMP NOT NULL, tag TEXT);
         WITH RECURSIVE h(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM h WHERE n < 22)
         INSERT INTO signups (at) SELECT printf('2026-11-04 %02d:30:00', n) FROM h;
         INSERT INTO signups (at) VALUES ('2026-11-03 23:30:00'), ('2026-11-05 00:30:00');
         WITH RECURSIVE m(n) AS (SELECT 0 UNION ALL SELECT n + 30 FROM m WHERE n < 1410)
         INSERT INTO signups (at) SELECT printf('2026-10-25 %02d:%02d:00', n / 60, n % 60) FROM m;
         INSERT INTO signups (at, tag) VALUES (1793793600, 'epoch'), ('2026-11-04T13:00:00+01:00', 'offset');",
    )
    .unwrap();
    path
}

/// A job in Europe/Berlin whose probe echoes `query` over `signups.db`,
/// with `source` lines added to `[source]`.
fn signups_job(dir: &Path, query: &str, source: &str) -> PathBuf {
    signups_db(dir);
    config(
        dir,
        &format!(
            "job = \"echo\"\ncomponent = \"{}\"\ntimezone = \"Europe/Berlin\"\n\n\
             [source]\npath = \"signups.db\"\nquery = {}\n{source}\n",
            guests().probe.display(),
            toml::Value::String(query.to_string())
        ),
    )
}

/// The first column of what the probe echoed, and its kind.
fn echoed(run: &Run) -> (String, Vec<Value>) {
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{r}\n{}", run.stderr);
    let summary: Value = serde_json::from_str(r["report"]["summary"].as_str().unwrap()).unwrap();
    let kind = summary["columns"][0]["kind"].as_str().unwrap().to_string();
    let values = summary["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row[0].clone())
        .collect();
    (kind, values)
}

/// A refused invocation: exit 2, one error line naming what `says`, and
/// no run in `store`.
fn assert_refused(run: &Run, store: &Path, says: &[&str]) {
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let errors: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("jobhost: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "one error line: {}", run.stderr);
    for s in says {
        assert!(errors[0].contains(s), "{s:?} in: {}", errors[0]);
    }
    if store.exists() {
        assert!(history(store).is_empty(), "nothing was claimed");
    }
}

fn unix(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>().unwrap().as_second()
}

const NOW: &str = "2026-11-05T00:05:00Z";

#[test]
fn a_sqlite_timestamp_column_is_refused_before_the_claim_unless_the_job_says_how_to_read_it() {
    let dir = scratch();
    let cfg = signups_job(
        dir.path(),
        "SELECT at FROM signups WHERE unixepoch(at) >= :start AND unixepoch(at) < :end",
        "",
    );
    let store = dir.path().join("s.db");
    assert_refused(
        &run_job(&cfg, &store, NOW),
        &store,
        &[
            "column `at` is declared TIMESTAMP, and its text values have no zone",
            "`naive_timestamps = \"job-zone\"` in `[source]`",
            "local times in Europe/Berlin",
        ],
    );
    // A value the setting cannot read is still refused: a typo.
    let cfg = signups_job(
        dir.path(),
        "SELECT at FROM signups WHERE :start < :end",
        "naive_timestamps = \"local\"",
    );
    assert_refused(
        &run_job(&cfg, &store, NOW),
        &store,
        &[
            "invalid `source.naive_timestamps = \"local\"`: use \"utc\"",
            "\"job-zone\"",
        ],
    );
}

#[test]
fn a_sqlite_berlin_day_counts_berlin_rows_with_job_zone_and_utc_rows_with_utc() {
    let dir = scratch();
    let (start, end) = (unix("2026-11-03T23:00:00Z"), unix("2026-11-04T23:00:00Z"));
    // The window as Berlin wall-time text, compared with the column's
    // own text (normalised by datetime()).
    let by_wall = "SELECT at FROM signups WHERE tag IS NULL AND datetime(at) >= :start_naive \
                   AND datetime(at) < :end_naive ORDER BY id";
    let cfg = signups_job(dir.path(), by_wall, "naive_timestamps = \"job-zone\"");
    let run = run_job(&cfg, dir.path().join("zone.db"), NOW);
    assert_eq!(run.receipt()["key"], "echo:2026-11-04", "{}", run.stderr);
    let (kind, values) = echoed(&run);
    assert_eq!(kind, "integer", "a timestamp column is Unix seconds");
    let expected: Vec<Value> = (0..23).map(|h| (start + 1800 + h * 3600).into()).collect();
    assert_eq!(values, expected, "23 signups, 00:30 to 22:30 Berlin time");

    // "utc" reads the wall times as UTC, and the same filter in UTC
    // (SQLite's own unixepoch() reads text without a zone as UTC) counts 24.
    let by_utc = "SELECT at FROM signups WHERE tag IS NULL AND unixepoch(at) >= :start \
                  AND unixepoch(at) < :end ORDER BY id";
    let cfg = signups_job(dir.path(), by_utc, "naive_timestamps = \"utc\"");
    let (_, values) = echoed(&run_job(&cfg, dir.path().join("utc.db"), NOW));
    assert_eq!(values.len(), 24, "{values:?}");
    assert_eq!(values[23], unix("2026-11-03T23:30:00Z"));

    // An integer is a Unix second and text with an offset is read with
    // it, whichever the setting.
    let tagged = "SELECT at FROM signups WHERE tag IS NOT NULL AND :start < :end ORDER BY id";
    for naive in ["utc", "job-zone"] {
        let cfg = signups_job(
            dir.path(),
            tagged,
            &format!("naive_timestamps = \"{naive}\""),
        );
        let (_, values) = echoed(&run_job(
            &cfg,
            dir.path().join(format!("{naive}-t.db")),
            NOW,
        ));
        let noon = unix("2026-11-04T12:00:00Z");
        assert_eq!(values, [Value::from(noon), Value::from(noon)], "{naive}");
        assert!((start..end).contains(&noon));
    }
}

#[test]
fn a_sqlite_berlin_fall_back_day_reads_the_repeated_hour_once_inside_its_25_hours() {
    let dir = scratch();
    let query = "SELECT at FROM signups WHERE datetime(at) >= :start_naive \
                 AND datetime(at) < :end_naive ORDER BY id";
    let cfg = signups_job(dir.path(), query, "naive_timestamps = \"job-zone\"");
    let run = run_job(&cfg, dir.path().join("s.db"), "2026-10-26T00:05:00Z");
    let r = run.receipt();
    assert_eq!(r["key"], "echo:2026-10-25", "{}", run.stderr);
    let (start, end) = (
        unix(r["window"]["start"].as_str().unwrap()),
        unix(r["window"]["end"].as_str().unwrap()),
    );
    assert_eq!(end - start, 25 * 3600);
    let (_, values) = echoed(&run);
    let values: Vec<i64> = values.iter().map(|v| v.as_i64().unwrap()).collect();
    assert_eq!(values.len(), 48, "every wall time of the day, once");
    assert!(
        values.iter().all(|t| (start..end).contains(t)),
        "{values:?}"
    );
    // 02:00 and 02:30 read as the second pass, +01:00, as PostgreSQL reads them.
    assert_eq!(
        values[4..6],
        [unix("2026-10-25T01:00:00Z"), unix("2026-10-25T01:30:00Z")]
    );
    assert_eq!(values[3], unix("2026-10-24T23:30:00Z"), "01:30 is +02:00");
}

/// A job of the reference report over the sample sales, in Europe/Berlin.
fn report_job(dir: &Path) -> PathBuf {
    report_config_with(dir, 200, "timezone = \"Europe/Berlin\"")
}

/// `jobhost ARGS` in virtual time.
fn cli(args: &[&str]) -> Run {
    let mut cmd = command(&root(), args);
    cmd.env("JOBHOST_TEST_VIRTUAL_TIME", "1");
    to_run(cmd.output().expect("jobhost runs"))
}

/// What `--now` says of a time without an offset.
const AS_NOW: &str = "a time without an offset is ambiguous; use RFC 3339 with an offset";

#[test]
fn run_for_a_date_and_time_without_an_offset_is_refused_as_now_refuses_it() {
    let dir = scratch();
    let cfg = report_job(dir.path());
    let store = dir.path().join("s.db");
    for text in ["2026-11-04T12:00:00", "2026-11-04 12:00"] {
        let mut cmd = job_command(&cfg, &store, NOW);
        cmd.args(["--for", text]);
        let run = to_run(cmd.output().unwrap());
        assert_refused(&run, &store, &[&format!("invalid --for `{text}`"), AS_NOW]);
        assert!(!run.stderr.contains("has that label"), "{}", run.stderr);
    }
    // The same time with its offset names Berlin's 2026-11-04.
    let mut cmd = job_command(&cfg, &store, NOW);
    cmd.args(["--for", "2026-11-04T12:00:00+01:00"]);
    let run = to_run(cmd.output().unwrap());
    assert_eq!(
        run.receipt()["key"],
        "daily-report:2026-11-04",
        "{}",
        run.stderr
    );
}

#[test]
fn backfill_from_or_to_a_date_and_time_without_an_offset_is_refused_as_now_refuses_it() {
    let dir = scratch();
    let cfg = report_job(dir.path());
    let db = dir.path().join("s.db");
    for (from, to, flag) in [
        ("2026-11-01T00:00:00", "2026-11-03", "--from"),
        ("2026-11-01", "2026-11-03 00:00", "--to"),
    ] {
        let run = cli(&[
            "backfill",
            "--config",
            s(&cfg),
            "--store",
            s(&db),
            "--from",
            from,
            "--to",
            to,
            "--now",
            NOW,
        ]);
        let text = if flag == "--from" { from } else { to };
        assert_refused(&run, &db, &[&format!("invalid {flag} `{text}`"), AS_NOW]);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
    }
}

#[test]
fn rerun_and_forget_of_a_key_whose_label_has_no_offset_are_refused() {
    let dir = scratch();
    let cfg = report_job(dir.path());
    let db = dir.path().join("s.db");
    // A window that ran, so the store exists and holds one row.
    let run = run_job(&cfg, &db, NOW);
    assert_eq!(
        run.receipt()["key"],
        "daily-report:2026-11-04",
        "{}",
        run.stderr
    );
    let before = history(&db);
    for key in ["daily-report:2026-11-04T12:00:00", "2026-11-04T12:00:00"] {
        let rerun = cli(&[
            "rerun",
            key,
            "--config",
            s(&cfg),
            "--store",
            s(&db),
            "--reason",
            "check",
            "--now",
            NOW,
        ]);
        assert_eq!(rerun.code, 2, "{}", rerun.stderr);
        assert!(
            rerun.stderr.contains("invalid KEY `2026-11-04T12:00:00`")
                && rerun.stderr.contains(AS_NOW),
            "{}",
            rerun.stderr
        );
    }
    let forget = cli(&[
        "forget",
        "daily-report:2026-11-04T12:00:00",
        "--store",
        s(&db),
        "--reason",
        "check",
    ]);
    assert_eq!(forget.code, 2, "{}", forget.stderr);
    assert!(
        forget.stderr.contains(
            "invalid window key `daily-report:2026-11-04T12:00:00`: a time without an offset is ambiguous"
        ),
        "{}",
        forget.stderr
    );
    assert_eq!(history(&db), before, "nothing changed");
}
