//! The dashboard's cost as a job's history grows: the median time to
//! answer the job page (HTML) and `/metrics` over HTTP from an in-process
//! server, for stores of 1k, 10k and 100k hour windows, on SQLite and on
//! PostgreSQL (the server named by `JOBHOST_TEST_POSTGRES`; skipped, and
//! said, without it). The goal is a page time flat in the history's
//! length: reads by state go through the `(job, state, window_start)`
//! index and `/metrics` reads the counts SQLite keeps (PostgreSQL counts
//! each state's index range, which grows with the history). With no daemon's
//! `decided_until`, `status` counts the rows of the last 10,000 due windows
//! for holes, so the times grow up to 10k windows and are flat after.
//!
//! `cargo bench -p jobhost-tests --bench dashboard` (add `-- --quick` for
//! fewer samples).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use jobhost::app::serve::{ServedJob, Settings, start};
use jobhost::core::schedule::Schedule;
use jobhost::core::window::{JobName, Window, WindowKind, Zone};
use jobhost::store::{Ledger, PostgresStore, PostgresUrl, Skip, SqliteStore, StoreLocation};
use jobhost_tests::pg::Scratch;
use jobhost_tests::stats::{median, ms, spread};

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

fn windows(n: usize) -> (Vec<Window>, Timestamp) {
    let job = JobName::new("big").unwrap();
    let mut w = Window::containing(
        &job,
        WindowKind::Hour,
        &Zone::utc(),
        "2014-01-01T00:00:00Z".parse().unwrap(),
    )
    .unwrap();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let next = w.next().unwrap();
        out.push(w);
        w = next;
    }
    (out, w.start)
}

fn fill(store: &mut dyn Ledger, ws: &[Window]) {
    for chunk in ws.chunks(10_000) {
        let skips: Vec<Skip<'_>> = chunk
            .iter()
            .map(|w| Skip {
                window: w,
                reason: "catch_up = \"latest\"",
            })
            .collect();
        store
            .record_skips(&skips, "bench", "2026-01-01T00:00:00Z".parse().unwrap())
            .unwrap();
    }
}

fn get(addr: &str, path: &str) -> usize {
    let mut c = TcpStream::connect(addr).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    c.read_to_end(&mut buf).unwrap();
    assert!(
        buf.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf)
    );
    buf.len()
}

fn measure(
    location: StoreLocation,
    now: Timestamp,
    samples: usize,
) -> [(Duration, Vec<Duration>, usize); 2] {
    let schedule = Schedule {
        job: JobName::new("big").unwrap(),
        kind: WindowKind::Hour,
        zone: Zone::utc(),
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
        grace: Duration::from_secs(3600),
    };
    let running = start(Settings {
        jobs: jobhost::app::serve::fixed(vec![ServedJob {
            schedule,
            location,
            digest_cache: None,
            target: jobhost::core::command::Target::default(),
            load: None,
        }]),
        listen: "127.0.0.1:0".parse().unwrap(),
        tokens: Default::default(),
        actions: None,
        clock: Arc::new(move || now),
        daemon: None,
        liveness: None,
    })
    .unwrap();
    let addr = running.addr.to_string();
    let mut out = Vec::new();
    for path in ["/jobs/big", "/metrics"] {
        let mut size = get(&addr, path);
        let mut v = Vec::with_capacity(samples);
        for _ in 0..samples {
            let t = Instant::now();
            size = get(&addr, path);
            v.push(t.elapsed());
        }
        out.push((median(&v), v, size));
    }
    running.stop();
    [out.remove(0), out.remove(0)]
}

/// `jobhost status`'s judgement (the bounded reads it shares with the
/// dashboard), in process, against what it read before this release: the
/// job's whole history.
fn measure_status(location: &StoreLocation, now: Timestamp, samples: usize) -> [Duration; 2] {
    let schedule = Schedule {
        job: JobName::new("big").unwrap(),
        kind: WindowKind::Hour,
        zone: Zone::utc(),
        delay: Duration::ZERO,
        jitter: Duration::ZERO,
        grace: Duration::from_secs(3600),
    };
    let mut store = jobhost::store::open_if_exists(location).unwrap().unwrap();
    let mut bounded = Vec::with_capacity(samples);
    let mut whole = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t = Instant::now();
        let mut reads = jobhost::run::reads::Reads::new(store.as_mut());
        std::hint::black_box(
            jobhost::run::status::status_bounded(&schedule, now, Some(&mut reads)).unwrap(),
        );
        bounded.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(store.history(Some("big")).unwrap());
        whole.push(t.elapsed());
    }
    [median(&bounded), median(&whole)]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let samples = if quick { 10 } else { 40 };
    let dir = jobhost_tests::guests::workspace_root()
        .join("target")
        .join("bench-dashboard");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    println!("dashboard: median of {samples} requests per page, hour windows, all SKIPPED");
    for n in SIZES {
        let (ws, now) = windows(n);
        let path = dir.join(format!("s{n}.db"));
        fill(&mut SqliteStore::open(&path).unwrap(), &ws);
        let [status, whole] = measure_status(&StoreLocation::Sqlite(path.clone()), now, samples);
        println!(
            "  SQLite     {n:>7} windows: status {:>7.2} ms (the whole history it read before: {:>7.2} ms)",
            ms(status),
            ms(whole)
        );
        let [page, metrics] = measure(StoreLocation::Sqlite(path), now, samples);
        println!(
            "  SQLite     {n:>7} windows: job page {:>7.2} ms ({}; {} B), /metrics {:>7.2} ms ({})",
            ms(page.0),
            spread(&page.1),
            page.2,
            ms(metrics.0),
            spread(&metrics.1)
        );
        match Scratch::for_bench("bench dashboard") {
            Some(scratch) => {
                let url = PostgresUrl::new(scratch.url());
                fill(&mut PostgresStore::open(&url).unwrap(), &ws);
                let [status, whole] =
                    measure_status(&StoreLocation::Postgres(url.clone()), now, samples);
                println!(
                    "  PostgreSQL {n:>7} windows: status {:>7.2} ms (the whole history it read before: {:>7.2} ms)",
                    ms(status),
                    ms(whole)
                );
                let [page, metrics] = measure(StoreLocation::Postgres(url), now, samples);
                println!(
                    "  PostgreSQL {n:>7} windows: job page {:>7.2} ms ({}; {} B), /metrics {:>7.2} ms ({})",
                    ms(page.0),
                    spread(&page.1),
                    page.2,
                    ms(metrics.0),
                    spread(&metrics.1)
                );
            }
            None => println!("  PostgreSQL skipped"),
        }
    }
}
