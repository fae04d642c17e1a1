//! Jobs that build on jobs (`[[needs]]`): a weekly job that needs a daily
//! one waits (WAITING, naming the days it waits for), starts once the
//! seventh day is DONE, and a cycle of needs is refused before anything
//! runs.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

/// A job file for the reference report over `sales.db` in `dir`: job
/// `name` with `window`, `extra` lines at the top, delivering to
/// `<name>.jsonl`.
fn job(dir: &Path, name: &str, window: &str, extra: &str, needs: &[&str]) -> PathBuf {
    let needs: String = needs
        .iter()
        .map(|n| format!("\n[[needs]]\njob = \"{n}\"\n"))
        .collect();
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"job = "{name}"
window = "{window}"
timezone = "UTC"
component = "{}"
{extra}

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "file"
path = "{name}.jsonl"
{needs}"#,
            guests().report.display()
        ),
    )
    .unwrap();
    path
}

/// `jobhost run --for LABEL` of `cfg` at `now`.
fn run_for(cfg: &Path, store: &Path, now: &str, label: &str) -> Run {
    let mut cmd = job_command(cfg, store, now);
    cmd.args(["--for", label]);
    to_run(cmd.output().unwrap())
}

/// The row of `key` as `history --json` gives it.
fn row(store: &Path, key: &str) -> Value {
    history(store)
        .into_iter()
        .find(|r| r["key"] == key)
        .unwrap_or_else(|| panic!("no row for {key}"))
}

fn status(cfg: &Path, store: &Path, now: &str) -> Run {
    jobhost(&[
        "status",
        "--config",
        s(cfg),
        "--store",
        s(store),
        "--now",
        now,
    ])
}

#[test]
fn a_weekly_job_waits_for_the_days_it_needs_names_them_and_runs_once_the_seventh_is_done() {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let store = dir.path().join("store.db");
    let daily = job(dir.path(), "daily", "day", "", &[]);
    let weekly = job(dir.path(), "weekly", "week", "", &["daily"]);
    let now = "2026-11-09T00:30:00Z";

    // The daily job has never run: the week waits for it, and is WAITING.
    let r = run_for(&weekly, &store, now, "2026-W45");
    assert_eq!(r.code, 0, "{}", r.stderr);
    let receipt = r.receipt();
    assert_eq!(receipt["event"], "skipped", "{receipt}");
    assert_eq!(receipt["reason"], "waiting");
    assert_eq!(receipt["waits_for"]["jobs_never_run"][0], "daily");
    assert_eq!(row(&store, "weekly:2026-W45")["state"], "WAITING");
    assert!(
        !dir.path().join("weekly.jsonl").exists(),
        "nothing is delivered"
    );

    // Six days done: it waits for the seventh, by key.
    for day in 2..=7 {
        let label = format!("2026-11-0{day}");
        let r = run_for(&daily, &store, now, &label);
        assert_eq!(r.event(), "ran", "{}", r.stdout);
    }
    let r = run_for(&weekly, &store, now, "2026-W45");
    let receipt = r.receipt();
    assert_eq!(receipt["reason"], "waiting", "{receipt}");
    assert_eq!(receipt["waits_for"]["count"], 1);
    assert_eq!(
        receipt["waits_for"]["windows"][0]["key"],
        "daily:2026-11-08"
    );
    assert!(receipt["waits_for"]["windows"][0]["state"].is_null());
    let waiting = row(&store, "weekly:2026-W45");
    assert_eq!(waiting["state"], "WAITING");
    assert!(
        waiting["reason"]
            .as_str()
            .unwrap()
            .contains("daily:2026-11-08"),
        "{waiting}"
    );

    // Within its grace the job is not late, and says what it waits for;
    // past it, it is late and names the missing day.
    let ok = status(&weekly, &store, now);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(ok.stdout.contains("WAITING for"), "{}", ok.stdout);
    let late = status(&weekly, &store, "2026-11-09T03:00:00Z");
    assert_eq!(late.code, 3, "{}{}", late.stdout, late.stderr);
    assert!(
        late.stdout.contains("late") && late.stdout.contains("daily:2026-11-08"),
        "{}",
        late.stdout
    );
    let json = jobhost(&[
        "status",
        "--json",
        "--config",
        s(&weekly),
        "--store",
        s(&store),
        "--now",
        now,
    ]);
    let st: Value = serde_json::from_str(json.stdout.trim()).unwrap();
    assert_eq!(st["waiting"][0]["key"], "weekly:2026-W45", "{st}");
    assert_eq!(st["expected_state"], "WAITING");

    // `plan` lists it as waiting.
    let plan = jobhost(&[
        "plan",
        "--config",
        s(&weekly),
        "--store",
        s(&store),
        "--now",
        now,
    ]);
    assert!(
        plan.stdout
            .lines()
            .any(|l| l.contains("wait") && l.contains("weekly:2026-W45")),
        "{}",
        plan.stdout
    );

    // The seventh day: the week runs, once, as its first attempt.
    let r = run_for(&daily, &store, now, "2026-11-08");
    assert_eq!(r.event(), "ran", "{}", r.stdout);
    let r = run_for(&weekly, &store, now, "2026-W45");
    let receipt = r.receipt();
    assert_eq!(receipt["event"], "ran", "{receipt}");
    assert_eq!(receipt["attempt"], 1);
    assert_eq!(row(&store, "weekly:2026-W45")["state"], "DONE");
    let delivered = std::fs::read_to_string(dir.path().join("weekly.jsonl")).unwrap();
    assert_eq!(delivered.lines().count(), 1);
    let ok = status(&weekly, &store, "2026-11-09T03:00:00Z");
    assert_eq!(ok.code, 0, "{}", ok.stdout);
}

#[test]
fn the_daemon_starts_a_waiting_window_as_soon_as_its_last_upstream_window_is_done() {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let store = dir.path().join("store.db");
    // The days come due an hour after midnight; the week at midnight.
    let daily = job(dir.path(), "daily", "day", "delay_seconds = 3600", &[]);
    let weekly = job(dir.path(), "weekly", "week", "", &["daily"]);
    let backfill = jobhost(&[
        "backfill",
        "--config",
        s(&daily),
        "--store",
        s(&store),
        "--now",
        "2026-11-08T12:00:00Z",
        "--from",
        "2026-10-26",
        "--to",
        "2026-11-08",
    ]);
    assert_eq!(backfill.code, 0, "{}", backfill.stderr);
    let r = run_for(&weekly, &store, "2026-11-08T12:00:00Z", "2026-W44");
    assert_eq!(r.event(), "ran", "{}", r.stdout);

    let out = daemon_command(
        &[&daily, &weekly],
        s(&store),
        "2026-11-08T23:00:00Z",
        "2026-11-09T01:30:00Z",
    )
    .output()
    .unwrap();
    let run = to_run(out);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |key: &str| -> Vec<&Value> { lines.iter().filter(|l| l["key"] == key).collect() };
    let week = of("weekly:2026-W45");
    assert_eq!(week.first().unwrap()["reason"], "waiting", "{week:?}");
    let ran: Vec<&&Value> = week.iter().filter(|l| l["event"] == "ran").collect();
    assert_eq!(ran.len(), 1, "{week:?}");
    let day = of("daily:2026-11-08");
    assert_eq!(day.len(), 1, "{day:?}");
    assert_eq!(day[0]["event"], "ran");
    let at = |l: &Value| {
        l["now"]
            .as_str()
            .unwrap()
            .parse::<jiff::Timestamp>()
            .unwrap()
    };
    let (day_at, week_at) = (at(day[0]), at(ran[0]));
    assert!(
        week_at >= day_at && week_at.duration_since(day_at) < jiff::SignedDuration::from_secs(10),
        "the week ran at {week_at}, the day it waited for at {day_at}"
    );
    assert_eq!(row(&store, "weekly:2026-W45")["state"], "DONE");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("weekly.jsonl"))
            .unwrap()
            .lines()
            .count(),
        2,
        "W44 and W45, once each"
    );
}

#[test]
fn needs_that_make_a_cycle_are_refused_before_anything_runs_and_so_is_a_job_that_needs_itself() {
    let dir = scratch();
    sales_db(dir.path(), 10);
    let store = dir.path().join("store.db");
    let a = job(dir.path(), "a", "day", "", &["b"]);
    let b = job(dir.path(), "b", "day", "", &["c"]);
    let c = job(dir.path(), "c", "day", "", &["a"]);
    let run = to_run(
        daemon_command(
            &[&a, &b, &c],
            s(&store),
            "2026-11-09T00:30:00Z",
            "2026-11-09T01:00:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("cycle") && run.stderr.contains("`a` needs `b` needs `c` needs `a`"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        !store.exists() || history(&store).is_empty(),
        "nothing was claimed"
    );

    let me = job(dir.path(), "me", "day", "", &["me"]);
    let r = run_job(&me, &store, "2026-11-09T00:30:00Z");
    assert_eq!(r.code, 2, "{}", r.stdout);
    assert!(
        r.stdout.contains("names itself in `[[needs]]`"),
        "{}",
        r.stdout
    );
}
