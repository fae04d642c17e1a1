//! A fleet on one PostgreSQL store: hosts racing the same windows, hosts
//! whose clocks disagree, a database that vanishes mid-run, and the errors a
//! user sees when the database cannot be reached or refuses the login. The
//! crash-injection trials on PostgreSQL are in `crashes`; the store contract
//! on both backends is in `store_contract`.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use jobhost_tests::pg::{self, Scratch};
use jobhost_tests::sink::Sink;

use crate::effects::{distinct_keys, http_config};
use crate::harness::*;

/// The reference report sending its digest to `sink`, with `limits`.
fn job(dir: &Path, sink: &Sink, limits: &str) -> std::path::PathBuf {
    http_config(
        dir,
        &format!("[limits]\n{limits}"),
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntimeout_seconds = 1\nmax_backoff_seconds = 0.5\n",
            sink.url("/digest")
        ),
    )
}

fn warm_cache() {
    let warm = scratch();
    let cfg = report_config(warm.path(), 100);
    let run = run_job(&cfg, warm.path().join("w.db"), "2026-11-09T00:05:00Z");
    assert_eq!(run.event(), "ran", "{}", run.stderr);
}

/// The test server's URL with another user, database or port.
fn variant(server: &str, user: &str, database: &str, port: Option<u16>) -> String {
    let config: postgres::Config = server.parse().expect("JOBHOST_TEST_POSTGRES is a URL");
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_string(),
    };
    let port = port.unwrap_or_else(|| config.get_ports().first().copied().unwrap_or(5432));
    format!("postgres://{user}@{host}:{port}/{database}")
}

/// A port on 127.0.0.1 with nothing listening.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Six hosts per window for three windows, all started at once on `store`:
/// each window is run by exactly one of them, the others skip it.
fn race_three_windows(cfg: &Path, store: &str, extra: &[&str]) {
    let days = ["2026-11-09", "2026-11-10", "2026-11-11"];
    let children: Vec<_> = days
        .iter()
        .flat_map(|d| std::iter::repeat_n(*d, 6))
        .map(|d| {
            job_command(cfg, store, &format!("{d}T00:05:00Z"))
                .args(extra)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let runs: Vec<Run> = children
        .into_iter()
        .map(|c| to_run(c.wait_with_output().expect("wait")))
        .collect();
    for (i, day) in days.iter().enumerate() {
        let of_day = &runs[i * 6..(i + 1) * 6];
        let events: Vec<String> = of_day.iter().map(Run::event).collect();
        assert_eq!(
            events.iter().filter(|e| *e == "ran").count(),
            1,
            "{day}: one host runs the window: {events:?}; stderr: {:?}",
            of_day.iter().map(|r| r.stderr.as_str()).collect::<Vec<_>>()
        );
        assert!(
            events.iter().all(|e| e == "ran" || e == "skipped"),
            "{events:?}"
        );
        assert!(of_day.iter().all(|r| r.code == 0), "{events:?}");
    }
}

#[test]
fn several_hosts_racing_the_same_windows_on_postgres_run_each_window_once() {
    let Some(db) = Scratch::new(
        "postgres::several_hosts_racing_the_same_windows_on_postgres_run_each_window_once",
    ) else {
        return;
    };
    warm_cache();
    let sink = Sink::start();
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "timeout_seconds = 30");
    // Three windows, six hosts each, all started at once on a schema that
    // has no tables yet: they race the migration too.
    race_three_windows(&cfg, &db.url(), &[]);
    assert_eq!(
        distinct_keys(&sink).len(),
        3,
        "one message per window, each under its own key"
    );
    assert_eq!(sink.requests().len(), 3, "and each sent once");
    let h = history(db.url());
    assert_eq!(h.len(), 3);
    assert!(
        h.iter().all(|r| r["state"] == "DONE" && r["fence"] == 1),
        "{h:?}"
    );
    let (versions, distinct): (i64, i64) = {
        let row = db
            .client()
            .query_one(
                "SELECT count(*), count(DISTINCT version) FROM jobhost_schema",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(
        (versions, distinct),
        (11, 11),
        "each of the eleven migrations was applied once"
    );
    // Eighteen hosts appended to the job's one chain: it holds, with no
    // gap and no fork, and accounts for every row.
    let verified = jobhost(&["verify", "--store", &db.url()]);
    assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
    assert!(
        verified.stdout.contains("every row accounted for"),
        "{}",
        verified.stdout
    );
}

#[test]
fn hosts_whose_clocks_disagree_by_minutes_never_take_a_live_lease() {
    let Some(db) =
        Scratch::new("postgres::hosts_whose_clocks_disagree_by_minutes_never_take_a_live_lease")
    else {
        return;
    };
    warm_cache();
    let sink = Sink::start();
    let dir = scratch();
    // A 60 s lease: far shorter than the skew between the hosts below.
    let cfg = job(
        dir.path(),
        &sink,
        "timeout_seconds = 30\nlease_seconds = 60",
    );
    // Host A's clock reads 06:00; it claims the window and stalls.
    let a = job_command(&cfg, db.url(), "2026-11-09T06:00:00Z")
        .env("JOBHOST_TEST_FAILPOINT", "after-claim:stop")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until_stopped(&a, "the failpoint");
    let claimed_at = jiff::Timestamp::now();
    // Hosts B and C read 20 minutes later and 20 minutes earlier: by B's
    // clock, A's lease ran out 19 minutes ago. The database says otherwise.
    for now in ["2026-11-09T06:20:00Z", "2026-11-09T05:40:00Z"] {
        let other = run_job(&cfg, db.url(), now);
        let r = other.receipt();
        assert_eq!(
            (r["event"].as_str(), r["reason"].as_str()),
            (Some("skipped"), Some("busy")),
            "a host at {now} must not take A's live lease: {r}"
        );
        assert_eq!(r["fence"], 1);
    }
    // The lease was set on the database's clock (now + 60 s), not on A's.
    let row = &history(db.url())[0];
    let until: jiff::Timestamp = row["lease_until"].as_str().unwrap().parse().unwrap();
    let ahead = until.duration_since(claimed_at).as_secs_f64();
    assert!(
        (30.0..=90.0).contains(&ahead),
        "the lease runs out {ahead} s after the claim, measured on the database's clock ({row})"
    );
    let done = resume(a);
    assert_eq!(done.event(), "ran", "{}", done.stderr);
    assert_eq!(sink.requests().len(), 1, "no duplicate");
    assert_eq!(history(db.url())[0]["state"], "DONE");
}

#[test]
fn a_database_that_goes_away_mid_run_fails_the_run_and_posts_nothing() {
    warm_cache();
    for boundary in ["after-claim", "after-prepare", "before-send"] {
        let Some(db) = Scratch::new(
            "postgres::a_database_that_goes_away_mid_run_fails_the_run_and_posts_nothing",
        ) else {
            return;
        };
        let sink = Sink::start();
        let dir = scratch();
        let cfg = job(dir.path(), &sink, "timeout_seconds = 2\nlease_seconds = 3");
        let a = job_command(&cfg, db.url(), "2026-11-09T00:05:00Z")
            .env("JOBHOST_TEST_FAILPOINT", format!("{boundary}:stop"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until_stopped(&a, "the failpoint");
        assert!(
            db.cut_connections() >= 1,
            "{boundary}: a connection was cut"
        );
        let failed = resume(a);
        let r = failed.receipt();
        assert_eq!(
            (
                failed.code,
                r["event"].as_str(),
                r["error"]["kind"].as_str()
            ),
            (1, Some("failed"), Some("store")),
            "{boundary}: {r}"
        );
        let message = r["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("connection to the database was lost"),
            "{boundary}: {message}"
        );
        assert_eq!(
            failed
                .stderr
                .lines()
                .filter(|l| l.starts_with("jobhost: error:"))
                .count(),
            1,
            "{}",
            failed.stderr
        );
        assert!(sink.requests().is_empty(), "{boundary}: nothing was posted");

        // The window is finished by a later invocation, once.
        let deadline = Instant::now() + Duration::from_secs(60);
        let next = loop {
            let next = run_job(&cfg, db.url(), "2026-11-09T00:06:00Z");
            if next.receipt()["reason"] != "busy" {
                break next;
            }
            assert!(Instant::now() < deadline, "the lease never ran out");
            std::thread::sleep(Duration::from_millis(250));
        };
        assert!(
            matches!(next.event().as_str(), "ran" | "resumed"),
            "{boundary}: {}",
            next.stdout
        );
        assert_eq!(sink.requests().len(), 1, "{boundary}: delivered once");
    }
}

#[test]
fn a_store_that_cannot_be_reached_is_one_line_exit_1_and_hides_the_password() {
    let dir = scratch();
    let sink = Sink::start();
    let cfg = job(dir.path(), &sink, "timeout_seconds = 30");
    let port = closed_port();
    let url = format!("postgres://jobs:hunter2-secret@127.0.0.1:{port}/jobs");
    let run = run_job(&cfg, &url, "2026-11-09T00:05:00Z");
    let r = run.receipt();
    assert_eq!(
        (run.code, r["error"]["kind"].as_str()),
        (1, Some("store")),
        "{r}"
    );
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "cannot connect to store `postgres://jobs:***@127.0.0.1:{port}/jobs`"
        )),
        "{message}"
    );
    assert!(
        message.contains("check that PostgreSQL is running"),
        "{message}"
    );
    assert_eq!(
        r["store"],
        format!("postgres://jobs:***@127.0.0.1:{port}/jobs")
    );
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    assert!(!run.stdout.contains("hunter2") && !run.stderr.contains("hunter2"));
    assert!(sink.requests().is_empty());

    let history = jobhost(&["history", "--store", &url]);
    assert_eq!(history.code, 1, "{}", history.stderr);
    assert!(
        history.stderr.contains("cannot connect to store"),
        "{}",
        history.stderr
    );
    assert!(!history.stderr.contains("hunter2"));
}

#[test]
fn a_malformed_store_url_is_bad_input() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 10);
    let run = run_job(
        &cfg,
        "postgres://jobs@127.0.0.1:notaport/jobs",
        "2026-11-09T00:05:00Z",
    );
    let r = run.receipt();
    assert_eq!(
        (run.code, r["error"]["kind"].as_str()),
        (2, Some("invalid-input")),
        "{r}"
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid store URL `postgres://jobs@127.0.0.1:notaport/jobs`"),
        "{r}"
    );
}

#[test]
fn a_refused_login_or_a_missing_database_names_the_fix() {
    let Some(server) = pg::server("postgres::a_refused_login_or_a_missing_database_names_the_fix")
    else {
        return;
    };
    let dir = scratch();
    let sink = Sink::start();
    let cfg = job(dir.path(), &sink, "timeout_seconds = 30");
    for (url, says) in [
        (
            variant(&server, "no_such_jobhost_role", "test", None),
            "check the user and password in the store URL",
        ),
        (
            variant(&server, "postgres", "no_such_jobhost_database", None),
            "create the database or fix its name in the store URL",
        ),
    ] {
        let run = run_job(&cfg, &url, "2026-11-09T00:05:00Z");
        let r = run.receipt();
        assert_eq!(
            (run.code, r["error"]["kind"].as_str()),
            (1, Some("store")),
            "{r}"
        );
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
        assert!(!message.contains('\n'));
    }
    assert!(sink.requests().is_empty());
}

#[test]
fn history_export_and_replay_read_a_postgres_store() {
    let Some(db) = Scratch::new("postgres::history_export_and_replay_read_a_postgres_store") else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 500);
    let run = run_job(&cfg, db.url(), "2026-11-09T00:05:00Z");
    assert_eq!(run.event(), "ran", "{}", run.stderr);
    // Its file destination is warned about (local-destination), its
    // store is not.
    let receipt = run.receipt();
    let kinds: Vec<&str> = receipt["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| w["kind"].as_str().unwrap())
        .collect();
    assert!(
        !kinds.contains(&"ephemeral-store"),
        "a PostgreSQL store is durable: {receipt}"
    );
    let again = run_job(&cfg, db.url(), "2026-11-09T06:00:00Z");
    assert_eq!(again.receipt()["reason"], "done");

    let h = history(db.url());
    assert_eq!(h.len(), 1);
    assert_eq!(h[0]["key"], "daily-report:2026-11-08");
    assert!(h[0]["journal_bytes"].as_u64().unwrap() > 0);
    let table = jobhost(&["history", "--store", &db.url()]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains("daily-report:2026-11-08"),
        "{}",
        table.stdout
    );

    let replay = jobhost(&[
        "replay",
        "daily-report:2026-11-08",
        "--store",
        &db.url(),
        "--component",
        s(&guests().report),
    ]);
    assert_eq!(replay.code, 0, "{}\n{}", replay.stdout, replay.stderr);
    assert!(replay.stdout.contains("identical"), "{}", replay.stdout);

    let file = dir.path().join("run.replay");
    let export = jobhost(&[
        "export",
        "daily-report:2026-11-08",
        "-o",
        s(&file),
        "--store",
        &db.url(),
        "--component",
        s(&guests().report),
    ]);
    assert_eq!(export.code, 0, "{}", export.stderr);
    assert!(file.is_file());
}

#[test]
fn history_of_a_database_without_a_store_says_so() {
    let Some(db) = Scratch::new("postgres::history_of_a_database_without_a_store_says_so") else {
        return;
    };
    let run = jobhost(&["history", "--store", &db.url()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("no jobhost store in"), "{}", run.stderr);
    let tables: i64 = db
        .client()
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "reading created nothing");
}

/// The test server's URL `server` with `password` (a `${...}` reference)
/// as its user's password, and that user.
fn with_password(server: &str, password: &str) -> (String, String) {
    let (scheme, rest) = server.split_once("://").unwrap();
    let (userinfo, host) = rest
        .split_once('@')
        .expect("JOBHOST_TEST_POSTGRES names a user");
    let user = userinfo.split(':').next().unwrap().to_string();
    (format!("{scheme}://{user}:{password}@{host}"), user)
}

#[test]
fn a_store_password_from_the_environment_reaches_the_database_and_nothing_else() {
    let Some(db) = Scratch::new(
        "postgres::a_store_password_from_the_environment_reaches_the_database_and_nothing_else",
    ) else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    // The test server trusts every login, so any password gets in; what is
    // checked is where the password shows up.
    let (url, user) = with_password(&db.url(), "${JOBHOST_TEST_PW}");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("store = \"{url}\"\n{text}")).unwrap();
    let out = command(
        &root(),
        &["run", "--config", s(&cfg), "--now", "2026-11-09T00:05:00Z"],
    )
    .env("JOBHOST_TEST_PW", "pw-0f-the-fleet")
    .output()
    .unwrap();
    let run = to_run(out);
    assert_eq!(run.event(), "ran", "{}", run.stderr);
    assert!(
        run.receipt()["store"]
            .as_str()
            .unwrap()
            .contains(&format!("{user}:***@"))
    );
    assert!(!run.stdout.contains("pw-0f") && !run.stderr.contains("pw-0f"));
    // Without the variable the config is refused before anything connects.
    let out = command(
        &root(),
        &["run", "--config", s(&cfg), "--now", "2026-11-10T00:05:00Z"],
    )
    .env_remove("JOBHOST_TEST_PW")
    .output()
    .unwrap();
    let run = to_run(out);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("${JOBHOST_TEST_PW}"), "{}", run.stderr);
}

#[test]
fn a_store_password_from_a_file_reaches_the_database_and_nothing_else() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(db) = Scratch::new(
        "postgres::a_store_password_from_a_file_reaches_the_database_and_nothing_else",
    ) else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let secret = dir.path().join("pgpassword");
    std::fs::write(&secret, "pw-in-a-file-7c2e\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The test server trusts every login: what is checked is that the URL
    // is read and where the password shows up.
    let (url, user) = with_password(&db.url(), &format!("${{file:{}}}", secret.display()));
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("store = \"{url}\"\n{text}")).unwrap();
    let run_at = |now: &str| {
        to_run(
            command(&root(), &["run", "--config", s(&cfg), "--now", now])
                .output()
                .unwrap(),
        )
    };
    let run = run_at("2026-11-09T00:05:00Z");
    assert_eq!(run.event(), "ran", "{}", run.stderr);
    let shown = run.receipt()["store"].as_str().unwrap().to_string();
    assert!(shown.contains(&format!("{user}:***@")), "{shown}");
    assert!(!run.stdout.contains("pw-in-a") && !run.stderr.contains("pw-in-a"));
    // A file every user may read is refused before anything connects.
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o604)).unwrap();
    let run = run_at("2026-11-10T00:05:00Z");
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("`store`"), "{}", run.stderr);
    assert!(run.stderr.contains("chmod o-rw"), "{}", run.stderr);
    assert!(!run.stderr.contains("pw-in-a"), "{}", run.stderr);
    assert_eq!(
        history(db.url()).len(),
        1,
        "the refused run claimed nothing"
    );
}

/// The test server's certificate file, when it speaks TLS and its file is
/// readable here; else a skip, a failure under `CI` (where `.ci/run` turns
/// TLS on in its local server, as Debian's cluster has it by default).
fn server_certificate(db: &Scratch) -> Option<String> {
    const TEST: &str = "postgres::tls_is_used_and_checked_as_sslmode_asks";
    let mut c = db.client();
    let ssl: String = c.query_one("SHOW ssl", &[]).unwrap().get(0);
    if ssl != "on" {
        jobhost_tests::skip::missing(
            TEST,
            "the test server has ssl = off",
            "turn ssl on in it (Debian's cluster has it on, with the snakeoil certificate); \
             .ci/run turns it on",
        );
        return None;
    }
    let path: String = c.query_one("SHOW ssl_cert_file", &[]).unwrap().get(0);
    if let Err(e) = std::fs::metadata(&path) {
        jobhost_tests::skip::missing(
            TEST,
            &format!("the test server's certificate {path} is not readable here ({e})"),
            "run the tests on the server's machine, as a user who can read it",
        );
        return None;
    }
    Some(path)
}

#[test]
fn tls_is_used_and_checked_as_sslmode_asks() {
    let Some(db) = Scratch::new("postgres::tls_is_used_and_checked_as_sslmode_asks") else {
        return;
    };
    let Some(cert) = server_certificate(&db) else {
        return;
    };
    warm_cache();
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    // Whether the connection of a run stalled after its claim is encrypted,
    // as the server sees it.
    let encrypted = |params: &str, day: &str| -> bool {
        let url = format!("{}&{params}", db.url());
        let child = job_command(&cfg, &url, &format!("{day}T00:05:00Z"))
            .env("JOBHOST_TEST_FAILPOINT", "after-claim:stop")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_until_stopped(&child, "the failpoint");
        let ssl: bool = db
            .client()
            .query_one(
                "SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
                 WHERE a.application_name = $1 AND a.pid <> pg_backend_pid()",
                &[&db.schema],
            )
            .unwrap()
            .get(0);
        let run = resume(child);
        assert_eq!(run.event(), "ran", "{params}: {}", run.stderr);
        ssl
    };
    assert!(!encrypted("sslmode=disable", "2026-11-09"));
    assert!(
        encrypted("sslmode=prefer", "2026-11-10"),
        "prefer encrypts when the server can"
    );
    assert!(encrypted("sslmode=require", "2026-11-11"));
    let root = format!("sslrootcert={}", cert.replace('/', "%2F"));
    assert!(encrypted(
        &format!("sslmode=verify-ca&{root}"),
        "2026-11-12"
    ));

    // verify-full checks the name: the server's certificate is not for the
    // address 127.0.0.1.
    for (params, says) in [
        (format!("sslmode=verify-full&{root}"), "not valid for name"),
        ("sslmode=verify-full".to_string(), "UnknownIssuer"),
    ] {
        // By address, whatever name the test server was given by.
        let url = format!("{}&{params}", db.url()).replace("@localhost", "@127.0.0.1");
        let run = run_job(&cfg, &url, "2026-11-13T00:05:00Z");
        let r = run.receipt();
        assert_eq!(
            (run.code, r["error"]["kind"].as_str()),
            (1, Some("store")),
            "{r}"
        );
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains("over TLS"), "{message}");
        assert!(message.contains(says), "{message}");
    }
    assert_eq!(
        history(db.url()).len(),
        4,
        "the refused runs claimed nothing"
    );
}

#[test]
fn a_store_of_a_newer_jobhost_or_a_foreign_table_is_refused_and_left_untouched() {
    let Some(db) = Scratch::new(
        "postgres::a_store_of_a_newer_jobhost_or_a_foreign_table_is_refused_and_left_untouched",
    ) else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let mut cmd = job_command(&cfg, db.url(), "2026-11-09T00:05:00Z");
    let first = to_run(cmd.arg("--require-durable-store").output().unwrap());
    assert_eq!(
        first.event(),
        "ran",
        "a PostgreSQL store is durable: {}",
        first.stderr
    );
    let mut c = db.client();
    c.batch_execute("INSERT INTO jobhost_schema (version) VALUES (99)")
        .unwrap();
    let run = run_job(&cfg, db.url(), "2026-11-10T00:05:00Z");
    let r = run.receipt();
    assert_eq!(run.code, 2, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("schema version 99, newer than this jobhost understands"),
        "{message}"
    );
    let runs: i64 = c
        .query_one("SELECT count(*) FROM jobhost_runs", &[])
        .unwrap()
        .get(0);
    assert_eq!(runs, 1, "nothing was claimed");

    // Somebody else's table of the same name, in another schema.
    let Some(other) = Scratch::new("postgres::a_store_of_a_newer_jobhost_or_a_foreign_table")
    else {
        return;
    };
    let mut c = other.client();
    c.batch_execute("CREATE TABLE jobhost_runs (id int); INSERT INTO jobhost_runs VALUES (7)")
        .unwrap();
    let run = run_job(&cfg, other.url(), "2026-11-09T00:05:00Z");
    let r = run.receipt();
    assert_eq!(run.code, 2, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has a `jobhost_runs` table but no jobhost schema version"),
        "{r}"
    );
    let tables: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "no table was added");
}

#[test]
fn several_hosts_through_a_transaction_pooler_run_each_window_once() {
    // PgBouncer in transaction mode hands each transaction to whichever
    // server connection is free: session state (advisory locks, prepared
    // statements, SET) does not survive between transactions.
    let pooler = match std::env::var("JOBHOST_TEST_PGBOUNCER") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            return jobhost_tests::skip::missing(
                "postgres::several_hosts_through_a_transaction_pooler_run_each_window_once",
                "JOBHOST_TEST_PGBOUNCER is not set",
                "set it to a PgBouncer in transaction mode in front of an empty database; \
                 .ci/run starts one and sets it",
            );
        }
    };
    warm_cache();
    let sink = Sink::start();
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "timeout_seconds = 30");
    // The pooler's database is shared by every run of this test: a job name
    // of this run's own keeps its windows apart.
    let job_name = format!(
        "pooled-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    );
    race_three_windows(&cfg, &pooler, &["--job", &job_name]);
    assert_eq!(sink.requests().len(), 3, "each window sent once");
    let mine: Vec<_> = history(&pooler)
        .into_iter()
        .filter(|r| r["job"] == job_name.as_str())
        .collect();
    assert_eq!(mine.len(), 3);
    assert!(
        mine.iter().all(|r| r["state"] == "DONE" && r["fence"] == 1),
        "{mine:?}"
    );
}

#[test]
fn a_store_in_a_schema_with_a_mixed_case_name_opens_and_keeps_its_runs() {
    let Some(server) =
        pg::server("postgres::a_store_in_a_schema_with_a_mixed_case_name_opens_and_keeps_its_runs")
    else {
        return;
    };
    let schema = format!("Jobs_Mixed_{:08x}", rand::random::<u32>());
    let mut admin = postgres::Client::connect(&server, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
        .unwrap();
    let sep = if server.contains('?') { '&' } else { '?' };
    let url = format!("{server}{sep}options=-csearch_path%3D%22{schema}%22");
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let first = run_job(&cfg, &url, "2026-11-09T00:05:00Z");
    let second = run_job(&cfg, &url, "2026-11-09T00:06:00Z");
    let tables: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1",
            &[&schema],
        )
        .unwrap()
        .get(0);
    admin
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .unwrap();
    assert_eq!(first.event(), "ran", "{}", first.stderr);
    assert_eq!(second.receipt()["reason"], "done", "{}", second.stdout);
    assert_eq!(
        tables, 18,
        "the tables (runs, outbox, cursors, schedule, digests, revisions, revision messages, \
         audit, pauses, forgotten, uses, stale, shadows, chain, chain adopted, incidents, \
         notifications, schema) went into the schema the URL \
         names"
    );
}

#[test]
fn plan_reads_a_postgres_store_and_creates_nothing_in_it() {
    let Some(db) = Scratch::new("postgres::plan_reads_a_postgres_store_and_creates_nothing_in_it")
    else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let plan = |now: &str| {
        let run = jobhost(&[
            "plan",
            "--config",
            s(&cfg),
            "--store",
            &db.url(),
            "--now",
            now,
            "--json",
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        run.stdout
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                format!(
                    "{} {}",
                    v["decision"].as_str().unwrap(),
                    v["key"].as_str().unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        plan("2026-11-09T00:05:00Z"),
        [
            "run daily-report:2026-11-08",
            "next daily-report:2026-11-09"
        ]
    );
    let tables: i64 = db
        .client()
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 0, "planning created nothing");
    let ran = run_job(&cfg, db.url(), "2026-11-09T00:05:00Z");
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    assert_eq!(
        plan("2026-11-11T00:05:00Z"),
        [
            "run daily-report:2026-11-09",
            "run daily-report:2026-11-10",
            "next daily-report:2026-11-11"
        ]
    );
}

#[test]
fn a_store_of_the_previous_version_is_migrated_keeping_its_runs_and_then_takes_skips() {
    let Some(db) = Scratch::new(
        "postgres::a_store_of_the_previous_version_is_migrated_keeping_its_runs_and_then_takes_skips",
    ) else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let first = run_job(&cfg, db.url(), "2026-11-06T00:05:00Z");
    assert_eq!(first.event(), "ran", "{}", first.stderr);
    // Back to the tables of version 1, as the previous jobhost left them.
    db.client()
        .batch_execute(
            "ALTER TABLE jobhost_runs DROP COLUMN skip_reason;
             ALTER TABLE jobhost_runs DROP COLUMN owner_process;
             DROP INDEX jobhost_runs_by_state;
             DROP TABLE jobhost_revisions, jobhost_revision_messages, jobhost_audit,
                 jobhost_pauses, jobhost_forgotten;
             DROP INDEX jobhost_runs_prunable;
             ALTER TABLE jobhost_runs DROP COLUMN revision, DROP COLUMN reason,
                 DROP COLUMN pruned_at;
             DROP TABLE jobhost_digests;
             DROP INDEX jobhost_runs_unfinished;
             ALTER TABLE jobhost_runs DROP COLUMN digest_prompt;
             ALTER TABLE jobhost_runs DROP COLUMN described;
             DROP TABLE jobhost_schedule;
             ALTER TABLE jobhost_runs DROP CONSTRAINT jobhost_runs_state_check;
             ALTER TABLE jobhost_runs ADD CONSTRAINT jobhost_runs_state_check CHECK (state IN
                 ('CLAIMED', 'PREPARED', 'DONE', 'FAILED', 'ABANDONED'));
             DROP TABLE jobhost_uses, jobhost_stale, jobhost_shadows;
             DROP TABLE jobhost_notifications, jobhost_incidents;
             DROP TABLE jobhost_chain, jobhost_chain_adopted;
             ALTER TABLE jobhost_outbox DROP COLUMN entry;
             DELETE FROM jobhost_schema WHERE version > 1;",
        )
        .unwrap();
    let refused = jobhost(&["history", "--store", &db.url()]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("run `jobhost run` with it once to upgrade it"),
        "{}",
        refused.stderr
    );
    // The daemon catches up three days later: its store is upgraded, the
    // old run kept, and the missed days decided (`latest`: one runs, the
    // others are recorded as skipped).
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("catch_up = \"latest\"\n{text}")).unwrap();
    let out = to_run(
        daemon_command(
            &[&cfg],
            &db.url(),
            "2026-11-09T00:30:00Z",
            "2026-11-09T01:00:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let states: Vec<(String, String)> = history(db.url())
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = [
        ("daily-report:2026-11-08", "DONE"),
        ("daily-report:2026-11-07", "SKIPPED"),
        ("daily-report:2026-11-06", "SKIPPED"),
        ("daily-report:2026-11-05", "DONE"),
    ];
    assert_eq!(
        states,
        want.map(|(k, v)| (k.to_string(), v.to_string())),
        "{}",
        out.stdout
    );
    let versions: Vec<i64> = db
        .client()
        .query("SELECT version FROM jobhost_schema ORDER BY version", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
}
