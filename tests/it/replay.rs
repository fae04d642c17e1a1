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
    let e = jobhost(&[
        "export",
        KEY,
        "-o",
        s(&file),
        "--store",
        s(&store),
        "--without-component",
    ]);
    assert_eq!(e.code, 0, "{}", e.stderr);
    assert!(e.stdout.contains("not embedded"), "{}", e.stdout);
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

/// Runs the reference report over the seven days 2026-11-02 .. 2026-11-08
/// into `store`.
fn seven_windows(cfg: &std::path::Path, store: &std::path::Path) {
    for day in 3..=9 {
        let now = format!("2026-11-{day:02}T00:05:00Z");
        let run = run_job(cfg, store, &now);
        assert_eq!(run.event(), "ran", "{now}: {}", run.stderr);
    }
}

/// The lines of `run`'s stdout.
fn lines(run: &Run) -> Vec<&str> {
    run.stdout.lines().collect()
}

#[test]
fn a_swap_preview_replays_the_last_windows_with_one_component() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 3000);
    let store = dir.path().join("s.db");
    seven_windows(&cfg, &store);
    let preview = |component: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["replay", "--last", "7", "--store", s(&store)];
        args.extend(["--component", s(component)]);
        args.extend_from_slice(extra);
        jobhost(&args)
    };

    // The component that ran: every window identical. The store holds one
    // job, so --job may be left out.
    let same = preview(&guests().report, &[]);
    assert_eq!(same.code, 0, "{}{}", same.stdout, same.stderr);
    let out = lines(&same);
    assert_eq!(
        out.len(),
        9,
        "a header, 7 windows, a summary: {}",
        same.stdout
    );
    assert!(out[0].starts_with("replaying the last 7 window(s) of daily-report with sha256:"));
    for (line, day) in out[1..8].iter().zip(2..=8) {
        assert_eq!(*line, format!("daily-report:2026-11-{day:02}: identical"));
    }
    assert_eq!(out[8], "7 windows: 7 identical");
    assert!(
        same.stderr.matches("compiling `").count() <= 1,
        "compiled once at most: {}",
        same.stderr
    );

    // New logic: every window different, each with its first difference.
    let other = preview(&guests().top_products, &[]);
    assert_eq!(other.code, 1, "{}{}", other.stdout, other.stderr);
    let out = lines(&other);
    assert_eq!(out.len(), 9, "{}", other.stdout);
    for (line, day) in out[1..8].iter().zip(2..=8) {
        let want = format!("daily-report:2026-11-{day:02}: different: report summary: ");
        assert!(line.starts_with(&want), "{line}");
        assert!(line.contains("more)"), "the rest are counted: {line}");
    }
    assert_eq!(out[8], "7 windows: 0 identical, 7 different");

    // --json: only JSON on stdout, one object per window, then a summary.
    let json = preview(&guests().top_products, &["--json"]);
    assert_eq!(json.code, 1, "{}", json.stderr);
    let objects: Vec<serde_json::Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(objects.len(), 8, "{}", json.stdout);
    for (o, day) in objects[..7].iter().zip(2..=8) {
        assert_eq!(o["key"], format!("daily-report:2026-11-{day:02}"));
        assert_eq!(o["verdict"], "different", "{o}");
        assert!(!o["differences"].as_array().unwrap().is_empty(), "{o}");
        assert_ne!(o["component"], o["recorded_component"], "{o}");
        assert!(
            o["component"].as_str().unwrap().starts_with("sha256:"),
            "{o}"
        );
        assert_eq!(o["overridden"], serde_json::json!([]), "{o}");
    }
    let summary = &objects[7];
    assert_eq!(
        (
            &summary["windows"],
            &summary["identical"],
            &summary["different"]
        ),
        (&7.into(), &0.into(), &7.into()),
        "{summary}"
    );
    assert_eq!(summary["job"], "daily-report");

    // Fewer recorded windows than asked for: all of them, said so. With a
    // config, its job is the one replayed.
    let more = jobhost(&[
        "replay",
        "--last",
        "10",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--component",
        s(&guests().report),
    ]);
    assert_eq!(more.code, 0, "{}{}", more.stdout, more.stderr);
    assert!(
        lines(&more)[0].contains("only 7 of the 10 asked for"),
        "{}",
        more.stdout
    );
    assert!(
        more.stdout.ends_with("7 windows: 7 identical\n"),
        "{}",
        more.stdout
    );
}

#[test]
fn a_swap_preview_asks_which_job_when_the_store_holds_several() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 500);
    let store = dir.path().join("s.db");
    assert_eq!(run_job(&cfg, &store, NOW).event(), "ran");
    let probe = dir.path().join("clock.toml");
    std::fs::write(
        &probe,
        format!(
            "job = \"clock\"\ncomponent = \"{}\"\n",
            guests().probe.display()
        ),
    )
    .unwrap();
    assert_eq!(run_job(&probe, &store, NOW).event(), "ran");

    let args = [
        "replay",
        "--last",
        "3",
        "--store",
        s(&store),
        "--component",
        s(&guests().report),
    ];
    let which = jobhost(&args);
    assert_eq!(which.code, 2, "{}{}", which.stdout, which.stderr);
    assert_eq!(which.stderr.lines().count(), 1, "{}", which.stderr);
    assert!(
        which.stderr.contains("2 jobs (clock, daily-report)") && which.stderr.contains("--job"),
        "{}",
        which.stderr
    );
    assert!(which.stdout.is_empty(), "{}", which.stdout);

    let named = jobhost(&[&args[..], &["--job", "daily-report"]].concat());
    assert_eq!(named.code, 0, "{}{}", named.stdout, named.stderr);
    assert!(
        named.stdout.contains("1 window: 1 identical"),
        "{}",
        named.stdout
    );

    let unknown = jobhost(&[&args[..], &["--job", "nightly"]].concat());
    assert_eq!(unknown.code, 2, "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("no runs of job `nightly`"),
        "{}",
        unknown.stderr
    );
}

#[test]
fn an_overridden_parameter_is_said_and_changes_the_result() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 3000);
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}\n[params]\ntop = 5\n")).unwrap();
    let store = dir.path().join("s.db");
    for now in ["2026-11-08T00:05:00Z", NOW] {
        assert_eq!(run_job(&cfg, &store, now).event(), "ran");
    }

    let r = replay(&store, &["--param", "top=1", "--param", "region=us"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("parameter top overridden: \"5\" -> \"1\""),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("parameter region added: \"us\""),
        "an unknown key is added: {}",
        r.stdout
    );
    assert!(r.stdout.contains("different:"), "{}", r.stdout);
    assert!(r.stdout.contains("removed (was"), "{}", r.stdout);

    // Over several windows, said once while the recorded values agree.
    let last = jobhost(&[
        "replay",
        "--last",
        "2",
        "--store",
        s(&store),
        "--component",
        s(&guests().report),
        "--param",
        "top=1",
    ]);
    assert_eq!(last.code, 1, "{}{}", last.stdout, last.stderr);
    assert_eq!(
        last.stdout.matches("parameter top overridden").count(),
        1,
        "{}",
        last.stdout
    );
    assert!(
        last.stdout.contains("2 windows: 0 identical, 2 different"),
        "{}",
        last.stdout
    );

    // In JSON, the override is in each window's object.
    let json = replay(&store, &["--param", "top=1", "--json"]);
    assert_eq!(json.code, 1, "{}", json.stderr);
    let o = json.receipt();
    assert_eq!(o["verdict"], "different");
    assert_eq!(
        o["overridden"],
        serde_json::json!([{"name": "top", "recorded": "5", "replayed": "1"}])
    );

    // The recorded value again: identical.
    let again = replay(&store, &["--param", "top=5"]);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);

    for bad in ["top", "=1"] {
        let r = replay(&store, &["--param", bad]);
        assert_eq!(r.code, 2, "{bad}: {}{}", r.stdout, r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{bad}: {}", r.stderr);
        assert!(r.stderr.contains("KEY=VALUE"), "{bad}: {}", r.stderr);
    }
}

#[test]
fn an_export_carries_its_component_and_replays_after_the_cache_is_gone() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 1500);
    let store = dir.path().join("s.db");
    assert_eq!(run_job(&cfg, &store, NOW).event(), "ran");
    let file = dir.path().join("run.jobhost-replay");
    let export = |extra: &[&str]| {
        let mut args = vec!["export", KEY, "-o", s(&file), "--store", s(&store)];
        args.extend_from_slice(extra);
        jobhost(&args)
    };

    // Nothing says which .wasm ran: refused, saying how to give it.
    let bare = export(&[]);
    assert_eq!(bare.code, 2, "{}", bare.stderr);
    assert_eq!(bare.stderr.lines().count(), 1, "{}", bare.stderr);
    assert!(
        bare.stderr.contains("--component") && bare.stderr.contains("--without-component"),
        "{}",
        bare.stderr
    );
    // Another component than the one that ran: refused, nothing written.
    let wrong = export(&["--component", s(&guests().top_products)]);
    assert_eq!(wrong.code, 2, "{}", wrong.stderr);
    assert_eq!(wrong.stderr.lines().count(), 1, "{}", wrong.stderr);
    assert!(
        wrong.stderr.contains("was recorded with") && wrong.stderr.contains("guest_top_products"),
        "{}",
        wrong.stderr
    );
    assert!(!file.exists());

    // The config's component is the one that ran: embedded.
    let e = export(&["--config", s(&cfg)]);
    assert_eq!(e.code, 0, "{}", e.stderr);
    assert!(e.stdout.contains("embedded ("), "{}", e.stdout);
    let bare = dir.path().join("bare.jobhost-replay");
    let b = jobhost(&[
        "export",
        KEY,
        "-o",
        s(&bare),
        "--store",
        s(&store),
        "--without-component",
    ]);
    assert_eq!(b.code, 0, "{}", b.stderr);
    std::fs::remove_file(&store).unwrap();
    std::fs::remove_file(dir.path().join("sales.db")).unwrap();

    // With a compile cache of its own, deleted between two replays: the
    // second compiles the carried component afresh.
    let cache = dir.path().join("cache");
    let replay_file = |file: &std::path::Path| {
        to_run(
            command(&root(), &["replay", "--file", s(file)])
                .env("JOBHOST_CACHE_DIR", &cache)
                .output()
                .unwrap(),
        )
    };
    let first = replay_file(&file);
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    std::fs::remove_dir_all(&cache).unwrap();
    let r = replay_file(&file);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("identical"), "{}", r.stdout);
    assert!(
        r.stdout.contains("(the one the file carries)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("compiling `the component in"),
        "{}",
        r.stderr
    );

    // Exported without it, a file needs the cache or --component.
    std::fs::remove_dir_all(&cache).unwrap();
    let r = replay_file(&bare);
    assert_eq!(r.code, 2, "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("pass --component"), "{}", r.stderr);
}
