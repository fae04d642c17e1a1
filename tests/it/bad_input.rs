//! Bad input: a clear one-line error naming the culprit, the right exit
//! code, a failed receipt on stdout, and nothing claimed.

use crate::harness::*;

/// Runs with `args` against a fresh store path and checks the common
/// promises; returns stderr for the specific assertions.
fn refused(args: &[&str], store: &std::path::Path, code: i32) -> String {
    let mut all = vec!["run", "--store", s(store)];
    all.extend_from_slice(args);
    let run = jobhost(&all);
    assert_eq!(run.code, code, "stderr: {}", run.stderr);
    let r = run.receipt();
    assert_eq!(r["event"], "failed");
    let err_lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("jobhost: error:"))
        .collect();
    assert_eq!(err_lines.len(), 1, "exactly one error line: {}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    if store.is_file() {
        assert!(history(store).is_empty(), "nothing was claimed");
    }
    err_lines[0].to_string()
}

#[test]
fn malformed_now_is_refused_with_the_accepted_forms() {
    let dir = scratch();
    let p = guests().probe.clone();
    let err = refused(
        &["--component", s(&p), "--now", "next tuesday"],
        &dir.path().join("s.db"),
        2,
    );
    assert!(
        err.contains("`next tuesday`") && err.contains("RFC 3339"),
        "{err}"
    );
}

#[test]
fn an_unknown_zone_is_named() {
    let dir = scratch();
    let p = guests().probe.clone();
    let err = refused(
        &["--component", s(&p), "--tz", "Europe/Atlantis"],
        &dir.path().join("s.db"),
        2,
    );
    assert!(err.contains("`Europe/Atlantis`"), "{err}");
}

#[test]
fn a_missing_component_is_named() {
    let dir = scratch();
    let missing = dir.path().join("nope.wasm");
    let err = refused(
        &["--component", s(&missing), "--now", "2026-11-09T00:05:00Z"],
        &dir.path().join("s.db"),
        2,
    );
    assert!(
        err.contains("nope.wasm") && err.contains("cannot read component"),
        "{err}"
    );
}

#[test]
fn a_file_that_is_not_wasm_is_named() {
    let dir = scratch();
    let bogus = dir.path().join("report.wasm");
    std::fs::write(&bogus, "#!/bin/sh\necho hello\n").unwrap();
    let err = refused(
        &["--component", s(&bogus), "--now", "2026-11-09T00:05:00Z"],
        &dir.path().join("s.db"),
        2,
    );
    assert!(
        err.contains("report.wasm") && err.contains("not a WebAssembly component"),
        "{err}"
    );
}

#[test]
fn a_core_module_is_refused_as_not_a_component() {
    let dir = scratch();
    let core = dir.path().join("core.wasm");
    std::fs::write(&core, b"\0asm\x01\0\0\0").unwrap(); // the smallest valid core module
    let err = refused(
        &["--component", s(&core), "--now", "2026-11-09T00:05:00Z"],
        &dir.path().join("s.db"),
        2,
    );
    assert!(
        err.contains("core WebAssembly module, not a component"),
        "{err}"
    );
}

#[test]
fn a_component_for_another_world_is_refused_naming_the_world() {
    let dir = scratch();
    let other = guests().other_world.clone();
    let err = refused(
        &["--component", s(&other), "--now", "2026-11-09T00:05:00Z"],
        &dir.path().join("s.db"),
        2,
    );
    assert!(
        err.contains("jobhost:report/reporter@0.1.1") && err.contains("other_world.wasm"),
        "{err}"
    );
    assert!(
        err.contains("does not export `run` (it exports `greet`)"),
        "names what is missing: {err}"
    );
}

#[test]
fn a_component_for_another_version_of_the_world_is_refused_naming_both_versions() {
    let dir = scratch();
    let future = guests().future_world.clone();
    let err = refused(
        &["--component", s(&future), "--now", "2026-11-09T00:05:00Z"],
        &dir.path().join("s.db"),
        2,
    );
    assert!(
        err.contains("built for jobhost:report@0.2.0")
            && err.contains("this host speaks jobhost:report@0.1.1"),
        "{err}"
    );
}

#[test]
fn a_store_file_that_is_not_sqlite_is_refused_and_left_untouched() {
    let dir = scratch();
    let store = dir.path().join("notes.db");
    let text = "meeting notes, definitely not a database\n".repeat(200);
    std::fs::write(&store, &text).unwrap();
    let p = guests().probe.clone();
    let run = jobhost(&[
        "run",
        "--component",
        s(&p),
        "--store",
        s(&store),
        "--now",
        "2026-11-09T00:05:00Z",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("is not a SQLite database"),
        "{}",
        run.stderr
    );
    assert!(
        std::fs::read_to_string(&store).unwrap() == text,
        "the user's file is unchanged"
    );
}

#[test]
fn a_store_path_that_cannot_be_created_is_named() {
    let dir = scratch();
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "x").unwrap();
    let store = blocker.join("state").join("jobhost.db");
    let p = guests().probe.clone();
    let err = refused(
        &["--component", s(&p), "--now", "2026-11-09T00:05:00Z"],
        &store,
        2,
    );
    assert!(
        err.contains("cannot create store folder") && err.contains("a-file"),
        "{err}"
    );
}

#[test]
fn a_config_with_a_misspelled_key_is_refused_before_anything_runs() {
    let dir = scratch();
    let cfg = config(
        dir.path(),
        "component = \"x.wasm\"\n[limits]\ntimeout_secs = 5\n",
    );
    let err = refused(&["--config", s(&cfg)], &dir.path().join("s.db"), 2);
    assert!(
        err.contains("timeout_secs") && err.contains("job.toml"),
        "{err}"
    );
}

#[test]
fn a_source_query_that_does_not_bind_the_window_is_refused_before_the_claim() {
    let dir = scratch();
    sales_db(dir.path(), 10);
    let cfg = config(
        dir.path(),
        &format!(
            "component = \"{}\"\n[source]\npath = \"sales.db\"\nquery = \"SELECT * FROM sales\"\n",
            guests().report.display()
        ),
    );
    let store = dir.path().join("s.db");
    let err = refused(
        &["--config", s(&cfg), "--now", "2026-11-09T00:05:00Z"],
        &store,
        2,
    );
    assert!(err.contains(":start and :end"), "{err}");
}

#[test]
fn unknown_flags_exit_2_with_a_receipt_naming_the_flag() {
    let run = jobhost(&["run", "--bogus"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--bogus"));
    let r = run.receipt();
    assert_eq!(r["event"], "failed");
    assert_eq!(r["error"]["kind"], "invalid-input");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("--bogus"),
        "{r}"
    );
}

#[test]
fn the_data_source_given_as_the_store_is_refused_and_left_untouched() {
    let dir = scratch();
    let sales = sales_db(dir.path(), 10);
    let before = std::fs::read(&sales).unwrap();
    let unchanged = |path: &std::path::Path| std::fs::read(path).unwrap() == before;
    let p = guests().probe.clone();
    let run = jobhost(&[
        "run",
        "--component",
        s(&p),
        "--store",
        s(&sales),
        "--now",
        "2026-11-09T00:05:00Z",
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("is a SQLite database but not a jobhost store"),
        "{}",
        run.stderr
    );
    assert!(unchanged(&sales), "no tables added, no WAL switch");
    let history = jobhost(&["history", "--store", s(&sales)]);
    assert_eq!(history.code, 2);
    assert!(
        history.stderr.contains("not a jobhost store"),
        "{}",
        history.stderr
    );
}

#[test]
fn changing_the_zone_of_a_job_cannot_make_a_new_window_look_done() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let store = dir.path().join("s.db");
    let utc = run_job(&cfg, &store, "2026-11-09T12:00:00Z");
    assert_eq!(utc.event(), "ran", "{}", utc.stderr);
    let berlin = jobhost(&[
        "run",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--tz",
        "Europe/Berlin",
        "--now",
        "2026-11-09T12:00:00Z",
    ]);
    assert_eq!(berlin.code, 2, "{}", berlin.stderr);
    assert!(
        berlin
            .stderr
            .contains("already recorded for another window"),
        "{}",
        berlin.stderr
    );
}
