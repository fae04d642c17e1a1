//! Window selection through the binary: zones, DST, hour and week windows.
//! (What the windows are is unit-tested in `host/src/core/window.rs`.)

use crate::harness::*;

fn receipt_for(extra: &[&str], now: &str) -> serde_json::Value {
    let dir = scratch();
    let store = dir.path().join("s.db");
    let probe = &guests().probe;
    let mut args = vec![
        "run",
        "--component",
        s(probe),
        "--job",
        "clock",
        "--store",
        s(&store),
        "--now",
        now,
    ];
    args.extend_from_slice(extra);
    let run = jobhost(&args);
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    r
}

/// The command line's `--tz` and `--window` reach the window the run
/// claims and its receipt names. What the windows are (DST days of 23 and
/// 25 hours, the repeated hour's two keys, ISO weeks, RFC 9557 instants)
/// is unit-tested in `core/window.rs` and `core/clock.rs`.
#[test]
fn the_tz_and_window_flags_choose_the_window_the_receipt_names() {
    let r = receipt_for(&["--tz", "Europe/Berlin"], "2026-03-30T00:10:00+02:00");
    assert_eq!(r["key"], "clock:2026-03-29");
    assert_eq!(r["window"]["start"], "2026-03-28T23:00:00Z");
    assert_eq!(r["window"]["end"], "2026-03-29T22:00:00Z");
    assert_eq!(r["window"]["tz"], "Europe/Berlin");

    let r = receipt_for(
        &["--window", "hour", "--tz", "America/New_York"],
        "2026-11-01T07:10:00Z",
    );
    assert_eq!(r["key"], "clock:2026-11-01T01:00-05:00");

    let r = receipt_for(&["--window", "week"], "2026-11-11T08:00:00[Asia/Tokyo]");
    assert_eq!(r["now"], "2026-11-10T23:00:00Z");
    assert_eq!(r["key"], "clock:2026-W45");
    assert_eq!(r["window"]["start"], "2026-11-02T00:00:00Z");
    assert_eq!(r["window"]["end"], "2026-11-09T00:00:00Z");
}

#[test]
fn without_now_the_system_clock_picks_the_window() {
    let dir = scratch();
    let probe = guests().probe.clone();
    let before = jiff::Timestamp::now();
    let run = jobhost(&[
        "run",
        "--component",
        s(&probe),
        "--job",
        "clock",
        "--store",
        s(&dir.path().join("s.db")),
    ]);
    let after = jiff::Timestamp::now();
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    let now: jiff::Timestamp = r["now"].as_str().unwrap().parse().unwrap();
    assert!(
        before <= now && now <= after,
        "{now} not between {before} and {after}"
    );
    let today = now.to_zoned_datetime(jiff::tz::TimeZone::UTC).date();
    let yesterday = today.yesterday().unwrap();
    assert_eq!(r["key"], format!("clock:{yesterday}"));
}

/// A 15-minute job in New York over the fall-back night: the daemon runs
/// every quarter-hour once (the repeated 01:xx ones twice, as distinct
/// windows), and `history`, `plan`, `status`, `run --for` and the
/// dashboard's grid all name them by their offset-bearing labels.
#[test]
fn quarter_hour_windows_run_once_each_across_the_fall_back_night_and_every_verb_names_them() {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let cfg = dir.path().join("q.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"job = "quarterly"
window = "15m"
timezone = "America/New_York"
component = "{}"

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "file"
path = "out.jsonl"
"#,
            guests().report.display()
        ),
    )
    .unwrap();
    let store = dir.path().join("s.db");
    // 00:00 to 03:00 local (EDT, then EST): four hours of clock time.
    let run = to_run(
        daemon_command(
            &[&cfg],
            s(&store),
            "2026-11-01T04:00:00Z",
            "2026-11-01T08:00:00Z",
        )
        .args(["--since", "2026-11-01T04:00:00Z"])
        .output()
        .unwrap(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ran: Vec<String> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event"] == "ran")
        .map(|v| v["key"].as_str().unwrap().to_string())
        .collect();
    let unique: std::collections::BTreeSet<&String> = ran.iter().collect();
    assert_eq!(ran.len(), unique.len(), "none twice: {ran:?}");
    // The 16 quarter-hours of those four hours, and the one that closed as
    // the daemon started (23:45 EDT).
    assert_eq!(ran.len(), 17, "{ran:?}\n{}", run.stderr);
    for key in [
        "quarterly:2026-11-01T01:45-04:00",
        "quarterly:2026-11-01T01:45-05:00",
    ] {
        assert!(ran.iter().any(|k| k == key), "{key} in {ran:?}");
    }
    let rows = history(&store);
    assert!(rows.iter().all(|r| r["state"] == "DONE"), "{rows:?}");
    assert_eq!(rows.len(), ran.len());

    // A person names one of the repeated hour's windows by its label.
    let again = jobhost(&[
        "run",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2026-11-01T08:00:00Z",
        "--for",
        "2026-11-01T01:45-05:00",
    ]);
    assert_eq!(again.receipt()["reason"], "done", "{}", again.stderr);

    let plan = jobhost(&[
        "plan",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2026-11-01T08:01:00Z",
        "--json",
    ]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stdout.contains("quarterly:2026-11-01T03:00-05:00"),
        "the next window: {}",
        plan.stdout
    );
    let status = jobhost(&[
        "status",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2026-11-01T08:01:00Z",
        "--json",
    ]);
    assert_eq!(status.code, 0, "{}\n{}", status.stdout, status.stderr);

    // The grid has a row per clock hour, the two 01:00 hours apart.
    let srv = crate::dashboard::serve(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2026-11-01T08:01:00Z",
    ]);
    let grid = crate::dashboard::get(&srv.addr, "/jobs/quarterly.json", &[]).json();
    let rows: Vec<&str> = grid["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert!(
        rows.contains(&"2026-11-01T01:00-04:00") && rows.contains(&"2026-11-01T01:00-05:00"),
        "{rows:?}"
    );
    let row = grid["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["label"] == "2026-11-01T01:00-05:00")
        .unwrap();
    assert_eq!(row["cells"].as_array().unwrap().len(), 4, "{row}");
}

#[test]
fn a_quarter_window_runs_by_its_label() {
    let dir = scratch();
    let store = dir.path().join("s.db");
    let run = jobhost(&[
        "run",
        "--component",
        s(&guests().probe),
        "--job",
        "clock",
        "--window",
        "quarter",
        "--tz",
        "Europe/Berlin",
        "--store",
        s(&store),
        "--now",
        "2027-01-05T00:00:00Z",
        "--for",
        "2026-Q3",
    ]);
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    assert_eq!(r["key"], "clock:2026-Q3");
    assert_eq!(r["window"]["start"], "2026-06-30T22:00:00Z");
    assert_eq!(r["window"]["end"], "2026-09-30T22:00:00Z");
}
