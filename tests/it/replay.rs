//! `jobhost replay`: a recorded run's component runs again against the
//! run's journal, with its recorded clock, and what it produces is compared
//! with what was recorded.

use crate::harness::*;

const NOW: &str = "2026-11-09T00:05:00Z";
const KEY: &str = "daily-report:2026-11-08";

fn replay(store: &std::path::Path, extra: &[&str]) -> Run {
    let mut args = vec!["replay", KEY, "--store", s(store)];
    args.extend_from_slice(extra);
    jobhost(&args)
}

#[test]
fn a_run_replays_bit_for_bit_even_after_its_source_rows_change() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 5000);
    let store = dir.path().join("s.db");
    let run = run_job(&cfg, &store, NOW);
    assert_eq!(run.event(), "ran", "{}", run.stderr);

    // The data source changes after the run (late corrections, a purge):
    // the journal, not the source, is the replay's input.
    let db = rusqlite::Connection::open(dir.path().join("sales.db")).unwrap();
    db.execute("DELETE FROM sales WHERE id % 2 = 0", [])
        .unwrap();
    db.execute("UPDATE sales SET amount = amount * 10", [])
        .unwrap();
    drop(db);

    // The recorded component is found in the compile cache by its digest.
    let same = replay(&store, &[]);
    assert_eq!(same.code, 0, "{}{}", same.stdout, same.stderr);
    assert!(same.stdout.contains("identical"), "{}", same.stdout);
    assert!(
        same.stdout.contains("1 message(s)"),
        "the staged message was compared too: {}",
        same.stdout
    );
}

#[test]
fn replaying_with_another_component_shows_what_it_would_have_said() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 2000);
    let store = dir.path().join("s.db");
    assert_eq!(run_job(&cfg, &store, NOW).event(), "ran");

    let other = replay(&store, &["--component", s(&guests().top_products)]);
    assert_eq!(other.code, 1, "{}{}", other.stdout, other.stderr);
    assert!(other.stdout.contains("different:"), "{}", other.stdout);
    assert!(
        other.stdout.contains("report summary:") && other.stdout.contains("Top 3 product(s)"),
        "{}",
        other.stdout
    );
    assert!(
        other
            .stdout
            .contains("message 1 (digest): $.top_products added"),
        "the JSON diff names the new field: {}",
        other.stdout
    );

    // The same swap, live: the new component runs the next window without
    // rebuilding or restarting anything, and history records which ran.
    let next = jobhost(&[
        "run",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2026-11-10T00:05:00Z",
        "--component",
        s(&guests().top_products),
    ]);
    assert_eq!(next.event(), "ran", "{}", next.stderr);
    let h = history(&store);
    assert_ne!(h[0]["component"], h[1]["component"], "{h:?}");
}

#[test]
fn replay_explains_a_missing_key_and_a_missing_store() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let store = dir.path().join("s.db");
    assert_eq!(run_job(&cfg, &store, NOW).event(), "ran");
    let missing = jobhost(&["replay", "daily-report:1999-01-01", "--store", s(&store)]);
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("no run `daily-report:1999-01-01`"),
        "{}",
        missing.stderr
    );
    assert!(!missing.stderr.contains("panicked"));

    let no_store = jobhost(&["replay", KEY, "--store", s(&dir.path().join("none.db"))]);
    assert_eq!(no_store.code, 2, "{}", no_store.stderr);
}

#[test]
fn clock_and_random_readings_replay_identically() {
    // The probe's `clock` mode reports its wall clock, monotonic clock and
    // random bytes in its summary; a replay must reproduce them exactly.
    let dir = scratch();
    let cfg = config(
        dir.path(),
        &format!(
            "job = \"clock\"\ncomponent = \"{}\"\n",
            guests().probe.display()
        ),
    );
    let store = dir.path().join("s.db");
    let run = run_job(&cfg, &store, NOW);
    assert_eq!(run.event(), "ran", "{}", run.stderr);
    let r = jobhost(&["replay", "clock:2026-11-08", "--store", s(&store)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("identical"), "{}", r.stdout);
}

/// The committed fixtures: real runs exported with `jobhost export`.
fn fixture(name: &str) -> std::path::PathBuf {
    root().join("tests").join("fixtures").join(name)
}

#[test]
fn committed_fixtures_replay_with_no_store_and_no_source() {
    // The reference report over 2026-11-08, and the probe reporting the
    // clock and random numbers it saw: both must come out the same.
    for (file, component) in [
        ("daily-report-2026-11-08.jobhost-replay", &guests().report),
        ("clock-2026-11-08.jobhost-replay", &guests().probe),
    ] {
        let r = jobhost(&[
            "replay",
            "--file",
            s(&fixture(file)),
            "--component",
            s(component),
        ]);
        assert_eq!(r.code, 0, "{file}: {}{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("identical"), "{file}: {}", r.stdout);
    }
}

#[test]
fn an_exported_run_replays_from_its_file_alone() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 1500);
    let store = dir.path().join("s.db");
    assert_eq!(run_job(&cfg, &store, NOW).event(), "ran");
    let file = dir.path().join("run.jobhost-replay");
    let e = jobhost(&["export", KEY, "-o", s(&file), "--store", s(&store)]);
    assert_eq!(e.code, 0, "{}", e.stderr);
    std::fs::remove_file(&store).unwrap();
    std::fs::remove_file(dir.path().join("sales.db")).unwrap();
    let r = jobhost(&["replay", "--file", s(&file)]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("identical"), "{}", r.stdout);
}

#[test]
fn damaged_truncated_and_newer_replay_files_are_refused_clearly() {
    let good = std::fs::read(fixture("daily-report-2026-11-08.jobhost-replay")).unwrap();
    let dir = scratch();
    let mut newer = good.clone();
    newer[8..12].copy_from_slice(&99u32.to_le_bytes());
    let mut cases = vec![
        (
            "truncated".to_string(),
            good[..good.len() / 3].to_vec(),
            "damaged or truncated",
        ),
        ("header only".to_string(), good[..10].to_vec(), "truncated"),
        ("newer".to_string(), newer, "newer than this jobhost reads"),
        (
            "not a replay".to_string(),
            b"{\"hello\":1}".to_vec(),
            "not a jobhost replay file",
        ),
    ];
    // One flipped byte anywhere after the header: never a plausible run.
    for at in (12..good.len()).step_by(good.len() / 16) {
        let mut flipped = good.clone();
        flipped[at] ^= 0x5a;
        cases.push((format!("flipped at {at}"), flipped, "damaged"));
    }
    for (name, bytes, want) in cases {
        let name = name.as_str();
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let r = jobhost(&[
            "replay",
            "--file",
            s(&path),
            "--component",
            s(&guests().report),
        ]);
        assert_eq!(r.code, 2, "{name}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(want), "{name}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{name}: {}", r.stderr);
    }
}

#[test]
fn a_guest_asking_for_what_the_journal_lacks_is_a_divergence_not_a_crash() {
    // The clock probe never opened its source; the reference report does.
    let r = jobhost(&[
        "replay",
        "--file",
        s(&fixture("clock-2026-11-08.jobhost-replay")),
        "--component",
        s(&guests().report),
    ]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("diverged") && r.stdout.contains("the recorded run never did"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_replay_file_ignores_a_store_named_in_the_environment() {
    let r = command(
        &root(),
        &[
            "replay",
            "--file",
            s(&fixture("clock-2026-11-08.jobhost-replay")),
            "--component",
            s(&guests().probe),
        ],
    )
    .env("JOBHOST_STORE", "/nonexistent/jobhost.db")
    .output()
    .unwrap();
    let r = to_run(r);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
}
