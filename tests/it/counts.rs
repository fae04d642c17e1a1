//! What a person reads about a job's windows, through the real binary:
//! backfill's counts by outcome, `status` and `plan` on unfinished and late
//! windows, `retry`, the dashboard's counts, and the commands jobhost
//! prints, each run as a person pastes it.

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde_json::Value;

use jobhost::core::window::{JobName, Window, WindowKind, Zone};
use jobhost::store::{Claim, ClaimRequest, ClaimStore, Purpose, SqliteStore};
use jobhost_tests::sink::{Reply, Sink};

use crate::dashboard::{get, serve};
use crate::harness::*;

/// The instant the tests run at: every window below has closed.
const NOW: &str = "2026-12-02T00:00:00Z";

/// The reference report over a month of sales, sending its digest to
/// `sink`'s `/d` once per invocation, a failed window retried an hour
/// later.
fn job(dir: &Path, sink: &Sink) -> PathBuf {
    sales_db(dir, 500);
    config(
        dir,
        &format!(
            r#"job = "daily-report"
component = "{}"
retry_delay_seconds = 3600

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "http"
url = "{}"
timeout_seconds = 2
tries = 1
"#,
            guests().report.display(),
            sink.url("/d")
        ),
    )
}

/// A scratch folder with [`job`] in it, its sink, and a store path there.
fn fixture() -> (tempfile::TempDir, Sink, PathBuf, PathBuf) {
    let dir = scratch();
    let sink = Sink::start();
    let cfg = job(dir.path(), &sink);
    let db = dir.path().join("s.db");
    (dir, sink, cfg, db)
}

/// `jobhost ARGS`: leases and retry times on the real clock, as a pasted
/// command judges them too.
fn cli(args: &[&str]) -> Run {
    to_run(command(&root(), args).output().expect("jobhost runs"))
}

fn run_for(cfg: &Path, db: &Path, day: &str) -> Run {
    cli(&[
        "run",
        "--config",
        s(cfg),
        "--store",
        s(db),
        "--now",
        NOW,
        "--for",
        day,
    ])
}

fn day(label: &str) -> Window {
    Window::containing(
        &JobName::new("daily-report").unwrap(),
        WindowKind::Day,
        &Zone::utc(),
        format!("{label}T12:00:00Z").parse().unwrap(),
    )
    .unwrap()
}

/// `day` claimed now (on the real clock, as a store judges leases) for
/// ten minutes by a process on another host; when its lease ends.
fn claimed_elsewhere(db: &Path, label: &str) -> Timestamp {
    let now = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    let mut store = SqliteStore::open(db).unwrap();
    let claim = store
        .claim(&ClaimRequest {
            window: &day(label),
            owner: "other-host:4242:0abc",
            component: "sha256:00",
            now,
            lease: std::time::Duration::from_secs(600),
            max_attempts: 3,
            purpose: Purpose::Asked,
            probe: &jobhost::store::LeasesOnly,
        })
        .unwrap();
    assert!(matches!(claim, Claim::Run { .. }), "{claim:?}");
    now.checked_add(jiff::SignedDuration::from_secs(600))
        .unwrap()
}

fn status_json(cfg: &Path, db: &Path) -> (i32, Value) {
    let run = cli(&[
        "status",
        "--config",
        s(cfg),
        "--store",
        s(db),
        "--now",
        NOW,
        "--json",
    ]);
    (
        run.code,
        serde_json::from_str(run.stdout.trim()).expect("one JSON line"),
    )
}

fn status_text(cfg: &Path, db: &Path, now: &str) -> Run {
    cli(&["status", "--config", s(cfg), "--store", s(db), "--now", now])
}

#[test]
fn a_backfill_counts_each_window_by_what_its_run_did() {
    let (_dir, sink, cfg, db) = fixture();
    assert_eq!(run_for(&cfg, &db, "2026-11-03").event(), "ran");
    // Another host holds the 4th; the 5th's delivery failed and waits an
    // hour to retry.
    claimed_elsewhere(&db, "2026-11-04");
    sink.script("/d", &[Reply::Status(503)]);
    let failed = run_for(&cfg, &db, "2026-11-05");
    assert_eq!(failed.event(), "failed", "{}", failed.stderr);

    let b = cli(&[
        "backfill",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--from",
        "2026-11-03",
        "--to",
        "2026-11-07",
        "--now",
        NOW,
    ]);
    assert_eq!(b.code, 0, "{}", b.stderr);
    assert!(
        b.stderr.contains(
            "done: 1 ran, 2 skipped (1 busy, 1 retry-later), 0 failed, 1 left as they were"
        ),
        "{}",
        b.stderr
    );
    assert!(
        b.stderr
            .contains("daily-report:2026-11-04 run: skipped (busy)"),
        "{}",
        b.stderr
    );

    // `--only failed` takes the delivery waiting out its backoff now, as
    // a new series of attempts, its message under the same key.
    let b = cli(&[
        "backfill",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--from",
        "2026-11-05",
        "--to",
        "2026-11-06",
        "--only",
        "failed",
        "--now",
        NOW,
    ]);
    assert_eq!(b.code, 0, "{}", b.stderr);
    assert!(b.stderr.contains("0 to run, 1 to retry"), "{}", b.stderr);
    assert!(
        b.stderr
            .contains("done: 1 ran, 0 skipped, 0 failed, 0 left as they were"),
        "{}",
        b.stderr
    );
    let keys: Vec<String> = sink
        .requests()
        .iter()
        .filter_map(|r| r.idempotency_key().map(str::to_string))
        .filter(|k| k.starts_with("daily-report:2026-11-05"))
        .collect();
    assert_eq!(
        keys,
        ["daily-report:2026-11-05#1", "daily-report:2026-11-05#1"],
        "the failed send and the retried one, the same message"
    );
}

#[test]
fn retry_delivers_a_report_waiting_out_its_backoff_now_and_names_the_verb_that_fits_otherwise() {
    let (_dir, sink, cfg, db) = fixture();
    sink.script("/d", &[Reply::Status(503)]);
    assert_eq!(run_for(&cfg, &db, "2026-11-05").event(), "failed");
    // Asked again, the window waits, and says how to try it now.
    let wait = run_for(&cfg, &db, "2026-11-05");
    assert_eq!(wait.receipt()["reason"], "retry-later", "{}", wait.stdout);
    let detail = wait.receipt()["detail"].as_str().unwrap().to_string();
    let printed = format!(
        "jobhost retry daily-report:2026-11-05 --config {} --store {}",
        s(&cfg),
        s(&db)
    );
    assert!(
        detail.contains(&format!("`{printed}` tries it now")),
        "{detail}"
    );

    // Pasted, it delivers the committed report now.
    let retried = paste(&root(), &printed);
    assert_eq!(retried.code, 0, "{}{}", retried.stdout, retried.stderr);
    let r = retried.receipt();
    assert_eq!(r["event"], "resumed", "{r}");
    assert_eq!(r["attempt"], 1, "a new series of attempts: {r}");
    let sent: Vec<Value> = history(&db)
        .into_iter()
        .filter(|h| h["key"] == "daily-report:2026-11-05")
        .collect();
    assert_eq!(sent[0]["state"], "DONE", "{sent:?}");
    let last = sink.requests().last().cloned().unwrap();
    assert_eq!(last.idempotency_key(), Some("daily-report:2026-11-05#1"));

    // DONE, and never run: refused, naming the verb that fits.
    let done = cli(&[
        "retry",
        "daily-report:2026-11-05",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
    ]);
    assert_eq!(done.code, 2, "{}", done.stderr);
    assert!(
        done.stderr
            .contains("is DONE: retry is for a window that failed or waits to deliver"),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr
            .contains("jobhost rerun daily-report:2026-11-05 --reason TEXT --config"),
        "{}",
        done.stderr
    );
    let never = cli(&[
        "retry",
        "2026-11-06",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
    ]);
    assert_eq!(never.code, 2, "{}", never.stderr);
    assert!(
        never.stderr.contains(&format!(
            "`jobhost run --for 2026-11-06 --config {} --store {}` runs it",
            s(&cfg),
            s(&db)
        )),
        "{}",
        never.stderr
    );
}

#[test]
fn status_and_plan_name_an_unfinished_window_its_owner_and_when_it_can_be_taken_over() {
    let (_dir, _sink, cfg, db) = fixture();
    assert_eq!(run_for(&cfg, &db, "2026-12-01").event(), "ran");
    let until = claimed_elsewhere(&db, "2026-11-30").to_string();

    let (code, line) = status_json(&cfg, &db);
    assert_eq!(code, 0, "{line}");
    let held = &line["unfinished"][0];
    assert_eq!(held["key"], "daily-report:2026-11-30", "{line}");
    assert_eq!(held["state"], "CLAIMED");
    assert_eq!(held["owner"], "other-host:4242:0abc");
    assert_eq!(held["lease_until"], until.as_str());
    assert_eq!(held["resumable_at"], until.as_str());
    assert!(
        held["retry_command"]
            .as_str()
            .unwrap()
            .starts_with("jobhost retry daily-report:2026-11-30 --config"),
        "{held}"
    );

    let text = status_text(&cfg, &db, NOW);
    assert!(
        text.stdout.contains(&format!(
            "daily-report:2026-11-30 is CLAIMED (attempt 1), held by other-host:4242:0abc until \
             {until}; it can be taken over at {until}"
        )),
        "{}",
        text.stdout
    );
    let plan = cli(&["plan", "--config", s(&cfg), "--store", s(&db), "--now", NOW]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert!(
        plan.stdout.lines().any(|l| l.contains("resume")
            && l.contains("daily-report:2026-11-30")
            && l.contains(&until)),
        "{}",
        plan.stdout
    );
}

#[test]
fn status_names_the_newest_late_window_and_the_oldest_hole_each_with_its_own_age() {
    let (_dir, _sink, cfg, db) = fixture();
    assert_eq!(run_for(&cfg, &db, "2026-11-01").event(), "ran");
    // The 4th fell due at midnight on the 5th, the 2nd (the oldest hole)
    // at midnight on the 3rd.
    let text = status_text(&cfg, &db, "2026-11-05T01:05:00Z");
    assert_eq!(text.code, 3, "{}", text.stderr);
    let line = text.stdout.trim();
    assert!(
        line.contains(
            "late by 2d1h (grace 1h): daily-report:2026-11-02 due 2026-11-03T00:00:00Z has no \
             run (the oldest of 2 hole(s)); also daily-report:2026-11-04 due \
             2026-11-05T00:00:00Z is not claimed, late by 1h5m"
        ),
        "{line}"
    );
    // The command it prints for the oldest hole runs it.
    let printed = line
        .split('`')
        .find(|p| p.starts_with("jobhost run --for"))
        .unwrap_or_else(|| panic!("no run command: {line}"));
    assert_eq!(
        printed,
        format!(
            "jobhost run --for 2026-11-02 --config {} --store {}",
            s(&cfg),
            s(&db)
        )
    );
    let ran = paste(&root(), printed);
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    assert_eq!(ran.receipt()["key"], "daily-report:2026-11-02");
}

#[test]
fn the_dashboard_counts_holes_as_status_does_and_shows_each_fact_once() {
    let (_dir, sink, cfg, db) = fixture();
    for d in ["2026-11-20", "2026-11-23"] {
        assert_eq!(run_for(&cfg, &db, d).event(), "ran");
    }
    // Holes: the 21st, 22nd and 24th to the 30th; the 1st of December is
    // the newest due window, not run yet.
    let srv = serve(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
    ]);
    let page = get(&srv.addr, "/jobs/daily-report.json", &[]).json();
    let holes = page["job"]["holes"].as_u64().unwrap();
    assert_eq!(holes, 9, "{}", page["job"]);
    assert_eq!(page["counts"]["hole"], holes, "{}", page["counts"]);
    assert_eq!(page["counts"]["due"], 1, "{}", page["counts"]);
    let html = get(&srv.addr, "/jobs/daily-report", &[])
        .body
        .replace("&#x2f;", "/");
    assert!(html.contains("hole: 9"), "{html}");
    assert!(html.contains("9 due window(s) with no run"), "{html}");
    assert!(
        html.contains(&format!(
            "jobhost run --for 2026-11-21 --config {} --store {}",
            s(&cfg),
            s(&db)
        )),
        "the oldest hole's command: {html}"
    );

    let jobs = get(&srv.addr, "/jobs.json", &[]).json();
    assert_eq!(
        jobs["jobs"][0]["last_done"]["due"], "2026-11-24T00:00:00Z",
        "{}",
        jobs["jobs"][0]
    );

    // A DONE run: no lease, the body of its message, times to the second.
    let run = get(&srv.addr, "/runs/daily-report:2026-11-23.json", &[]).json();
    assert_eq!(run["lease_until"], Value::Null, "{run}");
    let body = run["current"]["messages"][0]["body"].as_str().unwrap();
    assert!(body.contains("\"window\""), "{body}");
    let sent = sink.requests();
    let delivered = std::str::from_utf8(&sent.last().unwrap().body).unwrap();
    assert_eq!(body, delivered, "the body as delivered");
    for at in [&run["current"]["created_at"], &run["current"]["updated_at"]] {
        let at = at.as_str().unwrap();
        assert!(
            at.len() == 20 && at.ends_with('Z'),
            "{at} is not to the second"
        );
    }
    let html = get(&srv.addr, "/runs/daily-report:2026-11-23", &[]).body;
    assert!(!html.contains("lease until"), "{html}");
    assert_eq!(html.matches("jobhost replay").count(), 1, "{html}");
}

#[test]
fn history_shows_revisions_and_its_replay_line_pastes() {
    let (_dir, _sink, cfg, db) = fixture();
    assert_eq!(run_for(&cfg, &db, "2026-11-03").event(), "ran");
    let rerun = cli(&[
        "rerun",
        "daily-report:2026-11-03",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
        "--reason",
        "late rows",
    ]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    let table = cli(&["history", "--store", s(&db)]);
    let header: Vec<&str> = table
        .stdout
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let row: Vec<&str> = table
        .stdout
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .collect();
    let rev = header
        .iter()
        .position(|h| *h == "REV")
        .expect("a REV column");
    assert_eq!(row[rev], "2", "{}", table.stdout);

    let detail = cli(&["history", "daily-report:2026-11-03", "--store", s(&db)]);
    assert_eq!(detail.code, 0, "{}", detail.stderr);
    assert!(!detail.stdout.contains("lease until"), "{}", detail.stdout);
    let printed = detail
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay: "))
        .unwrap_or_else(|| panic!("no replay line: {}", detail.stdout));
    assert_eq!(
        printed,
        format!("jobhost replay daily-report:2026-11-03 --store {}", s(&db))
    );
    let replayed = paste(&root(), printed);
    assert_eq!(replayed.code, 0, "{}{}", replayed.stdout, replayed.stderr);
}

#[test]
fn a_replay_pasted_in_a_project_folder_without_its_config_is_told_to_name_it() {
    let dir = scratch();
    let sink = Sink::start();
    let cfg = job(dir.path(), &sink);
    // The project's own store, beside its config (the default).
    let ran = cli(&[
        "run",
        "--config",
        s(&cfg),
        "--now",
        NOW,
        "--for",
        "2026-11-03",
    ]);
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    assert!(dir.path().join("state/jobhost.db").is_file());
    let home = scratch();
    let mut cmd = command(dir.path(), &["replay", "daily-report:2026-11-03"]);
    cmd.env("XDG_STATE_HOME", home.path());
    let bare = to_run(cmd.output().unwrap());
    assert_eq!(bare.code, 2, "{}", bare.stderr);
    assert!(
        bare.stderr.contains(
            "`state/jobhost.db` here is the store of the job config `job.toml` in this folder: \
             pass --config job.toml"
        ),
        "{}",
        bare.stderr
    );
    assert!(
        !bare.stderr.contains("where jobhost kept it before"),
        "{}",
        bare.stderr
    );
}

#[test]
fn resume_without_a_note_says_none() {
    let (_dir, _sink, cfg, db) = fixture();
    let paused = cli(&[
        "pause",
        "daily-report",
        "--note",
        "db move",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
    ]);
    assert_eq!(paused.code, 0, "{}", paused.stderr);
    let resumed = cli(&[
        "resume",
        "daily-report",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
    ]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let line: Value = serde_json::from_str(resumed.stdout.trim()).unwrap();
    assert_eq!(line["note"], Value::Null, "{line}");
}
