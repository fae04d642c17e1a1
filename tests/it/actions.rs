//! Acting from the dashboard's JSON API (`jobhost serve --allow-actions
//! --tokens-file`), driven by `curl`: each action leaves the same rows and
//! audit lines as the command line's verb on a twin store, with the
//! token's name as who acted; a `read` token, a server started without
//! `--allow-actions`, a request without a token and a body that is not
//! JSON are refused and change nothing; a backfill runs in the background
//! and its progress is read while it runs. The browser's side (sign-in,
//! forms, a forged cross-site form) is in `browser`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::dashboard::{Served, every_state, serve};
use crate::harness::*;

const NOW: &str = "2026-12-02T00:00:00Z";

/// The operator's and the reader's tokens.
pub const OPERATE: &str = "op-7c1f0d2e9b8a4c3f6e5d";
pub const READ: &str = "rd-0a9b8c7d6e5f4a3b2c1d";

/// The host name `jobhost` puts after `user@` in a command line's audit
/// lines.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}

/// A tokens file: `operator` may act, `reader` may only read.
pub fn tokens_file(dir: &Path, operator: &str) -> PathBuf {
    use sha2::{Digest, Sha256};
    let file = dir.join("tokens");
    std::fs::write(
        &file,
        format!(
            "# name role sha256\n{operator} operate {}\nreader read {}\n",
            hex::encode(Sha256::digest(OPERATE.as_bytes())),
            hex::encode(Sha256::digest(READ.as_bytes()))
        ),
    )
    .unwrap();
    file
}

/// `jobhost serve` of the job `cfg` on `db` at [`NOW`], acting for the
/// tokens of `tokens`.
pub fn serve_acting(cfg: &Path, db: &Path, tokens: &Path) -> Served {
    serve(&[
        "serve",
        "--config",
        s(cfg),
        "--store",
        s(db),
        "--now",
        NOW,
        "--allow-actions",
        "--tokens-file",
        s(tokens),
    ])
}

/// `curl -X POST` of `body` (JSON) to `path` with `token`: the status, the
/// `Jobhost-Exit-Code` header and the body.
fn post(addr: &str, path: &str, token: Option<&str>, body: &str) -> (u16, String, String) {
    post_as(addr, path, token, "application/json", body)
}

fn post_as(
    addr: &str,
    path: &str,
    token: Option<&str>,
    content_type: &str,
    body: &str,
) -> (u16, String, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "300", "-D", "-", "-X", "POST"])
        .args(["-H", &format!("Content-Type: {content_type}")])
        .args(["--data-binary", body]);
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let out = cmd
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("curl runs (apt-get install curl)");
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    // Header names are any case (hyper sends them in lower case).
    let exit = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case("Jobhost-Exit-Code"))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    (status, exit, body.to_string())
}

/// `curl` of `path` with `token`: the JSON it answers.
fn get_json(addr: &str, path: &str, token: &str) -> Value {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--fail",
            "-H",
            &format!("Authorization: Bearer {token}"),
        ])
        .arg(format!("http://{addr}{path}"))
        .output()
        .expect("curl runs");
    assert!(
        out.status.success(),
        "curl {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// `jobhost ARGS` as user `alice`.
fn cli(args: &[&str]) -> Run {
    let mut cmd = command(&root(), args);
    cmd.env("USER", "alice");
    to_run(cmd.output().expect("jobhost runs"))
}

/// What `history --all --json` says of the store, without what differs
/// between two stores by when and where it happened: each line's key,
/// state, revision, attempt and reason, and each audit line's action, old
/// state, reason, detail (without its digits) and who.
fn record(store: &Path) -> Vec<Value> {
    let out = cli(&["history", "--all", "--json", "--store", s(store)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let keep = [
        "key",
        "state",
        "revision",
        "attempt",
        "reason",
        "revision_reason",
        "audit",
        "old_state",
        "detail",
        "by",
        "actor",
        "job",
    ];
    let mut lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("JSON");
            let obj = v.as_object().expect("an object");
            Value::Object(
                obj.iter()
                    .filter(|(k, _)| keep.contains(&k.as_str()))
                    .map(|(k, v)| match (k.as_str(), v.as_str()) {
                        // A detail names the test's sink by its port and
                        // a pause by when it began: the digits differ.
                        ("detail", Some(d)) => (
                            k.clone(),
                            Value::from(d.replace(|c: char| c.is_ascii_digit(), "")),
                        ),
                        _ => (k.clone(), v.clone()),
                    })
                    .collect(),
            )
        })
        .collect();
    lines.sort_by_key(|v| v.to_string());
    lines
}

#[test]
fn the_apis_actions_leave_the_same_rows_and_audit_lines_as_the_command_lines() {
    let (cli_dir, api_dir) = (scratch(), scratch());
    let (cli_cfg, cli_db, _cli_sink) = every_state(cli_dir.path());
    let (api_cfg, api_db, _api_sink) = every_state(api_dir.path());
    assert_eq!(record(&cli_db), record(&api_db), "the twins start equal");

    // The command line, as `alice` on this host.
    let by = format!("alice@{}", hostname());
    let job_flags = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--config", s(&cli_cfg), "--store", s(&cli_db), "--now", NOW]);
        let run = cli(&all);
        assert!(run.code == 0, "{args:?}: {}", run.stderr);
        run
    };
    let store_flags = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--store", s(&cli_db)]);
        let run = cli(&all);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        run
    };
    store_flags(&["pause", "daily-report", "--note", "destination migrating"]);
    store_flags(&["resume", "daily-report", "--note", "migrated"]);
    store_flags(&[
        "forget",
        "daily-report:2026-11-05",
        "--reason",
        "bad rows, fixed upstream",
    ]);
    job_flags(&["rerun", "daily-report:2026-11-03", "--reason", "late rows"]);
    job_flags(&[
        "retry",
        "daily-report:2026-11-06",
        "--reason",
        "endpoint back",
    ]);
    job_flags(&["run", "--for", "2026-11-07"]);

    // The API, with a token named as the command line's user is.
    let tokens = tokens_file(api_dir.path(), &by);
    let srv = serve_acting(&api_cfg, &api_db, &tokens);
    let a = srv.addr.as_str();
    let t = Some(OPERATE);
    let (status, _, body) = post(
        a,
        "/api/jobs/daily-report/pause",
        t,
        r#"{"note": "destination migrating"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let line: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(line["by"], by.as_str(), "{line}");
    let (status, _, body) = post(
        a,
        "/api/jobs/daily-report/resume",
        t,
        r#"{"note": "migrated"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = post(
        a,
        "/api/runs/daily-report:2026-11-05/forget",
        t,
        r#"{"reason": "bad rows, fixed upstream"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let (status, exit, body) = post(
        a,
        "/api/runs/daily-report:2026-11-03/rerun",
        t,
        r#"{"reason": "late rows"}"#,
    );
    assert_eq!((status, exit.as_str()), (200, "0"), "{body}");
    let receipt: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        receipt["event"], "ran",
        "the receipt `run` prints: {receipt}"
    );
    assert_eq!(receipt["revision"], 2, "{receipt}");
    let (status, _, body) = post(
        a,
        "/api/runs/daily-report%3A2026-11-06/retry",
        t,
        r#"{"reason": "endpoint back"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = post(
        a,
        "/api/jobs/daily-report/run",
        t,
        r#"{"window": "2026-11-07"}"#,
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["key"],
        "daily-report:2026-11-07"
    );

    let (by_cli, by_api) = (record(&cli_db), record(&api_db));
    assert_eq!(by_cli, by_api, "the same rows and audit lines");
    // And they are what was asked, with who asked (the store's making
    // ran its windows with `run --for` as the test's own user).
    let audit: Vec<&Value> = by_api
        .iter()
        .filter(|l| l.get("audit").is_some())
        .filter(|l| l["audit"] != "run" || l["key"] == "daily-report:2026-11-07")
        .collect();
    let actions: std::collections::BTreeSet<&str> =
        audit.iter().filter_map(|l| l["audit"].as_str()).collect();
    for want in ["pause", "resume", "forget", "rerun", "retry", "run"] {
        assert!(
            actions.contains(want),
            "an audit line for {want}: {audit:?}"
        );
    }
    assert!(
        audit
            .iter()
            .all(|l| l.get("by").or(l.get("actor")) == Some(&Value::from(by.as_str()))),
        "{audit:?}"
    );
    // Both chains verify: the API's changes are chain entries as the
    // command line's are.
    for db in [&cli_db, &api_db] {
        let v = cli(&["verify", "--store", s(db)]);
        assert_eq!(v.code, 0, "{}{}", v.stdout, v.stderr);
    }
}

#[test]
fn a_read_token_a_read_only_server_and_a_bad_request_change_nothing() {
    let dir = scratch();
    let (cfg, db, _sink) = every_state(dir.path());
    let before = record(&db);
    let tokens = tokens_file(dir.path(), "ops");

    // Read-only by default, whatever the token.
    let ro = serve(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
        "--tokens-file",
        s(&tokens),
    ]);
    let (status, _, body) = post(
        &ro.addr,
        "/api/jobs/daily-report/pause",
        Some(OPERATE),
        r#"{"note": "x"}"#,
    );
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("--allow-actions"), "{body}");
    drop(ro);

    let srv = serve_acting(&cfg, &db, &tokens);
    let a = srv.addr.as_str();
    let pause = r#"{"note": "x"}"#;
    let rerun = r#"{"reason": "x"}"#;
    for (path, body) in [
        ("/api/jobs/daily-report/pause", pause),
        ("/api/runs/daily-report:2026-11-03/rerun", rerun),
    ] {
        let (status, _, answer) = post(a, path, Some(READ), body);
        assert_eq!(status, 403, "a read token: {answer}");
        assert!(answer.contains("token `reader` may only read"), "{answer}");
        let (status, _, answer) = post(a, path, None, body);
        assert_eq!(status, 401, "no token: {answer}");
        let (status, _, answer) = post(a, path, Some("not-a-token-at-all-000"), body);
        assert_eq!(status, 401, "an unknown token: {answer}");
        // A form's body to the API: refused (the API takes JSON only).
        let (status, _, answer) = post_as(
            a,
            path,
            Some(OPERATE),
            "application/x-www-form-urlencoded",
            "note=x",
        );
        assert_eq!(status, 415, "{answer}");
    }
    let (status, _, answer) = post(
        a,
        "/api/jobs/daily-report/pause",
        Some(OPERATE),
        "{not json",
    );
    assert_eq!(status, 400, "{answer}");
    // A pause needs a note, a rerun a reason; a window of another job, or
    // one that is not DONE, is refused naming the fix.
    let (status, exit, answer) = post(a, "/api/jobs/daily-report/pause", Some(OPERATE), "{}");
    assert_eq!((status, exit.as_str()), (400, "2"), "{answer}");
    assert!(answer.contains("note is empty"), "{answer}");
    let (status, _, answer) = post(
        a,
        "/api/runs/daily-report:2026-11-05/rerun",
        Some(OPERATE),
        rerun,
    );
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer.contains("not DONE") && answer.contains("retry"),
        "{answer}"
    );
    let (status, _, answer) = post(a, "/api/jobs/no-such-job/pause", Some(OPERATE), pause);
    assert_eq!(status, 404, "{answer}");
    let (status, _, answer) = post(a, "/api/jobs/daily-report/delete", Some(OPERATE), pause);
    assert_eq!(status, 404, "{answer}");
    // A `force` that is neither true nor false is refused, not read as no.
    let (status, exit, answer) = post(
        a,
        "/api/runs/daily-report:2026-11-05/forget",
        Some(OPERATE),
        r#"{"reason": "x", "force": "ture"}"#,
    );
    assert_eq!((status, exit.as_str()), (400, "2"), "{answer}");
    assert!(
        answer.contains("field `force` is `ture`; send true or false"),
        "{answer}"
    );
    // A form POST without this server's Origin: refused.
    let (status, _, answer) = post_as(
        a,
        "/jobs/daily-report/pause",
        Some(OPERATE),
        "application/x-www-form-urlencoded",
        "note=x",
    );
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("Origin"), "{answer}");
    assert_eq!(record(&db), before, "nothing changed");

    // --allow-actions without an operate token is refused at start.
    let reader_only = dir.path().join("readers");
    std::fs::write(&reader_only, format!("viewer read {}\n", "ab".repeat(32))).unwrap();
    let refused = cli(&[
        "serve",
        "--config",
        s(&cfg),
        "--allow-actions",
        "--tokens-file",
        s(&reader_only),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("operate"), "{}", refused.stderr);
}

#[test]
fn a_backfill_from_the_api_runs_in_the_background_and_its_progress_is_read() {
    let dir = scratch();
    let (cfg, db, _sink) = every_state(dir.path());
    let tokens = tokens_file(dir.path(), "ops");
    let srv = serve_acting(&cfg, &db, &tokens);
    let a = srv.addr.as_str();
    let (status, _, body) = post(
        a,
        "/api/jobs/daily-report/backfill",
        Some(OPERATE),
        r#"{"from": "2026-11-07", "to": "2026-11-13", "only": "missing"}"#,
    );
    assert_eq!(status, 202, "{body}");
    let task: Value = serde_json::from_str(&body).unwrap();
    // 11-07..11-12 less 11-10, which is DONE.
    assert_eq!(task["total"], 5, "{task}");
    let id = task["id"].as_u64().unwrap();
    let mut view = get_json(a, &format!("/api/tasks/{id}"), READ);
    for _ in 0..600 {
        if view["ended"].is_string() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        view = get_json(a, &format!("/api/tasks/{id}"), READ);
    }
    assert!(
        view["ended"].as_str().unwrap().starts_with("finished"),
        "{view}"
    );
    assert_eq!(
        (view["done"].clone(), view["ran"].clone()),
        (5.into(), 5.into()),
        "{view}"
    );
    assert_eq!(view["by"], "ops");
    assert_eq!(view["exit_code"], 0);
    let states: std::collections::BTreeMap<String, String> = history(&db)
        .into_iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for day in ["07", "08", "09", "11", "12"] {
        assert_eq!(
            states
                .get(&format!("daily-report:2026-11-{day}"))
                .map(String::as_str),
            Some("DONE"),
            "{states:?}"
        );
    }
    // Its page, for a person.
    let page = crate::dashboard::get(
        a,
        &format!("/tasks/{id}"),
        &[("Authorization", &format!("Bearer {READ}"))],
    );
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains("<span id=\"done\">5</span> of 5"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("daily-report:2026-11-12"),
        "{}",
        page.body
    );
}

#[test]
fn a_request_that_claims_a_huge_body_or_never_sends_it_stops_nothing() {
    use std::io::{Read, Write};
    let dir = scratch();
    let (cfg, db, _sink) = every_state(dir.path());
    let tokens = tokens_file(dir.path(), "ops");
    let srv = serve_acting(&cfg, &db, &tokens);
    let a = srv.addr.as_str();
    // A body claimed far larger than memory, then the connection closed:
    // answered 413 (a POST) or ignored (a GET), and the server lives on.
    for method in ["POST", "GET"] {
        let mut conn = std::net::TcpStream::connect(a).unwrap();
        // A server that read on and on would fail this test, not hang it.
        conn.set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        let _ = write!(
            conn,
            "{method} /api/jobs/daily-report/pause HTTP/1.1\r\nHost: {a}\r\n\
             Authorization: Bearer {OPERATE}\r\nContent-Type: application/json\r\n\
             Content-Length: 1000000000000000\r\n\r\n{{\"note\""
        );
        let _ = conn.shutdown(std::net::Shutdown::Write);
        let mut answer = String::new();
        let _ = conn.read_to_string(&mut answer);
        if method == "POST" {
            assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        }
    }
    // Two clients that send headers and never their bodies hold up no
    // page: both answering threads stay free.
    let stalled: Vec<_> = (0..2)
        .map(|_| {
            let mut conn = std::net::TcpStream::connect(a).unwrap();
            write!(
                conn,
                "POST /api/jobs/daily-report/pause HTTP/1.1\r\nHost: {a}\r\n\
                 Authorization: Bearer {OPERATE}\r\nContent-Type: application/json\r\n\
                 Content-Length: 100\r\n\r\n"
            )
            .unwrap();
            conn
        })
        .collect();
    let page = crate::dashboard::get(
        a,
        "/jobs.json",
        &[("Authorization", &format!("Bearer {READ}"))],
    );
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(crate::dashboard::get(a, "/healthz", &[]).status, 200);
    drop(stalled);
    let (status, _, body) = post(
        a,
        "/api/jobs/daily-report/pause",
        Some(OPERATE),
        r#"{"note": "still here"}"#,
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_daemon_serving_its_dashboard_acts_with_the_jobs_it_loaded() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 50);
    let db = dir.path().join("s.db");
    let tokens = tokens_file(dir.path(), "ops");
    let srv = serve(&[
        "daemon",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        "2026-11-09T00:05:00Z",
        "--listen",
        "127.0.0.1:0",
        "--allow-actions",
        "--tokens-file",
        s(&tokens),
    ]);
    let a = srv.addr.as_str();
    // A window the daemon's schedule does not reach: run from the page,
    // in the daemon's process.
    let (status, exit, body) = post(
        a,
        "/api/jobs/daily-report/run",
        Some(OPERATE),
        r#"{"window": "2026-11-02"}"#,
    );
    assert_eq!((status, exit.as_str()), (200, "0"), "{body}");
    let receipt: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(receipt["event"], "ran", "{receipt}");
    assert_eq!(receipt["key"], "daily-report:2026-11-02");
    let (status, _, body) = post(
        a,
        "/api/jobs/daily-report/pause",
        Some(OPERATE),
        r#"{"note": "from the daemon's page"}"#,
    );
    assert_eq!(status, 200, "{body}");
    let audit = cli(&["history", "--all", "--json", "--store", s(&db)]);
    let lines: Vec<Value> = audit
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|l: &Value| l.get("audit").is_some())
        .collect();
    let by_ops: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| l["by"] == "ops")
        .map(|l| {
            (
                l["audit"].as_str().unwrap(),
                l["key"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(
        by_ops.contains(&("run", "daily-report:2026-11-02")),
        "{lines:?}"
    );
    assert!(by_ops.contains(&("pause", "")), "{lines:?}");
    // --allow-actions is for a daemon that serves its dashboard.
    let refused = cli(&[
        "daemon",
        "--config",
        s(&cfg),
        "--allow-actions",
        "--until",
        "2026-11-09T00:05:00Z",
    ]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("--listen"), "{}", refused.stderr);
}
