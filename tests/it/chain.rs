//! The chain (docs/chain.md): a store whose every decision is an entry
//! verifies, and each change made to it outside jobhost is named by
//! `jobhost verify`, on SQLite and PostgreSQL; an exported run verifies
//! offline with only the file and the public key; a delivered message's
//! signature verifies with `verify-message` and with the documented Python
//! snippet, and fails for a changed body.

use std::path::{Path, PathBuf};

use jobhost_tests::pg::Scratch;
use jobhost_tests::sink::Sink;

use crate::effects::http_config;
use crate::harness::*;

/// Where the tests tamper: a SQLite file or a PostgreSQL schema, each
/// reached by its own client, as a person with the store's credentials
/// would.
enum Target {
    Sqlite(PathBuf),
    Postgres(Scratch),
}

impl Target {
    fn store(&self) -> String {
        match self {
            Target::Sqlite(p) => s(p).to_string(),
            Target::Postgres(db) => db.url(),
        }
    }

    /// Runs `sql`, written with `{runs}`-style table names.
    fn tamper(&self, sql: &str) {
        match self {
            Target::Sqlite(p) => {
                let sql = ["runs", "audit", "chain"]
                    .iter()
                    .fold(sql.to_string(), |s, t| s.replace(&format!("{{{t}}}"), t));
                let c = rusqlite::Connection::open(p).unwrap();
                c.execute_batch(&sql).unwrap();
            }
            Target::Postgres(db) => {
                let sql = ["runs", "audit", "chain"]
                    .iter()
                    .fold(sql.to_string(), |s, t| {
                        s.replace(&format!("{{{t}}}"), &format!("jobhost_{t}"))
                    });
                db.client().batch_execute(&sql).unwrap();
            }
        }
    }
}

/// A key made by `jobhost keygen` in `dir`; its private and public files.
fn keygen(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let key = dir.join(name);
    let made = jobhost(&["keygen", "--out", s(&key)]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let public = dir.join(format!("{name}.pub"));
    assert!(made.stdout.contains("public key"), "{}", made.stdout);
    (key, public)
}

/// The reference job over `dir`, signed with `key`.
fn signed_job(dir: &Path, key: &Path) -> PathBuf {
    let cfg = report_config(dir, 300);
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{text}\n[signing]\nkey_file = \"{}\"\n", s(key)),
    )
    .unwrap();
    cfg
}

/// `jobhost verify --store STORE` with `args`.
fn verify(store: &str, args: &[&str]) -> Run {
    let mut all = vec!["verify", "--store", store];
    all.extend(args);
    jobhost(&all)
}

/// Two days run, the first rerun with a reason, the job paused and
/// resumed: every kind of row the chain covers.
fn history_of_decisions(cfg: &Path, store: &str) {
    for now in ["2026-11-09T00:05:00Z", "2026-11-10T00:05:00Z"] {
        let run = run_job(cfg, store, now);
        assert_eq!(run.event(), "ran", "{}", run.stderr);
        assert!(
            run.receipt()["entry"]
                .as_str()
                .is_some_and(|h| h.len() == 64),
            "the receipt names its entry: {}",
            run.stdout
        );
    }
    let rerun = jobhost(&[
        "rerun",
        "--config",
        s(cfg),
        "--store",
        store,
        "2026-11-08",
        "--reason",
        // Text that would end a dollar-quoted constant early, and quotes:
        // the reason reaches PostgreSQL's statements as a constant.
        "the first figures missed late sales ($j0 and '$j0$')",
        "--now",
        "2026-11-10T00:06:00Z",
    ]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    for verb in ["pause", "resume"] {
        let mut args = vec![verb, "daily-report", "--store", store, "--config", s(cfg)];
        if verb == "pause" {
            args.extend(["--note", "a look at the source"]);
        }
        let done = jobhost(&args);
        assert_eq!(done.code, 0, "{verb}: {}", done.stderr);
    }
}

/// A clean store verifies; then each change made outside jobhost, one
/// after the other, is named by `verify` (exit 7) with what it changed.
fn tampering_is_named(target: &Target) {
    let dir = scratch();
    let (key, public) = keygen(dir.path(), "signing.key");
    let cfg = signed_job(dir.path(), &key);
    let store = target.store();
    history_of_decisions(&cfg, &store);
    let clean = verify(&store, &["--public-key", s(&public)]);
    assert_eq!(clean.code, 0, "{}{}", clean.stdout, clean.stderr);
    assert!(
        clean.stdout.contains("with a good signature; verified")
            && clean.stdout.contains("every row accounted for"),
        "{}",
        clean.stdout
    );
    let unchecked = verify(&store, &[]);
    assert_eq!(unchecked.code, 0, "{}", unchecked.stdout);
    assert!(
        unchecked.stdout.contains("not checked"),
        "{}",
        unchecked.stdout
    );
    // Another key than the one that signed: every entry is refused.
    let (_, other) = keygen(dir.path(), "other.key");
    let wrong = verify(&store, &["--public-key", s(&other)]);
    assert_eq!(wrong.code, 7, "{}", wrong.stdout);
    assert!(
        wrong.stdout.contains("not among the public keys given"),
        "{}",
        wrong.stdout
    );

    let steps: [(&str, &str); 5] = [
        (
            "UPDATE {runs} SET report = report || ' (edited)' WHERE key = 'daily-report:2026-11-09'",
            "changed: window `daily-report:2026-11-09`: its report is",
        ),
        (
            "UPDATE {audit} SET reason = 'a better story' WHERE action = 'rerun'",
            "its reason is `a better story`, but entry",
        ),
        (
            "DELETE FROM {audit} WHERE action = 'pause'",
            "deleted: audit line",
        ),
        (
            "INSERT INTO {runs} (key, job, window_start, window_end, timezone, state, fence, \
             owner, lease_expires_at, attempt, component, created_at, updated_at) \
             SELECT 'daily-report:2026-11-01', job, window_start, window_end, timezone, 'DONE', \
             1, owner, lease_expires_at, 1, component, created_at, updated_at FROM {runs} \
             WHERE key = 'daily-report:2026-11-09'",
            "outside: window `daily-report:2026-11-01` (DONE) has no entry in the chain",
        ),
        (
            "UPDATE {chain} SET seq = -1 WHERE job = 'daily-report' AND seq = 2; \
             UPDATE {chain} SET seq = 2 WHERE job = 'daily-report' AND seq = 3; \
             UPDATE {chain} SET seq = 3 WHERE job = 'daily-report' AND seq = -1",
            "entry #2 does not match its hash",
        ),
    ];
    for (sql, named) in steps {
        target.tamper(sql);
        let found = verify(&store, &["--public-key", s(&public)]);
        assert_eq!(
            found.code, 7,
            "after `{sql}`: {}{}",
            found.stdout, found.stderr
        );
        assert!(
            found.stdout.contains(named) && found.stdout.contains("NOT verified"),
            "after `{sql}`, verify names it (`{named}`):\n{}",
            found.stdout
        );
    }
    // The reordered entries break their links too, and the JSON says which.
    let json = verify(&store, &["--json"]);
    let line: serde_json::Value =
        serde_json::from_str(json.stdout.lines().next().unwrap()).unwrap();
    let problems: Vec<&str> = line["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["problem"].as_str().unwrap())
        .collect();
    for p in ["edited", "broken", "changed", "deleted", "outside"] {
        assert!(problems.contains(&p), "{p} in {problems:?}");
    }
}

#[test]
fn a_store_verifies_and_each_change_made_outside_jobhost_is_named_on_sqlite() {
    let dir = scratch();
    tampering_is_named(&Target::Sqlite(dir.path().join("jobhost.db")));
}

#[test]
fn a_store_verifies_and_each_change_made_outside_jobhost_is_named_on_postgres() {
    let Some(db) = Scratch::new(
        "chain::a_store_verifies_and_each_change_made_outside_jobhost_is_named_on_postgres",
    ) else {
        return;
    };
    tampering_is_named(&Target::Postgres(db));
}

#[test]
fn an_unsigned_chain_verifies_as_tamper_evident_and_fails_where_a_key_is_required() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let store = dir.path().join("jobhost.db");
    let run = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(run.event(), "ran", "{}", run.stderr);
    let plain = verify(s(&store), &[]);
    assert_eq!(plain.code, 0, "{}", plain.stdout);
    assert!(
        plain.stdout.contains("unsigned; verified"),
        "{}",
        plain.stdout
    );
    let (_, public) = keygen(dir.path(), "k");
    let keyed = verify(s(&store), &["--public-key", s(&public)]);
    assert_eq!(keyed.code, 7, "{}", keyed.stdout);
    assert!(keyed.stdout.contains("is not signed"), "{}", keyed.stdout);
    // A key file others can read is refused, naming it and the fix.
    let (key, _) = keygen(dir.path(), "loose");
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let refused = command(&root(), &["run", "--config", s(&cfg), "--store", s(&store)])
        .env("JOBHOST_SIGNING_KEY", &key)
        .output()
        .unwrap();
    let refused = to_run(refused);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("chmod 600"), "{}", refused.stderr);
}

#[test]
fn an_exported_run_verifies_offline_with_only_the_file_and_the_public_key() {
    let dir = scratch();
    let (key, public) = keygen(dir.path(), "signing.key");
    let cfg = signed_job(dir.path(), &key);
    let store = dir.path().join("jobhost.db");
    history_of_decisions(&cfg, s(&store));
    let file = dir.path().join("run.replay");
    let exported = jobhost(&[
        "export",
        "daily-report:2026-11-08",
        "--output",
        s(&file),
        "--store",
        s(&store),
        "--without-component",
    ]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    // Another machine: a fresh folder with the file and the public key.
    let elsewhere = scratch();
    std::fs::copy(&file, elsewhere.path().join("run.replay")).unwrap();
    std::fs::copy(&public, elsewhere.path().join("signing.pub")).unwrap();
    let offline = jobhost_in(
        elsewhere.path(),
        &[
            "verify",
            "--file",
            "run.replay",
            "--public-key",
            "signing.pub",
        ],
    );
    assert_eq!(offline.code, 0, "{}{}", offline.stdout, offline.stderr);
    assert!(
        offline
            .stdout
            .contains("its report, journal and messages are the ones committed (DONE)"),
        "{}",
        offline.stdout
    );
    assert_eq!(
        std::fs::read_dir(elsewhere.path()).unwrap().count(),
        2,
        "verifying wrote nothing"
    );
    let (_, other) = keygen(elsewhere.path(), "other");
    let wrong = jobhost_in(
        elsewhere.path(),
        &["verify", "--file", "run.replay", "--public-key", s(&other)],
    );
    assert_eq!(wrong.code, 7, "{}", wrong.stdout);
}

/// The documented Python snippet, as docs/chain.md has it.
fn python_snippet() -> String {
    let doc = std::fs::read_to_string(root().join("docs/chain.md")).unwrap();
    let after = doc
        .split("<!-- verify-message.py -->\n```python\n")
        .nth(1)
        .expect("docs/chain.md has the snippet");
    after.split("\n```").next().unwrap().to_string()
}

#[test]
fn a_signed_message_verifies_with_the_python_snippet_and_fails_for_a_changed_body() {
    let library = match jobhost_tests::tools::ensure_cryptography() {
        Ok(dir) => dir,
        Err(why) => {
            jobhost_tests::skip::missing(
                "chain::a_signed_message_verifies_with_the_python_snippet_and_fails_for_a_changed_body",
                &why,
                "python3 with pip, and the package index (.ci/run installs it)",
            );
            return;
        }
    };
    let dir = scratch();
    let (key, public) = keygen(dir.path(), "signing.key");
    let sink = Sink::start();
    let cfg = http_config(
        dir.path(),
        &format!("[signing]\nkey_file = \"{}\"", s(&key)),
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\n",
            sink.url("/digest")
        ),
    );
    let run = run_job(&cfg, dir.path().join("jobhost.db"), "2026-11-09T00:05:00Z");
    assert_eq!(run.event(), "ran", "{}", run.stderr);
    let request = sink.requests().pop().expect("one delivery");
    let header = request
        .headers
        .iter()
        .find(|(n, _)| n == "jobhost-signature")
        .map(|(_, v)| v.clone())
        .expect("a signed delivery carries Jobhost-Signature");
    assert!(
        header.starts_with("v=1; key_id=")
            && header.contains("idempotency_key=daily-report:2026-11-08#1; destination=digest;"),
        "{header}"
    );
    let body = dir.path().join("body");
    std::fs::write(&body, &request.body).unwrap();
    let mut changed = request.body.clone();
    changed.extend_from_slice(b" ");
    let changed_body = dir.path().join("changed");
    std::fs::write(&changed_body, &changed).unwrap();
    let snippet = dir.path().join("verify-message.py");
    std::fs::write(&snippet, python_snippet()).unwrap();
    assert!(python_snippet().lines().count() <= 25, "a short snippet");
    let python = |body: &Path| {
        std::process::Command::new("python3")
            .env("PYTHONPATH", &library)
            .args([s(&snippet), s(&public), &header, s(body)])
            .output()
            .unwrap()
    };
    let good = python(&body);
    assert!(
        good.status.success(),
        "{}{}",
        String::from_utf8_lossy(&good.stdout),
        String::from_utf8_lossy(&good.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&good.stdout).trim(), "verified");
    let bad = python(&changed_body);
    assert_eq!(bad.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&bad.stdout).trim(), "NOT verified");
    // The same with jobhost, and a forged field fails too.
    let ours = |header: &str, body: &Path| {
        jobhost(&[
            "verify-message",
            "--public-key",
            s(&public),
            "--signature",
            header,
            "--body",
            s(body),
        ])
    };
    let yes = ours(&header, &body);
    assert_eq!(yes.code, 0, "{}{}", yes.stdout, yes.stderr);
    let no = ours(&header, &changed_body);
    assert_eq!(no.code, 7, "{}", no.stdout);
    assert!(no.stdout.contains("not the one signed"), "{}", no.stdout);
    let forged = header.replace("destination=digest", "destination=elsewhere");
    let no = ours(&forged, &body);
    assert_eq!(no.code, 7, "{}", no.stdout);
}

#[test]
fn a_file_destinations_lines_carry_signatures_that_verify() {
    let dir = scratch();
    let (key, public) = keygen(dir.path(), "signing.key");
    let cfg = signed_job(dir.path(), &key);
    history_of_decisions(&cfg, s(&dir.path().join("jobhost.db")));
    let out = dir.path().join("out.jsonl");
    let checked = jobhost(&[
        "verify-message",
        "--public-key",
        s(&public),
        "--lines",
        s(&out),
    ]);
    assert_eq!(checked.code, 0, "{}{}", checked.stdout, checked.stderr);
    assert!(
        checked.stdout.contains("3 verified, 0 not"),
        "{}",
        checked.stdout
    );
    // A line whose figures were changed fails.
    let text = std::fs::read_to_string(&out).unwrap();
    std::fs::write(
        &out,
        text.replacen("\\\"orders\\\":", "\\\"orders\\\":1", 1),
    )
    .unwrap();
    let changed = jobhost(&[
        "verify-message",
        "--public-key",
        s(&public),
        "--lines",
        s(&out),
    ]);
    assert_eq!(changed.code, 7, "{}", changed.stdout);
    assert!(
        changed.stdout.contains("line 1: NOT verified"),
        "{}",
        changed.stdout
    );
    // A line whose signature names a key with terminal controls in it is
    // refused, and the controls never reach the terminal.
    let forged = r#"{"body":"x","signature":{"key_id":"\u001b[2Jk","idempotency_key":"k","destination":"d","body":"sha256:00","entry":"e","signature":"AA=="}}"#;
    std::fs::write(&out, format!("{forged}\n")).unwrap();
    let refused = jobhost(&[
        "verify-message",
        "--public-key",
        s(&public),
        "--lines",
        s(&out),
    ]);
    assert_eq!(refused.code, 7, "{}", refused.stdout);
    assert!(
        refused.stdout.contains("line 1: NOT verified") && !refused.stdout.contains('\u{1b}'),
        "{:?}",
        refused.stdout
    );
}

#[test]
fn a_job_whose_chain_a_frozen_host_holds_is_busy_and_a_store_in_another_schema_is_not() {
    let test =
        "chain::a_job_whose_chain_a_frozen_host_holds_is_busy_and_a_store_in_another_schema_is_not";
    let (Some(held), Some(other)) = (Scratch::new(test), Scratch::new(test)) else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let first = run_job(&cfg, held.url(), "2026-11-09T00:05:00Z");
    assert_eq!(first.event(), "ran", "{}", first.stderr);
    // A session holds the job's chain in the first store's schema, as a
    // host frozen in the middle of a transaction would (the lock jobhost
    // takes: class "jobs", the schema and the job's name).
    let mut holder = held.client();
    let mut tx = holder.transaction().unwrap();
    tx.execute(
        "SELECT pg_advisory_xact_lock(1785684595, hashtext(current_schema() || '.' || 'daily-report'))",
        &[],
    )
    .unwrap();
    let busy = run_job(&cfg, held.url(), "2026-11-10T00:05:00Z");
    assert_eq!(busy.receipt()["reason"], "busy", "{}", busy.stdout);
    // The same job in a store of another schema of the same database (and
    // a file of its own) runs.
    let dir2 = scratch();
    let cfg2 = report_config(dir2.path(), 100);
    let elsewhere = run_job(&cfg2, other.url(), "2026-11-10T00:05:00Z");
    assert_eq!(elsewhere.event(), "ran", "{}", elsewhere.stderr);
    tx.rollback().unwrap();
    let after = run_job(&cfg, held.url(), "2026-11-10T00:05:00Z");
    assert_eq!(after.event(), "ran", "{}", after.stderr);
    for store in [held.url(), other.url()] {
        assert_eq!(verify(&store, &[]).code, 0);
    }
}
