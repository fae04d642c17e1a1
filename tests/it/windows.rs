//! Window selection through the binary: zones, DST, hour and week windows.
//! (The exhaustive tiling checks are unit tests in `host/src/window.rs`.)

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

#[test]
fn a_berlin_day_across_the_spring_change_is_23_hours() {
    let r = receipt_for(&["--tz", "Europe/Berlin"], "2026-03-30T00:10:00+02:00");
    assert_eq!(r["key"], "clock:2026-03-29");
    assert_eq!(r["window"]["start"], "2026-03-28T23:00:00Z");
    assert_eq!(r["window"]["end"], "2026-03-29T22:00:00Z");
    assert_eq!(r["window"]["tz"], "Europe/Berlin");
}

#[test]
fn a_new_york_day_across_the_fall_change_is_25_hours() {
    let r = receipt_for(&["--tz", "America/New_York"], "2026-11-02T09:00:00Z");
    assert_eq!(r["key"], "clock:2026-11-01");
    assert_eq!(r["window"]["start"], "2026-11-01T04:00:00Z");
    assert_eq!(r["window"]["end"], "2026-11-02T05:00:00Z");
}

#[test]
fn hour_windows_carry_the_offset_so_the_repeated_hour_has_its_own_key() {
    let first = receipt_for(
        &["--window", "hour", "--tz", "America/New_York"],
        "2026-11-01T06:10:00Z",
    );
    let second = receipt_for(
        &["--window", "hour", "--tz", "America/New_York"],
        "2026-11-01T07:10:00Z",
    );
    assert_eq!(first["key"], "clock:2026-11-01T01:00-04:00");
    assert_eq!(second["key"], "clock:2026-11-01T01:00-05:00");
}

#[test]
fn week_windows_are_iso_weeks() {
    let r = receipt_for(&["--window", "week"], "2026-11-11T08:00:00Z");
    assert_eq!(r["key"], "clock:2026-W45");
    assert_eq!(r["window"]["start"], "2026-11-02T00:00:00Z");
    assert_eq!(r["window"]["end"], "2026-11-09T00:00:00Z");
}

#[test]
fn rfc9557_zone_annotations_are_accepted_for_now() {
    let r = receipt_for(&[], "2026-11-09T09:05:00[Asia/Tokyo]");
    assert_eq!(r["now"], "2026-11-09T00:05:00Z");
    assert_eq!(r["key"], "clock:2026-11-08");
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
