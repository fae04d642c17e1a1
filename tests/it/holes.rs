//! Holes and the small things of issue 17, item 13: `status` and `plan`
//! see due windows that nothing ran (cron mode: `jobhost run` runs only the
//! newest), `history` shows each window's bounds and when it ran and takes
//! `--limit` and `--config`, `--version` names the WIT package, and
//! lateness reads as a duration.

use std::path::Path;

use jobhost_tests::pg::Scratch;
use serde_json::Value;

use crate::harness::*;

/// `status` as text and as JSON: (exit code, JSON line, text).
fn status(cfg: &Path, store: &str, now: &str) -> (i32, Value, String) {
    let args = ["status", "--config", s(cfg), "--store", store, "--now", now];
    let text = jobhost(&args);
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let json = jobhost(&json_args);
    assert_eq!(text.code, json.code, "{}{}", text.stderr, json.stderr);
    let line = serde_json::from_str(json.stdout.trim()).expect("one JSON line");
    (json.code, line, text.stdout)
}

fn with(dir: &Path, extra: &str) -> std::path::PathBuf {
    report_config_with(dir, 100, extra)
}

/// Cron mode, no daemon: the 8th ran, the 9th and 10th never did, the 11th
/// ran at its tick.
fn cron_with_a_gap(cfg: &Path, store: &str) {
    for now in ["2026-11-09T00:05:00Z", "2026-11-12T00:05:00Z"] {
        let ran = run_job(cfg, store, now);
        assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    }
}

fn holes_make_status_late_and_plan_lists_them(cfg: &Path, store: &str) {
    cron_with_a_gap(cfg, store);
    let (code, line, text) = status(cfg, store, "2026-11-12T03:00:00Z");
    assert_eq!(code, 3, "late, not healthy: {text}");
    assert_eq!(line["health"], "late");
    assert_eq!(line["expected"], "daily-report:2026-11-11");
    assert_eq!(line["expected_state"], "DONE", "the newest due window ran");
    assert_eq!(line["holes"]["count"], 2);
    let listed: Vec<&str> = line["holes"]["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        ["daily-report:2026-11-09", "daily-report:2026-11-10"],
        "oldest first"
    );
    // The 9th fell due at midnight on the 10th: 51 hours before now.
    assert_eq!(line["holes"]["listed"][0]["due"], "2026-11-10T00:00:00Z");
    assert_eq!(line["holes"]["listed"][0]["late_seconds"], 51 * 3600);
    assert_eq!(
        line["late_seconds"],
        51 * 3600,
        "the oldest hole's lateness"
    );
    assert!(
        text.contains("late by 2d3h (grace 1h): daily-report:2026-11-09"),
        "{text}"
    );
    assert!(
        text.contains(
            "2 window(s) due with no run (holes): daily-report:2026-11-09, daily-report:2026-11-10"
        ),
        "{text}"
    );

    // `plan` shows them without `--since`.
    let plan = jobhost(&[
        "plan",
        "--config",
        s(cfg),
        "--store",
        store,
        "--now",
        "2026-11-12T03:00:00Z",
    ]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let holes: Vec<&str> = plan
        .stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("hole"))
        .collect();
    assert_eq!(holes.len(), 2, "{}", plan.stdout);
    assert!(
        holes[0].contains("daily-report:2026-11-09") && holes[0].contains("jobhost run --for"),
        "{}",
        plan.stdout
    );
    let json = jobhost(&[
        "plan",
        "--config",
        s(cfg),
        "--store",
        store,
        "--now",
        "2026-11-12T03:00:00Z",
        "--json",
    ]);
    let lines: Vec<Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let hole_keys: Vec<&str> = lines
        .iter()
        .filter(|l| l["decision"] == "hole")
        .map(|l| l["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        hole_keys,
        ["daily-report:2026-11-09", "daily-report:2026-11-10"]
    );
    assert_eq!(lines.last().unwrap()["decision"], "next");

    // Running the holes on purpose makes the job healthy again.
    for label in ["2026-11-09", "2026-11-10"] {
        let ran = to_run(
            job_command(cfg, store, "2026-11-12T03:00:00Z")
                .args(["--for", label])
                .output()
                .unwrap(),
        );
        assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    }
    let (code, line, text) = status(cfg, store, "2026-11-12T03:00:00Z");
    assert_eq!(code, 0, "{text}");
    assert_eq!(line["holes"]["count"], 0);
    assert!(!text.contains("holes"), "{text}");
}

#[test]
fn holes_in_cron_mode_make_status_late_and_plan_lists_them() {
    let dir = scratch();
    let cfg = with(dir.path(), "grace_seconds = 3600");
    let store = dir.path().join("s.db");
    holes_make_status_late_and_plan_lists_them(&cfg, s(&store));
}

#[test]
fn holes_on_postgres_make_status_late_and_plan_lists_them() {
    let Some(db) = Scratch::new("holes::holes_on_postgres_make_status_late_and_plan_lists_them")
    else {
        return;
    };
    let dir = scratch();
    let cfg = with(dir.path(), "grace_seconds = 3600");
    holes_make_status_late_and_plan_lists_them(&cfg, &db.url());
}

#[test]
fn a_hole_within_its_grace_keeps_the_job_healthy_but_is_listed() {
    let dir = scratch();
    // A day's grace: the 10th, due at midnight on the 11th, is a hole but
    // not yet late at 11-12T00:30 (the 9th ran, the 11th ran at its tick).
    let cfg = with(dir.path(), "grace_seconds = 100000");
    let store = dir.path().join("s.db");
    for now in ["2026-11-10T00:05:00Z", "2026-11-12T00:05:00Z"] {
        assert_eq!(run_job(&cfg, &store, now).event(), "ran");
    }
    let (code, line, text) = status(&cfg, s(&store), "2026-11-12T00:30:00Z");
    assert_eq!(code, 0, "{text}");
    assert_eq!(line["health"], "healthy");
    assert_eq!(line["holes"]["count"], 1);
    assert!(text.contains("daily-report:2026-11-10"), "{text}");
    // Past the grace it is late.
    let (code, _, text) = status(&cfg, s(&store), "2026-11-12T04:00:00Z");
    assert_eq!(code, 3, "{text}");
}

#[test]
fn a_job_idle_for_years_counts_its_holes_and_lists_only_the_first_few() {
    let dir = scratch();
    let cfg = with(dir.path(), "window = \"hour\"");
    let store = dir.path().join("s.db");
    assert_eq!(run_job(&cfg, &store, "2026-11-09T00:05:00Z").event(), "ran");
    assert_eq!(run_job(&cfg, &store, "2028-11-09T00:05:00Z").event(), "ran");
    let (code, line, text) = status(&cfg, s(&store), "2028-11-09T00:30:00Z");
    assert_eq!(code, 3, "{text}");
    assert_eq!(text.lines().count(), 1, "one line per job: {text}");
    assert!(text.len() < 1000, "bounded: {text}");
    assert!(text.contains("more"), "{text}");
    assert_eq!(line["holes"]["listed"].as_array().unwrap().len(), 5);
    assert_eq!(line["holes"]["truncated"], true, "two years of hours");
    assert!(line["holes"]["count"].as_u64().unwrap() >= 9_999);
    let plan = jobhost(&[
        "plan",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2028-11-09T00:30:00Z",
    ]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(plan.stdout.lines().count() < 12, "{}", plan.stdout);
    assert!(plan.stdout.contains("more hole(s)"), "{}", plan.stdout);
}

#[test]
fn lateness_is_printed_as_a_duration_and_kept_in_seconds_in_json() {
    let dir = scratch();
    let cfg = with(dir.path(), "grace_seconds = 45");
    let store = dir.path().join("s.db");
    assert_eq!(run_job(&cfg, &store, "2026-11-08T00:05:00Z").event(), "ran");
    // The 8th fell due at midnight on the 9th.
    let (code, line, text) = status(&cfg, s(&store), "2026-11-09T18:58:30Z");
    assert_eq!(code, 3, "{text}");
    assert_eq!(line["late_seconds"], 18 * 3600 + 58 * 60 + 30);
    assert_eq!(line["grace_seconds"], 45);
    assert!(text.contains("late by 18h58m (grace 45s)"), "{text}");
}

#[test]
fn history_shows_window_bounds_and_when_it_ran_and_takes_limit_and_config() {
    let dir = scratch();
    // The config's own store: `store` in the file.
    let cfg = report_config_with(dir.path(), 100, "store = \"mine.db\"");
    for now in [
        "2026-11-09T00:05:00Z",
        "2026-11-10T00:05:00Z",
        "2026-11-11T00:05:00Z",
    ] {
        let run = to_run(
            command(&root(), &["run", "--config", s(&cfg), "--now", now])
                .env("JOBHOST_TEST_VIRTUAL_TIME", "1")
                .env_remove("JOBHOST_STORE")
                .output()
                .unwrap(),
        );
        assert_eq!(run.event(), "ran", "{}", run.stderr);
    }
    assert!(dir.path().join("mine.db").exists());
    let json = to_run(
        command(
            &root(),
            &["history", "--config", s(&cfg), "--json", "--limit", "2"],
        )
        .env_remove("JOBHOST_STORE")
        .output()
        .unwrap(),
    );
    assert_eq!(json.code, 0, "{}", json.stderr);
    let rows: Vec<Value> = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(
        keys,
        ["daily-report:2026-11-10", "daily-report:2026-11-09"],
        "the newest two, from the config's store"
    );
    assert_eq!(rows[0]["window"]["start"], "2026-11-10T00:00:00Z");
    assert_eq!(rows[0]["window"]["end"], "2026-11-11T00:00:00Z");
    assert_eq!(rows[0]["ran_at"], "2026-11-11T00:05:00Z");

    let table = to_run(
        command(&root(), &["history", "--config", s(&cfg), "--limit", "1"])
            .env_remove("JOBHOST_STORE")
            .output()
            .unwrap(),
    );
    assert_eq!(table.code, 0, "{}", table.stderr);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "a header and one row: {}", table.stdout);
    for column in ["START", "END", "RAN"] {
        assert!(lines[0].contains(column), "{}", table.stdout);
    }
    for cell in [
        "daily-report:2026-11-10",
        "2026-11-10T00:00:00Z",
        "2026-11-11T00:00:00Z",
        "2026-11-11T00:05:00Z",
    ] {
        assert!(lines[1].contains(cell), "{cell}: {}", table.stdout);
    }

    let zero = jobhost(&["history", "--config", s(&cfg), "--limit", "0"]);
    assert_eq!(zero.code, 2, "{}", zero.stderr);
    assert!(zero.stderr.contains("--limit"), "{}", zero.stderr);
}

#[test]
fn version_names_the_wit_package_the_host_speaks() {
    let run = jobhost(&["--version"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("jobhost:report@0.1.1"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.starts_with("jobhost "), "{}", run.stdout);
    let wit = std::fs::read_to_string(root().join("wit/report.wit")).unwrap();
    assert!(
        wit.contains("package jobhost:report@0.1.1;"),
        "the WIT agrees"
    );
}
