//! Speed and memory of a PostgreSQL data source, side by side in one run:
//! 1M rows of the sales shape in one day's window, on the server
//! `JOBHOST_TEST_POSTGRES` names (for example
//! `postgres://postgres@127.0.0.1:5432/test`),
//!
//! 1. `jobhost run` with the reference report reading them from PostgreSQL,
//!    end to end (one process: start, read, aggregate, commit, deliver);
//! 2. native Rust reading the same rows with the same query through the
//!    `postgres` crate (binary protocol) and aggregating them in the same
//!    process (a row loop with hash maps);
//! 3. `jobhost run` over the same rows from SQLite, for the peak memory.
//!
//! `cargo bench -p jobhost-tests --bench pg_source` (add `-- --quick` for
//! fewer samples). Medians with the 25th and 75th percentiles, the ratio of
//! the medians, and each process's peak resident memory. Without the
//! variable the bench says so and measures nothing.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use jobhost_tests::guests;
use jobhost_tests::pg::Scratch;
use jobhost_tests::stats::{median, ratio, report};
use jobhost_tests::{native, process};

const DAY_START: i64 = 1_794_096_000; // 2026-11-08T00:00:00Z
const DAY_END: i64 = DAY_START + 86_400;
const NOW: &str = "2026-11-09T00:05:00Z";
const ROWS: u64 = 1_000_000;
const PG_QUERY: &str = "SELECT created_at AS ts, region, product, quantity, amount FROM sales \
                        WHERE created_at >= $1 AND created_at < $2 ORDER BY created_at, id";
const SQLITE_QUERY: &str = "SELECT ts, region, product, quantity, amount FROM sales \
                            WHERE ts >= :start AND ts < :end ORDER BY ts, id";

fn main() {
    // SAFETY: set before any thread starts.
    unsafe { std::env::set_var("RUST_BACKTRACE", "0") };
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 3 } else { 9 };
    let Some(db) = Scratch::for_bench("bench pg_source") else {
        return;
    };
    let root = guests::workspace_root();
    let target = root.join("target").join("bench-guests");
    let built = guests::build(&target).unwrap_or_else(|e| panic!("building guests failed:\n{e}"));
    let cache = target.join("compile-cache");
    let work = std::env::temp_dir().join(format!("jobhost-bench-pg-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("bench folder");

    let sqlite = work.join("sales.db");
    jobhost_tests::sample::write_sales(&sqlite, DAY_START, DAY_END, ROWS, 11).expect("sample data");
    load(&db, &sqlite);
    let pg_config = config(
        &work.join("pg"),
        &built.report,
        &format!(
            "type = \"postgres\"\nurl = \"{}\"\nquery = \"{PG_QUERY}\"",
            db.url()
        ),
    );
    let sqlite_config = config(
        &work.join("sqlite"),
        &built.report,
        &format!(
            "path = \"{}\"\nquery = \"{SQLITE_QUERY}\"",
            sqlite.display()
        ),
    );

    // Warm the compile cache once, outside any measurement.
    run(&pg_config, &work.join("warm.db"), &cache);

    let (mut pg, mut native, mut lite) = (Vec::new(), Vec::new(), Vec::new());
    let (mut pg_rss, mut lite_rss) = (Vec::new(), Vec::new());
    let (mut pg_cpu, mut native_cpu) = (Vec::new(), Vec::new());
    let mut rows = (0, 0, 0);
    for i in 0..n {
        let t = Instant::now();
        let (out, rss, cpu) = run(&pg_config, &work.join(format!("pg-{i}.db")), &cache);
        pg.push(t.elapsed());
        pg_rss.push(rss);
        pg_cpu.push(cpu);
        rows.0 = receipt_rows(&out);

        let (t, cpu) = (Instant::now(), process::own_cpu());
        rows.1 = aggregate_natively(&db.url());
        native.push(t.elapsed());
        native_cpu.push(process::own_cpu() - cpu);

        let t = Instant::now();
        let (out, rss, _) = run(&sqlite_config, &work.join(format!("sqlite-{i}.db")), &cache);
        lite.push(t.elapsed());
        lite_rss.push(rss);
        rows.2 = receipt_rows(&out);
    }
    assert_eq!(rows.0, ROWS, "the window holds every row");
    assert_eq!(
        (rows.1, rows.2),
        (rows.0, rows.0),
        "every path saw the same rows"
    );

    println!("PostgreSQL source, 1M rows (medians, p25-p75; {n} runs each, interleaved)");
    report("jobhost run, PostgreSQL source, end to end", &pg);
    report("native: postgres crate + row loop + hash maps", &native);
    report("jobhost run, SQLite source, end to end", &lite);
    println!(
        "ratio jobhost (PostgreSQL) / native: {:.2}x; jobhost PostgreSQL / SQLite: {:.2}x",
        ratio(median(&pg), median(&native)),
        ratio(median(&pg), median(&lite))
    );
    println!(
        "client CPU (user + system, median; the server's not counted): jobhost {:.0} ms, \
         native {:.0} ms",
        median(&pg_cpu).as_secs_f64() * 1e3,
        median(&native_cpu).as_secs_f64() * 1e3
    );
    let mib = |v: &[u64]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2] as f64 / 1024.0
    };
    println!(
        "peak RSS (median): PostgreSQL source {:.1} MiB, SQLite source {:.1} MiB, difference {:+.1} MiB",
        mib(&pg_rss),
        mib(&lite_rss),
        mib(&pg_rss) - mib(&lite_rss)
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// Copies the SQLite sales into a table `sales` of `db`, with the time as
/// `timestamptz`, indexed as a reporting table would be.
fn load(db: &Scratch, sqlite: &Path) {
    let mut c = db.client();
    c.batch_execute(
        "CREATE TABLE sales (id int8 PRIMARY KEY, created_at timestamptz NOT NULL,
         region text NOT NULL, product text NOT NULL, quantity int4 NOT NULL,
         amount float8 NOT NULL)",
    )
    .expect("sales table");
    let lite = rusqlite::Connection::open(sqlite).expect("sample data");
    let mut stmt = lite
        .prepare("SELECT id, ts, region, product, quantity, amount FROM sales ORDER BY id")
        .expect("sample query");
    let mut rows = stmt.query([]).expect("sample rows");
    let mut copy = c
        .copy_in("COPY sales (id, created_at, region, product, quantity, amount) FROM STDIN")
        .expect("copy");
    while let Some(r) = rows.next().expect("sample row") {
        let ts: i64 = r.get(1).expect("ts");
        let at = jiff::Timestamp::from_second(ts).expect("instant");
        writeln!(
            copy,
            "{}\t{at}\t{}\t{}\t{}\t{:?}",
            r.get::<_, i64>(0).expect("id"),
            r.get::<_, String>(2).expect("region"),
            r.get::<_, String>(3).expect("product"),
            r.get::<_, i64>(4).expect("quantity"),
            r.get::<_, f64>(5).expect("amount"),
        )
        .expect("copy row");
    }
    copy.finish().expect("copy done");
    c.batch_execute("CREATE INDEX ON sales (created_at, id); ANALYZE sales")
        .expect("index");
}

fn config(dir: &Path, component: &Path, source: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("bench folder");
    let path = dir.join("job.toml");
    std::fs::write(
        &path,
        format!(
            "job = \"bench\"\ncomponent = \"{}\"\n[source]\n{source}\n\
             [destinations.digest]\ntype = \"file\"\npath = \"out.jsonl\"\n\
             [limits]\nmemory_mib = 512\ntimeout_seconds = 300\n",
            component.display()
        ),
    )
    .expect("bench config");
    path
}

/// One `jobhost run` process on a store of its own: its receipt, its peak
/// resident memory in KiB and the CPU time it used.
fn run(config: &Path, store: &Path, cache: &Path) -> (String, u64, Duration) {
    let _ = std::fs::remove_file(config.with_file_name("out.jsonl"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jobhost-under-test"));
    cmd.args(["run", "--config"])
        .arg(config)
        .arg("--store")
        .arg(store)
        .args(["--now", NOW])
        .env("JOBHOST_CACHE_DIR", cache);
    let m = process::measure(cmd);
    assert!(m.stdout.contains("\"event\":\"ran\""), "{}", m.stdout);
    (m.stdout, m.peak_kib, m.cpu)
}

fn receipt_rows(receipt: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(receipt.trim()).expect("receipt JSON");
    v["stats"]["rows"].as_u64().expect("rows in the receipt")
}

/// The reference report's aggregation written the plain native way over
/// the same query's rows, streamed in binary. Returns the rows seen.
fn aggregate_natively(url: &str) -> u64 {
    use postgres::fallible_iterator::FallibleIterator;
    let mut c = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    let start = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(DAY_START as u64);
    let end = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(DAY_END as u64);
    let params: [&(dyn postgres::types::ToSql + Sync); 2] = [&start, &end];
    let mut rows = c.query_raw(PG_QUERY, params).expect("query");
    let mut sales = native::Sales::default();
    while let Some(row) = rows.next().expect("row") {
        let at: std::time::SystemTime = row.get(0);
        let ts = at
            .duration_since(std::time::SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let units = i64::from(row.get::<_, i32>(3));
        sales.add(ts, row.get(1), row.get(2), units, row.get(4));
    }
    sales.finish()
}
