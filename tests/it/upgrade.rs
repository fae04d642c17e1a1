//! Old and new across a schema change (see "Upgrades" in docs/store.md).
//!
//! New on old: `tests/fixtures/upgrade/` holds a SQLite store and a
//! `pg_dump` of a PostgreSQL one, each written by the release before the
//! `owner_process` migration (`tests/upgrade/check.sh --fixture` wrote
//! them): DONE, SKIPPED and FAILED windows, a rerun's second revision, a
//! paused job. Today's binary reads them as they are (`history`, `status`,
//! `plan` migrate nothing), the first writing command migrates them, every
//! row the old release wrote is still there, and the jobs run on.
//!
//! Old on new: a store one schema version ahead of this build, as any
//! older binary sees a store a newer one migrated: every command refuses
//! it (exit 2, "upgrade jobhost"), reads included, and nothing is written;
//! the dashboard stays up and says so. (`just upgrade-check` runs the real
//! previous release against a store this build migrated.)

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

/// The release that wrote the fixtures.
const RELEASE: &str = "50fe569";

/// The runs the fixtures hold: key, state, revision.
const FIXTURE_RUNS: [(&str, &str, u64); 5] = [
    ("daily-report:2026-11-03", "DONE", 1),
    ("daily-report:2026-11-04", "SKIPPED", 1),
    ("daily-report:2026-11-05", "SKIPPED", 1),
    ("daily-report:2026-11-06", "DONE", 2),
    ("fail:2026-11-07", "FAILED", 1),
];

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures/upgrade").join(name)
}

/// The fixture's two jobs over this build's components: `daily-report`
/// (the reference report, to a file) and `fail` (a probe that refuses its
/// data).
fn configs(dir: &Path) -> (PathBuf, PathBuf) {
    let report = report_config(dir, 300);
    let fail = dir.join("fail.toml");
    std::fs::write(
        &fail,
        format!(
            "job = \"fail\"\ncomponent = \"{}\"\n\n[source]\npath = \"sales.db\"\n\
             query = \"SELECT ts FROM sales WHERE ts >= :start AND ts < :end\"\n",
            guests().probe.display()
        ),
    )
    .unwrap();
    (report, fail)
}

/// Every run as `history --json` reads it: key -> (state, revision).
fn runs(store: &str) -> BTreeMap<String, (String, u64)> {
    history(store)
        .iter()
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

/// One JSON line of stdout.
fn json(run: &Run) -> Value {
    serde_json::from_str(run.stdout.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", run.stdout, run.stderr))
}

/// The rows of every table of a store, each as text, by table.
type Rows = BTreeMap<String, BTreeSet<String>>;

/// What a backend-specific test hands the shared one.
trait Fixture {
    /// The store as `--store` takes it.
    fn store(&self) -> String;
    /// Its schema version.
    fn version(&self) -> i64;
    /// Every table's rows, each projected on `columns` of its table (all
    /// of them when the table is not named).
    fn rows(&self, columns: &BTreeMap<String, Vec<String>>) -> Rows;
    /// Every table's columns.
    fn columns(&self) -> BTreeMap<String, Vec<String>>;
}

/// The checks both backends share: reads leave the store as the previous
/// release wrote it, the first writing command migrates it to the version
/// a new store has, every earlier row survives, and the jobs run on.
fn reads_then_migrates_keeping_every_row(f: &dyn Fixture, dir: &Path, fresh_version: i64) {
    let store = f.store();
    let st = store.as_str();
    let (report, fail) = configs(dir);
    let old_version = f.version();
    assert!(
        old_version < fresh_version,
        "the fixture of {RELEASE} predates this build's schema ({old_version} vs {fresh_version})"
    );
    let old_columns = f.columns();
    let before = f.rows(&old_columns);

    // Reads: the runs as the previous release left them, nothing migrated.
    let read = runs(st);
    let expected: BTreeMap<String, (String, u64)> = FIXTURE_RUNS
        .iter()
        .map(|(k, s, r)| (k.to_string(), (s.to_string(), *r)))
        .collect();
    assert_eq!(read, expected);
    let all = jobhost(&["history", "--all", "--store", st]);
    assert_eq!(all.code, 0, "{}", all.stderr);
    assert!(
        all.stdout.contains("a second revision")
            && all.stdout.contains("paused before the upgrade"),
        "the audit lines of the rerun and the pause: {}",
        all.stdout
    );
    let detail = jobhost(&[
        "history",
        "daily-report:2026-11-06",
        "--json",
        "--store",
        st,
    ]);
    assert_eq!(detail.code, 0, "{}", detail.stderr);
    let detail = json(&detail);
    assert_eq!(detail["current"]["revision"], 2, "{detail}");
    assert_eq!(detail["earlier"].as_array().unwrap().len(), 1, "{detail}");
    let now = "2026-11-08T00:05:00Z";
    let status = jobhost(&[
        "status",
        "--json",
        "--config",
        s(&report),
        "--store",
        st,
        "--now",
        now,
    ]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    assert_eq!(json(&status)["last_done"], "daily-report:2026-11-06");
    let status = jobhost(&[
        "status",
        "--json",
        "--config",
        s(&fail),
        "--store",
        st,
        "--now",
        now,
    ]);
    assert_eq!(status.code, 4, "{}", status.stderr);
    let failed = json(&status);
    assert_eq!(failed["health"], "failed", "{failed}");
    assert_eq!(
        failed["paused"]["note"], "paused before the upgrade",
        "{failed}"
    );
    let plan = jobhost(&[
        "plan",
        "--json",
        "--config",
        s(&report),
        "--store",
        st,
        "--now",
        now,
    ]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    assert_eq!(json(&plan)["decision"], "run");
    assert_eq!(json(&plan)["key"], "daily-report:2026-11-07");
    assert_eq!(f.version(), old_version, "a read migrates nothing");
    assert_eq!(f.rows(&old_columns), before, "a read writes nothing");

    // The first writing command migrates, and runs.
    let ran = run_job(&report, st, now);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let r = ran.receipt();
    assert_eq!(
        (r["event"].as_str(), r["key"].as_str()),
        (Some("ran"), Some("daily-report:2026-11-07"))
    );
    assert_eq!(
        f.version(),
        fresh_version,
        "migrated to the version a new store has"
    );

    // Every row the previous release wrote is still there, as it was. The
    // run moved the job's cursor and counted itself, as any run does.
    let after = f.rows(&old_columns);
    for (table, rows) in &before {
        if matches!(
            table.trim_start_matches("jobhost_"),
            "cursors" | "run_counts" | "schema"
        ) {
            continue;
        }
        let kept = &after[table];
        let lost: Vec<&String> = rows.difference(kept).collect();
        assert!(lost.is_empty(), "{table}: rows changed or lost: {lost:?}");
    }
    let now_read = runs(st);
    for (key, was) in &expected {
        assert_eq!(&now_read[key], was, "{key}");
    }

    // And on: a DONE window is done, a rerun takes the third revision, the
    // paused job resumes and its failed window is tried again.
    assert_eq!(run_job(&report, st, now).event(), "skipped");
    let rerun = jobhost(&[
        "rerun",
        "daily-report:2026-11-06",
        "--config",
        s(&report),
        "--store",
        st,
        "--reason",
        "after the upgrade",
        "--now",
        now,
    ]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    assert_eq!(rerun.receipt()["revision"], 3);
    let resumed = jobhost(&["resume", "fail", "--store", st]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let retry = jobhost(&[
        "retry",
        "fail:2026-11-07",
        "--config",
        s(&fail),
        "--store",
        st,
        "--now",
        now,
    ]);
    let r = retry.receipt();
    assert_eq!(r["error"]["kind"], "guest-error", "{r}");
    assert_eq!(r["fence"], 2, "{r}");
    let status = jobhost(&[
        "status",
        "--json",
        "--config",
        s(&report),
        "--store",
        st,
        "--now",
        now,
    ]);
    assert_eq!(json(&status)["health"], "healthy", "{}", status.stdout);

    // The rows the previous release wrote are adopted by the chain, which
    // covers what happened since: the store verifies.
    let verified = jobhost(&["verify", "--store", st]);
    assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
    assert!(
        verified
            .stdout
            .contains("from before the chain (covered from their next change)")
            && verified.stdout.contains("every row accounted for"),
        "{}",
        verified.stdout
    );
}

// ---- SQLite ----

struct SqliteFixture(PathBuf);

impl SqliteFixture {
    fn conn(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(&self.0, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap()
    }
}

impl Fixture for SqliteFixture {
    fn store(&self) -> String {
        s(&self.0).to_string()
    }

    fn version(&self) -> i64 {
        sqlite_version(&self.0)
    }

    fn columns(&self) -> BTreeMap<String, Vec<String>> {
        let c = self.conn();
        let mut q = c
            .prepare(
                "SELECT m.name, p.name FROM sqlite_schema m, pragma_table_info(m.name) p
                 WHERE m.type = 'table' ORDER BY m.name, p.cid",
            )
            .unwrap();
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for row in q
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .unwrap()
        {
            let (t, col) = row.unwrap();
            out.entry(t).or_default().push(col);
        }
        out
    }

    fn rows(&self, columns: &BTreeMap<String, Vec<String>>) -> Rows {
        let moved = self.columns()["runs"].contains(&"skip_reason".to_string());
        let c = self.conn();
        columns
            .iter()
            .map(|(table, cols)| {
                let list = cols
                    .iter()
                    .map(|c| match (table.as_str(), c.as_str()) {
                        // The reason v8 moved out of `error`, where the
                        // previous release kept it.
                        ("runs", "error") if moved => "coalesce(error, skip_reason)".to_string(),
                        _ => format!("\"{c}\""),
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let mut q = c
                    .prepare(&format!("SELECT {list} FROM \"{table}\""))
                    .unwrap();
                let n = cols.len();
                let rows = q
                    .query_map([], |r| {
                        (0..n)
                            .map(|i| r.get::<_, rusqlite::types::Value>(i).map(|v| shown(&v)))
                            .collect::<Result<Vec<_>, _>>()
                            .map(|v| v.join(" | "))
                    })
                    .unwrap()
                    .collect::<Result<BTreeSet<_>, _>>()
                    .unwrap();
                (table.clone(), rows)
            })
            .collect()
    }
}

/// A value as a row's text shows it: a blob by its length and digest.
fn shown(v: &rusqlite::types::Value) -> String {
    use sha2::Digest;
    match v {
        rusqlite::types::Value::Blob(b) => {
            format!(
                "Blob({} bytes, sha256 {})",
                b.len(),
                hex::encode(sha2::Sha256::digest(b))
            )
        }
        other => format!("{other:?}"),
    }
}

fn sqlite_version(path: &Path) -> i64 {
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// The schema version this build gives a new SQLite store.
fn fresh_sqlite_version(dir: &Path) -> i64 {
    std::fs::create_dir_all(dir).unwrap();
    let store = dir.join("fresh.db");
    let cfg = report_config(dir, 10);
    assert_eq!(run_job(&cfg, &store, "2026-11-09T00:05:00Z").event(), "ran");
    sqlite_version(&store)
}

#[test]
fn a_sqlite_store_of_the_previous_release_is_read_as_it_is_then_migrated_by_the_first_writing_command_keeping_every_row()
 {
    let dir = scratch();
    let fresh = fresh_sqlite_version(&dir.path().join("fresh"));
    let store = dir.path().join("jobhost.db");
    std::fs::copy(fixture(&format!("sqlite-{RELEASE}.db")), &store).unwrap();
    let f = SqliteFixture(store);
    reads_then_migrates_keeping_every_row(&f, dir.path(), fresh);
    // What the previous release's claims recorded of their process: nothing.
    let unrecorded: i64 = f
        .conn()
        .query_row(
            "SELECT count(*) FROM runs WHERE key IN ('daily-report:2026-11-03', \
             'daily-report:2026-11-05') AND owner_process IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(unrecorded, 2);
}

// ---- PostgreSQL ----

struct PgFixture(jobhost_tests::pg::Scratch);

impl Fixture for PgFixture {
    fn store(&self) -> String {
        self.0.url()
    }

    fn version(&self) -> i64 {
        self.0
            .client()
            .query_one("SELECT max(version)::int8 FROM jobhost_schema", &[])
            .unwrap()
            .get(0)
    }

    fn columns(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for row in self
            .0
            .client()
            .query(
                "SELECT table_name::text, column_name::text FROM information_schema.columns
                 WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position",
                &[],
            )
            .unwrap()
        {
            out.entry(row.get(0)).or_default().push(row.get(1));
        }
        out
    }

    fn rows(&self, columns: &BTreeMap<String, Vec<String>>) -> Rows {
        let now = self.columns();
        let mut c = self.0.client();
        columns
            .iter()
            .map(|(table, cols)| {
                // The row as JSON without the columns added since.
                let added: Vec<String> = now[table]
                    .iter()
                    .filter(|c| !cols.contains(c))
                    .cloned()
                    .collect();
                // The reason v7 moved out of `error`, where the previous
                // release kept it.
                let moved = if table == "jobhost_runs" && added.contains(&"skip_reason".into()) {
                    " || jsonb_build_object('error', coalesce(t.error, t.skip_reason))"
                } else {
                    ""
                };
                let rows = c
                    .query(
                        &format!("SELECT (to_jsonb(t) - $1::text[]{moved})::text FROM {table} t"),
                        &[&added],
                    )
                    .unwrap()
                    .iter()
                    .map(|r| r.get::<_, String>(0))
                    .collect();
                (table.clone(), rows)
            })
            .collect()
    }
}

/// The statements of a plain `pg_dump --inserts` of schema
/// `jobhost_fixture`, for the schema `into`: without psql's meta-commands,
/// the session settings and the schema's creation.
fn restorable(dump: &str, into: &str) -> String {
    dump.lines()
        .filter(|l| {
            !(l.starts_with('\\')
                || l.starts_with("--")
                || l.starts_with("SET ")
                || l.starts_with("SELECT pg_catalog.set_config(")
                || l.starts_with("CREATE SCHEMA "))
        })
        .collect::<Vec<_>>()
        .join("\n")
        .replace("jobhost_fixture", into)
}

#[test]
fn a_postgres_store_of_the_previous_release_is_read_as_it_is_then_migrated_by_the_first_writing_command_keeping_every_row()
 {
    let Some(fresh) = jobhost_tests::pg::Scratch::new(
        "a_postgres_store_of_the_previous_release_is_read_as_it_is_then_migrated",
    ) else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 10);
    assert_eq!(
        run_job(&cfg, fresh.url(), "2026-11-09T00:05:00Z").event(),
        "ran"
    );
    let fresh_version = PgFixture(fresh).version();

    let db = jobhost_tests::pg::Scratch::new("a_postgres_store_of_the_previous_release").unwrap();
    let dump = std::fs::read_to_string(fixture(&format!("postgres-{RELEASE}.sql"))).unwrap();
    db.client()
        .batch_execute(&restorable(&dump, &db.schema))
        .unwrap_or_else(|e| panic!("restoring the dump: {e}"));
    let f = PgFixture(db);
    let work = scratch();
    reads_then_migrates_keeping_every_row(&f, work.path(), fresh_version);
}

// ---- Old on new ----

/// A store this build wrote, then moved one schema version ahead, as a
/// newer jobhost's migration would (a column an older binary does not know
/// of, and the version).
fn one_version_ahead(dir: &Path) -> (PathBuf, PathBuf, i64) {
    let store = dir.join("jobhost.db");
    let cfg = report_config(dir, 100);
    assert_eq!(run_job(&cfg, &store, "2026-11-09T00:05:00Z").event(), "ran");
    let known = sqlite_version(&store);
    let c = rusqlite::Connection::open(&store).unwrap();
    c.execute_batch(&format!(
        "ALTER TABLE runs ADD COLUMN from_the_future TEXT; PRAGMA user_version = {};",
        known + 1
    ))
    .unwrap();
    (store, cfg, known)
}

/// Every row of every table, as text.
fn everything(store: &Path) -> Rows {
    let f = SqliteFixture(store.to_path_buf());
    f.rows(&f.columns())
}

#[test]
fn a_store_one_schema_version_ahead_is_refused_by_every_command_reads_included_and_left_as_it_was()
{
    let dir = scratch();
    let (store, cfg, known) = one_version_ahead(dir.path());
    let (st, c) = (s(&store), s(&cfg));
    let before = everything(&store);
    let now = "2026-11-10T00:05:00Z";
    let says = format!(
        "store `{st}` has schema version {}, newer than this jobhost understands ({known}); upgrade jobhost",
        known + 1
    );
    let commands: Vec<Vec<&str>> = vec![
        // Writing commands.
        vec!["run", "--config", c, "--store", st, "--now", now],
        vec![
            "daemon", "--config", c, "--store", st, "--now", now, "--until", now,
        ],
        vec![
            "backfill",
            "--config",
            c,
            "--store",
            st,
            "--from",
            "2026-11-01",
            "--to",
            "2026-11-03",
            "--now",
            now,
        ],
        vec![
            "rerun",
            "daily-report:2026-11-08",
            "--config",
            c,
            "--store",
            st,
            "--reason",
            "x",
            "--now",
            now,
        ],
        vec![
            "retry",
            "daily-report:2026-11-08",
            "--config",
            c,
            "--store",
            st,
            "--now",
            now,
        ],
        vec![
            "forget",
            "daily-report:2026-11-08",
            "--reason",
            "x",
            "--store",
            st,
        ],
        vec!["pause", "daily-report", "--note", "x", "--store", st],
        vec!["resume", "daily-report", "--store", st],
        vec!["prune", "--older-than", "1d", "--store", st],
        // Reads: they refuse too, rather than guess what the newer
        // version's rows mean.
        vec!["history", "--store", st],
        vec!["status", "--config", c, "--store", st, "--now", now],
        vec!["plan", "--config", c, "--store", st, "--now", now],
        vec![
            "export",
            "daily-report:2026-11-08",
            "--output",
            "x.replay",
            "--store",
            st,
        ],
        vec!["replay", "daily-report:2026-11-08", "--store", st],
    ];
    for args in &commands {
        let r = jobhost_in(dir.path(), args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(&says), "{args:?}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{args:?}: {}", r.stderr);
    }
    // A monitor's plugin says UNKNOWN with the reason.
    let nagios = jobhost(&[
        "status", "--nagios", "--config", c, "--store", st, "--now", now,
    ]);
    assert_eq!(nagios.code, 3, "{}", nagios.stderr);
    assert!(
        nagios.stdout.starts_with("JOBHOST UNKNOWN - ") && nagios.stdout.contains(&says),
        "{}",
        nagios.stdout
    );
    assert_eq!(sqlite_version(&store), known + 1, "nothing migrated back");
    assert_eq!(everything(&store), before, "nothing written");
    assert!(!dir.path().join("x.replay").exists());

    // The dashboard stays up, and says it.
    let srv = crate::dashboard::serve(&["serve", "--config", c, "--store", st, "--now", now]);
    assert_eq!(
        crate::dashboard::get(&srv.addr, "/healthz", &[]).status,
        200
    );
    let metrics = crate::dashboard::get(&srv.addr, "/metrics", &[]);
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .body
            .contains(&format!("jobhost_store_up{{store=\"{st}\"}} 0")),
        "{}",
        metrics.body
    );
    let page = crate::dashboard::get(&srv.addr, "/jobs.json", &[]);
    assert_eq!(page.status, 503);
    assert!(page.body.contains("upgrade jobhost"), "{}", page.body);
}

#[test]
fn a_postgres_store_one_schema_version_ahead_is_refused_by_every_command_reads_included() {
    let Some(db) = jobhost_tests::pg::Scratch::new(
        "a_postgres_store_one_schema_version_ahead_is_refused_by_every_command_reads_included",
    ) else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let url = db.url();
    assert_eq!(run_job(&cfg, &url, "2026-11-09T00:05:00Z").event(), "ran");
    let mut client = db.client();
    let known: i64 = client
        .query_one("SELECT max(version)::int8 FROM jobhost_schema", &[])
        .unwrap()
        .get(0);
    client
        .batch_execute(&format!(
            "ALTER TABLE jobhost_runs ADD COLUMN from_the_future text;
             INSERT INTO jobhost_schema (version) VALUES ({})",
            known + 1
        ))
        .unwrap();
    let (c, now) = (s(&cfg), "2026-11-10T00:05:00Z");
    let says = format!(
        "has schema version {}, newer than this jobhost understands ({known}); upgrade jobhost",
        known + 1
    );
    for args in [
        vec!["run", "--config", c, "--store", &url, "--now", now],
        vec![
            "daemon", "--config", c, "--store", &url, "--now", now, "--until", now,
        ],
        vec!["pause", "daily-report", "--note", "x", "--store", &url],
        vec!["history", "--store", &url],
        vec!["status", "--config", c, "--store", &url, "--now", now],
        vec!["plan", "--config", c, "--store", &url, "--now", now],
    ] {
        let r = jobhost(&args);
        assert_eq!(r.code, 2, "{}: {}", args[0], r.stderr);
        assert!(r.stderr.contains(&says), "{}: {}", args[0], r.stderr);
    }
    let counts: (i64, i64) = {
        let row = client
            .query_one(
                "SELECT (SELECT count(*) FROM jobhost_runs), (SELECT count(*) FROM jobhost_pauses)",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(counts, (1, 0), "nothing claimed, nothing paused");
}
