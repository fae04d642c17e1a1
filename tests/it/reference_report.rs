//! The reference daily sales report, end to end: the bundled example runs,
//! its numbers agree with SQL over the same window, it is delivered once
//! with its idempotency key, and running it again is a skip.

use serde_json::Value;

use crate::harness::*;

#[test]
fn the_bundled_example_runs_once_then_skips() {
    let dir = scratch();
    for f in ["daily-sales.toml", "sales.db"] {
        std::fs::copy(root().join("examples").join(f), dir.path().join(f)).unwrap();
    }
    let cfg = dir.path().join("daily-sales.toml");
    let component = guests().report.clone();
    let args = [
        "run",
        "--config",
        s(&cfg),
        "--component",
        s(&component),
        "--now",
        "2026-11-09T00:05:00Z",
    ];
    let first = jobhost_in(dir.path(), &args);
    let r = first.receipt();
    assert_eq!(
        (first.code, r["event"].as_str()),
        (0, Some("ran")),
        "{}",
        first.stderr
    );
    assert_eq!(r["key"], "daily-sales:2026-11-08");
    let conn = rusqlite::Connection::open(dir.path().join("sales.db")).unwrap();
    let rows: i64 = conn
        .query_row(
            "SELECT count(*) FROM sales WHERE ts >= 1794096000 AND ts < 1794182400",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert!(rows > 100, "the sample data covers 2026-11-08");
    assert_eq!(r["stats"]["rows"], rows);
    let digest = std::fs::read_to_string(dir.path().join("out/daily-sales.jsonl")).unwrap();
    assert_eq!(digest.lines().count(), 1);
    assert!(
        dir.path().join("state/jobhost.db").is_file(),
        "default store under ./state"
    );
    let second = jobhost_in(dir.path(), &args);
    assert_eq!(second.receipt()["event"], "skipped");
    assert_eq!(second.code, 0);
}

#[test]
fn report_totals_match_sql_over_the_same_window() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 5000);
    let store = dir.path().join("s.db");
    let run = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    let delivered = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    let line: Value = serde_json::from_str(delivered.trim()).unwrap();
    assert_eq!(line["idempotency_key"], "daily-report:2026-11-08#1");
    assert_eq!(r["messages"][0]["status"], "delivered");
    assert_eq!(r["messages"][0]["detail"], "appended");
    assert_eq!(r["destinations"]["digest"]["status"], "delivered");
    let summary = &line["body"];

    let conn = rusqlite::Connection::open(dir.path().join("sales.db")).unwrap();
    let (start, end) = (1_794_096_000_i64, 1_794_182_400_i64); // 2026-11-08 UTC
    let (orders, units, revenue): (i64, i64, f64) = conn
        .query_row(
            "SELECT count(*), sum(quantity), sum(amount) FROM sales WHERE ts >= ?1 AND ts < ?2",
            [start, end],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .unwrap();
    assert!(orders > 200);
    assert_eq!(summary["totals"]["orders"], orders);
    assert_eq!(summary["totals"]["units"], units);
    let got = summary["totals"]["revenue"].as_f64().unwrap();
    assert!(
        (got - revenue).abs() < 0.006,
        "revenue {got} vs SQL {revenue}"
    );
    assert_eq!(r["stats"]["rows"], orders);
    let text = r["report"]["summary"].as_str().unwrap();
    assert!(
        text.contains(&format!("{orders} orders, {units} units")),
        "the receipt's report is the readable digest: {text}"
    );
}

#[test]
fn an_empty_window_still_produces_a_report() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let store = dir.path().join("s.db");
    // 2026-12-01 holds no sales.
    let run = run_job(&cfg, &store, "2026-12-02T00:05:00Z");
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    let delivered = std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap();
    let line: Value = serde_json::from_str(delivered.trim()).unwrap();
    assert_eq!(line["body"]["totals"]["orders"], 0);
    assert_eq!(line["body"]["products"], serde_json::json!([]));
}
