//! A command resolves only what it uses: on a monitoring host, whose copy
//! of a job's config names no component and whose environment holds none
//! of the job's delivery, ping or model credentials, `status`, `plan` and
//! `history --config` work; only the commands that run the job (`run`,
//! `daemon`) refuse, exit 2, before they claim anything.

use std::path::{Path, PathBuf};

use crate::harness::*;

/// The job's delivery, ping and model settings, each with a credential
/// from the environment.
const WITH_CREDENTIALS: &str = r#"
[destinations.ledger]
type = "http"
url = "http://127.0.0.1:9/${LEDGER_PATH}"
headers = { Authorization = "Bearer ${LEDGER_TOKEN}" }

[ping]
success = "http://127.0.0.1:9/${HC_UUID}"

[digest]
base_url = "http://127.0.0.1:9/v1"
model = "m"
api_key = "${MODEL_KEY}"
"#;

/// The monitoring host's copy: the same job and store, no component, and
/// the credentials' settings as the job has them.
fn monitor_config(dir: &Path, store: &Path) -> PathBuf {
    let path = dir.join("monitor.toml");
    std::fs::write(
        &path,
        format!(
            "job = \"daily-report\"\nstore = \"{}\"\ncache_dir = \"cache\"\n{WITH_CREDENTIALS}",
            s(store)
        ),
    )
    .unwrap();
    path
}

#[test]
fn status_plan_and_history_need_neither_the_component_nor_the_runs_credentials() {
    let dir = scratch();
    let store = dir.path().join("s.db");
    let ran = run_job(
        &report_config(dir.path(), 100),
        &store,
        "2026-11-09T00:05:00Z",
    );
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    let cfg = monitor_config(dir.path(), &store);

    let status = jobhost(&[
        "status",
        "--config",
        s(&cfg),
        "--now",
        "2026-11-09T06:00:00Z",
        "--json",
    ]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let line: serde_json::Value = serde_json::from_str(status.stdout.trim()).unwrap();
    assert_eq!(line["health"], "healthy");
    assert_eq!(line["last_done"], "daily-report:2026-11-08");

    let plan = jobhost(&[
        "plan",
        "--config",
        s(&cfg),
        "--now",
        "2026-11-10T00:05:00Z",
        "--json",
    ]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    let decisions: Vec<serde_json::Value> = plan
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        decisions[0]["key"], "daily-report:2026-11-09",
        "{}",
        plan.stdout
    );
    assert_eq!(decisions[0]["decision"], "run", "{}", plan.stdout);

    let history = jobhost(&["history", "--config", s(&cfg), "--json"]);
    assert_eq!(history.code, 0, "{}", history.stderr);
    assert!(
        history
            .stdout
            .contains(r#""key":"daily-report:2026-11-08""#),
        "{}",
        history.stdout
    );
    for out in [&status, &plan, &history] {
        assert!(
            out.stderr.is_empty(),
            "nothing to warn about: {}",
            out.stderr
        );
    }
}

#[test]
fn run_and_daemon_refuse_a_missing_component_or_credential_before_claiming() {
    let dir = scratch();
    let store = dir.path().join("s.db");
    let ran = run_job(
        &report_config(dir.path(), 100),
        &store,
        "2026-11-09T00:05:00Z",
    );
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    let cfg = monitor_config(dir.path(), &store);
    let before = history(&store);

    // No component: named, with the flag and the key that give one.
    let run = run_job(&cfg, &store, "2026-11-10T00:05:00Z");
    assert_eq!(run.code, 2, "{}", run.stdout);
    let receipt = run.receipt();
    assert_eq!(receipt["event"], "failed");
    assert_eq!(receipt["error"]["kind"], "invalid-input");
    let message = receipt["error"]["message"].as_str().unwrap();
    assert!(message.contains("no component given"), "{message}");

    // A component, but the credentials unset: the first one is named, and
    // its value would never be shown.
    let component = guests().report.clone();
    for args in [
        vec!["run", "--config", s(&cfg), "--component", s(&component)],
        vec![
            "daemon",
            "--config",
            s(&cfg),
            "--component",
            s(&component),
            "--until",
            "2026-11-10T00:05:00Z",
        ],
    ] {
        let mut cmd = command(&root(), &args);
        cmd.args(["--now", "2026-11-10T00:05:00Z"])
            .env("JOBHOST_TEST_VIRTUAL_TIME", "1");
        for var in ["LEDGER_PATH", "LEDGER_TOKEN", "HC_UUID", "MODEL_KEY"] {
            cmd.env_remove(var);
        }
        let out = to_run(cmd.output().unwrap());
        assert_eq!(out.code, 2, "{args:?}: {}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains("LEDGER_PATH"),
            "{args:?} names the variable: {}",
            out.stderr
        );
    }
    assert_eq!(
        history(&store),
        before,
        "nothing was claimed, skipped or decided"
    );
}

#[test]
fn an_out_of_range_limit_is_refused_naming_the_key_and_its_range() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 10);
    let text = std::fs::read_to_string(&cfg).unwrap();
    let store = dir.path().join("s.db");
    for (limits, want) in [
        (
            "batch_rows = 0",
            "invalid `limits.batch_rows = 0`: use 1 to 1048576",
        ),
        (
            "max_messages = 0",
            "invalid `limits.max_messages = 0`: use 1 to 100000",
        ),
        (
            "log_bytes = 99999999999",
            "invalid `limits.log_bytes = 99999999999`: use 0 to 16777216",
        ),
    ] {
        std::fs::write(&cfg, format!("{text}\n[limits]\n{limits}\n")).unwrap();
        let run = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
        assert_eq!(run.code, 2, "{limits}: {}", run.stdout);
        let message = run.receipt()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(message.contains(want), "{limits}: {message}");
        assert!(
            !store.exists(),
            "{limits}: refused before the store is created"
        );
    }
}
