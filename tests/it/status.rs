//! `jobhost status`: whether each job keeps up, for a person or a monitor;
//! exit 0 when every job is healthy, 3 when one is late, 4 when one failed.

use std::path::Path;

use serde_json::Value;

use crate::harness::*;

fn status(cfgs: &[&Path], store: &Path, now: &str) -> (i32, Vec<Value>, String) {
    let mut args = vec!["status"];
    for c in cfgs {
        args.extend(["--config", s(c)]);
    }
    args.extend(["--store", s(store), "--now", now]);
    let text = jobhost(&args);
    args.push("--json");
    let json = jobhost(&args);
    assert_eq!(text.code, json.code, "{}", json.stderr);
    let lines = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (json.code, lines, text.stdout)
}

fn with(dir: &Path, extra: &str) -> std::path::PathBuf {
    let cfg = report_config(dir, 100);
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{extra}\n{text}")).unwrap();
    cfg
}

#[test]
fn a_job_whose_newest_due_window_is_done_is_healthy() {
    let dir = scratch();
    let cfg = with(dir.path(), "");
    let store = dir.path().join("s.db");
    let ran = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    let (code, lines, text) = status(&[&cfg], &store, "2026-11-09T06:00:00Z");
    assert_eq!(code, 0, "{text}");
    assert_eq!(lines[0]["health"], "healthy");
    assert_eq!(lines[0]["expected"], "daily-report:2026-11-08");
    assert_eq!(lines[0]["expected_state"], "DONE");
    assert_eq!(lines[0]["last_done"], "daily-report:2026-11-08");
    assert!(text.starts_with("daily-report: healthy"), "{text}");
}

#[test]
fn a_job_is_late_only_once_its_grace_has_passed_and_the_worst_job_sets_the_exit_code() {
    let dir = scratch();
    let cfg = with(dir.path(), "grace_seconds = 3600");
    let store = dir.path().join("s.db");
    let ran = run_job(&cfg, &store, "2026-11-08T00:05:00Z");
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    // The 8th became due at midnight on the 9th and has not run.
    let (code, lines, _) = status(&[&cfg], &store, "2026-11-09T00:30:00Z");
    assert_eq!(
        (code, lines[0]["health"].as_str()),
        (0, Some("healthy")),
        "within the grace"
    );
    let (code, lines, text) = status(&[&cfg], &store, "2026-11-09T02:00:00Z");
    assert_eq!(code, 3, "{text}");
    assert_eq!(lines[0]["health"], "late");
    assert_eq!(lines[0]["late_seconds"], 7200);
    assert_eq!(lines[0]["expected_state"], "not claimed");
    assert_eq!(lines[0]["last_done"], "daily-report:2026-11-07");
    assert!(text.contains("late by 2h (grace 1h)"), "{text}");

    // A second, healthy job does not hide the late one.
    let other = scratch();
    let healthy = with(other.path(), "job = \"other\"");
    let text = std::fs::read_to_string(&healthy).unwrap();
    std::fs::write(&healthy, text.replacen("job = \"daily-report\"\n", "", 1)).unwrap();
    let ran = run_job(&healthy, &store, "2026-11-09T00:05:00Z");
    assert_eq!(ran.receipt()["job"], "other", "{}", ran.stdout);
    let (code, lines, _) = status(&[&healthy, &cfg], &store, "2026-11-09T02:00:00Z");
    assert_eq!(code, 3);
    assert_eq!(lines[0]["health"], "healthy");
    assert_eq!(lines[1]["health"], "late");
}

#[test]
fn a_job_with_an_abandoned_window_has_failed_until_a_person_looks() {
    let dir = scratch();
    // Nothing listens on this port: every send fails, and with one
    // attempt allowed the window is abandoned.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = crate::effects::http_config(
        dir.path(),
        "max_attempts = 1",
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"http://127.0.0.1:{port}/x\"\ntries = 1\n"
        ),
    );
    let store = dir.path().join("s.db");
    let run = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(run.event(), "abandoned", "{}", run.stdout);
    let (code, lines, text) = status(&[&cfg], &store, "2026-11-09T00:10:00Z");
    assert_eq!(code, 4, "{text}");
    assert_eq!(lines[0]["health"], "failed");
    assert_eq!(
        lines[0]["needs_a_person"][0]["key"],
        "daily-report:2026-11-08"
    );
    assert_eq!(lines[0]["needs_a_person"][0]["state"], "ABANDONED");
    assert!(text.contains("a person must look"), "{text}");

    // The next window runs fine (the destination is now a file): the
    // abandoned one still needs a person, so the job stays failed.
    let text = std::fs::read_to_string(&cfg).unwrap();
    let start = text.find("[destinations.digest]").unwrap();
    std::fs::write(
        &cfg,
        format!(
            "{}[destinations.digest]\ntype = \"file\"\npath = \"out.jsonl\"\n",
            &text[..start]
        ),
    )
    .unwrap();
    let next = run_job(&cfg, &store, "2026-11-10T00:05:00Z");
    assert_eq!(next.event(), "ran", "{}", next.stdout);
    let (code, lines, _) = status(&[&cfg], &store, "2026-11-10T00:10:00Z");
    assert_eq!(
        code, 4,
        "an abandoned window stays until a person removes its row"
    );
    assert_eq!(lines[0]["last_done"], "daily-report:2026-11-09");
}

#[test]
fn status_of_a_job_that_never_ran_creates_no_store_and_bad_input_is_exit_2() {
    let dir = scratch();
    let cfg = with(dir.path(), "");
    let store = dir.path().join("none").join("s.db");
    // A store that does not exist may be a mistyped path: an error, unless
    // the deploy is fresh and says so.
    let missing = jobhost(&[
        "status",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2026-11-09T06:00:00Z",
    ]);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("does not exist") && missing.stderr.contains("--allow-missing"),
        "{}",
        missing.stderr
    );
    let mut args = vec![
        "status",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        "2026-11-09T06:00:00Z",
        "--allow-missing",
    ];
    let text = jobhost(&args);
    args.push("--json");
    let json = jobhost(&args);
    assert_eq!(
        (text.code, json.code),
        (3, 3),
        "never ran, six hours past due"
    );
    let line: Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(line["last_done"], Value::Null);
    assert!(!store.exists());
    let bad = with(dir.path(), "grace_seconds = 99999999");
    let run = jobhost(&["status", "--config", s(&bad)]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("invalid `grace_seconds = 99999999`"),
        "{}",
        run.stderr
    );
}

#[test]
fn nagios_exit_codes_are_ok_warning_critical_and_unknown() {
    let dir = scratch();
    let cfg = with(dir.path(), "");
    let store = dir.path().join("s.db");
    assert_eq!(run_job(&cfg, &store, "2026-11-08T00:05:00Z").event(), "ran");
    let nagios = |now: &str, store: &Path| {
        jobhost(&[
            "status",
            "--config",
            s(&cfg),
            "--store",
            s(store),
            "--now",
            now,
            "--nagios",
        ])
    };
    let ok = nagios("2026-11-08T00:30:00Z", &store);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(
        ok.stdout.starts_with("JOBHOST OK - 1 healthy\n"),
        "{}",
        ok.stdout
    );
    // The 8th is two hours past due: late is a warning.
    let late = nagios("2026-11-09T02:00:00Z", &store);
    assert_eq!(late.code, 1, "{}", late.stdout);
    assert!(
        late.stdout
            .starts_with("JOBHOST WARNING - 1 late (daily-report)\n"),
        "{}",
        late.stdout
    );
    assert!(
        late.stdout
            .lines()
            .nth(1)
            .unwrap()
            .starts_with("daily-report: late by")
    );
    // A store that cannot be read is unknown, not a warning.
    let nowhere = dir.path().join("no-such.db");
    let unknown = nagios("2026-11-09T02:00:00Z", &nowhere);
    assert_eq!(unknown.code, 3, "{}{}", unknown.stdout, unknown.stderr);
    assert!(
        unknown.stdout.starts_with("JOBHOST UNKNOWN - store "),
        "{}",
        unknown.stdout
    );
}
