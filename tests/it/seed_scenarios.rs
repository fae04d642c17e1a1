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
fn deleting_the_store_folder_is_caught_by_a_file_destination_that_already_holds_the_key() {
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
    let first = jobhost(&args);
    assert_eq!(first.event(), "ran");
    assert_eq!(
        first.receipt()["store_created"],
        true,
        "a new store is said"
    );
    std::fs::remove_dir_all(&state).unwrap(); // a fresh container, same key
    let again = jobhost(&args);
    let r = again.receipt();
    // The store forgot the window, so the claim is fresh: the duplicate
    // this product exists to prevent. The new store is said, and the file
    // destination, which holds the key already, refuses the second copy.
    assert_eq!(r["store_created"], true);
    assert!(
        again.stderr.contains("created a new store"),
        "{}",
        again.stderr
    );
    assert_eq!(
        (again.code, r["event"].as_str()),
        (1, Some("failed")),
        "{r}"
    );
    assert_eq!(r["error"]["kind"], "delivery");
    assert_eq!(r["error"]["retryable"], false);
    let message = r["error"]["message"].as_str().unwrap();
    for part in ["out.jsonl", "daily-report:2026-11-08#1", "another store?"] {
        assert!(message.contains(part), "{part}: {message}");
    }
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
    assert_eq!(keys, ["daily-report:2026-11-08#1"], "never written twice");
    assert_eq!(history(&store)[0]["state"], "FAILED", "a person must look");
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

#[test]
fn a_window_whose_rows_a_person_removed_runs_again_once_its_file_lines_are_removed_too() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 2000);
    let store = dir.path().join("s.db");
    let now = "2026-11-09T00:05:00Z";
    assert_eq!(run_job(&cfg, &store, now).event(), "ran");
    let remove_rows = || {
        let conn = rusqlite::Connection::open(&store).unwrap();
        conn.execute_batch(
            "DELETE FROM outbox WHERE key = 'daily-report:2026-11-08';
             DELETE FROM runs WHERE key = 'daily-report:2026-11-08';",
        )
        .unwrap();
    };
    // The rows removed to run the window again (the remedy the host names
    // for a window that needs a person): the file still holds the key, so
    // the run is refused, and the refusal says what else to remove.
    remove_rows();
    let again = run_job(&cfg, &store, now);
    let r = again.receipt();
    assert_eq!(r["error"]["kind"], "delivery", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("remove its lines from the file too"),
        "{r}"
    );
    let out = dir.path().join("out.jsonl");
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 1);
    // With its line gone as well, the window runs again, once.
    std::fs::write(&out, "").unwrap();
    remove_rows();
    let third = run_job(&cfg, &store, now);
    assert_eq!(third.event(), "ran", "{}", third.stderr);
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 1);
}
