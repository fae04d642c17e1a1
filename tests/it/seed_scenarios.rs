//! The four scenarios from the field report that started jobhost, driven
//! through the real binary with an injected clock.

use crate::harness::*;

#[test]
fn second_tick_in_the_same_utc_day_is_skipped() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 2000);
    let store = dir.path().join("state").join("jobhost.db");
    let first = run_job(&cfg, &store, "2026-11-09T00:05:00+00:00");
    let second = run_job(&cfg, &store, "2026-11-09T23:55:00+00:00");
    assert_eq!(
        (first.code, first.event()),
        (0, "ran".to_string()),
        "{}",
        first.stderr
    );
    let r = second.receipt();
    assert_eq!(second.code, 0);
    assert_eq!(r["event"], "skipped");
    assert_eq!(r["reason"], "done");
    assert_eq!(r["key"], "daily-report:2026-11-08");
    let delivered = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    assert_eq!(delivered.lines().count(), 1, "one message, delivered once");
}

#[test]
fn tokyo_half_past_midnight_and_ten_utc_are_different_utc_days_and_both_run() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 2000);
    let store = dir.path().join("state").join("jobhost.db");
    let tokyo = run_job(&cfg, &store, "2026-11-09T00:30:00+09:00");
    let utc = run_job(&cfg, &store, "2026-11-09T10:00:00+00:00");
    let (a, b) = (tokyo.receipt(), utc.receipt());
    assert_eq!(a["event"], "ran", "{}", tokyo.stderr);
    assert_eq!(b["event"], "ran", "{}", utc.stderr);
    // 00:30 in Tokyo is 15:30 UTC the day before: the last closed UTC day is the 7th.
    assert_eq!(a["key"], "daily-report:2026-11-07");
    assert_eq!(a["now"], "2026-11-08T15:30:00Z");
    assert_eq!(b["key"], "daily-report:2026-11-08");
}

#[test]
fn deleting_the_store_folder_runs_the_job_again_the_failure_a_host_local_store_invites() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 2000);
    let state = dir.path().join("state");
    let store = state.join("jobhost.db");
    let args = [
        "run",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2026-11-09T00:05:00+00:00",
    ];
    assert_eq!(jobhost(&args).event(), "ran");
    std::fs::remove_dir_all(&state).unwrap(); // a fresh container, same key
    let again = jobhost(&args);
    assert_eq!(
        again.event(),
        "ran",
        "the duplicate this product exists to prevent, made visible"
    );
    let delivered = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    let keys: Vec<String> = delivered
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["idempotency_key"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        keys,
        vec!["daily-report:2026-11-08#1"; 2],
        "same idempotency key both times, so a downstream can dedupe"
    );
}

#[test]
fn a_naive_timestamp_is_refused_and_nothing_is_claimed() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 10);
    let store = dir.path().join("state").join("jobhost.db");
    let run = run_job(&cfg, &store, "2026-11-09T00:05:00");
    assert_eq!(run.code, 2);
    let r = run.receipt();
    assert_eq!(r["event"], "failed");
    assert_eq!(r["error"]["kind"], "invalid-input");
    assert!(run.stderr.contains("without an offset"), "{}", run.stderr);
    assert!(
        run.stderr.contains("2026-11-09T00:05:00Z"),
        "the accepted forms are shown: {}",
        run.stderr
    );
    assert!(
        !store.exists(),
        "no store was created, so nothing was claimed"
    );
}
