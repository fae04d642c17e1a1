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
