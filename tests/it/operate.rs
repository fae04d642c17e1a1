//! What a person does on purpose, through the real binary: `backfill`,
//! `rerun`, `forget`, `pause`/`resume`, `prune`, `history KEY` and
//! `--all`, and the read-only commands on a store of the previous schema.
//! The store rules behind them are in `store_contract`, on both backends.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

use jobhost_tests::pg::Scratch;
use jobhost_tests::sink::{Reply, Sink};

use crate::effects::{distinct_keys, http_config};
use crate::harness::*;

/// The reference report sending its digest to `sink`'s `/d`, with `extra`
/// lines at the top of the config.
fn sink_job(dir: &Path, sink: &Sink, extra: &str) -> PathBuf {
    http_config(
        dir,
        extra,
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntimeout_seconds = 2\ntries = 1\n",
            sink.url("/d")
        ),
    )
}

/// `jobhost ARGS` with the test's virtual clock.
fn cli(args: &[&str]) -> Run {
    let mut cmd = command(&root(), args);
    cmd.env("JOBHOST_TEST_VIRTUAL_TIME", "1");
    to_run(cmd.output().expect("jobhost runs"))
}

/// Every JSON line of stdout.
fn lines(run: &Run) -> Vec<Value> {
    run.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Each stored window's state and revision by key.
fn states(store: &str) -> std::collections::BTreeMap<String, (String, u64)> {
    history(store)
        .into_iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                (
                    r["state"].as_str().unwrap().to_string(),
                    r["revision"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

fn key(day: &str) -> String {
    format!("daily-report:{day}")
}

fn run_for(cfg: &Path, store: &str, day: &str) -> Run {
    let mut cmd = job_command(cfg, store, "2026-12-02T00:00:00Z");
    cmd.args(["--for", day]);
    to_run(cmd.output().expect("jobhost runs"))
}

fn backfill(cfg: &Path, store: &str, from: &str, to: &str, extra: &[&str]) -> Run {
    let mut args = vec![
        "backfill",
        "--config",
        s(cfg),
        "--store",
        store,
        "--from",
        from,
        "--to",
        to,
        "--now",
        "2026-12-02T00:00:00Z",
    ];
    args.extend_from_slice(extra);
    cli(&args)
}

/// A SKIPPED row for `day`, as a daemon's catch-up records it.
fn record_skip(store: &Path, day: &str) {
    use jobhost::core::window::{JobName, Window, WindowKind, Zone};
    use jobhost::store::{Ledger, Skip, SqliteStore};
    let w = Window::containing(
        &JobName::new("daily-report").unwrap(),
        WindowKind::Day,
        &Zone::utc(),
        format!("{day}T12:00:00Z").parse().unwrap(),
    )
    .unwrap();
    let mut s = SqliteStore::open(store).unwrap();
    let recorded = s
        .record_skips(
            &[Skip {
                window: &w,
                reason: "catch_up = \"latest\"",
            }],
            "test",
            "2026-12-01T00:00:00Z".parse().unwrap(),
        )
        .unwrap();
    assert_eq!(recorded, [true]);
}

#[test]
fn a_backfill_of_thirty_days_runs_what_each_only_asks_for_and_nothing_twice() {
    let dir = scratch();
    let sink = Sink::start();
    let cfg = sink_job(dir.path(), &sink, "max_attempts = 1");
    let db = dir.path().join("s.db");
    let store = s(&db);
    for day in ["2026-11-03", "2026-11-10", "2026-11-20"] {
        assert_eq!(run_for(&cfg, store, day).event(), "ran");
    }
    // One delivery refused for good (FAILED), one that fails its only
    // attempt (ABANDONED).
    sink.script("/d", &[Reply::Status(400)]);
    assert_eq!(run_for(&cfg, store, "2026-11-05").event(), "failed");
    sink.script("/d", &[Reply::Status(503)]);
    assert_eq!(run_for(&cfg, store, "2026-11-06").event(), "abandoned");
    record_skip(&db, "2026-11-15");
    let before = sink.requests().len();

    let plan = backfill(&cfg, store, "2026-11-01", "2026-12-01", &["--dry-run"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let planned = lines(&plan);
    assert_eq!(planned.len(), 30, "every window of the range");
    let act = |k: &str| {
        planned
            .iter()
            .find(|p| p["key"] == key(k))
            .map(|p| p["action"].as_str().unwrap().to_string())
    };
    assert_eq!(act("2026-11-01").as_deref(), Some("run"));
    assert_eq!(act("2026-11-03").as_deref(), Some("leave"), "DONE");
    assert_eq!(act("2026-11-05").as_deref(), Some("leave"), "FAILED");
    assert_eq!(act("2026-11-15").as_deref(), Some("run"), "SKIPPED");
    assert_eq!(sink.requests().len(), before, "a dry run runs nothing");
    assert!(plan.stderr.contains("25 to run"), "{}", plan.stderr);

    let missing = backfill(&cfg, store, "2026-11-01", "2026-12-01", &[]);
    assert_eq!(missing.code, 0, "{}", missing.stderr);
    let receipts = lines(&missing);
    assert_eq!(receipts.len(), 25, "one receipt per window it ran");
    assert!(receipts.iter().all(|r| r["event"] == "ran"), "{receipts:?}");
    let after = states(store);
    assert_eq!(after.len(), 30);
    assert_eq!(
        after[&key("2026-11-05")].0,
        "FAILED",
        "--only missing leaves it"
    );
    assert_eq!(after[&key("2026-11-06")].0, "ABANDONED");
    assert_eq!(
        after[&key("2026-11-15")].0,
        "DONE",
        "a skipped window is run"
    );
    assert_eq!(
        after.values().filter(|(s, _)| s == "DONE").count(),
        28,
        "{after:?}"
    );
    // The same backfill again has nothing to do.
    let again = backfill(&cfg, store, "2026-11-01", "2026-12-01", &[]);
    assert_eq!(
        (again.code, lines(&again).len()),
        (0, 0),
        "{}",
        again.stderr
    );

    let failed = backfill(
        &cfg,
        store,
        "2026-11-01",
        "2026-12-01",
        &["--only", "failed"],
    );
    assert_eq!(failed.code, 0, "{}", failed.stderr);
    let receipts = lines(&failed);
    let keys: Vec<&str> = receipts
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, [key("2026-11-05"), key("2026-11-06")]);
    // Their reports were committed: the stored messages are delivered
    // (with their keys), not rendered again.
    assert!(
        receipts.iter().all(|r| r["event"] == "resumed"),
        "{receipts:?}"
    );
    assert!(states(store).values().all(|(s, r)| s == "DONE" && *r == 1));
    // Each old error is kept, in the audit lines; each window the first
    // backfill ran is one too (a window a person named), with the state it
    // found (none, or SKIPPED), as are the five `run --for` above.
    let all = cli(&["history", "--all", "--json", "--store", store]);
    let audit: Vec<Value> = lines(&all)
        .into_iter()
        .filter(|l| l.get("audit").is_some())
        .collect();
    let retried: Vec<&Value> = audit.iter().filter(|a| a["audit"] == "retry").collect();
    assert_eq!(retried.len(), 2, "{audit:?}");
    assert!(retried.iter().any(|a| a["old_state"] == "ABANDONED"));
    let ran: Vec<&Value> = audit.iter().filter(|a| a["audit"] == "run").collect();
    assert_eq!(ran.len(), 25 + 5, "{audit:?}");
    assert_eq!(
        ran.iter().filter(|a| a["old_state"] == "SKIPPED").count(),
        1,
        "{ran:?}"
    );
    assert_eq!(audit.len(), 32, "{audit:?}");
    assert_eq!(distinct_keys(&sink).len(), 30, "one message per window");

    let no_reason = backfill(&cfg, store, "2026-11-01", "2026-11-04", &["--only", "all"]);
    assert_eq!(no_reason.code, 2);
    assert!(
        no_reason.stderr.contains("--reason"),
        "{}",
        no_reason.stderr
    );
    let all = backfill(
        &cfg,
        store,
        "2026-11-01",
        "2026-11-04",
        &["--only", "all", "--reason", "new rounding"],
    );
    assert_eq!(all.code, 0, "{}", all.stderr);
    let receipts = lines(&all);
    assert_eq!(receipts.len(), 3);
    assert!(
        receipts
            .iter()
            .all(|r| r["revision"] == 2 && r["because"] == "new rounding")
    );
    assert_eq!(states(store)[&key("2026-11-02")], ("DONE".to_string(), 2));
    assert!(distinct_keys(&sink).contains(&format!("{}~r2#1", key("2026-11-02"))));
    assert_eq!(distinct_keys(&sink).len(), 33);
}

#[test]
fn a_backfill_stopped_by_sigint_finishes_its_run_and_the_next_goes_on() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 2000);
    let db = dir.path().join("s.db");
    let mut cmd = command(
        &root(),
        &[
            "backfill",
            "--config",
            s(&cfg),
            "--store",
            s(&db),
            "--from",
            "2026-11-01",
            "--to",
            "2026-11-07",
            "--now",
            "2026-12-02T00:00:00Z",
        ],
    );
    let child = cmd
        .env("JOBHOST_TEST_VIRTUAL_TIME", "1")
        .env("JOBHOST_TEST_FAILPOINT", "after-claim@3:stop")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until_stopped(&child, "the third run's claim");
    signal(&child, libc::SIGINT);
    let stopped = resume(child);
    assert_eq!(stopped.code, 130, "{}", stopped.stderr);
    let ran = lines(&stopped);
    assert_eq!(ran.len(), 3, "the run in progress finishes: {ran:?}");
    assert!(ran.iter().all(|r| r["event"] == "ran"));
    assert!(
        stopped.stderr.contains("goes on from there"),
        "{}",
        stopped.stderr
    );
    let next = backfill(&cfg, s(&db), "2026-11-01", "2026-11-07", &[]);
    assert_eq!(next.code, 0, "{}", next.stderr);
    let keys: Vec<String> = lines(&next)
        .iter()
        .map(|r| r["key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        keys,
        [key("2026-11-04"), key("2026-11-05"), key("2026-11-06")]
    );
}

/// The stores a test runs on: SQLite always, PostgreSQL when the test
/// server is configured (a skip is said on stderr).
fn stores(dir: &Path, test: &str) -> (Vec<String>, Option<Scratch>) {
    let pg = Scratch::new(test);
    let mut out = vec![s(&dir.join("s.db")).to_string()];
    if let Some(p) = &pg {
        out.push(p.url());
    }
    (out, pg)
}

#[test]
fn two_backfills_racing_on_one_store_run_each_window_once() {
    let dir = scratch();
    let (stores, _pg) = stores(dir.path(), "two_backfills_racing");
    for store in &stores {
        let sink = Sink::start();
        let cfg = sink_job(dir.path(), &sink, "");
        let children: Vec<_> = (0..2)
            .map(|_| {
                command(
                    &root(),
                    &[
                        "backfill",
                        "--config",
                        s(&cfg),
                        "--store",
                        store,
                        "--from",
                        "2026-11-01",
                        "--to",
                        "2026-11-09",
                        "--now",
                        "2026-12-02T00:00:00Z",
                    ],
                )
                .env("JOBHOST_TEST_VIRTUAL_TIME", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
            })
            .collect();
        let runs: Vec<Run> = children
            .into_iter()
            .map(|c| to_run(c.wait_with_output().unwrap()))
            .collect();
        let ran: usize = runs
            .iter()
            .map(|r| lines(r).iter().filter(|l| l["event"] == "ran").count())
            .sum();
        assert_eq!(ran, 8, "each window is run by one of them: {runs:?}");
        assert_eq!(sink.requests().len(), 8, "and delivered once");
        assert!(states(store).values().all(|(s, r)| s == "DONE" && *r == 1));
    }
}

#[test]
fn a_rerun_delivers_a_new_message_under_a_new_key_and_each_revision_replays() {
    let dir = scratch();
    let (stores, _pg) = stores(dir.path(), "a_rerun_delivers");
    for store in &stores {
        let sink = Sink::start();
        let cfg = sink_job(dir.path(), &sink, "");
        for day in ["2026-11-08", "2026-11-09"] {
            assert_eq!(run_for(&cfg, store, day).event(), "ran");
        }
        let rerun = |why: &str| {
            cli(&[
                "rerun",
                &key("2026-11-08"),
                "--config",
                s(&cfg),
                "--store",
                store,
                "--reason",
                why,
                "--now",
                "2026-12-02T00:00:00Z",
            ])
        };
        for (n, why) in [(2, "fixed the rounding"), (3, "fixed it again")] {
            let r = rerun(why);
            assert_eq!(r.code, 0, "{}", r.stderr);
            let receipt = r.receipt();
            assert_eq!(receipt["event"], "ran");
            assert_eq!(
                (receipt["revision"].as_u64(), receipt["because"].as_str()),
                (Some(n), Some(why))
            );
        }
        let keys = distinct_keys(&sink);
        assert_eq!(keys.len(), 4, "{keys:?}");
        for k in ["#1", "~r2#1", "~r3#1"] {
            assert!(
                keys.contains(&format!("{}{k}", key("2026-11-08"))),
                "{keys:?}"
            );
        }
        // The job's cursor is still the newest window's.
        let rows = history(store);
        let newest = rows.iter().find(|r| r["key"] == key("2026-11-09")).unwrap();
        let mut ledger = jobhost::store::open_read_only(&jobhost::store::StoreLocation::parse(
            store,
            Path::new("."),
        ))
        .unwrap();
        let cursor = ledger
            .cursor(&jobhost::core::window::JobName::new("daily-report").unwrap())
            .unwrap();
        assert_eq!(cursor.as_deref(), newest["report"]["cursor"].as_str());
        // history KEY shows every revision; replay takes each.
        let detail = cli(&["history", &key("2026-11-08"), "--store", store]);
        assert_eq!(detail.code, 0, "{}", detail.stderr);
        assert!(detail.stdout.contains("revision 3"), "{}", detail.stdout);
        assert!(
            detail.stdout.contains("rerun because: fixed it again"),
            "{}",
            detail.stdout
        );
        assert!(
            detail.stdout.contains("earlier revision 1"),
            "{}",
            detail.stdout
        );
        assert!(detail.stdout.contains("--revision 2"), "{}", detail.stdout);
        for n in ["1", "2", "3"] {
            let r = cli(&[
                "replay",
                &key("2026-11-08"),
                "--store",
                store,
                "--revision",
                n,
            ]);
            assert_eq!(r.code, 0, "revision {n}: {}{}", r.stdout, r.stderr);
            assert!(r.stdout.contains("identical"), "{}", r.stdout);
        }
        let none = cli(&[
            "replay",
            &key("2026-11-08"),
            "--store",
            store,
            "--revision",
            "9",
        ]);
        assert_eq!(none.code, 2);
        assert!(
            none.stderr.contains("revision(s) 1, 2, 3"),
            "{}",
            none.stderr
        );
        // Only a DONE window is rerun.
        let never = cli(&[
            "rerun",
            &key("2026-11-01"),
            "--config",
            s(&cfg),
            "--store",
            store,
            "--reason",
            "x",
            "--now",
            "2026-12-02T00:00:00Z",
        ]);
        assert_eq!(never.code, 2);
        assert!(never.stderr.contains("never run"), "{}", never.stderr);
    }
}

#[test]
fn forget_removes_a_failed_window_with_an_audit_line_and_the_daemon_decides_it_again() {
    let dir = scratch();
    let sink = Sink::start();
    let cfg = sink_job(dir.path(), &sink, "");
    let db = dir.path().join("s.db");
    let store = s(&db);
    sink.script("/d", &[Reply::Status(400)]);
    let daemon = to_run(
        daemon_command(
            &[&cfg],
            store,
            "2026-11-09T00:05:00Z",
            "2026-11-11T00:10:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(
        daemon.code, 1,
        "a window failed for good: {}",
        daemon.stderr
    );
    let st = states(store);
    assert_eq!(st[&key("2026-11-08")].0, "FAILED", "{st:?}");
    assert_eq!(st[&key("2026-11-10")].0, "DONE");
    let forget = |k: &str, extra: &[&str]| {
        let mut args = vec![
            "forget",
            k,
            "--store",
            store,
            "--reason",
            "bad upstream data",
        ];
        args.extend_from_slice(extra);
        cli(&args)
    };
    let done = forget(&key("2026-11-10"), &[]);
    assert_eq!(done.code, 2);
    assert!(done.stderr.contains("jobhost rerun"), "{}", done.stderr);
    let gone = forget(&key("2026-11-08"), &[]);
    assert_eq!(gone.code, 0, "{}", gone.stderr);
    let line = gone.receipt();
    assert_eq!(
        (line["event"].as_str(), line["old_state"].as_str()),
        (Some("forgotten"), Some("FAILED"))
    );
    assert_eq!(line["decided_until"], "2026-11-08T00:00:00Z");
    assert!(!states(store).contains_key(&key("2026-11-08")));
    let audit = cli(&["history", "--all", "--store", store]);
    assert!(
        audit
            .stdout
            .contains("forget  daily-report:2026-11-08 (was FAILED)"),
        "{}",
        audit.stdout
    );
    assert!(
        audit.stdout.contains("bad upstream data"),
        "{}",
        audit.stdout
    );
    // The daemon decides the window again, from where it was moved back.
    let again = to_run(
        daemon_command(
            &[&cfg],
            store,
            "2026-11-11T00:20:00Z",
            "2026-11-11T00:30:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(
        states(store)[&key("2026-11-08")].0,
        "DONE",
        "{}",
        again.stdout
    );
    let missing = forget(&key("2026-10-01"), &[]);
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("no run"), "{}", missing.stderr);
}

#[test]
fn a_paused_job_is_skipped_on_every_host_and_status_says_paused() {
    let dir = scratch();
    let (stores, _pg) = stores(dir.path(), "a_paused_job");
    for store in &stores {
        let job_dir = scratch();
        let cfg = report_config(job_dir.path(), 500);
        // Before the job's first run: --config names the job.
        let typo = cli(&["pause", "daily-reprot", "--note", "x", "--store", store]);
        assert_eq!(
            typo.code, 2,
            "a job the store does not know: {}",
            typo.stderr
        );
        let paused = cli(&[
            "pause",
            "daily-report",
            "--note",
            "destination migrating",
            "--config",
            s(&cfg),
            "--store",
            store,
        ]);
        assert_eq!(paused.code, 0, "{}", paused.stderr);
        // Another host (another process) on the same store.
        let run = run_job(&cfg, store, "2026-11-09T00:05:00Z");
        assert_eq!(run.code, 0);
        let r = run.receipt();
        assert_eq!(
            (r["event"].as_str(), r["reason"].as_str()),
            (Some("skipped"), Some("paused"))
        );
        assert!(
            r["detail"]
                .as_str()
                .unwrap()
                .contains("destination migrating"),
            "{r}"
        );
        let status = cli(&[
            "status",
            "--config",
            s(&cfg),
            "--store",
            store,
            "--now",
            "2026-11-09T06:00:00Z",
        ]);
        assert_eq!(
            status.code, 5,
            "paused has its own exit code: {}",
            status.stdout
        );
        assert!(status.stdout.contains("paused since"), "{}", status.stdout);
        let refused = backfill(&cfg, store, "2026-11-01", "2026-11-08", &[]);
        assert_eq!(refused.code, 2, "{}", refused.stderr);
        assert!(
            refused.stderr.contains("jobhost resume daily-report"),
            "{}",
            refused.stderr
        );
        let resumed = cli(&["resume", "daily-report", "--store", store]);
        assert_eq!(resumed.code, 0, "{}", resumed.stderr);
        let ran = run_job(&cfg, store, "2026-11-09T00:05:00Z");
        assert_eq!(ran.event(), "ran", "{}", ran.stderr);
        let status = cli(&[
            "status",
            "--config",
            s(&cfg),
            "--store",
            store,
            "--now",
            "2026-11-09T06:00:00Z",
        ]);
        assert_eq!(status.code, 0, "{}", status.stdout);
    }
}

#[test]
fn a_daemon_leaves_a_paused_job_undecided_and_its_catch_up_decides_on_resume() {
    let dir = scratch();
    let cfg = report_config_with(dir.path(), 500, "catch_up = \"latest\"");
    let db = dir.path().join("s.db");
    let store = s(&db);
    // The daemon has decided up to 11-08 when the job is paused.
    let first = to_run(
        daemon_command(
            &[&cfg],
            store,
            "2026-11-09T00:05:00Z",
            "2026-11-09T00:10:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(states(store).len(), 1);
    assert_eq!(
        cli(&[
            "pause",
            "daily-report",
            "--note",
            "audit week",
            "--store",
            store
        ])
        .code,
        0
    );
    let out = to_run(
        daemon_command(
            &[&cfg],
            store,
            "2026-11-09T00:15:00Z",
            "2026-11-12T00:10:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let said = lines(&out);
    assert_eq!(said.len(), 1, "one line says it is paused: {said:?}");
    assert_eq!(said[0]["reason"], "paused");
    assert_eq!(
        states(store).len(),
        1,
        "nothing claimed, skipped or decided"
    );
    assert_eq!(cli(&["resume", "daily-report", "--store", store]).code, 0);
    let out = to_run(
        daemon_command(
            &[&cfg],
            store,
            "2026-11-12T00:20:00Z",
            "2026-11-12T00:30:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let st = states(store);
    // catch_up = "latest": the newest due window runs, the rest are skipped.
    assert_eq!(st[&key("2026-11-11")].0, "DONE", "{st:?}");
    assert!(st.contains_key(&key("2026-11-10")), "{st:?}");
    assert_eq!(st[&key("2026-11-10")].0, "SKIPPED");
}

#[test]
fn prune_frees_old_journals_and_bodies_keeps_the_rows_and_refuses_their_replay() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 5000);
    let db = dir.path().join("s.db");
    let store = s(&db);
    for day in ["2026-11-01", "2026-11-02", "2026-11-08"] {
        assert_eq!(run_for(&cfg, store, day).event(), "ran");
    }
    let before = history(store);
    let journal_of = |rows: &[Value], day: &str| {
        rows.iter().find(|r| r["key"] == key(day)).unwrap()["journal_bytes"].as_u64()
    };
    let old_journals: u64 = ["2026-11-01", "2026-11-02"]
        .iter()
        .map(|d| journal_of(&before, d).unwrap())
        .sum();
    let pruned = cli(&[
        "prune",
        "--older-than",
        "5d",
        "--now",
        "2026-11-10T00:00:00Z",
        "--store",
        store,
    ]);
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    let line = pruned.receipt();
    assert_eq!(line["runs"], 2, "{line}");
    assert_eq!(line["journal_bytes"].as_u64(), Some(old_journals));
    assert!(line["body_bytes"].as_u64().unwrap() > 0);
    let after = history(store);
    assert_eq!(after.len(), 3, "every row stays");
    assert!(after.iter().all(|r| r["state"] == "DONE"));
    assert_eq!(journal_of(&after, "2026-11-01"), None);
    assert_eq!(
        journal_of(&after, "2026-11-08"),
        journal_of(&before, "2026-11-08")
    );
    let refused = cli(&["replay", &key("2026-11-01"), "--store", store]);
    assert_eq!(refused.code, 2);
    assert!(refused.stderr.contains("was pruned"), "{}", refused.stderr);
    let kept = cli(&["replay", &key("2026-11-08"), "--store", store]);
    assert_eq!(kept.code, 0, "{}{}", kept.stdout, kept.stderr);
    // With --keep-journals a pruned run still replays (its messages
    // compared without their dropped bodies); export refuses it.
    let light = cli(&[
        "prune",
        "--older-than",
        "1d",
        "--keep-journals",
        "--now",
        "2026-11-10T00:00:00Z",
        "--store",
        store,
    ]);
    assert_eq!(light.receipt()["runs"], 1, "{}", light.stdout);
    assert_eq!(light.receipt()["journal_bytes"], 0);
    let replayed = cli(&["replay", &key("2026-11-08"), "--store", store]);
    assert_eq!(replayed.code, 0, "{}{}", replayed.stdout, replayed.stderr);
    let export = cli(&[
        "export",
        &key("2026-11-08"),
        "--store",
        store,
        "-o",
        s(&dir.path().join("x.replay")),
        "--without-component",
    ]);
    assert_eq!(export.code, 2);
    assert!(export.stderr.contains("was pruned"), "{}", export.stderr);
    let bad = cli(&["prune", "--older-than", "soon", "--store", store]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("`90d`"), "{}", bad.stderr);
}

/// Takes the store back to the schema before the operator's tables, as an
/// older jobhost left it (what the later migrations added is dropped).
fn downgrade(store: &str) {
    if store.starts_with("postgres") {
        let mut c =
            postgres::Client::connect(store.split('?').next().unwrap(), postgres::NoTls).unwrap();
        let schema = store
            .split("search_path%3D")
            .nth(1)
            .unwrap()
            .split('&')
            .next()
            .unwrap();
        c.batch_execute(&format!(
            "SET search_path = {schema};
             UPDATE jobhost_runs SET error = skip_reason WHERE state = 'SKIPPED';
             ALTER TABLE jobhost_runs DROP COLUMN skip_reason;
             ALTER TABLE jobhost_runs DROP COLUMN owner_process;
             DROP INDEX jobhost_runs_by_state;
             DROP TABLE jobhost_revisions, jobhost_revision_messages, jobhost_audit, jobhost_pauses,
                 jobhost_forgotten;
             DROP INDEX jobhost_runs_prunable;
             ALTER TABLE jobhost_runs DROP COLUMN revision, DROP COLUMN reason, DROP COLUMN pruned_at;
             DROP TABLE jobhost_uses, jobhost_stale, jobhost_shadows;
             DROP TABLE jobhost_notifications, jobhost_incidents;
             DROP TABLE jobhost_chain, jobhost_chain_adopted;
             ALTER TABLE jobhost_outbox DROP COLUMN entry;
             DELETE FROM jobhost_schema WHERE version > 3;"
        ))
        .unwrap();
    } else {
        let c = rusqlite::Connection::open(store).unwrap();
        c.execute_batch(
            "UPDATE runs SET error = skip_reason WHERE state = 'SKIPPED';
             ALTER TABLE runs DROP COLUMN skip_reason;
             DROP TRIGGER runs_counted_insert; DROP TRIGGER runs_counted_delete;
             DROP TRIGGER runs_counted_update; DROP TABLE run_counts; DROP INDEX runs_by_state;
             DROP TABLE revisions; DROP TABLE revision_messages; DROP TABLE audit;
             DROP TABLE pauses; DROP TABLE forgotten; DROP INDEX runs_prunable;
             ALTER TABLE runs DROP COLUMN revision; ALTER TABLE runs DROP COLUMN reason;
             ALTER TABLE runs DROP COLUMN pruned_at; ALTER TABLE runs DROP COLUMN owner_process;
             DROP TABLE uses; DROP TABLE stale; DROP TABLE shadows;
             DROP TABLE notifications; DROP TABLE incidents;
             DROP TABLE chain; DROP TABLE chain_adopted;
             ALTER TABLE outbox DROP COLUMN entry;
             PRAGMA user_version = 4;",
        )
        .unwrap();
    }
}

#[test]
fn status_plan_and_history_read_a_store_of_the_previous_schema() {
    let dir = scratch();
    let (stores, _pg) = stores(dir.path(), "read_previous_schema");
    for store in &stores {
        let job_dir = scratch();
        let cfg = report_config(job_dir.path(), 500);
        assert_eq!(run_job(&cfg, store, "2026-11-09T00:05:00Z").event(), "ran");
        downgrade(store);
        let status = cli(&[
            "status",
            "--config",
            s(&cfg),
            "--store",
            store,
            "--now",
            "2026-11-09T06:00:00Z",
        ]);
        assert_eq!(status.code, 0, "{}{}", status.stdout, status.stderr);
        let plan = cli(&[
            "plan",
            "--config",
            s(&cfg),
            "--store",
            store,
            "--now",
            "2026-11-09T06:00:00Z",
        ]);
        assert_eq!(plan.code, 0, "{}", plan.stderr);
        let rows = history(store);
        assert_eq!(rows[0]["revision"], 1);
        let detail = cli(&["history", &key("2026-11-08"), "--all", "--store", store]);
        assert_eq!(detail.code, 0, "{}", detail.stderr);
        // The next run migrates it, and everything goes on.
        let next = run_job(&cfg, store, "2026-11-10T00:05:00Z");
        assert_eq!(next.event(), "ran", "{}", next.stderr);
        assert_eq!(history(store).len(), 2);
    }
}

#[test]
fn a_daemon_with_retention_prunes_old_runs_once_a_day_and_keeps_recent_ones() {
    let dir = scratch();
    let cfg = report_config_with(dir.path(), 3000, "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{text}\n[retention]\nolder_than_days = 1\n")).unwrap();
    let db = dir.path().join("s.db");
    let store = s(&db);
    let out = to_run(
        daemon_command(
            &[&cfg],
            store,
            "2026-11-09T00:05:00Z",
            "2026-11-12T00:10:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pruned: Vec<Value> = lines(&out)
        .into_iter()
        .filter(|l| l["event"] == "pruned")
        .collect();
    assert!(!pruned.is_empty(), "{}", out.stdout);
    assert!(
        pruned
            .iter()
            .all(|p| p["runs"].as_u64() > Some(0) && p["journal_bytes"].as_u64() > Some(0))
    );
    let rows = history(store);
    let of = |day: &str| rows.iter().find(|r| r["key"] == key(day)).unwrap().clone();
    assert!(of("2026-11-08")["pruned_at"].is_string(), "{rows:?}");
    assert!(of("2026-11-08")["journal_bytes"].is_null());
    assert!(
        of("2026-11-11")["pruned_at"].is_null(),
        "a window younger than a day is kept"
    );
    assert!(rows.iter().all(|r| r["state"] == "DONE"));
    let audit = cli(&["history", "--all", "--json", "--store", store]);
    assert!(
        lines(&audit)
            .iter()
            .any(|l| l["audit"] == "prune" && l["reason"] == "[retention] older_than_days = 1"),
        "{}",
        audit.stdout
    );
}
