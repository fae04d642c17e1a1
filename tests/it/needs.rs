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

/// `jobhost backfill` of `cfg` from `from` to `to` at `now`, with `extra`
/// flags; it must succeed.
fn backfill(cfg: &Path, store: &Path, now: &str, (from, to): (&str, &str), extra: &[&str]) -> Run {
    let mut args = vec![
        "backfill",
        "--config",
        s(cfg),
        "--store",
        s(store),
        "--now",
        now,
        "--from",
        from,
        "--to",
        to,
    ];
    args.extend_from_slice(extra);
    let r = jobhost(&args);
    assert_eq!(r.code, 0, "{}", r.stderr);
    r
}

/// Each receipt's key and revision, every one of a run that ran.
fn ran_revisions(r: &Run) -> Vec<(String, i64)> {
    r.stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            assert_eq!(v["event"], "ran", "{v}");
            (
                v["key"].as_str().unwrap().to_string(),
                v["revision"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// The lines of `jobhost daemon` over `configs` in virtual time from
/// `now` until `until`; it must exit 0.
fn daemon_lines(configs: &[&Path], store: &Path, now: &str, until: &str) -> Vec<Value> {
    let run = to_run(
        daemon_command(configs, s(store), now, until)
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The keys of the windows `history` shows stale, sorted.
fn stale_keys(store: &Path) -> Vec<String> {
    let mut keys: Vec<String> = history(store)
        .iter()
        .filter(|r| r.get("stale").is_some())
        .map(|r| r["key"].as_str().unwrap().to_string())
        .collect();
    keys.sort();
    keys
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

/// `jobhost plan --json` of `cfg` at `now`: the line of window `key`.
fn planned(cfg: &Path, store: &Path, now: &str, key: &str) -> Value {
    let r = jobhost(&[
        "plan",
        "--json",
        "--config",
        s(cfg),
        "--store",
        s(store),
        "--now",
        now,
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    r.stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["key"] == key)
        .unwrap_or_else(|| panic!("no plan line for {key}: {}", r.stdout))
}

#[test]
fn plan_says_wait_for_a_due_window_whose_upstream_is_not_done_names_it_and_run_once_it_is() {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let store = dir.path().join("store.db");
    let daily = job(dir.path(), "daily", "day", "", &[]);
    let weekly = job(dir.path(), "weekly", "week", "", &["daily"]);
    let now = "2026-11-09T00:30:00Z";

    // No store yet: the week would wait for a job that has never run, and
    // planning creates nothing.
    let week = planned(&weekly, &store, now, "weekly:2026-W45");
    assert_eq!(week["decision"], "wait", "{week}");
    let detail = week["detail"].as_str().unwrap();
    assert!(
        detail.contains("`daily`, which has no window in the store yet")
            && detail.contains("WAITING"),
        "{week}"
    );
    assert!(!store.exists(), "plan created the store");

    // Six of its seven days DONE: it would wait for the seventh, by key.
    for day in 2..=7 {
        let r = run_for(&daily, &store, now, &format!("2026-11-0{day}"));
        assert_eq!(r.event(), "ran", "{}", r.stdout);
    }
    let week = planned(&weekly, &store, now, "weekly:2026-W45");
    assert_eq!(week["decision"], "wait", "{week}");
    let detail = week["detail"].as_str().unwrap();
    assert!(
        detail.contains("`daily:2026-11-08` (not run yet)") && !detail.contains("2026-11-07"),
        "{week}"
    );
    // The text form says it too.
    let text = jobhost(&[
        "plan",
        "--config",
        s(&weekly),
        "--store",
        s(&store),
        "--now",
        now,
    ]);
    assert!(
        text.stdout
            .lines()
            .any(|l| l.trim_start().starts_with("wait")
                && l.contains("weekly:2026-W45")
                && l.contains("daily:2026-11-08")),
        "{}",
        text.stdout
    );
    // Planning recorded nothing: the week has no row.
    assert!(
        history(&store)
            .iter()
            .all(|r| r["key"] != "weekly:2026-W45")
    );

    // The seventh day DONE: the week would run, and does.
    let r = run_for(&daily, &store, now, "2026-11-08");
    assert_eq!(r.event(), "ran", "{}", r.stdout);
    let week = planned(&weekly, &store, now, "weekly:2026-W45");
    assert_eq!(week["decision"], "run", "{week}");
    assert!(week["detail"].is_null(), "{week}");
    let r = run_for(&weekly, &store, now, "2026-W45");
    assert_eq!(r.event(), "ran", "{}", r.stdout);
}

#[test]
fn the_daemon_starts_a_waiting_window_as_soon_as_its_last_upstream_window_is_done() {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let store = dir.path().join("store.db");
    // The days come due an hour after midnight; the week at midnight.
    let daily = job(dir.path(), "daily", "day", "delay_seconds = 3600", &[]);
    let weekly = job(dir.path(), "weekly", "week", "", &["daily"]);
    backfill(
        &daily,
        &store,
        "2026-11-08T12:00:00Z",
        ("2026-10-26", "2026-11-08"),
        &[],
    );
    let r = run_for(&weekly, &store, "2026-11-08T12:00:00Z", "2026-W44");
    assert_eq!(r.event(), "ran", "{}", r.stdout);

    let lines = daemon_lines(
        &[&daily, &weekly],
        &store,
        "2026-11-08T23:00:00Z",
        "2026-11-09T01:30:00Z",
    );
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

/// Job `name` (`window`) over `upstream`'s reports (`type = "upstream"`):
/// the sandbox probe, in `mode` (`echo`, or `echo-send`, which also sends
/// what it read to `<name>.jsonl`), reports the rows it reads.
fn over_reports(dir: &Path, name: &str, window: &str, upstream: &str, mode: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"job = "{name}"
window = "{window}"
timezone = "UTC"
component = "{}"

[source]
type = "upstream"

[params]
mode = "{mode}"

[destinations.digest]
type = "file"
path = "{name}.jsonl"

[[needs]]
job = "{upstream}"
"#,
            guests().probe.display()
        ),
    )
    .unwrap();
    path
}

/// The rows an echoed report holds, as `[job, key, label, revision,
/// window_start, window_end, report]`.
fn echoed_rows(summary: &str) -> Vec<Vec<Value>> {
    let v: Value = serde_json::from_str(summary).unwrap();
    let names: Vec<&str> = v["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "job",
            "key",
            "label",
            "revision",
            "window_start",
            "window_end",
            "report"
        ]
    );
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().clone())
        .collect()
}

#[test]
fn a_weekly_report_reads_the_daily_reports_a_daily_rerun_makes_exactly_that_week_stale_and_rerun_stale_runs_it_as_revision_2()
 {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let store = dir.path().join("store.db");
    let daily = job(dir.path(), "daily", "day", "", &[]);
    let weekly = over_reports(dir.path(), "weekly", "week", "daily", "echo-send");
    let now = "2026-11-17T00:30:00Z";
    backfill(&daily, &store, now, ("2026-11-02", "2026-11-16"), &[]);
    for week in ["2026-W45", "2026-W46"] {
        let r = run_for(&weekly, &store, now, week);
        assert_eq!(r.event(), "ran", "{}{}", r.stdout, r.stderr);
    }

    // The week read the seven daily reports, each as committed.
    let detail = |key: &str| -> Value {
        let r = jobhost(&["history", key, "--json", "--store", s(&store)]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap()
    };
    let w45 = detail("weekly:2026-W45");
    let rows = echoed_rows(w45["current"]["summary"].as_str().unwrap());
    let keys: Vec<&str> = rows.iter().map(|r| r[1].as_str().unwrap()).collect();
    assert_eq!(
        keys,
        (2..=8)
            .map(|d| format!("daily:2026-11-0{d}"))
            .collect::<Vec<_>>()
    );
    assert!(rows.iter().all(|r| r[0] == "daily" && r[3] == 1));
    let day5 = detail("daily:2026-11-05");
    assert_eq!(
        rows[3][6], day5["current"]["summary"],
        "the report as committed"
    );
    assert_eq!(w45["used"].as_array().unwrap().len(), 7, "{w45}");

    // It replays identical, from its journal, with no store read.
    let replay = jobhost(&[
        "replay",
        "weekly:2026-W45",
        "--config",
        s(&weekly),
        "--store",
        s(&store),
    ]);
    assert_eq!(replay.code, 0, "{}{}", replay.stdout, replay.stderr);
    assert!(replay.stdout.contains("identical"), "{}", replay.stdout);

    // Nothing is stale yet; the dashboard agrees.
    let ok = status(&weekly, &store, now);
    assert_eq!(ok.code, 0, "{}", ok.stdout);
    let srv = crate::dashboard::serve(&[
        "serve",
        "--config",
        s(&weekly),
        "--store",
        s(&store),
        "--now",
        now,
    ]);
    let board = |srv: &crate::dashboard::Served| {
        let jobs = crate::dashboard::get(&srv.addr, "/jobs.json", &[]).json();
        let job = jobs["jobs"][0].clone();
        let cells: std::collections::BTreeMap<String, String> = job["strip"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["label"].as_str().unwrap().to_string(),
                    c["state"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        (job["health"].as_str().unwrap().to_string(), cells)
    };
    let (health, cells) = board(&srv);
    assert_eq!(health, "healthy");
    assert_eq!(cells["2026-W45"], "done");

    // One day of week 45 is run again: that week, and no other, is stale.
    let rerun = jobhost(&[
        "rerun",
        "daily:2026-11-05",
        "--config",
        s(&daily),
        "--store",
        s(&store),
        "--now",
        now,
        "--reason",
        "late rows",
    ]);
    assert_eq!(rerun.code, 0, "{}{}", rerun.stdout, rerun.stderr);
    let st = status(&weekly, &store, now);
    assert_eq!(st.code, 6, "{}{}", st.stdout, st.stderr);
    assert!(
        st.stdout.contains("stale") && st.stdout.contains("weekly:2026-W45"),
        "{}",
        st.stdout
    );
    assert!(st.stdout.contains("1 DONE window(s)"), "{}", st.stdout);
    let daily_status = status(&daily, &store, now);
    assert_eq!(daily_status.code, 0, "{}", daily_status.stdout);
    assert_eq!(stale_keys(&store), ["weekly:2026-W45"]);
    assert!(
        detail("weekly:2026-W45")["stale"][0]
            .as_str()
            .unwrap()
            .contains("daily:2026-11-05"),
    );
    let (health, cells) = board(&srv);
    assert_eq!(health, "stale");
    assert_eq!(cells["2026-W45"], "stale");
    assert_eq!(cells["2026-W46"], "done");

    // `rerun --stale` runs it again as revision 2, over the new day, with
    // new idempotency keys.
    let before = std::fs::read_to_string(dir.path().join("weekly.jsonl")).unwrap();
    assert_eq!(before.lines().count(), 2);
    let again = jobhost(&[
        "rerun",
        "--stale",
        "--config",
        s(&weekly),
        "--store",
        s(&store),
        "--now",
        now,
        "--reason",
        "daily:2026-11-05 was rerun",
    ]);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    let receipts: Vec<Value> = again
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(receipts.len(), 1, "{}", again.stdout);
    assert_eq!(receipts[0]["key"], "weekly:2026-W45");
    assert_eq!(receipts[0]["event"], "ran");
    assert_eq!(receipts[0]["revision"], 2);
    let keys: Vec<&str> = receipts[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["idempotency_key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["weekly:2026-W45~r2#1"]);
    let w45 = detail("weekly:2026-W45");
    let rows = echoed_rows(w45["current"]["summary"].as_str().unwrap());
    assert_eq!(rows[3][1], "daily:2026-11-05");
    assert_eq!(rows[3][3], 2, "the day's new revision");
    let after = std::fs::read_to_string(dir.path().join("weekly.jsonl")).unwrap();
    assert_eq!(after.lines().count(), 3, "one more delivery, of revision 2");

    // Nothing is stale any more, in status or on the page.
    let ok = status(&weekly, &store, now);
    assert_eq!(ok.code, 0, "{}", ok.stdout);
    let (health, cells) = board(&srv);
    assert_eq!(health, "healthy");
    assert_eq!(cells["2026-W45"], "done");
}

#[test]
fn rerun_stale_over_a_folder_reruns_the_dependents_in_order_and_backfill_only_stale_reruns_only_stale_windows()
 {
    let dir = scratch();
    sales_db(dir.path(), 500);
    let store = dir.path().join("store.db");
    let now = "2026-11-09T12:00:00Z";
    let daily = job(dir.path(), "daily", "day", "", &[]);
    let second = over_reports(dir.path(), "second", "day", "daily", "echo");
    let third = over_reports(dir.path(), "third", "day", "second", "echo");
    for cfg in [&daily, &second, &third] {
        backfill(cfg, &store, now, ("2026-11-05", "2026-11-08"), &[]);
    }
    let rerun = |key: &str| {
        let r = jobhost(&[
            "rerun",
            key,
            "--config",
            s(&daily),
            "--store",
            s(&store),
            "--now",
            now,
            "--reason",
            "late rows",
        ]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    };

    // A day of the first job again: only the second job's day uses it.
    rerun("daily:2026-11-06");
    assert_eq!(stale_keys(&store), ["second:2026-11-06"]);
    // Over the folder, the second job's day is rerun, which makes the
    // third's stale, which is rerun after it.
    let r = jobhost(&[
        "rerun",
        "--stale",
        "--config",
        s(&second),
        "--jobs",
        s(dir.path()),
        "--store",
        s(&store),
        "--now",
        now,
        "--reason",
        "daily:2026-11-06 was rerun",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let done = ran_revisions(&r);
    assert_eq!(
        done,
        [
            ("second:2026-11-06".to_string(), 2),
            ("third:2026-11-06".to_string(), 2)
        ]
    );
    assert!(stale_keys(&store).is_empty(), "{:?}", stale_keys(&store));

    // `backfill --only stale` reruns the stale windows of its range and
    // nothing else.
    rerun("daily:2026-11-05");
    rerun("daily:2026-11-07");
    assert_eq!(
        stale_keys(&store),
        ["second:2026-11-05", "second:2026-11-07"]
    );
    let b = backfill(
        &second,
        &store,
        now,
        ("2026-11-05", "2026-11-07"),
        &["--only", "stale", "--reason", "upstream rerun"],
    );
    let ran: Vec<String> = b
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| v["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ran, ["second:2026-11-05"]);
    assert_eq!(
        stale_keys(&store),
        ["second:2026-11-07", "third:2026-11-05"],
        "the one outside the range stays stale; the one that used the rerun is now"
    );
    let refused = jobhost(&[
        "backfill",
        "--config",
        s(&second),
        "--store",
        s(&store),
        "--now",
        now,
        "--from",
        "2026-11-05",
        "--to",
        "2026-11-08",
        "--only",
        "stale",
    ]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("--reason"), "{}", refused.stderr);
}

/// Writes a sale of 2026-11-04 into `db` after that day's run.
fn book_late_sale(db: &Path) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let ts = "2026-11-04T23:59:00Z"
        .parse::<jiff::Timestamp>()
        .unwrap()
        .as_second();
    conn.execute(
        "INSERT INTO sales (ts, region, product, quantity, amount) VALUES (?1, 'eu', 'late', 1, 9.5)",
        [ts],
    )
    .unwrap();
}

#[test]
fn a_row_written_into_a_done_day_after_its_run_makes_check_mark_that_day_stale_and_no_other() {
    let dir = scratch();
    let db = sales_db(dir.path(), 2000);
    let store = dir.path().join("store.db");
    let now = "2026-11-07T00:30:00Z";
    let daily = job(dir.path(), "daily", "day", "", &[]);
    backfill(&daily, &store, now, ("2026-11-02", "2026-11-06"), &[]);
    let check = || {
        jobhost(&[
            "check",
            "--config",
            s(&daily),
            "--store",
            s(&store),
            "--now",
            now,
            "--since",
            "2026-11-02",
            "--json",
        ])
    };
    let results = |r: &Run| -> Vec<(String, String, String)> {
        r.stdout
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .map(|v| {
                (
                    v["key"].as_str().unwrap().to_string(),
                    v["result"].as_str().unwrap().to_string(),
                    v["detail"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    // Nothing changed: every day is the same.
    let first = check();
    assert_eq!(first.code, 0, "{}{}", first.stdout, first.stderr);
    let r = results(&first);
    assert_eq!(r.len(), 4, "{r:?}");
    assert!(r.iter().all(|(_, result, _)| result == "same"), "{r:?}");

    // A sale booked on the 4th, written after its run.
    book_late_sale(&db);
    let second = check();
    assert_eq!(second.code, 6, "{}{}", second.stdout, second.stderr);
    let r = results(&second);
    let changed: Vec<&(String, String, String)> =
        r.iter().filter(|(_, result, _)| result != "same").collect();
    assert_eq!(changed.len(), 1, "{r:?}");
    assert_eq!(changed[0].0, "daily:2026-11-04");
    assert_eq!(changed[0].1, "changed");
    assert_eq!(changed[0].2, "inputs changed: 1 row more");
    let st = status(&daily, &store, now);
    assert_eq!(st.code, 6, "{}", st.stdout);
    assert_eq!(stale_keys(&store), ["daily:2026-11-04"]);

    // Rerun, it reads the late row, and a check finds nothing changed.
    let again = jobhost(&[
        "rerun",
        "--stale",
        "--config",
        s(&daily),
        "--store",
        s(&store),
        "--now",
        now,
        "--reason",
        "a late sale",
    ]);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert_eq!(again.receipt()["revision"], 2);
    let third = check();
    assert_eq!(third.code, 0, "{}{}", third.stdout, third.stderr);
    assert!(
        results(&third)
            .iter()
            .all(|(_, result, _)| result == "same")
    );
    assert_eq!(status(&daily, &store, now).code, 0);
}

#[test]
fn a_query_that_reads_random_numbers_is_said_not_to_be_comparable_rather_than_guessed() {
    let dir = scratch();
    sales_db(dir.path(), 100);
    let store = dir.path().join("store.db");
    let now = "2026-11-07T00:30:00Z";
    let cfg = job(dir.path(), "daily", "day", "", &[]);
    let text = std::fs::read_to_string(&cfg).unwrap().replace(
        "ORDER BY ts, id",
        "AND random() IS NOT NULL ORDER BY ts, id",
    );
    std::fs::write(&cfg, text).unwrap();
    assert_eq!(run_job(&cfg, &store, now).event(), "ran");
    let r = jobhost(&[
        "check",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        now,
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .starts_with("unknown  daily:2026-11-06: the query reads `random(`"),
        "{}",
        r.stdout
    );
    assert!(history(&store).iter().all(|r| r.get("stale").is_none()));
}

#[test]
fn a_daemon_with_freshness_reads_recent_done_days_again_at_a_quiet_moment_and_marks_the_changed_one()
 {
    let dir = scratch();
    let db = sales_db(dir.path(), 2000);
    let store = dir.path().join("store.db");
    let daily = job(dir.path(), "daily", "day", "", &[]);
    backfill(
        &daily,
        &store,
        "2026-11-06T00:30:00Z",
        ("2026-11-01", "2026-11-06"),
        &[],
    );
    let conn = rusqlite::Connection::open(&db).unwrap();
    for day in ["2026-10-31T12:00:00Z", "2026-11-04T23:59:00Z"] {
        let ts = day.parse::<jiff::Timestamp>().unwrap().as_second();
        conn.execute(
            "INSERT INTO sales (ts, region, product, quantity, amount) VALUES (?1, 'eu', 'late', 1, 9.5)",
            [ts],
        )
        .unwrap();
    }
    // Changed after its run, and also a day older than the recheck reaches.
    let conn2 = conn;
    conn2
        .execute(
            "UPDATE sales SET amount = amount + 1 WHERE id = (SELECT min(id) FROM sales WHERE ts >= ?1)",
            ["2026-11-01T00:00:00Z".parse::<jiff::Timestamp>().unwrap().as_second()],
        )
        .unwrap();
    drop(conn2);
    let text = std::fs::read_to_string(&daily).unwrap();
    std::fs::write(&daily, format!("{text}\n[freshness]\nrecheck = \"3d\"\n")).unwrap();
    let checks: Vec<Value> = daemon_lines(
        &[&daily],
        &store,
        "2026-11-06T00:30:00Z",
        "2026-11-06T06:00:00Z",
    )
    .into_iter()
    .filter(|v| v["event"] == "check")
    .collect();
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(checks[0]["key"], "daily:2026-11-04");
    assert_eq!(checks[0]["detail"], "inputs changed: 1 row more");
    assert_eq!(
        stale_keys(&store),
        ["daily:2026-11-04"],
        "the 1st is older than 3 days"
    );

    // A job that reads no source again is refused before anything runs.
    let text = std::fs::read_to_string(&daily).unwrap();
    std::fs::write(&daily, text.replace("recheck = \"3d\"", "recheck = \"3w\"")).unwrap();
    let bad = run_job(&daily, &store, "2026-11-06T00:30:00Z");
    assert_eq!(bad.code, 2, "{}", bad.stdout);
    assert!(bad.stdout.contains("freshness.recheck"), "{}", bad.stdout);
}

#[test]
fn replay_since_with_plan_lists_exactly_the_windows_a_new_component_changes_and_rerun_plan_reruns_them_and_no_other()
 {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let store = dir.path().join("store.db");
    let now = "2026-11-10T00:30:00Z";
    let cfg = job(dir.path(), "daily", "day", "", &[]);
    let candidate = guests().top_products.display().to_string();
    // Three days already run by the candidate, two by the live component.
    let with = ["--component", candidate.as_str()];
    backfill(&cfg, &store, now, ("2026-11-03", "2026-11-06"), &with);
    backfill(&cfg, &store, now, ("2026-11-06", "2026-11-08"), &[]);
    let plan = dir.path().join("plan.json");
    let replay = jobhost(&[
        "replay",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--since",
        "2026-11-04T00:00:00Z",
        "--component",
        &candidate,
        "--plan",
        s(&plan),
    ]);
    assert_eq!(replay.code, 1, "{}{}", replay.stdout, replay.stderr);
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    let keys: Vec<&str> = written["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["daily:2026-11-06", "daily:2026-11-07"], "{written}");
    assert_eq!(written["replayed"], 4, "from the 4th on");
    assert_eq!(written["windows"][0]["destinations"][0], "digest");
    assert_eq!(written["windows"][0]["revision"], 1);

    // Refused while the job still runs the live component.
    let rerun = |component: Option<&str>| {
        let mut args = vec![
            "rerun",
            "--plan",
            s(&plan),
            "--config",
            s(&cfg),
            "--store",
            s(&store),
            "--now",
            now,
            "--reason",
            "new top products report",
        ];
        if let Some(c) = component {
            args.extend(["--component", c]);
        }
        jobhost(&args)
    };
    let refused = rerun(None);
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    assert!(
        refused.stderr.contains("the plan was made with"),
        "{}",
        refused.stderr
    );
    let ran = rerun(Some(&candidate));
    assert_eq!(ran.code, 0, "{}{}", ran.stdout, ran.stderr);
    let receipts = ran_revisions(&ran);
    assert_eq!(
        receipts,
        [
            ("daily:2026-11-06".to_string(), 2),
            ("daily:2026-11-07".to_string(), 2)
        ]
    );
    let revisions: Vec<(String, i64)> = history(&store)
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["revision"].as_i64().unwrap(),
            )
        })
        .collect();
    for (key, revision) in revisions {
        let want = if key == "daily:2026-11-06" || key == "daily:2026-11-07" {
            2
        } else {
            1
        };
        assert_eq!(revision, want, "{key}");
    }
    // Run again, the plan reruns nothing more: each window is past the
    // revision it names.
    let again = rerun(Some(&candidate));
    assert!(
        again
            .stdout
            .lines()
            .all(|l| l.contains("\"reason\":\"done\"")),
        "{}",
        again.stdout
    );
}

/// `cfg` with `[shadow] component = PATH` added.
fn with_shadow(cfg: &Path, component: &str) {
    let text = std::fs::read_to_string(cfg).unwrap();
    std::fs::write(
        cfg,
        format!("{text}\n[shadow]\ncomponent = \"{component}\"\n"),
    )
    .unwrap();
}

#[test]
fn a_shadow_candidate_runs_beside_each_live_run_is_counted_agreed_or_differed_and_never_delivers() {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let now = "2026-11-10T00:30:00Z";
    let candidate = guests().top_products.display().to_string();
    // The same days without a shadow, for the live deliveries to compare.
    let plain_dir = scratch();
    sales_db(plain_dir.path(), 2000);
    let plain = job(plain_dir.path(), "daily", "day", "", &[]);
    let plain_store = plain_dir.path().join("store.db");
    let cfg = job(dir.path(), "daily", "day", "", &[]);
    with_shadow(&cfg, &candidate);
    let store = dir.path().join("store.db");
    // Two days whose live component is the candidate itself (agreed), three
    // with the reference report (differed).
    let with = ["--component", candidate.as_str()];
    let first = backfill(&cfg, &store, now, ("2026-11-03", "2026-11-05"), &with);
    let second = backfill(&cfg, &store, now, ("2026-11-05", "2026-11-08"), &[]);
    backfill(
        &plain,
        &plain_store,
        now,
        ("2026-11-03", "2026-11-05"),
        &with,
    );
    backfill(&plain, &plain_store, now, ("2026-11-05", "2026-11-08"), &[]);
    let verdicts: Vec<String> = first
        .stdout
        .lines()
        .chain(second.stdout.lines())
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| v["shadow"]["verdict"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        verdicts,
        ["agreed", "agreed", "differed", "differed", "differed"]
    );
    // The live deliveries are byte for byte those of the same runs
    // without a shadow; the shadow sent nothing.
    assert_eq!(
        std::fs::read(dir.path().join("daily.jsonl")).unwrap(),
        std::fs::read(plain_dir.path().join("daily.jsonl")).unwrap()
    );
    let st = jobhost(&[
        "status",
        "--json",
        "--config",
        s(&cfg),
        "--store",
        s(&store),
        "--now",
        now,
    ]);
    let st: Value = serde_json::from_str(st.stdout.trim()).unwrap();
    assert_eq!(st["shadow"]["agreed"], 2, "{st}");
    assert_eq!(st["shadow"]["differed"], 3);
    assert_eq!(st["shadow"]["failed"], 0);
    let detail = jobhost(&["history", "daily:2026-11-06", "--store", s(&store)]);
    assert!(
        detail.stdout.contains("differed") && detail.stdout.contains("report summary"),
        "{}",
        detail.stdout
    );
}

#[test]
fn a_shadow_that_traps_or_loops_changes_nothing_of_the_live_run() {
    for mode in ["panic", "spin"] {
        let dir = scratch();
        sales_db(dir.path(), 500);
        let store = dir.path().join("store.db");
        let cfg = job(
            dir.path(),
            "daily",
            "day",
            &format!("[params]\nmode = \"{mode}\""),
            &[],
        );
        // The probe ignores what it reads: the shadow probes, the live
        // report is the reference one.
        let text = std::fs::read_to_string(&cfg).unwrap();
        let text = text.replace("[params]", "[limits]\ntimeout_seconds = 2\n\n[params]");
        std::fs::write(&cfg, text).unwrap();
        with_shadow(&cfg, &guests().probe.display().to_string());
        let r = run_job(&cfg, &store, "2026-11-09T00:30:00Z");
        assert_eq!(r.code, 0, "{mode}: {}{}", r.stdout, r.stderr);
        let receipt = r.receipt();
        assert_eq!(receipt["event"], "ran", "{mode}: {receipt}");
        assert_eq!(receipt["shadow"]["verdict"], "failed", "{mode}: {receipt}");
        assert_eq!(row(&store, "daily:2026-11-08")["state"], "DONE");
        let delivered = std::fs::read_to_string(dir.path().join("daily.jsonl")).unwrap();
        assert_eq!(delivered.lines().count(), 1, "{mode}");
    }
}

#[test]
fn run_wait_starts_a_waiting_window_as_soon_as_its_last_upstream_window_is_done() {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let store = dir.path().join("store.db");
    let now = "2026-11-09T00:30:00Z";
    let daily = job(dir.path(), "daily", "day", "", &[]);
    let weekly = job(dir.path(), "weekly", "week", "", &["daily"]);
    backfill(&daily, &store, now, ("2026-11-02", "2026-11-08"), &[]);
    // A cron line for the week, started before the last day's run ends.
    let mut cmd = job_command(&weekly, &store, now);
    cmd.args(["--for", "2026-W45", "--wait", "120"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let waiting = cmd.spawn().unwrap();
    // It is WAITING in the store meanwhile, for every host to see.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while history(&store)
        .iter()
        .all(|r| r["key"] != "weekly:2026-W45")
    {
        assert!(std::time::Instant::now() < deadline, "never recorded");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(row(&store, "weekly:2026-W45")["state"], "WAITING");
    let started = std::time::Instant::now();
    let day = run_for(&daily, &store, now, "2026-11-08");
    assert_eq!(day.event(), "ran", "{}", day.stdout);
    let week = to_run(waiting.wait_with_output().unwrap());
    assert_eq!(week.code, 0, "{}{}", week.stdout, week.stderr);
    assert_eq!(week.receipt()["event"], "ran", "{}", week.stdout);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "it ran once its upstream was done, not at the end of its wait"
    );
    // Without the day, a short wait ends as `waiting`.
    let w46 = {
        let mut cmd = job_command(&weekly, &store, "2026-11-16T00:30:00Z");
        cmd.args(["--for", "2026-W46", "--wait", "1"]);
        to_run(cmd.output().unwrap())
    };
    assert_eq!(w46.receipt()["reason"], "waiting", "{}", w46.stdout);
}

#[test]
fn a_stale_done_window_is_told_once_at_the_next_run_and_its_rerun_says_recovered() {
    let sink = jobhost_tests::sink::Sink::start();
    let dir = scratch();
    let db = sales_db(dir.path(), 2000);
    let store = dir.path().join("store.db");
    let now = "2026-11-07T00:30:00Z";
    let daily = job(
        dir.path(),
        "daily",
        "day",
        &format!(
            "[[notify]]\non = [\"stale\", \"recovered\"]\nurl = \"{}\"\n",
            sink.url("/hook")
        ),
        &[],
    );
    backfill(&daily, &store, now, ("2026-11-02", "2026-11-06"), &[]);
    assert!(
        sink.requests().is_empty(),
        "nothing to tell: {:?}",
        sink.requests()
            .iter()
            .map(|q| String::from_utf8_lossy(&q.body).into_owned())
            .collect::<Vec<_>>()
    );
    // A sale booked on the 4th after its run; `check` marks the day stale.
    book_late_sale(&db);
    let check = jobhost(&[
        "check",
        "--config",
        s(&daily),
        "--store",
        s(&store),
        "--now",
        now,
        "--since",
        "2026-11-02",
    ]);
    assert_eq!(check.code, 6, "{}{}", check.stdout, check.stderr);
    // The next run that reaches the store tells of it, once.
    let next = to_run(
        job_command(&daily, &store, "2026-11-08T00:30:00Z")
            .output()
            .unwrap(),
    );
    assert_eq!(next.event(), "ran", "{}", next.stderr);
    let told = |i: usize| -> Value { serde_json::from_slice(&sink.requests()[i].body).unwrap() };
    assert_eq!(sink.requests().len(), 1, "{:?}", sink.requests());
    let stale = told(0);
    assert_eq!(stale["event"], "stale");
    assert_eq!(stale["window"], "daily:2026-11-04");
    assert!(
        stale["detail"]
            .as_str()
            .unwrap()
            .contains("inputs changed: 1 row more"),
        "{stale}"
    );
    // Rerun, it is over.
    let again = jobhost(&[
        "rerun",
        "--stale",
        "--config",
        s(&daily),
        "--store",
        s(&store),
        "--now",
        now,
        "--reason",
        "a late sale",
    ]);
    assert_eq!(again.code, 0, "{}{}", again.stdout, again.stderr);
    assert_eq!(sink.requests().len(), 2, "{:?}", sink.requests());
    let recovered = told(1);
    assert_eq!(recovered["event"], "recovered");
    assert_eq!(recovered["incident"], stale["incident"]);
}
