//! `jobhost history`: what the store holds, as a table or JSON lines.

use crate::harness::*;

#[test]
fn history_lists_runs_as_a_table_and_as_json_lines() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 1000);
    let store = dir.path().join("s.db");
    for now in ["2026-11-09T00:05:00Z", "2026-11-10T00:05:00Z"] {
        assert_eq!(run_job(&cfg, &store, now).event(), "ran");
    }
    let rows = history(&store);
    assert_eq!(rows.len(), 2);
    assert_eq!(
        rows[0]["key"], "daily-report:2026-11-09",
        "newest window first"
    );
    assert_eq!(rows[1]["state"], "DONE");
    assert_eq!(rows[1]["delivered"], 1);
    assert!(
        rows[1]["component"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );

    let table = jobhost(&["history", "--store", s(&store)]);
    assert_eq!(table.code, 0);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(lines[0].starts_with("KEY"), "{}", table.stdout);
    assert!(lines[0].contains("JOURNAL"), "{}", table.stdout);
    assert!(
        lines[1].contains(" KiB") || lines[1].contains(" B "),
        "the journal's size: {}",
        table.stdout
    );
    assert!(
        lines[1].contains("daily-report:2026-11-09") && lines[1].contains("DONE"),
        "{}",
        table.stdout
    );

    let filtered = jobhost(&["history", "--store", s(&store), "--job", "other", "--json"]);
    assert_eq!(filtered.stdout, "");
}

#[test]
fn history_of_a_missing_store_says_so_without_creating_it() {
    let dir = scratch();
    let store = dir.path().join("missing.db");
    let run = jobhost(&["history", "--store", s(&store)]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("no store at"), "{}", run.stderr);
    assert!(!store.exists());
}

#[test]
fn a_reader_that_stops_reading_ends_the_listing_quietly() {
    use jobhost::core::window::{JobName, Window, WindowKind, Zone};
    use jobhost::store::{Ledger, Skip, SqliteStore};
    use std::io::Read;
    let dir = scratch();
    let db = dir.path().join("s.db");
    // Three thousand hour windows: far more than a pipe holds.
    let job = JobName::new("hourly").unwrap();
    let start: jiff::Timestamp = "2026-01-01T00:30:00Z".parse().unwrap();
    let windows: Vec<Window> = (0..3000)
        .map(|h| {
            let at = start
                .checked_add(jiff::SignedDuration::from_hours(h))
                .unwrap();
            Window::containing(&job, WindowKind::Hour, &Zone::utc(), at).unwrap()
        })
        .collect();
    let skips: Vec<Skip<'_>> = windows
        .iter()
        .map(|w| Skip {
            window: w,
            reason: "catch_up = \"latest\"",
        })
        .collect();
    SqliteStore::open(&db)
        .unwrap()
        .record_skips(&skips, "test", "2026-06-01T00:00:00Z".parse().unwrap())
        .unwrap();
    for args in [&["history"][..], &["history", "--json"][..]] {
        // `jobhost history | head -c 100`: the reader goes after 100 bytes.
        let mut child = command(&root(), args)
            .args(["--store", s(&db)])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 100];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert_eq!(stderr, "", "{args:?}: nothing said of the closed pipe");
    }
}
