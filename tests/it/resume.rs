//! After a run is PREPARED its messages are delivered as stored: a process
//! that dies after committing the report leaves work the next invocation
//! finishes without running the guest again.

use jiff::Timestamp;
use jobhost::core::window::{JobName, Window, WindowKind, Zone};
use jobhost::store::{Claim, ClaimRequest, ClaimStore, SqliteStore, StagedMessage, StoredReport};

use crate::harness::*;

#[test]
fn a_prepared_run_whose_owner_died_is_resumed_with_the_stored_bytes() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 1000);
    let store_path = dir.path().join("s.db");

    // A process claimed the window at 00:05, committed its report and a
    // message, and died before delivering it.
    let t0: Timestamp = "2026-11-09T00:05:00Z".parse().unwrap();
    let window = Window::last_closed(
        &JobName::new("daily-report").unwrap(),
        WindowKind::Day,
        &Zone::utc(),
        t0,
    )
    .unwrap();
    let mut store = SqliteStore::open(&store_path).unwrap();
    let Claim::Run { lease, .. } = store
        .claim(&ClaimRequest {
            window: &window,
            owner: "dead-host:1",
            component: "sha256:earlier",
            now: t0,
            lease: std::time::Duration::from_secs(60),
            max_attempts: 3,
            purpose: jobhost::store::Purpose::Asked,
            probe: &jobhost::store::LeasesOnly,
        })
        .unwrap()
    else {
        panic!("fresh claim")
    };
    let stored = StagedMessage {
        seq: 1,
        destination: "digest".into(),
        idempotency_key: "daily-report:2026-11-08#1".into(),
        content_type: "application/json".into(),
        body: br#"{"rendered":"by the process that died"}"#.to_vec(),
    };
    let report = StoredReport {
        summary: "earlier report".into(),
        cursor: Some("c".into()),
        prompt: None,
        described: true,
    };
    store.prepare(&lease, &report, &[stored], b"", t0).unwrap();
    drop(store);

    // While the lease is live, another invocation stays away.
    let busy = run_job(&cfg, &store_path, "2026-11-09T00:05:30Z");
    assert_eq!(busy.receipt()["reason"], "busy", "{}", busy.stderr);

    // After it expires, the next one delivers the stored bytes.
    let run = run_job(&cfg, &store_path, "2026-11-09T00:10:00Z");
    let r = run.receipt();
    assert_eq!(r["event"], "resumed", "{}", run.stderr);
    assert_eq!(r["fence"], 2);
    assert_eq!(
        r["report"]["summary"], "earlier report",
        "the guest did not run again"
    );
    assert_eq!(
        r["component"], "sha256:earlier",
        "the component that rendered the messages"
    );
    let line: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(dir.path().join("out.jsonl"))
            .unwrap()
            .trim(),
    )
    .unwrap();
    assert_eq!(line["body"]["rendered"], "by the process that died");
    assert_eq!(line["idempotency_key"], "daily-report:2026-11-08#1");
    let h = history(&store_path);
    assert_eq!(h[0]["state"], "DONE");

    let again = run_job(&cfg, &store_path, "2026-11-09T00:11:00Z");
    assert_eq!(again.receipt()["reason"], "done");
}

#[test]
fn a_failed_delivery_keeps_the_report_and_the_next_run_delivers_it() {
    let dir = scratch();
    sales_db(dir.path(), 500);
    // The destination's folder is blocked by a file of the same name.
    std::fs::write(dir.path().join("out"), "in the way").unwrap();
    let cfg = config(
        dir.path(),
        &format!(
            r#"component = "{}"
[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end"
[destinations.digest]
type = "file"
path = "out/digest.jsonl"
"#,
            guests().report.display()
        ),
    );
    let store = dir.path().join("s.db");
    let failed = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    let r = failed.receipt();
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    assert_eq!(r["error"]["kind"], "delivery");
    assert_eq!(r["error"]["retryable"], true);
    let row = &history(&store)[0];
    assert_eq!(row["state"], "PREPARED", "the report is kept");
    assert!(row["error"].as_str().unwrap().contains("digest"), "{row}");

    std::fs::remove_file(dir.path().join("out")).unwrap();
    let resumed = run_job(&cfg, &store, "2026-11-09T00:06:00Z");
    let r2 = resumed.receipt();
    assert_eq!(r2["event"], "resumed", "{}", resumed.stderr);
    assert_eq!(
        r2["report"]["summary"], r["report"]["summary"],
        "the stored report, not a new one"
    );
    let lines = std::fs::read_to_string(dir.path().join("out/digest.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 1);
    let done = &history(&store)[0];
    assert_eq!(done["state"], "DONE");
    assert!(
        done["error"].is_null(),
        "a finished run shows no stale error: {done}"
    );
}

#[test]
fn a_committed_report_is_delivered_even_after_its_component_file_is_gone() {
    let dir = scratch();
    let wasm = dir.path().join("report.wasm");
    std::fs::copy(&guests().report, &wasm).unwrap();
    sales_db(dir.path(), 500);
    // A destination folder that cannot be created fails the first delivery.
    std::fs::write(dir.path().join("out"), "a file where a folder should be").unwrap();
    let cfg = config(
        dir.path(),
        r#"component = "report.wasm"
retry_delay_seconds = 0
[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end"
[destinations.digest]
type = "file"
path = "out/digest.jsonl"
"#,
    );
    let store = dir.path().join("s.db");
    let failed = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(
        failed.receipt()["error"]["retryable"],
        true,
        "{}",
        failed.stderr
    );

    // The component is swapped out (or its path is wrong) before the retry.
    std::fs::remove_file(&wasm).unwrap();
    std::fs::remove_file(dir.path().join("out")).unwrap();
    let resumed = run_job(&cfg, &store, "2026-11-09T00:06:00Z");
    let r = resumed.receipt();
    assert_eq!(
        (resumed.code, r["event"].as_str()),
        (0, Some("resumed")),
        "{}",
        resumed.stderr
    );
    assert_eq!(
        r["component"],
        failed.receipt()["component"],
        "the recorded component"
    );
    assert_eq!(history(&store)[0]["state"], "DONE");

    // A window that still needs the guest cannot run without it: bad input.
    let next = run_job(&cfg, &store, "2026-11-10T00:05:00Z");
    assert_eq!(next.code, 2, "{}", next.stderr);
    assert!(
        next.receipt()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("report.wasm")
    );
}
