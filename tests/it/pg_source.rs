//! A job whose rows come from PostgreSQL (`[source] type = "postgres"`):
//! the reference report says the same as over the same rows in SQLite, a
//! zone's day is its own length on the days the clocks change, every type
//! the source reads arrives as the guest's kinds with its NULLs, the types
//! it does not read are refused naming a cast, a time without a zone is
//! refused unless `naive_timestamps` says how to read it (and then read
//! where the server's own filter puts it), bad input claims nothing,
//! a query past the time limit is cancelled on the server, a window of any
//! size streams in bounded memory, and a run replays with its table gone.
//! Each test has a schema of its own on the server `JOBHOST_TEST_POSTGRES`
//! names, and skips loudly without one.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use jobhost::guest::source::postgres::PostgresSpec;
use jobhost::guest::source::{SourceAccess, SourceError};
use jobhost::store::PostgresUrl;
use jobhost_tests::pg::Scratch;
use serde_json::Value;

use crate::harness::*;

const NOW: &str = "2026-11-09T00:05:00Z";
const KEY: &str = "daily-report:2026-11-08";

/// The reference report's query over the `sales` table, by its
/// `timestamptz` column.
const SALES_BY_TIME: &str = "SELECT created_at AS ts, region, product, quantity, amount \
     FROM sales WHERE created_at >= $1 AND created_at < $2 ORDER BY created_at, id";

/// A config for `component` (run as job `job`, the probe's mode) reading
/// `query` from the database at `url`, delivering to `out.jsonl`; `top`
/// holds more top-level keys, `extra` more tables.
fn pg_config(
    dir: &Path,
    job: &str,
    component: &Path,
    url: &str,
    query: &str,
    top: &str,
    extra: &str,
) -> std::path::PathBuf {
    config(
        dir,
        &format!(
            "job = \"{job}\"\ncomponent = \"{}\"\n{top}\n[source]\ntype = \"postgres\"\nurl = {}\nquery = {}\n\n\
             [destinations.digest]\ntype = \"file\"\npath = \"out.jsonl\"\n{extra}",
            component.display(),
            toml_str(url),
            toml_str(query),
        ),
    )
}

/// `text` as a TOML basic string.
fn toml_str(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}

/// Copies the sales of the SQLite file `sqlite` into a table `sales` of
/// `db` that keeps the time both as Unix seconds (`ts`) and as
/// `timestamptz` (`created_at`).
fn load_sales(db: &Scratch, sqlite: &Path) -> usize {
    let mut c = db.client();
    c.batch_execute(
        "CREATE TABLE sales (id int8 PRIMARY KEY, ts int8 NOT NULL, created_at timestamptz NOT NULL,
         region text NOT NULL, product text NOT NULL, quantity int4 NOT NULL, amount float8 NOT NULL)",
    )
    .unwrap();
    let lite = rusqlite::Connection::open(sqlite).unwrap();
    let mut stmt = lite
        .prepare("SELECT id, ts, region, product, quantity, amount FROM sales ORDER BY id")
        .unwrap();
    let mut copy = c
        .copy_in("COPY sales (id, ts, created_at, region, product, quantity, amount) FROM STDIN")
        .unwrap();
    let mut n = 0;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, f64>(5)?,
            ))
        })
        .unwrap();
    for row in rows {
        let (id, ts, region, product, quantity, amount) = row.unwrap();
        let at = jiff::Timestamp::from_second(ts).unwrap();
        // `{:?}` writes the shortest text that reads back as the same double.
        writeln!(
            copy,
            "{id}\t{ts}\t{at}\t{region}\t{product}\t{quantity}\t{amount:?}"
        )
        .unwrap();
        n += 1;
    }
    copy.finish().unwrap();
    n
}

/// The summary the probe's `echo` mode wrote: columns and rows.
fn echoed(run: &Run) -> (Vec<(String, String)>, Vec<Vec<Value>>) {
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{r}\n{}", run.stderr);
    let summary: Value = serde_json::from_str(r["report"]["summary"].as_str().unwrap()).unwrap();
    let columns = summary["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let rows = summary["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_array().unwrap().clone())
        .collect();
    (columns, rows)
}

/// A refused run: exit 2, a failed receipt, one error line, and no run in
/// `store`; returns the error message.
fn refused(run: &Run, store: &Path) -> String {
    let r = run.receipt();
    assert_eq!(
        (run.code, r["event"].as_str()),
        (2, Some("failed")),
        "{r}\n{}",
        run.stderr
    );
    assert_eq!(r["error"]["kind"], "invalid-input", "{r}");
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("jobhost: error:"))
        .collect();
    assert_eq!(lines.len(), 1, "one error line: {}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    if store.is_file() {
        assert!(history(store).is_empty(), "nothing was claimed");
    }
    r["error"]["message"].as_str().unwrap().to_string()
}

#[test]
fn the_reference_report_says_the_same_from_postgresql_as_from_sqlite() {
    let Some(db) = Scratch::new(
        "pg_source::the_reference_report_says_the_same_from_postgresql_as_from_sqlite",
    ) else {
        return;
    };
    let lite = scratch();
    let cfg = report_config(lite.path(), 5000);
    let from_sqlite = run_job(&cfg, lite.path().join("s.db"), NOW);
    assert_eq!(from_sqlite.event(), "ran", "{}", from_sqlite.stderr);
    assert_eq!(load_sales(&db, &lite.path().join("sales.db")), 5000);

    // By the `timestamptz` column and $1/$2, and by Unix seconds and $3/$4.
    for query in [
        SALES_BY_TIME.to_string(),
        "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= $3 AND ts < $4 \
         ORDER BY ts, id"
            .to_string(),
    ] {
        let dir = scratch();
        let cfg = pg_config(
            dir.path(),
            "daily-report",
            &guests().report,
            &db.url(),
            &query,
            "",
            "",
        );
        let from_pg = run_job(&cfg, dir.path().join("s.db"), NOW);
        assert_eq!(from_pg.event(), "ran", "{query}: {}", from_pg.stderr);
        assert_eq!(
            from_pg.receipt()["stats"]["rows"],
            from_sqlite.receipt()["stats"]["rows"],
            "{query}: the same rows"
        );
        assert_eq!(
            from_pg.receipt()["report"]["summary"],
            from_sqlite.receipt()["report"]["summary"],
            "{query}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out.jsonl")).unwrap(),
            std::fs::read_to_string(lite.path().join("out.jsonl")).unwrap(),
            "{query}: the same message"
        );
    }
}

#[test]
fn a_berlin_day_is_23_and_25_hours_long_on_the_days_the_clocks_change() {
    let Some(db) = Scratch::new(
        "pg_source::a_berlin_day_is_23_and_25_hours_long_on_the_days_the_clocks_change",
    ) else {
        return;
    };
    let mut c = db.client();
    // A row every half hour around both change days.
    c.batch_execute(
        "CREATE TABLE events (at timestamptz NOT NULL);
         INSERT INTO events SELECT g FROM generate_series(
             '2026-03-28 20:00Z'::timestamptz, '2026-03-30 04:00Z', '30 minutes') g;
         INSERT INTO events SELECT g FROM generate_series(
             '2026-10-24 18:00Z'::timestamptz, '2026-10-26 04:00Z', '30 minutes') g;",
    )
    .unwrap();
    let query = "SELECT at, $3 AS start_s, $4 AS end_s, $5 AS start_ms, $6 AS end_ms \
                 FROM events WHERE at >= $1 AND at < $2 ORDER BY at";
    for (now, day, hours) in [
        ("2026-03-30T01:00:00Z", "2026-03-29", 23),
        ("2026-10-26T01:00:00Z", "2026-10-25", 25),
    ] {
        let dir = scratch();
        let cfg = pg_config(
            dir.path(),
            "echo",
            &guests().probe,
            &db.url(),
            query,
            "timezone = \"Europe/Berlin\"\n",
            "",
        );
        let run = run_job(&cfg, dir.path().join("s.db"), now);
        assert_eq!(
            run.receipt()["key"],
            format!("echo:{day}"),
            "{}",
            run.stderr
        );
        let (columns, rows) = echoed(&run);
        assert_eq!(
            columns,
            ["at", "start_s", "end_s", "start_ms", "end_ms"]
                .map(|c| (c.to_string(), "integer".to_string()))
        );
        let start: jiff::ZonedDateTime = format!("{day}T00:00[Europe/Berlin]").parse().unwrap();
        let end = start.tomorrow().unwrap();
        let (start, end) = (start.timestamp().as_second(), end.timestamp().as_second());
        assert_eq!(end - start, hours * 3600, "{day}");
        assert_eq!(
            rows.len() as i64,
            hours * 2,
            "{day}: a row per half hour of the day"
        );
        let first = &rows[0];
        assert_eq!(
            first[0], start,
            "{day}: from the zone's midnight, as Unix seconds"
        );
        assert_eq!(rows.last().unwrap()[0], end - 1800);
        assert_eq!(
            first[1..],
            [start, end, start * 1000, end * 1000].map(Value::from),
            "{day}: the window as bound"
        );
    }
}

#[test]
fn every_type_the_source_reads_reaches_the_guest_with_its_nulls() {
    let Some(db) =
        Scratch::new("pg_source::every_type_the_source_reads_reaches_the_guest_with_its_nulls")
    else {
        return;
    };
    let mut c = db.client();
    c.batch_execute(
        "CREATE TYPE mood AS ENUM ('sad', 'happy');
         CREATE DOMAIN small_count AS int4 CHECK (VALUE >= 0);
         CREATE TABLE t (
             ts timestamptz NOT NULL, i2 int2, i4 int4, i8 int8, o oid, b bool, f4 float4,
             f8 float8, n numeric, t text, vc varchar(5), bp char(4), nm name, j json,
             jb jsonb, u uuid, e mood, by bytea, tz timestamptz, tsn timestamp, d date,
             dom small_count);
         INSERT INTO t VALUES ('2026-11-08 10:00Z', -2, 2147483647, -9223372036854775808,
             4294967295, true, 1.5, 0.1, 12345678901234567.89, 'héllo', 'ab', 'ab', 'nm',
             '{\"a\":  1}', '{\"a\":  1}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'happy',
             '\\xdeadbeef', '2026-11-08 12:00:00.9Z', '2026-11-08 12:00:00', '2026-11-08', 7);
         INSERT INTO t (ts) VALUES ('2026-11-08 11:00Z');",
    )
    .unwrap();
    let query = "SELECT i2, i4, i8, o, b, f4, f8, n, n::text AS exact, t, vc, bp, nm, j, jb, u, \
                 e, by, tz, tsn, d, dom FROM t WHERE ts >= $1 AND ts < $2 ORDER BY ts";
    let dir = scratch();
    let cfg = pg_config(
        dir.path(),
        "echo",
        &guests().probe,
        &db.url(),
        query,
        "",
        "",
    );
    with_source_line(&cfg, "naive_timestamps = \"utc\"");
    let (columns, rows) = echoed(&run_job(&cfg, dir.path().join("s.db"), NOW));
    let kinds: Vec<&str> = columns.iter().map(|(_, k)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "integer", "integer", "integer", "integer", "integer", "real", "real", "real", "text",
            "text", "text", "text", "text", "text", "text", "text", "text", "blob", "integer",
            "integer", "integer", "integer"
        ]
    );
    let noon = 1_794_139_200; // 2026-11-08T12:00:00Z
    let expected: Vec<Value> = vec![
        (-2).into(),
        2_147_483_647.into(),
        i64::MIN.into(),
        4_294_967_295u32.into(),
        1.into(),
        1.5.into(),
        0.1.into(),
        // More digits than a double holds: the nearest double; as text, exact.
        12_345_678_901_234_568.0.into(),
        "12345678901234567.89".into(),
        "héllo".into(),
        "ab".into(),
        "ab  ".into(),
        "nm".into(),
        "{\"a\":  1}".into(),
        "{\"a\": 1}".into(),
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into(),
        "happy".into(),
        "deadbeef".into(),
        noon.into(),
        noon.into(),
        (noon - 12 * 3600).into(),
        7.into(),
    ];
    assert_eq!(rows.len(), 2);
    for (i, (name, _)) in columns.iter().enumerate() {
        assert_eq!(rows[0][i], expected[i], "column {name}");
        assert_eq!(
            rows[1][i],
            Value::Null,
            "column {name} is NULL in the second row"
        );
    }
}

#[test]
fn a_type_the_source_does_not_read_is_refused_naming_a_cast() {
    let Some(db) =
        Scratch::new("pg_source::a_type_the_source_does_not_read_is_refused_naming_a_cast")
    else {
        return;
    };
    db.client()
        .batch_execute(
            "CREATE TABLE t (ts timestamptz, price money, took interval, host inet, tags text[]);",
        )
        .unwrap();
    for (column, cast) in [
        ("price", "price::numeric AS price"),
        ("took", "extract(epoch FROM took) AS took"),
        ("host", "host::text AS host"),
        ("tags", "tags::text AS tags"),
    ] {
        let dir = scratch();
        let query = format!("SELECT {column} FROM t WHERE ts >= $1 AND ts < $2");
        let cfg = pg_config(
            dir.path(),
            "echo",
            &guests().probe,
            &db.url(),
            &query,
            "",
            "",
        );
        let store = dir.path().join("s.db");
        let message = refused(&run_job(&cfg, &store, NOW), &store);
        assert!(
            message.contains(&format!("column `{column}` is of type")),
            "{message}"
        );
        assert!(message.contains(&format!("`{cast}`")), "{message}");

        // The cast it names is read.
        let query = format!("SELECT {cast} FROM t WHERE ts >= $1 AND ts < $2");
        let cfg = pg_config(
            dir.path(),
            "echo",
            &guests().probe,
            &db.url(),
            &query,
            "",
            "",
        );
        let (columns, rows) = echoed(&run_job(&cfg, &store, NOW));
        assert_eq!(columns[0].0, column);
        assert!(rows.is_empty());
    }
}

/// A port on 127.0.0.1 with nothing listening.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// A server that asks for a password and refuses whatever it is given, as
/// PostgreSQL does (`28P01`); returns its port.
fn refusing_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut s) = stream else { continue };
            let message = |s: &mut std::net::TcpStream| -> Option<Vec<u8>> {
                let mut len = [0u8; 4];
                s.read_exact(&mut len).ok()?;
                let n = (u32::from_be_bytes(len) as usize)
                    .saturating_sub(4)
                    .min(1 << 16);
                let mut body = vec![0u8; n];
                s.read_exact(&mut body).ok()?;
                Some(body)
            };
            let Some(mut startup) = message(&mut s) else {
                continue;
            };
            if startup.starts_with(&80_877_103u32.to_be_bytes()) {
                // An SSLRequest: no TLS here.
                let _ = s.write_all(b"N");
                let Some(next) = message(&mut s) else {
                    continue;
                };
                startup = next;
            }
            drop(startup);
            // AuthenticationCleartextPassword, then the password message.
            let _ = s.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]);
            let mut tag = [0u8; 1];
            if s.read_exact(&mut tag).is_err() || message(&mut s).is_none() {
                continue;
            }
            let mut fields = Vec::new();
            for (code, text) in [
                (b'S', "FATAL"),
                (b'V', "FATAL"),
                (b'C', "28P01"),
                (b'M', "password authentication failed for user \"reporter\""),
            ] {
                fields.push(code);
                fields.extend_from_slice(text.as_bytes());
                fields.push(0);
            }
            fields.push(0);
            let mut out = vec![b'E'];
            out.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
            out.extend_from_slice(&fields);
            let _ = s.write_all(&out);
        }
    });
    port
}

#[test]
fn bad_source_input_is_one_line_exit_2_claims_nothing_and_hides_the_password() {
    let Some(db) = Scratch::new(
        "pg_source::bad_source_input_is_one_line_exit_2_claims_nothing_and_hides_the_password",
    ) else {
        return;
    };
    db.client()
        .batch_execute("CREATE TABLE sales (id int8, created_at timestamptz, amount float8)")
        .unwrap();
    let good = "SELECT created_at, amount FROM sales WHERE created_at >= $1 AND created_at < $2";
    let tls = format!("{}&sslmode=verify-full", db.url()).replace("@localhost", "@127.0.0.1");
    let closed = format!(
        "postgres://reporter:hunter2-secret@127.0.0.1:{}/sales",
        closed_port()
    );
    let refusing = format!(
        "postgres://reporter:hunter2-secret@127.0.0.1:{}/sales?sslmode=disable",
        refusing_server()
    );
    for (url, query, says) in [
        (
            closed.as_str(),
            good,
            "cannot connect to data source `postgres://reporter:***@127.0.0.1:",
        ),
        (
            refusing.as_str(),
            good,
            "check the user and password in `source.url`",
        ),
        (
            "postgres://reporter:${JOBHOST_TEST_UNSET_SOURCE_PW}@127.0.0.1/sales",
            good,
            "`source.url` uses `${JOBHOST_TEST_UNSET_SOURCE_PW}`, which is not set",
        ),
        (tls.as_str(), good, "over TLS"),
        (
            &db.url(),
            "SELECT created_at, amount\nFROM nope WHERE created_at >= $1 AND created_at < $2",
            "relation \"nope\" does not exist (42P01) at line 2, column 6 (`nope WHERE",
        ),
        (
            &db.url(),
            "SELECT created_at, nope FROM sales WHERE created_at >= $1 AND created_at < $2",
            "column \"nope\" does not exist (42703) at line 1, column 20 (`nope FROM sales",
        ),
        (
            &db.url(),
            "SELECT created_at, amount FROM sales WHERE created_at >= $1",
            "a start and an end",
        ),
        (
            &db.url(),
            "DELETE FROM sales WHERE created_at >= $1 AND created_at < $2",
            "starts with `DELETE`",
        ),
        (
            &db.url(),
            "SELECT created_at FROM sales WHERE created_at >= $1 AND created_at < $2 AND id = $7",
            "unknown parameter `$7`",
        ),
    ] {
        let dir = scratch();
        let cfg = pg_config(
            dir.path(),
            "daily-report",
            &guests().report,
            url,
            query,
            "",
            "",
        );
        let store = dir.path().join("s.db");
        let run = run_job(&cfg, &store, NOW);
        let message = refused(&run, &store);
        assert!(message.contains(says), "{url} {query}: {message}");
        assert!(
            !run.stdout.contains("hunter2") && !run.stderr.contains("hunter2"),
            "{message}"
        );
    }
}

#[test]
fn a_write_in_the_query_fails_with_postgresqls_own_error() {
    let Some(db) = Scratch::new("pg_source::a_write_in_the_query_fails_with_postgresqls_own_error")
    else {
        return;
    };
    let mut c = db.client();
    c.batch_execute(
        "CREATE TABLE sales (id int8, created_at timestamptz, amount float8);
         INSERT INTO sales VALUES (1, '2026-11-08 10:00Z', 1.0);",
    )
    .unwrap();
    let dir = scratch();
    let query = "WITH gone AS (DELETE FROM sales RETURNING *) \
                 SELECT created_at FROM gone WHERE created_at >= $1 AND created_at < $2";
    let cfg = pg_config(
        dir.path(),
        "echo",
        &guests().probe,
        &db.url(),
        query,
        "",
        "",
    );
    let run = run_job(&cfg, dir.path().join("s.db"), NOW);
    let r = run.receipt();
    assert_eq!(run.code, 1, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    // The statement that ran is a SELECT: PostgreSQL names it so.
    assert!(
        message.contains(
            "the source query failed: cannot execute SELECT in a read-only transaction (25006)"
        ),
        "{message}"
    );
    assert_eq!(history(dir.path().join("s.db"))[0]["state"], "FAILED");
    let left: i64 = c
        .query_one("SELECT count(*) FROM sales", &[])
        .unwrap()
        .get(0);
    assert_eq!(left, 1, "nothing was deleted");
}

#[test]
fn a_query_past_the_time_limit_is_cancelled_on_the_server_and_fails_the_run() {
    let Some(db) = Scratch::new(
        "pg_source::a_query_past_the_time_limit_is_cancelled_on_the_server_and_fails_the_run",
    ) else {
        return;
    };
    let dir = scratch();
    let query = "SELECT x AS ts FROM generate_series(1, 3) x, pg_sleep(600) WHERE $3 < $4";
    let cfg = pg_config(
        dir.path(),
        "echo",
        &guests().probe,
        &db.url(),
        query,
        "",
        "[limits]\ntimeout_seconds = 1\n",
    );
    let store = dir.path().join("s.db");
    let run = run_job(&cfg, &store, NOW);
    let r = run.receipt();
    assert_eq!((run.code, r["event"].as_str()), (1, Some("failed")), "{r}");
    assert_eq!(r["error"]["kind"], "guest-timeout", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("time limit of 1 s"),
        "{r}"
    );
    assert_eq!(history(&store)[0]["state"], "FAILED");
    let running: i64 = db
        .client()
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = $1 AND state = 'active' AND query LIKE '%pg_sleep(600)%'
               AND pid <> pg_backend_pid()",
            &[&db.schema],
        )
        .unwrap()
        .get(0);
    assert_eq!(running, 0, "the server no longer runs the query");
}

/// Source access over `query` on `db`'s schema for the day of 2026-11-08.
fn access(db: &Scratch, query: &str, batch_rows: u32, timeout: Duration) -> SourceAccess {
    let spec = PostgresSpec {
        url: PostgresUrl::new(db.url()),
        query: query.to_string(),
        timeout,
        naive: jobhost::guest::source::NaiveTimes::Utc,
    };
    let day = jiff::Timestamp::from_second(1_794_096_000).unwrap();
    SourceAccess::new(
        Some(spec),
        day,
        day + jiff::SignedDuration::from_hours(24),
        std::num::NonZeroU32::new(batch_rows).unwrap(),
    )
}

#[test]
fn the_deadline_cancels_a_query_still_running_on_the_server() {
    let Some(db) =
        Scratch::new("pg_source::the_deadline_cancels_a_query_still_running_on_the_server")
    else {
        return;
    };
    let query = "SELECT x FROM generate_series(1, 3) x, pg_sleep(600) WHERE $1 < $2";
    // The server's own limit is far away: only the cancel request stops it.
    let mut access = access(&db, query, 100, Duration::from_secs(3600));
    access.start_early().unwrap();
    let mut c = db.client();
    let started = std::time::Instant::now();
    loop {
        let running: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1
                 AND state = 'active' AND query LIKE '%pg_sleep(600)%' AND pid <> pg_backend_pid()",
                &[&db.schema],
            )
            .unwrap()
            .get(0);
        if running > 0 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the query never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    access.interrupter().interrupt();
    let err = access.open().unwrap_err();
    assert_eq!(
        err,
        SourceError::QueryFailed("the source query was cancelled at the run's deadline".into())
    );
    assert!(!access.ran_out_of_time());
}

#[test]
fn a_window_of_100k_rows_streams_at_most_two_chunks_ahead_of_a_slow_guest() {
    let Some(db) = Scratch::new(
        "pg_source::a_window_of_100k_rows_streams_at_most_two_chunks_ahead_of_a_slow_guest",
    ) else {
        return;
    };
    let query = "SELECT g AS n, md5(g::text) AS s FROM generate_series(1, 100000) g \
                 WHERE $3 < $4 ORDER BY g";
    let mut access = access(&db, query, 1000, Duration::from_secs(60));
    let mut cursor = access.open().unwrap();
    let mut next = 1i64;
    let mut batches = 0;
    while let Some(batch) = cursor.next_batch(1000).unwrap() {
        let jobhost::guest::source::ColumnData::Integer(n) = &batch.columns[0].data else {
            panic!("n is an integer column")
        };
        for v in n {
            assert_eq!(*v, next, "rows arrive in order, none lost");
            next += 1;
        }
        batches += 1;
        // A guest slower than the reader: the reader waits, never piles up.
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(next, 100_001);
    assert_eq!(batches, 100);
    assert!(
        (1..=2).contains(&cursor.peak_chunks_ahead()),
        "at most two chunks ahead: {}",
        cursor.peak_chunks_ahead()
    );
    assert_eq!(access.rows_read(), 100_000);
}

#[test]
fn a_run_that_read_postgresql_replays_with_its_table_dropped() {
    let Some(db) =
        Scratch::new("pg_source::a_run_that_read_postgresql_replays_with_its_table_dropped")
    else {
        return;
    };
    let dir = scratch();
    sales_db(dir.path(), 2000);
    load_sales(&db, &dir.path().join("sales.db"));
    let cfg = pg_config(
        dir.path(),
        "daily-report",
        &guests().report,
        &db.url(),
        SALES_BY_TIME,
        "",
        "",
    );
    let store = dir.path().join("s.db");
    let run = run_job(&cfg, &store, NOW);
    assert_eq!(run.event(), "ran", "{}", run.stderr);
    db.client().batch_execute("DROP TABLE sales").unwrap();
    let replay = jobhost(&["replay", KEY, "--store", s(&store)]);
    assert_eq!(replay.code, 0, "{}{}", replay.stdout, replay.stderr);
    assert!(replay.stdout.contains("identical"), "{}", replay.stdout);
}

#[test]
fn a_source_password_from_the_environment_reaches_the_database_and_nothing_else() {
    let Some(db) = Scratch::new(
        "pg_source::a_source_password_from_the_environment_reaches_the_database_and_nothing_else",
    ) else {
        return;
    };
    db.client()
        .batch_execute("CREATE TABLE sales (created_at timestamptz)")
        .unwrap();
    // The test server trusts every login: what is checked is where the
    // password shows up.
    let url = db.url().replacen(
        "postgres://postgres@",
        "postgres://postgres:${JOBHOST_TEST_SOURCE_PW}@",
        1,
    );
    assert!(url.contains("${JOBHOST_TEST_SOURCE_PW}"), "{url}");
    let dir = scratch();
    let query = "SELECT created_at FROM sales WHERE created_at >= $1 AND created_at < $2";
    let cfg = pg_config(dir.path(), "echo", &guests().probe, &url, query, "", "");
    let run = to_run(
        job_command(&cfg, dir.path().join("s.db"), NOW)
            .env("JOBHOST_TEST_SOURCE_PW", "p@ss/w?rd-hunter2")
            .output()
            .unwrap(),
    );
    let (columns, rows) = echoed(&run);
    assert_eq!(columns, [("created_at".to_string(), "integer".to_string())]);
    assert!(rows.is_empty());
    assert!(!run.stdout.contains("hunter2") && !run.stderr.contains("hunter2"));
}

#[test]
fn a_source_password_from_a_file_reaches_the_database_and_nothing_else() {
    use std::os::unix::fs::PermissionsExt as _;
    let Some(db) = Scratch::new(
        "pg_source::a_source_password_from_a_file_reaches_the_database_and_nothing_else",
    ) else {
        return;
    };
    db.client()
        .batch_execute("CREATE TABLE sales (created_at timestamptz)")
        .unwrap();
    let dir = scratch();
    let secret = dir.path().join("source-password");
    std::fs::write(&secret, "p@ss/w?rd-hunter3\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o400)).unwrap();
    // The test server trusts every login: what is checked is that the URL
    // is read and where the password shows up.
    let url = db.url().replacen(
        "postgres://postgres@",
        &format!("postgres://postgres:${{file:{}}}@", secret.display()),
        1,
    );
    assert!(url.contains("${file:"), "{url}");
    let query = "SELECT created_at FROM sales WHERE created_at >= $1 AND created_at < $2";
    let cfg = pg_config(dir.path(), "echo", &guests().probe, &url, query, "", "");
    let run = to_run(
        job_command(&cfg, dir.path().join("s.db"), NOW)
            .output()
            .unwrap(),
    );
    let (columns, rows) = echoed(&run);
    assert_eq!(columns, [("created_at".to_string(), "integer".to_string())]);
    assert!(rows.is_empty());
    assert!(!run.stdout.contains("hunter3") && !run.stderr.contains("hunter3"));
}

/// `cfg` with `line` added to its `[source]` table.
fn with_source_line(cfg: &Path, line: &str) {
    let text = std::fs::read_to_string(cfg).unwrap();
    let text = text.replacen("[source]\n", &format!("[source]\n{line}\n"), 1);
    std::fs::write(cfg, text).unwrap();
}

/// Unix seconds of an RFC 3339 instant.
fn unix(text: &str) -> i64 {
    text.parse::<jiff::Timestamp>().unwrap().as_second()
}

/// The instants the server makes of `signups.at` in `zone` (its own
/// conversion of a `timestamp` to a `timestamptz`), in Unix seconds, by
/// wall time as text.
fn server_reading(db: &Scratch, zone: &str) -> std::collections::BTreeMap<String, i64> {
    db.client()
        .query(
            "SELECT to_char(at, 'YYYY-MM-DD HH24:MI'), \
             extract(epoch FROM at AT TIME ZONE $1)::int8 FROM signups",
            &[&zone],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// A table `signups` whose `at` is a `timestamp` (without time zone) of
/// Berlin wall times: every hour at :30 of 2026-11-04, and 23:30 the day
/// before and 00:30 the day after; every half hour of the two days the
/// clocks change (each wall time of a repeated hour written once, as such
/// a column can hold it, and the skipped hour's too).
fn load_signups(db: &Scratch) {
    db.client()
        .batch_execute(
            "CREATE TABLE signups (id serial, at timestamp NOT NULL);
             INSERT INTO signups (at) SELECT g FROM generate_series(
                 '2026-11-04 00:30'::timestamp, '2026-11-04 22:30', '1 hour') g;
             INSERT INTO signups (at) VALUES ('2026-11-03 23:30'), ('2026-11-05 00:30');
             INSERT INTO signups (at) SELECT g FROM generate_series(
                 '2026-10-25 00:00'::timestamp, '2026-10-25 23:30', '30 minutes') g;
             INSERT INTO signups (at) SELECT g FROM generate_series(
                 '2026-03-29 00:00'::timestamp, '2026-03-29 23:30', '30 minutes') g;",
        )
        .unwrap();
}

const SIGNUPS: &str = "SELECT at FROM signups WHERE at >= $1 AND at < $2 ORDER BY at, id";

/// The values of the single column the probe echoed.
fn instants(run: &Run) -> Vec<i64> {
    let (columns, rows) = echoed(run);
    assert_eq!(columns, [("at".to_string(), "integer".to_string())]);
    rows.iter().map(|r| r[0].as_i64().unwrap()).collect()
}

#[test]
fn a_timestamp_without_time_zone_is_refused_before_the_claim_naming_the_column_and_the_setting() {
    let Some(db) = Scratch::new(
        "pg_source::a_timestamp_without_time_zone_is_refused_before_the_claim_naming_the_column_and_the_setting",
    ) else {
        return;
    };
    load_signups(&db);
    db.client()
        .batch_execute(
            "CREATE DOMAIN local_day AS date;
             CREATE TABLE visits (at timestamptz, day local_day, d date);",
        )
        .unwrap();
    for (query, column, says) in [
        (
            SIGNUPS,
            "at",
            "column `at` is of type timestamp without time zone, whose values have no zone",
        ),
        (
            "SELECT day FROM visits WHERE at >= $1 AND at < $2",
            "day",
            // A domain's column is described by its base type.
            "column `day` is of type date, whose values have no zone",
        ),
        (
            "SELECT d FROM visits WHERE at >= $1 AND at < $2",
            "d",
            "column `d` is of type date, whose values have no zone",
        ),
    ] {
        let dir = scratch();
        let cfg = pg_config(
            dir.path(),
            "echo",
            &guests().probe,
            &db.url(),
            query,
            "timezone = \"Europe/Berlin\"\n",
            "",
        );
        let store = dir.path().join("s.db");
        let run = run_job(&cfg, &store, "2026-11-05T00:05:00Z");
        let message = refused(&run, &store);
        assert!(message.contains(says), "{message}");
        assert!(
            message.contains(
                "set `naive_timestamps = \"job-zone\"` in `[source]` to read them as local \
                 times in Europe/Berlin, or `\"utc\"`"
            ),
            "{message}"
        );
        assert!(
            message.contains(&format!("column `{column}`"))
                && message.contains("AT TIME ZONE 'Europe/Berlin'"),
            "{message}"
        );
        // The cast it names reads the column.
        let cast = message
            .rsplit_once("for example `")
            .unwrap()
            .1
            .trim_end_matches('`');
        let fixed = query.replacen(&format!("SELECT {column} "), &format!("SELECT {cast} "), 1);
        let cfg = pg_config(
            dir.path(),
            "echo",
            &guests().probe,
            &db.url(),
            &fixed,
            "timezone = \"Europe/Berlin\"\n",
            "",
        );
        let (columns, _) = echoed(&run_job(&cfg, &store, "2026-11-05T00:05:00Z"));
        assert_eq!(
            columns,
            [(column.to_string(), "integer".to_string())],
            "{fixed}"
        );
    }
}

#[test]
fn naive_timestamps_job_zone_reads_berlin_wall_times_as_berlin_days_and_utc_reads_them_as_before() {
    let Some(db) = Scratch::new(
        "pg_source::naive_timestamps_job_zone_reads_berlin_wall_times_as_berlin_days_and_utc_reads_them_as_before",
    ) else {
        return;
    };
    load_signups(&db);
    let dir = scratch();
    let cfg = pg_config(
        dir.path(),
        "echo",
        &guests().probe,
        &db.url(),
        SIGNUPS,
        "timezone = \"Europe/Berlin\"\n",
        "",
    );
    let now = "2026-11-05T00:05:00Z";
    // Berlin's 2026-11-04 is [2026-11-03T23:00Z, 2026-11-04T23:00Z).
    let (start, end) = (unix("2026-11-03T23:00:00Z"), unix("2026-11-04T23:00:00Z"));

    with_source_line(&cfg, "naive_timestamps = \"job-zone\"");
    let run = run_job(&cfg, dir.path().join("zone.db"), now);
    assert_eq!(run.receipt()["key"], "echo:2026-11-04", "{}", run.stderr);
    let read = instants(&run);
    assert_eq!(read.len(), 23, "23 signups in Berlin's day: {read:?}");
    let expected: Vec<i64> = (0..23).map(|h| start + 1800 + h * 3600).collect();
    assert_eq!(read, expected, "00:30 to 22:30 Berlin time, as instants");
    assert!(read.iter().all(|t| (start..end).contains(t)));
    let server = server_reading(&db, "Europe/Berlin");
    assert_eq!(
        server["2026-11-04 00:30"], read[0],
        "the server reads it the same"
    );

    // "utc": the old reading, on purpose: 24 (the 23:30 of the day before
    // counted, as 23:30 UTC), each value the wall time as UTC.
    let cfg = pg_config(
        dir.path(),
        "echo",
        &guests().probe,
        &db.url(),
        SIGNUPS,
        "timezone = \"Europe/Berlin\"\n",
        "",
    );
    with_source_line(&cfg, "naive_timestamps = \"utc\"");
    let run = run_job(&cfg, dir.path().join("utc.db"), now);
    let read = instants(&run);
    assert_eq!(read.len(), 24, "{read:?}");
    assert_eq!(read[0], unix("2026-11-03T23:30:00Z"));
    assert_eq!(read[1], unix("2026-11-04T00:30:00Z"));
}

#[test]
fn a_berlin_day_and_hour_read_a_repeated_or_skipped_wall_time_where_the_server_puts_it() {
    let Some(db) = Scratch::new(
        "pg_source::a_berlin_day_and_hour_read_a_repeated_or_skipped_wall_time_where_the_server_puts_it",
    ) else {
        return;
    };
    load_signups(&db);
    let server = server_reading(&db, "Europe/Berlin");
    // The server's rule, checked against the server: a repeated wall time
    // is the second pass (+01:00), a skipped one takes +01:00, the offset
    // before the jump.
    assert_eq!(server["2026-10-25 02:30"], unix("2026-10-25T01:30:00Z"));
    assert_eq!(server["2026-03-29 02:30"], unix("2026-03-29T01:30:00Z"));
    let dir = scratch();
    for (window, now, day, hours) in [
        ("day", "2026-10-26T00:05:00Z", "2026-10-25", 25),
        ("day", "2026-03-30T00:05:00Z", "2026-03-29", 23),
    ] {
        let cfg = pg_config(
            dir.path(),
            "echo",
            &guests().probe,
            &db.url(),
            SIGNUPS,
            &format!("timezone = \"Europe/Berlin\"\nwindow = \"{window}\"\n"),
            "",
        );
        with_source_line(&cfg, "naive_timestamps = \"job-zone\"");
        let run = run_job(&cfg, dir.path().join(format!("{day}.db")), now);
        let r = run.receipt();
        assert_eq!(r["key"], format!("echo:{day}"), "{}", run.stderr);
        let (start, end) = (
            unix(r["window"]["start"].as_str().unwrap()),
            unix(r["window"]["end"].as_str().unwrap()),
        );
        assert_eq!(end - start, hours * 3600);
        let read = instants(&run);
        assert_eq!(read.len(), 48, "{day}: every wall time of the day, once");
        // Each value is the server's own reading, and inside the window
        // the server's filter put it in.
        let mut want: Vec<i64> = server
            .iter()
            .filter(|(wall, _)| wall.starts_with(day))
            .map(|(_, at)| *at)
            .collect();
        want.sort_unstable();
        let mut sorted = read.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, want, "{day}");
        assert!(
            read.iter().all(|t| (start..end).contains(t)),
            "{day}: {read:?}"
        );
    }
    // The hour of 02:00 comes twice on 2026-10-25: its wall times all read
    // as the second pass, so the first hour reads none and the second both.
    for (now, label, rows) in [
        (
            "2026-10-25T01:00:05Z",
            "echo:2026-10-25T02:00+02:00",
            vec![],
        ),
        (
            "2026-10-25T02:00:05Z",
            "echo:2026-10-25T02:00+01:00",
            vec![unix("2026-10-25T01:00:00Z"), unix("2026-10-25T01:30:00Z")],
        ),
    ] {
        let cfg = pg_config(
            dir.path(),
            "echo",
            &guests().probe,
            &db.url(),
            SIGNUPS,
            "timezone = \"Europe/Berlin\"\nwindow = \"hour\"\n",
            "",
        );
        with_source_line(&cfg, "naive_timestamps = \"job-zone\"");
        let run = run_job(&cfg, dir.path().join("hours.db"), now);
        assert_eq!(run.receipt()["key"], label, "{}", run.stderr);
        assert_eq!(instants(&run), rows, "{label}");
    }
}

#[test]
fn job_zone_sets_the_sessions_zone_for_the_querys_own_dates() {
    let Some(db) =
        Scratch::new("pg_source::job_zone_sets_the_sessions_zone_for_the_querys_own_dates")
    else {
        return;
    };
    db.client()
        .batch_execute(
            "CREATE TABLE t (at timestamptz NOT NULL); INSERT INTO t VALUES ('2026-11-04 23:30Z');",
        )
        .unwrap();
    // 23:30 UTC is the next day in Berlin: `::date` and `date_trunc` work
    // in the session's zone.
    let query = "SELECT at::date::text AS day, extract(epoch FROM date_trunc('day', at))::int8 AS midnight \
                 FROM t WHERE at >= $1 AND at < $2";
    let dir = scratch();
    for (naive, day, midnight) in [
        ("utc", "2026-11-04", unix("2026-11-04T00:00:00Z")),
        ("job-zone", "2026-11-05", unix("2026-11-04T23:00:00Z")),
    ] {
        let cfg = pg_config(
            dir.path(),
            "echo",
            &guests().probe,
            &db.url(),
            query,
            "timezone = \"Europe/Berlin\"\n",
            "",
        );
        with_source_line(&cfg, &format!("naive_timestamps = \"{naive}\""));
        let (_, rows) = echoed(&run_job(
            &cfg,
            dir.path().join(format!("{naive}.db")),
            "2026-11-06T00:05:00Z",
        ));
        assert_eq!(
            rows,
            [vec![Value::from(day), Value::from(midnight)]],
            "{naive}"
        );
    }
}
