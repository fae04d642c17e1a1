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
