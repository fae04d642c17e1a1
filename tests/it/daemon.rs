//! `jobhost daemon`: every due window run at the right moment, in virtual
//! time (the daemon's clock advances when it sleeps), across an outage, a
//! daylight-saving night, several daemons on one store, and a stop signal.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Stdio};

use jobhost::core::window::{JobName, Window, WindowKind, Zone};
use serde_json::Value;

use crate::harness::*;

/// A config for the reference report with `extra` lines at the top, for
/// job `name` with `window`s in `zone`.
fn job(dir: &Path, name: &str, window: &str, zone: &str, extra: &str) -> std::path::PathBuf {
    sales_db(dir, 2000);
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"job = "{name}"
window = "{window}"
timezone = "{zone}"
component = "{}"
{extra}

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "file"
path = "{name}.jsonl"
"#,
            guests().report.display()
        ),
    )
    .unwrap();
    path
}

/// Its output lines, after it exited 0.
fn daemon(configs: &[&Path], store: &str, now: &str, until: &str) -> Vec<Value> {
    let run = to_run(daemon_command(configs, store, now, until).output().unwrap());
    assert_eq!(run.code, 0, "{}", run.stderr);
    lines(&run.stdout)
}

fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Each line's key and what happened to it: `ran`, `skipped:catch-up`, ...
fn decided(lines: &[Value]) -> Vec<(String, String)> {
    lines
        .iter()
        .map(|l| {
            let what = match l["reason"].as_str() {
                Some(r) => format!("{}:{r}", l["event"].as_str().unwrap()),
                None => l["event"].as_str().unwrap().to_string(),
            };
            (l["key"].as_str().unwrap().to_string(), what)
        })
        .collect()
}

/// Every window key of `name` from the one containing `from` up to the
/// last one ending by `to`.
fn keys_between(name: &str, kind: WindowKind, zone: &str, from: &str, to: &str) -> Vec<String> {
    let zone = Zone::new(zone).unwrap();
    let job = JobName::new(name).unwrap();
    let to: jiff::Timestamp = to.parse().unwrap();
    let mut w = Window::containing(&job, kind, &zone, from.parse().unwrap()).unwrap();
    let mut keys = Vec::new();
    while w.end <= to {
        keys.push(w.key().to_string());
        w = w.next().unwrap();
    }
    keys
}

#[test]
fn a_simulated_month_with_an_outage_decides_every_window_exactly_once_under_each_policy() {
    for (policy, hourly_runs_after_outage) in [
        ("catch_up = \"all\"\nmax_catch_up = 3", 3),
        ("catch_up = \"latest\"", 1),
        ("catch_up = \"none\"", 1),
    ] {
        let dir = scratch();
        let daily = job(dir.path(), "daily", "day", "UTC", policy);
        let hourly = job(dir.path(), "hourly", "hour", "UTC", policy);
        let store = dir.path().join("s.db");
        let store = s(&store);
        // Up until the 10th, down for three days, then up to the 1st.
        let mut out = daemon(
            &[&daily, &hourly],
            store,
            "2026-11-01T00:30:00Z",
            "2026-11-10T00:30:00Z",
        );
        let before = out.len();
        out.extend(daemon(
            &[&daily, &hourly],
            store,
            "2026-11-13T00:30:00Z",
            "2026-12-01T00:30:00Z",
        ));
        let decided = decided(&out);
        let mut seen = BTreeMap::new();
        for (key, what) in &decided {
            assert!(
                seen.insert(key.clone(), what.clone()).is_none(),
                "{policy}: {key} decided twice"
            );
        }
        // A fresh store starts with the newest due window, no back-fill.
        let want: BTreeSet<String> = keys_between(
            "daily",
            WindowKind::Day,
            "UTC",
            "2026-10-31T12:00:00Z",
            "2026-12-01T00:00:00Z",
        )
        .into_iter()
        .chain(keys_between(
            "hourly",
            WindowKind::Hour,
            "UTC",
            "2026-10-31T23:30:00Z",
            "2026-12-01T00:00:00Z",
        ))
        .collect();
        let got: BTreeSet<String> = seen.keys().cloned().collect();
        assert_eq!(got, want, "{policy}: every window of the month, no hole");
        assert!(
            decided
                .iter()
                .all(|(_, w)| w == "ran" || w == "skipped:catch-up"),
            "{policy}: {decided:?}"
        );
        // After the outage: the policy decides the 72 missed hours.
        let after: Vec<&(String, String)> = decided[before..]
            .iter()
            .filter(|(k, _)| {
                k.starts_with("hourly:2026-11-10")
                    || k.starts_with("hourly:2026-11-11")
                    || k.starts_with("hourly:2026-11-12")
            })
            .collect();
        assert_eq!(after.len(), 72, "{policy}");
        assert_eq!(
            after.iter().filter(|(_, w)| w == "ran").count(),
            hourly_runs_after_outage,
            "{policy}"
        );
        // The store holds every decision: no silent hole in its history,
        // whichever daemon process made it.
        let h = history(store);
        let rows: BTreeMap<&str, &Value> =
            h.iter().map(|r| (r["key"].as_str().unwrap(), r)).collect();
        assert_eq!(rows.len(), h.len(), "{policy}: one row per window");
        assert_eq!(
            rows.keys().map(|k| k.to_string()).collect::<BTreeSet<_>>(),
            want,
            "{policy}: a row for every window of the month"
        );
        for (key, what) in &seen {
            let row = rows[key.as_str()];
            if what == "ran" {
                assert_eq!(row["state"], "DONE", "{policy}: {key}");
            } else {
                assert_eq!(row["state"], "SKIPPED", "{policy}: {key}");
                assert!(
                    row["reason"].as_str().unwrap().contains("catch_up"),
                    "{policy}: {key}: {row}"
                );
            }
        }
    }
}

#[test]
fn windows_left_without_a_decision_while_no_daemon_ran_are_decided_when_it_comes_back() {
    let dir = scratch();
    let hourly = job(
        dir.path(),
        "hourly",
        "hour",
        "UTC",
        "catch_up = \"all\"\nmax_catch_up = 2",
    );
    let store = dir.path().join("s.db");
    let store = s(&store);
    let first = daemon(
        &[&hourly],
        store,
        "2026-11-09T00:30:00Z",
        "2026-11-09T03:30:00Z",
    );
    assert_eq!(decided(&first).len(), 4, "23:00 to 02:00: {first:?}");
    // While no daemon runs, cron runs the newest due window at 07:05: the
    // hours from 03:00 to 05:00 get no row.
    let ran = run_job(&hourly, store, "2026-11-09T07:05:00Z");
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    let plan = jobhost(&[
        "plan",
        "--config",
        s(&hourly),
        "--store",
        store,
        "--now",
        "2026-11-09T07:30:00Z",
        "--json",
    ]);
    assert!(
        plan.stdout.contains("hourly:2026-11-09T03:00+00:00"),
        "the plan shows the hole: {}",
        plan.stdout
    );
    let back = daemon(
        &[&hourly],
        store,
        "2026-11-09T07:30:00Z",
        "2026-11-09T07:45:00Z",
    );
    assert_eq!(
        decided(&back),
        [
            (
                "hourly:2026-11-09T03:00+00:00".to_string(),
                "skipped:catch-up".to_string()
            ),
            (
                "hourly:2026-11-09T04:00+00:00".to_string(),
                "ran".to_string()
            ),
            (
                "hourly:2026-11-09T05:00+00:00".to_string(),
                "ran".to_string()
            ),
        ],
        "the newest two missed hours run, the older one is skipped: {back:?}"
    );
    let keys: Vec<String> = history(store)
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        keys.len(),
        8,
        "23:00 to 06:00, each once, no hole: {keys:?}"
    );
    // `latest` never goes back to run a hole older than a window that ran.
    let dir = scratch();
    let latest = job(dir.path(), "hourly", "hour", "UTC", "catch_up = \"latest\"");
    let store = dir.path().join("s.db");
    let store = s(&store);
    daemon(
        &[&latest],
        store,
        "2026-11-09T00:30:00Z",
        "2026-11-09T01:30:00Z",
    );
    run_job(&latest, store, "2026-11-09T04:05:00Z");
    let back = daemon(
        &[&latest],
        store,
        "2026-11-09T04:30:00Z",
        "2026-11-09T04:45:00Z",
    );
    assert_eq!(
        decided(&back)
            .iter()
            .map(|(k, w)| format!("{k} {w}"))
            .collect::<Vec<_>>(),
        [
            "hourly:2026-11-09T01:00+00:00 skipped:catch-up",
            "hourly:2026-11-09T02:00+00:00 skipped:catch-up"
        ]
    );
    assert!(
        back[1]["detail"]
            .as_str()
            .unwrap()
            .contains("has run already")
    );
}

#[test]
fn a_window_whose_run_failed_before_its_claim_stays_undecided_and_runs_once_the_cause_is_fixed() {
    let dir = scratch();
    // A component of its own, which a deploy can take away.
    let wasm = dir.path().join("report.wasm");
    std::fs::copy(&guests().report, &wasm).unwrap();
    let daily = job(dir.path(), "daily", "day", "UTC", "");
    let text = std::fs::read_to_string(&daily)
        .unwrap()
        .replace(guests().report.to_str().unwrap(), s(&wasm));
    std::fs::write(&daily, &text).unwrap();
    let store = dir.path().join("s.db");
    let store = s(&store);
    // The daemon starts with its component there, and the component goes
    // away while it runs (a deploy replacing it): held at the first claim,
    // the 7th, then let go without it.
    let held = stopped_at(
        daemon_command(
            &[&daily],
            store,
            "2026-11-08T00:30:00Z",
            "2026-11-09T00:02:30Z",
        ),
        "after-claim@1:stop",
    );
    std::fs::remove_file(&wasm).unwrap();
    let run = resume(held);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = lines(&run.stdout);
    assert_eq!(out[0]["key"], "daily:2026-11-07");
    assert_eq!(
        out[0]["event"], "ran",
        "loaded before the claim: {}",
        out[0]
    );
    // The 8th fails before it claims, and is tried again a minute later,
    // not a day later.
    let failed = &out[1..];
    assert_eq!(
        failed.len(),
        3,
        "at its due moment, a minute later, two minutes later: {out:?}"
    );
    assert!(failed.iter().all(|l| l["key"] == "daily:2026-11-08"
        && l["event"] == "failed"
        && l["error"]["kind"] == "invalid-input"
        && l.get("fence").is_none()));
    assert_eq!(history(store).len(), 1, "no row for the 8th");
    std::fs::copy(&guests().report, &wasm).unwrap();
    // Back two days later: the 8th was never decided, so it is caught up.
    let out = daemon(
        &[&daily],
        store,
        "2026-11-10T00:30:00Z",
        "2026-11-10T01:00:00Z",
    );
    assert_eq!(
        decided(&out),
        [
            ("daily:2026-11-08".to_string(), "ran".to_string()),
            ("daily:2026-11-09".to_string(), "ran".to_string())
        ]
    );
}

#[test]
fn a_daemon_refuses_at_start_up_what_cannot_become_valid_while_it_runs() {
    let dir = scratch();
    let daily = job(dir.path(), "daily", "day", "UTC", "");
    let store = dir.path().join("s.db");
    let store = s(&store);
    let until = "2026-11-10T00:30:00Z";
    let start = "2026-11-08T00:30:00Z";
    // A component that is not there, named in the config or by --component.
    let text = std::fs::read_to_string(&daily).unwrap();
    let missing = text.replace(
        guests().report.to_str().unwrap(),
        s(&dir.path().join("gone.wasm")),
    );
    std::fs::write(&daily, &missing).unwrap();
    let run = to_run(
        daemon_command(&[&daily], store, start, until)
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "nothing ran: {}", run.stdout);
    assert!(
        run.stderr.contains("job `daily`") && run.stderr.contains("gone.wasm"),
        "{}",
        run.stderr
    );
    assert!(!Path::new(store).exists(), "no store was created");
    // --component names it instead, as for `jobhost run`.
    let mut cmd = daemon_command(&[&daily], store, start, "2026-11-08T01:00:00Z");
    cmd.args(["--component", s(&guests().report)]);
    let run = to_run(cmd.output().unwrap());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        decided(&lines(&run.stdout)),
        [("daily:2026-11-07".to_string(), "ran".to_string())]
    );
    // A component that does not fit the world.
    let other = text.replace(
        guests().report.to_str().unwrap(),
        guests().other_world.to_str().unwrap(),
    );
    std::fs::write(&daily, other).unwrap();
    let run = to_run(
        daemon_command(&[&daily], store, start, until)
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("does not fit"), "{}", run.stderr);
    // A config error.
    std::fs::write(
        &daily,
        text.replace("window = \"day\"", "window = \"fortnight\""),
    )
    .unwrap();
    let run = to_run(
        daemon_command(&[&daily], store, start, until)
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("fortnight"), "{}", run.stderr);
    assert!(run.stdout.is_empty());
}

#[test]
fn across_daylight_saving_days_hourly_jobs_run_23_and_25_windows_and_daily_ones_once() {
    for (zone, day_start, next_day, hours) in [
        (
            "America/New_York",
            "2026-11-01T04:00:00Z",
            "2026-11-02T05:00:00Z",
            25,
        ),
        (
            "America/New_York",
            "2026-03-08T05:00:00Z",
            "2026-03-09T04:00:00Z",
            23,
        ),
        (
            "Europe/Berlin",
            "2026-10-24T22:00:00Z",
            "2026-10-25T23:00:00Z",
            25,
        ),
        (
            "Europe/Berlin",
            "2026-03-28T23:00:00Z",
            "2026-03-29T22:00:00Z",
            23,
        ),
    ] {
        let dir = scratch();
        let hourly = job(dir.path(), "hourly", "hour", zone, "");
        let daily = job(dir.path(), "daily", "day", zone, "");
        let store = dir.path().join("s.db");
        // From just inside the local day to just after it ends.
        let start: jiff::Timestamp = day_start.parse().unwrap();
        let start = (start + jiff::SignedDuration::from_mins(1)).to_string();
        let end: jiff::Timestamp = next_day.parse().unwrap();
        let end = (end + jiff::SignedDuration::from_mins(1)).to_string();
        let out = daemon(&[&hourly, &daily], s(&store), &start, &end);
        let ran: Vec<(String, String)> = decided(&out);
        let hourly_keys: BTreeSet<&str> = ran
            .iter()
            .filter(|(k, w)| k.starts_with("hourly:") && w == "ran")
            .map(|(k, _)| k.as_str())
            .collect();
        // The first line is the hour before the day (the newest due at start).
        assert_eq!(
            hourly_keys.len(),
            hours + 1,
            "{zone} {day_start}: {hourly_keys:?}"
        );
        let hourly_lines = ran.iter().filter(|(k, _)| k.starts_with("hourly:")).count();
        assert_eq!(
            hourly_lines,
            hours + 1,
            "{zone}: keys are unique, none ran twice"
        );
        let daily_ran: Vec<&str> = ran
            .iter()
            .filter(|(k, w)| k.starts_with("daily:") && w == "ran")
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(
            daily_ran.len(),
            2,
            "{zone}: the day before, and the day itself once"
        );
    }
}

#[test]
fn two_daemons_on_one_sqlite_store_run_each_window_once() {
    let dir = scratch();
    let store = dir.path().join("s.db");
    two_daemons_run_each_window_once(dir.path(), s(&store));
}

#[test]
fn two_daemons_on_one_postgres_store_run_each_window_once() {
    let Some(db) = jobhost_tests::pg::Scratch::new(
        "daemon::two_daemons_on_one_postgres_store_run_each_window_once",
    ) else {
        return;
    };
    let dir = scratch();
    two_daemons_run_each_window_once(dir.path(), &db.url());
}

fn two_daemons_run_each_window_once(dir: &Path, store: &str) {
    let warm = scratch();
    let cfg = report_config(warm.path(), 100);
    let _ = run_job(&cfg, warm.path().join("w.db"), "2026-11-09T00:05:00Z");
    // On SQLite each daemon measures leases on its own virtual clock, which
    // jumps to the end of the other's lease when it finds a window busy:
    // it may then take over a run the other is still doing, and the other
    // take it back, each time an attempt. Real clocks on one machine agree,
    // so here attempts are many: a window handed back and forth must still
    // finish once, not be abandoned for the test's clocks.
    let hourly = job(
        dir,
        "hourly",
        "hour",
        "UTC",
        "catch_up = \"all\"\nmax_catch_up = 3\nmax_attempts = 20",
    );
    // Both start after a day nobody ran (`--since` its start, on a fresh
    // store): they race to record the 21 skips as well as to run windows.
    let spawn = || {
        daemon_command(
            &[&hourly],
            store,
            "2026-11-09T00:30:00Z",
            "2026-11-10T00:30:00Z",
        )
        .args(["--since", "2026-11-08T00:00:00Z"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (
        to_run(a.wait_with_output().unwrap()),
        to_run(b.wait_with_output().unwrap()),
    );
    assert_eq!(
        (a.code, b.code),
        (0, 0),
        "{}\n{}\n{}\n{}",
        a.stderr,
        b.stderr,
        a.stdout,
        b.stdout
    );
    let all: Vec<(String, String)> = decided(&lines(&a.stdout))
        .into_iter()
        .chain(decided(&lines(&b.stdout)))
        .collect();
    // Each daemon's clock is its own (virtual) one, so one may run ahead of
    // the other by more than a lease and take over a run the other is
    // still doing: then the window ends `ran` or `resumed` by the one, and
    // `lease-lost` for the other. Either way it finishes once.
    let ran: Vec<&String> = all
        .iter()
        .filter(|(_, w)| w == "ran" || w == "resumed")
        .map(|(k, _)| k)
        .collect();
    let unique: BTreeSet<&String> = ran.iter().copied().collect();
    assert_eq!(ran.len(), unique.len(), "no window ran twice: {all:?}");
    assert_eq!(
        unique.len(),
        27,
        "the newest 3 of the missed day, and the next day's 24: {all:?}\n{}\n{}",
        a.stderr,
        b.stderr
    );
    // Each skip was recorded, and reported, by one of the two.
    let skips: Vec<&String> = all
        .iter()
        .filter(|(_, w)| w == "skipped:catch-up")
        .map(|(k, _)| k)
        .collect();
    let unique_skips: BTreeSet<&String> = skips.iter().copied().collect();
    assert_eq!(skips.len(), unique_skips.len(), "{skips:?}");
    assert_eq!(skips.len(), 21, "{skips:?}");
    assert!(unique_skips.iter().all(|k| !unique.contains(k)));
    let h = history(store);
    assert_eq!(h.len(), 48, "one row per window, no hole");
    assert_eq!(
        h.iter().filter(|r| r["state"] == "SKIPPED").count(),
        21,
        "{h:?}"
    );
    assert!(
        h.iter()
            .all(|r| r["state"] == "SKIPPED" || r["state"] == "DONE")
    );
    let delivered = std::fs::read_to_string(dir.join("hourly.jsonl")).unwrap();
    assert_eq!(delivered.lines().count(), 27, "one delivery per window run");
}

#[test]
fn sigterm_while_a_guest_runs_lets_it_finish_and_exits_0_and_a_second_signal_exits_at_once() {
    let dir = scratch();
    let daily = job(dir.path(), "daily", "day", "UTC", "");
    let store = dir.path().join("s.db");
    // The first run stops inside the guest; SIGTERM arrives meanwhile.
    let child = stopped_at(
        daemon_command(
            &[&daily],
            s(&store),
            "2026-11-09T00:30:00Z",
            "2026-11-20T00:30:00Z",
        ),
        "in-guest:stop",
    );
    signal(&child, libc::SIGTERM);
    let run = resume(child);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = decided(&lines(&run.stdout));
    assert_eq!(
        out,
        [("daily:2026-11-08".to_string(), "ran".to_string())],
        "the run in progress finished; nothing new was claimed"
    );
    assert_eq!(history(&store)[0]["state"], "DONE");

    // A second signal: the daemon exits at once, mid-run; the window is
    // finished later, exactly once. "At once" is the signal thread's next
    // turn: on a busy machine the continued run may commit its report (or,
    // rarely, deliver it) before that thread is scheduled, so the later
    // daemon either runs the window or resumes the committed report.
    let child = stopped_at(
        daemon_command(
            &[&daily],
            s(&store),
            "2026-11-10T00:30:00Z",
            "2026-11-20T00:30:00Z",
        ),
        "in-guest:stop",
    );
    // Two different signals: the same one twice would merge while the
    // process is stopped.
    signal(&child, libc::SIGTERM);
    signal(&child, libc::SIGINT);
    let run = resume(child);
    assert_eq!(
        run.code, 130,
        "it exited at once, not gracefully: {}",
        run.stderr
    );
    let mut out = decided(&lines(&run.stdout));
    out.extend(decided(&daemon(
        &[&daily],
        s(&store),
        "2026-11-10T06:30:00Z",
        "2026-11-10T07:00:00Z",
    )));
    assert_eq!(out.len(), 1, "one receipt for the window: {out:?}");
    assert_eq!(out[0].0, "daily:2026-11-09");
    assert!(["ran", "resumed"].contains(&out[0].1.as_str()), "{out:?}");
    assert!(history(&store).iter().all(|r| r["state"] == "DONE"));
    let delivered = std::fs::read_to_string(dir.path().join("daily.jsonl")).unwrap();
    assert_eq!(delivered.lines().count(), 2, "each window delivered once");
}

/// The hourly reference job whose daemon catches up on the newest
/// `max_catch_up` hours of the day before, and its store, in `dir`.
fn backlog_job(dir: &Path, max_catch_up: u32) -> (std::path::PathBuf, std::path::PathBuf) {
    let hourly = job(
        dir,
        "hourly",
        "hour",
        "UTC",
        &format!("catch_up = \"all\"\nmax_catch_up = {max_catch_up}"),
    );
    (hourly, dir.join("s.db"))
}

/// A daemon over `hourly` on `store` started at 00:30 with the day before
/// behind it (`--since` its start, until `until`), once it has stopped
/// itself at `failpoint`.
fn stopped_in_backlog(hourly: &Path, store: &Path, until: &str, failpoint: &str) -> Child {
    let mut cmd = daemon_command(&[hourly], s(store), "2026-11-09T00:30:00Z", until);
    cmd.args(["--since", "2026-11-08T00:00:00Z"]);
    stopped_at(cmd, failpoint)
}

#[test]
fn a_backlog_is_claimed_in_batches_ahead_and_a_stop_lets_go_of_what_did_not_start() {
    let dir = scratch();
    let (hourly, store) = backlog_job(dir.path(), 12);
    // The third window's guest stops; by then the first has run on its own
    // claim, and the next eleven were claimed in one batch.
    let child = stopped_in_backlog(&hourly, &store, "2026-11-09T00:40:00Z", "in-guest@3:stop");
    let states = |store: &Path| -> BTreeMap<String, String> {
        history(store)
            .into_iter()
            .map(|r| {
                (
                    r["key"].as_str().unwrap().to_string(),
                    r["state"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let held = states(&store);
    let count =
        |m: &BTreeMap<String, String>, state: &str| m.values().filter(|v| *v == state).count();
    assert_eq!(count(&held, "SKIPPED"), 12, "{held:?}");
    assert_eq!(count(&held, "DONE"), 2, "{held:?}");
    assert_eq!(
        count(&held, "CLAIMED"),
        10,
        "the running window and the nine after it, claimed ahead: {held:?}"
    );
    signal(&child, libc::SIGTERM);
    let run = resume(child);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ran = decided(&lines(&run.stdout));
    assert_eq!(ran.iter().filter(|(_, e)| e == "ran").count(), 3, "{ran:?}");
    assert_eq!(ran.len(), 15, "12 skips and 3 runs: {ran:?}");
    let after = states(&store);
    assert_eq!(count(&after, "DONE"), 3, "{after:?}");
    assert_eq!(
        count(&after, "CLAIMED"),
        0,
        "the windows not started were let go of at the stop: {after:?}"
    );
    assert_eq!(after.len(), 15, "{after:?}");

    // Started again, the daemon runs them at once as first attempts: no
    // lease to wait out, nothing taken over.
    let out = daemon(
        &[&hourly],
        s(&store),
        "2026-11-09T00:41:00Z",
        "2026-11-09T00:42:00Z",
    );
    assert_eq!(out.len(), 9, "{out:?}");
    for line in &out {
        assert_eq!(line["event"], "ran", "{line}");
        assert_eq!(line["attempt"], 1, "{line}");
        assert!(line.get("took_over").is_none(), "{line}");
    }
    let last = states(&store);
    assert_eq!(count(&last, "DONE"), 12, "{last:?}");
    let delivered = std::fs::read_to_string(dir.path().join("hourly.jsonl")).unwrap();
    assert_eq!(delivered.lines().count(), 12, "each window delivered once");
}

#[test]
fn a_host_whose_batch_skipped_windows_another_holds_goes_on_after_its_own() {
    use jobhost::store::{Claim, ClaimRequest, ClaimStore, LeasesOnly, Purpose, SqliteStore};
    let dir = scratch();
    let (hourly, store) = backlog_job(dir.path(), 24);
    // While the daemon runs the day's first window, another host claims
    // the third to fifth.
    let child = stopped_in_backlog(&hourly, &store, "2026-11-09T00:30:00Z", "in-guest@1:stop");
    let name = JobName::new("hourly").unwrap();
    let hour = |h: i64| {
        let t = "2026-11-08T00:30:00Z".parse::<jiff::Timestamp>().unwrap()
            + jiff::SignedDuration::from_hours(h);
        Window::containing(&name, WindowKind::Hour, &Zone::utc(), t).unwrap()
    };
    let mut other = SqliteStore::open(&store).unwrap();
    for h in 2..=4 {
        let claim = other
            .claim(&ClaimRequest {
                window: &hour(h),
                owner: "other-host",
                component: "sha256:00",
                now: "2026-11-09T00:30:00Z".parse().unwrap(),
                lease: std::time::Duration::from_secs(3600),
                max_attempts: 3,
                purpose: Purpose::Scheduled,
                probe: &LeasesOnly,
            })
            .unwrap();
        assert!(matches!(claim, Claim::Run { .. }), "{claim:?}");
    }
    drop(other);
    // The daemon claims the next sixteen windows in one batch (granted
    // but for the three held), runs the second, finds the third held,
    // runs its own from the sixth on, and goes on with the rest of the
    // day after them in the same wake-up (its only one: `--until` is its
    // start): the other host left the job when it found them.
    let run = resume(child);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = decided(&lines(&run.stdout));
    let ran: Vec<&String> = out
        .iter()
        .filter(|(_, e)| e == "ran")
        .map(|(k, _)| k)
        .collect();
    let held: Vec<String> = (2..=4)
        .map(|h| hour(h).key().as_str().to_string())
        .collect();
    assert_eq!(ran.len(), 21, "every window but the three held: {out:?}");
    assert!(ran.iter().all(|k| !held.contains(k)), "{out:?}");
    assert!(
        out.contains(&(held[0].clone(), "skipped:busy".to_string())),
        "{out:?}"
    );
    let done = history(&store)
        .iter()
        .filter(|r| r["state"] == "DONE")
        .count();
    assert_eq!(done, 21);
}

#[test]
fn a_component_replaced_during_a_batch_is_recorded_with_each_window_it_ran() {
    let dir = scratch();
    // The job's own copy of the component, replaced while a batch runs.
    let component = dir.path().join("report.wasm");
    std::fs::copy(&guests().report, &component).unwrap();
    let (hourly, store) = backlog_job(dir.path(), 6);
    let text = std::fs::read_to_string(&hourly).unwrap();
    let reference = guests().report.display().to_string();
    std::fs::write(
        &hourly,
        text.replace(&reference, &component.display().to_string()),
    )
    .unwrap();
    // The second window (the first of the batch) is running when the
    // file is replaced by another report.
    let child = stopped_in_backlog(&hourly, &store, "2026-11-09T00:30:00Z", "in-guest@2:stop");
    std::fs::copy(&guests().top_products, &component).unwrap();
    let run = resume(child);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let ran: Vec<Value> = lines(&run.stdout)
        .into_iter()
        .filter(|l| l["event"] == "ran")
        .collect();
    assert_eq!(ran.len(), 6, "{}", run.stdout);
    let digests: Vec<&str> = ran
        .iter()
        .map(|l| l["component"].as_str().unwrap())
        .collect();
    assert_eq!(digests[0], digests[1], "{digests:?}");
    assert!(
        digests[2..].iter().all(|d| *d != digests[0]),
        "the windows after the change ran the new component: {digests:?}"
    );
    // What the store recorded with each window is what ran it.
    let recorded: BTreeMap<String, String> = history(&store)
        .into_iter()
        .filter(|r| r["state"] == "DONE")
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["component"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    for line in &ran {
        let key = line["key"].as_str().unwrap();
        assert_eq!(
            recorded.get(key).map(String::as_str),
            line["component"].as_str(),
            "{key}: {recorded:?}"
        );
        assert_eq!(line["attempt"], 1, "{line}");
    }
}

/// `cmd` spawned with the failpoint `failpoint` (`<boundary>[@n]:stop`),
/// once it has stopped itself there.
fn stopped_at(mut cmd: std::process::Command, failpoint: &str) -> std::process::Child {
    let child = cmd
        .env("JOBHOST_TEST_FAILPOINT", failpoint)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until_stopped(&child, failpoint);
    child
}

/// A daemon that exited 0 after one receipt: its run let the claim go
/// because it was asked to stop, to be retried.
fn let_go_after_a_stop(run: &Run) {
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = lines(&run.stdout);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0]["event"], "failed");
    assert_eq!(out[0]["error"]["retryable"], true, "{}", out[0]);
    assert!(
        out[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("asked to stop"),
        "{}",
        out[0]
    );
}

#[test]
fn sigterm_while_a_delivery_waits_to_retry_lets_the_claim_go_and_the_window_is_delivered_once_later()
 {
    let sink = jobhost_tests::sink::Sink::start();
    sink.script(
        "/digest",
        &[
            jobhost_tests::sink::Reply::Status(503),
            jobhost_tests::sink::Reply::Status(503),
            jobhost_tests::sink::Reply::Status(201),
        ],
    );
    let dir = scratch();
    let cfg = crate::effects::http_config(
        dir.path(),
        "",
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntries = 10\n\
             timeout_seconds = 2\nbackoff_seconds = 30\nmax_backoff_seconds = 30\n",
            sink.url("/digest")
        ),
    );
    let store = dir.path().join("s.db");
    // Stopped just before the second send; the signal arrives then.
    let child = stopped_at(
        daemon_command(
            &[&cfg],
            s(&store),
            "2026-11-09T00:30:00Z",
            "2026-11-20T00:00:00Z",
        ),
        "before-send@2:stop",
    );
    signal(&child, libc::SIGTERM);
    let_go_after_a_stop(&resume(child));
    assert_eq!(sink.requests().len(), 2, "no third send after the signal");
    let h = history(&store);
    assert_eq!(
        (h[0]["state"].as_str(), h[0]["delivered"].as_u64()),
        (Some("PREPARED"), Some(0)),
        "the committed report is kept, its claim let go: {:?}",
        h[0]
    );
    // The next daemon delivers the same message, once.
    let out = daemon(
        &[&cfg],
        s(&store),
        "2026-11-09T01:00:00Z",
        "2026-11-09T01:30:00Z",
    );
    assert_eq!(
        decided(&out),
        [("daily-report:2026-11-08".to_string(), "resumed".to_string())]
    );
    let requests = sink.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests
            .iter()
            .all(|r| r.idempotency_key() == Some("daily-report:2026-11-08#1")),
        "the same message each time"
    );
    assert_eq!(history(&store)[0]["state"], "DONE");
}

#[test]
fn sigterm_during_a_real_wait_to_resend_lets_the_claim_go_at_once_without_using_up_an_attempt() {
    let sink = jobhost_tests::sink::Sink::start();
    // The destination asks for ten minutes before the next try.
    sink.script(
        "/digest",
        &[jobhost_tests::sink::Reply::RetryAfter(503, 600)],
    );
    let dir = scratch();
    let cfg = crate::effects::http_config(
        dir.path(),
        "max_attempts = 1\ncatch_up = \"latest\"",
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntries = 5\n\
             timeout_seconds = 2\nmax_backoff_seconds = 600\n",
            sink.url("/digest")
        ),
    );
    let store = dir.path().join("s.db");
    // Real time: the wait is a real one.
    let mut child = command(
        &root(),
        &[
            "daemon",
            "--config",
            s(&cfg),
            "--store",
            s(&store),
            "--now",
            "2026-11-09T00:30:00Z",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while sink.requests().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first send never came"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    signal(&child, libc::SIGTERM);
    // It must end by itself, long before the ten minutes are up.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the daemon kept waiting to send again after SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let_go_after_a_stop(&to_run(child.wait_with_output().unwrap()));
    assert_eq!(sink.requests().len(), 1, "nothing sent after the signal");
    let h = history(&store);
    assert_eq!(
        (h[0]["state"].as_str(), h[0]["attempt"].as_u64()),
        (Some("PREPARED"), Some(0)),
        "the report is kept and the stop used up no attempt: {:?}",
        h[0]
    );
    // With `max_attempts = 1`, the next daemon (once the destination's ten
    // minutes are over) still delivers it, as attempt 1, not abandons it.
    let out = daemon(
        &[&cfg],
        s(&store),
        "2027-01-01T00:30:00Z",
        "2027-01-01T01:00:00Z",
    );
    let resumed: Vec<&Value> = out
        .iter()
        .filter(|l| l["key"] == "daily-report:2026-11-08")
        .collect();
    assert_eq!(resumed.len(), 1, "{out:?}");
    assert_eq!(resumed[0]["event"], "resumed", "{}", resumed[0]);
    assert_eq!(resumed[0]["attempt"], 1);
    assert_eq!(
        sink.requests().len(),
        3,
        "the resend, and the newest window"
    );
    assert_eq!(
        sink.requests()[1].idempotency_key(),
        Some("daily-report:2026-11-08#1")
    );
}

#[test]
fn a_failed_delivery_is_retried_after_its_backoff_not_at_the_next_window() {
    let sink = jobhost_tests::sink::Sink::start();
    sink.script(
        "/digest",
        &[
            jobhost_tests::sink::Reply::Status(503),
            jobhost_tests::sink::Reply::Status(200),
        ],
    );
    let dir = scratch();
    let cfg = crate::effects::http_config(
        dir.path(),
        "",
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntries = 1\ntimeout_seconds = 2\n",
            sink.url("/digest")
        ),
    );
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace("retry_delay_seconds = 0", "retry_delay_seconds = 60"),
    )
    .unwrap();
    let store = dir.path().join("s.db");
    // A daily job: the next window is due a day later; the retry must not
    // wait for it.
    let out = daemon(
        &[&cfg],
        s(&store),
        "2026-11-09T00:30:00Z",
        "2026-11-09T06:00:00Z",
    );
    let events: Vec<(String, String)> = decided(&out);
    assert_eq!(
        events,
        [
            ("daily-report:2026-11-08".to_string(), "failed".to_string()),
            ("daily-report:2026-11-08".to_string(), "resumed".to_string()),
        ],
        "{out:?}"
    );
    assert_eq!(
        out[1]["now"], "2026-11-09T00:31:01Z",
        "run again a second after its backoff of 60 s"
    );
    assert_eq!(history(&store)[0]["state"], "DONE");
    assert_eq!(sink.requests().len(), 2, "the same message, sent twice");
}

#[test]
fn status_lists_windows_skipped_since_the_last_done_one_and_a_skipped_newest_window_is_late() {
    let dir = scratch();
    let hourly = job(
        dir.path(),
        "hourly",
        "hour",
        "UTC",
        "catch_up = \"none\"\ngrace_seconds = 600",
    );
    let store = dir.path().join("s.db");
    let store = s(&store);
    daemon(
        &[&hourly],
        store,
        "2026-11-09T00:05:00Z",
        "2026-11-09T01:30:00Z",
    );
    // Down from 01:30 to 05:30: every hour since fell due more than the
    // grace ago, so `none` skips all four, the newest included.
    let out = daemon(
        &[&hourly],
        store,
        "2026-11-09T05:30:00Z",
        "2026-11-09T05:31:00Z",
    );
    assert_eq!(out.len(), 4, "{out:?}");
    assert!(out.iter().all(|l| l["reason"] == "catch-up"));
    let st = jobhost(&[
        "status",
        "--config",
        s(&hourly),
        "--store",
        store,
        "--now",
        "2026-11-09T05:35:00Z",
        "--json",
    ]);
    assert_eq!(st.code, 3, "late: {}{}", st.stdout, st.stderr);
    let v: Value = serde_json::from_str(st.stdout.trim()).unwrap();
    assert_eq!(v["health"], "late");
    assert_eq!(v["expected_state"], "SKIPPED");
    assert_eq!(v["last_done"], "hourly:2026-11-09T00:00+00:00");
    let skipped: Vec<&str> = v["skipped_since_last_done"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        skipped,
        [
            "hourly:2026-11-09T04:00+00:00",
            "hourly:2026-11-09T03:00+00:00",
            "hourly:2026-11-09T02:00+00:00",
            "hourly:2026-11-09T01:00+00:00"
        ]
    );
    let text = jobhost(&[
        "status",
        "--config",
        s(&hourly),
        "--store",
        store,
        "--now",
        "2026-11-09T05:35:00Z",
    ]);
    assert!(
        text.stdout.contains(
            "is SKIPPED; last done hourly:2026-11-09T00:00+00:00; 4 window(s) skipped by catch-up"
        ),
        "{}",
        text.stdout
    );
    // The next hour runs on time: healthy again.
    daemon(
        &[&hourly],
        store,
        "2026-11-09T06:01:00Z",
        "2026-11-09T06:02:00Z",
    );
    let st = jobhost(&[
        "status",
        "--config",
        s(&hourly),
        "--store",
        store,
        "--now",
        "2026-11-09T06:05:00Z",
        "--json",
    ]);
    assert_eq!(st.code, 0, "{}", st.stdout);
}

#[test]
fn a_daemon_run_with_until_exits_1_when_a_window_failed_for_good() {
    let sink = jobhost_tests::sink::Sink::start();
    // The destination refuses the message: a permanent failure.
    sink.script("/digest", &[jobhost_tests::sink::Reply::Status(400)]);
    let dir = scratch();
    let cfg = crate::effects::http_config(
        dir.path(),
        "",
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntries = 1\n",
            sink.url("/digest")
        ),
    );
    let store = dir.path().join("s.db");
    let run = to_run(
        daemon_command(
            &[&cfg],
            s(&store),
            "2026-11-09T00:30:00Z",
            "2026-11-09T01:00:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(
            "1 window(s) failed for good or were abandoned while the daemon ran: \
             daily-report:2026-11-08"
        ),
        "{}",
        run.stderr
    );
    // The next window succeeds: a daemon whose runs all went well exits 0.
    let out = daemon(
        &[&cfg],
        s(&store),
        "2026-11-10T00:30:00Z",
        "2026-11-10T01:00:00Z",
    );
    assert_eq!(
        decided(&out),
        [("daily-report:2026-11-09".to_string(), "ran".to_string())]
    );
}

/// A job `name` of `component` over `sales.db` in `dir`, delivering to
/// `<name>.jsonl` there, with `limits` in its `[limits]`.
fn job_of(dir: &Path, name: &str, component: &Path, limits: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"job = "{name}"
component = "{}"

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "file"
path = "{name}.jsonl"

[limits]
{limits}
"#,
            component.display()
        ),
    )
    .unwrap();
    path
}

#[test]
fn one_wake_up_of_many_jobs_runs_each_once_with_what_a_run_of_its_own_gives() {
    // Twelve jobs due at once, of two components, and one in the middle
    // whose guest runs past its time limit: every run of the wake-up
    // shares the daemon's engine, and none may see another's state or be
    // stopped by another's deadline.
    let (in_daemon, alone) = (scratch(), scratch());
    let g = guests();
    let mut jobs: Vec<(String, &Path, &str)> = (1..=12)
        .map(|i| {
            let component = if i % 2 == 0 {
                &g.top_products
            } else {
                &g.report
            };
            (format!("job-{i:02}"), component.as_path(), "")
        })
        .collect();
    jobs.insert(
        4,
        ("spin".to_string(), g.probe.as_path(), "timeout_seconds = 1"),
    );
    let mut configs = Vec::new();
    for dir in [in_daemon.path(), alone.path()] {
        sales_db(dir, 2000);
        configs.push(
            jobs.iter()
                .map(|(name, component, limits)| job_of(dir, name, component, limits))
                .collect::<Vec<_>>(),
        );
    }
    let now = "2026-11-09T00:05:00Z";
    let store = in_daemon.path().join("s.db");
    let daemon_configs: Vec<&Path> = configs[0].iter().map(|p| p.as_path()).collect();
    let run = to_run(
        daemon_command(&daemon_configs, s(&store), now, now)
            .output()
            .unwrap(),
    );
    // 1: the spinning job failed (for now: it is retried later).
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = lines(&run.stdout);
    assert_eq!(
        lines.len(),
        jobs.len(),
        "one receipt per job: {}",
        run.stdout
    );
    // Runs of several jobs go on at once, so their receipts come in the
    // order the runs end: each job has exactly one.
    for (name, _, _) in &jobs {
        let key = format!("{name}:2026-11-08");
        let mine: Vec<&Value> = lines.iter().filter(|l| l["key"] == key.as_str()).collect();
        assert_eq!(mine.len(), 1, "one receipt for {key}: {}", run.stdout);
        let line = mine[0];
        if name == "spin" {
            assert_eq!(line["event"], "failed", "{line}");
            assert_eq!(line["error"]["kind"], "guest-timeout", "{line}");
            continue;
        }
        assert_eq!(line["event"], "ran", "{line}");
        // What a `jobhost run` of the same job on a store of its own
        // delivers, byte for byte.
        let cfg = alone.path().join(format!("{name}.toml"));
        let one = run_job(&cfg, alone.path().join(format!("{name}.db")), now);
        assert_eq!(one.code, 0, "{}", one.stderr);
        let delivered = |dir: &Path| std::fs::read_to_string(dir.join(format!("{name}.jsonl")));
        let (ours, theirs) = (
            delivered(in_daemon.path()).unwrap(),
            delivered(alone.path()).unwrap(),
        );
        assert_eq!(ours.lines().count(), 1, "{name}: delivered once: {ours}");
        assert_eq!(ours, theirs, "{name}: the same message as a run of its own");
        assert_eq!(
            line["report"]["summary"],
            one.receipt()["report"]["summary"],
            "{name}: the same report"
        );
    }
    let h = history(&store);
    assert_eq!(h.len(), jobs.len(), "one row per job");
    for row in &h {
        let want = if row["key"] == "spin:2026-11-08" {
            "FAILED"
        } else {
            "DONE"
        };
        assert_eq!(row["state"], want, "{row}");
        assert_eq!(row["attempt"], 1, "{row}");
    }
}

#[test]
fn a_daemon_whose_output_nobody_reads_runs_every_window_and_exits_on_its_own() {
    use std::io::Read;
    let dir = scratch();
    let hourly = job(dir.path(), "hourly", "hour", "UTC", "catch_up = \"all\"");
    let store = dir.path().join("s.db");
    // Ten days of hourly windows: their receipts are far more than a
    // pipe's 64 KiB, and nobody reads either pipe until the daemon exits
    // (a log collector that stalled).
    let mut child = daemon_command(
        &[&hourly],
        s(&store),
        "2026-11-01T00:30:00Z",
        "2026-11-11T00:30:00Z",
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the daemon stalled on a pipe nobody reads");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(0));
    // Every window ran once: the store says so.
    let done: BTreeSet<String> = history(&store)
        .into_iter()
        .filter(|r| r["state"] == "DONE")
        .map(|r| r["key"].as_str().unwrap().to_string())
        .collect();
    let want: BTreeSet<String> = keys_between(
        "hourly",
        WindowKind::Hour,
        "UTC",
        "2026-10-31T23:00:00Z",
        "2026-11-11T00:00:00Z",
    )
    .into_iter()
    .collect();
    assert_eq!(done, want);
    // What the pipe holds is the first receipts, whole lines (but maybe
    // the last, cut where the pipe filled).
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.len() > 10, "{out}");
    for l in &lines[..lines.len() - 1] {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert_eq!(v["event"], "ran", "{l}");
    }
}
