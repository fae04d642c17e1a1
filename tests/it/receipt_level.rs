//! `--receipt brief` (`JOBHOST_RECEIPT=brief`): under systemd or Kubernetes
//! stdout goes to the journal or the cluster's logs, and a full receipt
//! carries the report's summary and the digest's text there. A brief one
//! keeps what a monitor or a grep needs and none of that text, on every
//! command that prints receipts (`run`, `daemon`, `backfill`, `rerun`,
//! `retry`); a value other than `full` or `brief` is refused before
//! anything is claimed.

use std::path::{Path, PathBuf};

use jobhost_tests::sink::{Reply, Sink};
use serde_json::Value;

use crate::harness::*;

const NOW: &str = "2026-11-09T00:05:00Z";
const KEY: &str = "daily-report:2026-11-08";
const MODEL_KEY_VAR: &str = "JOBHOST_TEST_MODEL_KEY";
const DIGEST_TEXT: &str = "Sunday's orders were led by the North region; nothing unusual.";
const ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"Sunday's orders were led by the North region; nothing unusual."},"finish_reason":"stop"}]}"#;

/// The reference report over `sales.db`, its message to the sink's
/// `/report`, and a digest from the sink's model.
fn job(dir: &Path, sink: &Sink) -> PathBuf {
    sales_db(dir, 300);
    config(
        dir,
        &format!(
            r#"job = "daily-report"
component = "{component}"

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.report]
type = "http"
url = "{report}"
tries = 1

[digest]
base_url = "{base}"
model = "stub-model"
api_key = "${{{MODEL_KEY_VAR}}}"
timeout_seconds = 5
cache_dir = "digests"

[params]
destination = "report"
"#,
            component = guests().report.display(),
            report = sink.url("/report"),
            base = sink.url("/v1"),
        ),
    )
}

/// A sink that takes the report and answers the model, `n` times each.
fn sink(n: usize) -> Sink {
    let sink = Sink::start();
    sink.script("/v1/chat/completions", &vec![Reply::Body(200, ANSWER); n]);
    sink
}

/// `jobhost ARGS` in virtual time with the model's key set and `env`.
fn jobhost_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    to_run(
        command(&root(), args)
            .env("JOBHOST_TEST_VIRTUAL_TIME", "1")
            .env(MODEL_KEY_VAR, "sk-test")
            .envs(env.iter().copied())
            .output()
            .unwrap(),
    )
}

/// The fields a monitor or a grep needs, as every brief receipt of a run
/// that ran keeps them.
fn assert_brief_keeps_the_key_fields(r: &Value) {
    assert_eq!(r["event"], "ran", "{r}");
    assert_eq!(r["job"], "daily-report", "{r}");
    assert_eq!(r["key"], KEY, "{r}");
    assert_eq!(r["window"]["label"], "2026-11-08", "{r}");
    assert!(r["attempt"].is_u64() && r["fence"].is_i64(), "{r}");
    // The chain entry of the run's last decision, for `jobhost verify`.
    assert!(r["entry"].as_str().is_some_and(|e| e.len() == 64), "{r}");
    let m = &r["messages"][0];
    assert_eq!(m["seq"], 1, "{r}");
    assert_eq!(m["destination"], "report", "{r}");
    assert!(
        m["idempotency_key"].as_str().unwrap().starts_with(KEY),
        "{r}"
    );
    assert_eq!(m["status"], "delivered", "{r}");
    assert!(
        ["generated", "cached"].contains(&r["digest"]["status"].as_str().unwrap()),
        "{r}"
    );
}

/// Whether any line of `stdout` carries the report's or the model's text,
/// or what a send came to.
fn carries_text(stdout: &str, summary: &str) -> bool {
    stdout.contains(summary)
        || stdout.contains(DIGEST_TEXT)
        || stdout.lines().any(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v.get("report").is_some()
                || v["messages"]
                    .as_array()
                    .is_some_and(|ms| ms.iter().any(|m| m.get("detail").is_some()))
        })
}

#[test]
fn a_brief_receipt_keeps_the_key_fields_and_none_of_the_reports_or_the_models_text() {
    // The same window in two stores: a full receipt, then a brief one.
    let dir = scratch();
    let sink = sink(2);
    let cfg = job(dir.path(), &sink);
    let run = |store: &str, more: &[&str], env: &[(&str, &str)]| {
        let store = dir.path().join(store);
        let mut args = vec![
            "run",
            "--config",
            s(&cfg),
            "--store",
            s(&store),
            "--now",
            NOW,
        ];
        args.extend(more);
        jobhost_env(&args, env)
    };
    let full = run("full.db", &[], &[]);
    assert_eq!(full.code, 0, "{}", full.stderr);
    let f = full.receipt();
    let summary = f["report"]["summary"].as_str().unwrap().to_string();
    assert!(summary.contains("orders"), "{summary}");
    assert_eq!(f["digest"]["text"], DIGEST_TEXT, "{f}");
    assert!(carries_text(&full.stdout, &summary));

    let brief = run("brief.db", &["--receipt", "brief"], &[]);
    assert_eq!(brief.code, 0, "{}", brief.stderr);
    let b = brief.receipt();
    assert_brief_keeps_the_key_fields(&b);
    assert!(b.get("report").is_none(), "{b}");
    assert!(b["digest"].get("text").is_none(), "{b}");
    assert!(b["messages"][0].get("detail").is_none(), "{b}");
    assert!(!carries_text(&brief.stdout, &summary), "{}", brief.stdout);
    // The store keeps the report whatever the receipt told.
    let h = history(dir.path().join("brief.db"));
    assert_eq!(h[0]["report"]["summary"], summary.as_str());

    // The variable does the same; the flag wins over it.
    for (store, flag, brief) in [("env.db", None, true), ("flag.db", Some("full"), false)] {
        let more: Vec<&str> = flag.map(|f| vec!["--receipt", f]).unwrap_or_default();
        let r = run(store, &more, &[("JOBHOST_RECEIPT", "brief")]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(carries_text(&r.stdout, &summary), !brief, "{}", r.stdout);
    }
}

#[test]
fn the_daemon_backfill_rerun_and_retry_print_brief_receipts_too() {
    let dir = scratch();
    let sink = sink(8);
    let cfg = job(dir.path(), &sink);
    let store = dir.path().join("s.db");
    let brief = [("JOBHOST_RECEIPT", "brief")];
    let c = s(&cfg);
    let st = s(&store);

    // The daemon: its receipts and its digest's line.
    let mut daemon = daemon_command(&[&cfg], st, NOW, "2026-11-09T01:00:00Z");
    let out = to_run(
        daemon
            .env(MODEL_KEY_VAR, "sk-test")
            .envs(brief)
            .output()
            .unwrap(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ran = lines.iter().find(|l| l["event"] == "ran").expect("a run");
    assert_eq!(ran["key"], KEY, "{}", out.stdout);
    assert!(ran.get("report").is_none(), "{ran}");
    let digest = lines.iter().find(|l| l["event"] == "digest");
    let digest = digest.unwrap_or_else(|| panic!("a digest line: {}", out.stdout));
    assert_eq!(digest["digest"]["status"], "generated", "{digest}");
    let summary = history(&store)[0]["report"]["summary"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!carries_text(&out.stdout, &summary), "{}", out.stdout);

    // A rerun: the revision and the reason, without the text.
    let rerun = jobhost_env(
        &[
            "rerun",
            KEY,
            "--config",
            c,
            "--store",
            st,
            "--reason",
            "fixed it",
            "--now",
            NOW,
            "--receipt",
            "brief",
        ],
        &[],
    );
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    let r = rerun.receipt();
    assert_eq!(r["revision"], 2, "{r}");
    assert_eq!(r["because"], "fixed it", "{r}");
    assert!(!carries_text(&rerun.stdout, &summary), "{}", rerun.stdout);

    // A backfill of the day before.
    let backfill = jobhost_env(
        &[
            "backfill",
            "--config",
            c,
            "--store",
            st,
            "--from",
            "2026-11-07",
            "--to",
            "2026-11-08",
            "--now",
            NOW,
        ],
        &brief,
    );
    assert_eq!(backfill.code, 0, "{}", backfill.stderr);
    let b: Value = serde_json::from_str(backfill.stdout.trim()).unwrap();
    assert_eq!(b["key"], "daily-report:2026-11-07", "{b}");
    assert!(b.get("report").is_none(), "{b}");
    assert!(
        !backfill.stdout.contains(DIGEST_TEXT),
        "{}",
        backfill.stdout
    );

    // A retry of a DONE window is refused: its receipt is brief as well.
    let retry = jobhost_env(
        &[
            "retry",
            KEY,
            "--config",
            c,
            "--store",
            st,
            "--now",
            NOW,
            "--receipt",
            "brief",
        ],
        &[],
    );
    assert_eq!(retry.code, 2, "{}", retry.stderr);
    assert_eq!(retry.receipt()["error"]["kind"], "invalid-input");
}

#[test]
fn a_receipt_level_other_than_full_or_brief_is_one_line_exit_2_and_claims_nothing() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 10);
    let store = dir.path().join("s.db");
    let c = s(&cfg);
    let st = s(&store);
    // The command line, the environment, and what stderr says.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 5] = [
        (
            &[
                "run",
                "--config",
                c,
                "--store",
                st,
                "--now",
                NOW,
                "--receipt",
                "loud",
            ],
            &[],
            "--receipt is `loud`",
        ),
        (
            &["run", "--config", c, "--store", st, "--now", NOW],
            &[("JOBHOST_RECEIPT", "quiet")],
            "$JOBHOST_RECEIPT is `quiet`",
        ),
        (
            &[
                "daemon",
                "--config",
                c,
                "--store",
                st,
                "--now",
                NOW,
                "--until",
                NOW,
                "--receipt",
                "Brief",
            ],
            &[],
            "--receipt is `Brief`",
        ),
        (
            &[
                "backfill",
                "--config",
                c,
                "--store",
                st,
                "--from",
                "2026-11-07",
                "--to",
                "2026-11-08",
                "--now",
                NOW,
            ],
            &[("JOBHOST_RECEIPT", "none")],
            "$JOBHOST_RECEIPT is `none`",
        ),
        (
            &[
                "rerun",
                KEY,
                "--config",
                c,
                "--store",
                st,
                "--reason",
                "x",
                "--now",
                NOW,
                "--receipt",
                "",
            ],
            &[],
            "--receipt is ``",
        ),
    ];
    for (args, env, says) in cases {
        let r = jobhost_env(args, env);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        let lines: Vec<&str> = r.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {}", r.stderr);
        assert!(
            lines[0].contains(says) && lines[0].contains("full") && lines[0].contains("brief"),
            "{args:?}: {}",
            r.stderr
        );
        assert!(!store.exists(), "{args:?}: nothing was created or claimed");
    }
}
