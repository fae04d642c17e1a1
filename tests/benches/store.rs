//! The claim store's cost with full durability, SQLite and PostgreSQL side
//! by side in one process and one run:
//!
//! 1. claims alone: one transaction (one commit, one fsync) per window;
//! 2. a whole run's store work: claim, PREPARED (the report, one staged
//!    message and a 2 KiB journal), DONE with the delivery recorded (three
//!    transactions);
//! 3. the same with the lease checked before the send, as delivery does
//!    (a read, no fsync).
//!
//! SQLite runs in WAL mode with `synchronous=FULL`, its file under
//! `target/bench-store`, on the same disk as the project, not in a
//! RAM-backed temp folder. PostgreSQL is the server named by
//! `JOBHOST_TEST_POSTGRES` (for example
//! `postgres://postgres@127.0.0.1:5432/test`), reached over one connection
//! exactly as a host reaches it; its durability is the server's own
//! (`synchronous_commit`, printed with the results). Without the variable
//! the bench measures SQLite alone and says that PostgreSQL was skipped.
//!
//! Each round claims `N` fresh windows per measurement and backend. The
//! rounds interleave the backends measurement by measurement (and swap
//! which goes first every round), so drift on a shared machine hits both
//! alike. Reported: the medians of the rounds (with the fastest and slowest
//! round), each backend's whole run against its own claim, and PostgreSQL
//! against SQLite for each measurement.
//!
//! 4. the chain's cost: a run's store traffic without the chain, with it,
//!    and with it signed, side by side on each backend;
//! 5. how long `jobhost verify` takes over a store of 100,000 entries.
//!
//! `cargo bench -p jobhost-tests --bench store` (add `-- --quick` for
//! fewer rounds, `-- --chain` for the last two alone).

use jobhost_tests::stats::{median, ms, per_s, ratio, spread};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use jobhost::core::window::{JobName, Window, WindowKind, Zone};
use jobhost::store::{
    Attempted, Claim, ClaimRequest, Lease, PostgresStore, PostgresUrl, SqliteStore, StagedMessage,
    Store, StoredReport,
};
use jobhost_tests::pg::Scratch;

/// What one timed pass over `N` windows does per window.
#[derive(Clone, Copy)]
enum Work {
    /// A claim.
    Claim,
    /// Claim, PREPARED, DONE.
    Whole,
    /// Claim, PREPARED, lease check, DONE.
    WholeChecked,
}

const WORK: [Work; 3] = [Work::Claim, Work::Whole, Work::WholeChecked];
const SQLITE: usize = 0;
const POSTGRES: usize = 1;
const NAMES: [&str; 2] = ["SQLite", "PostgreSQL"];

/// The store of one backend for one round. Fields drop in order: the
/// connection closes before its scratch schema is dropped.
struct Backend {
    store: Box<dyn Store>,
    _scratch: Option<Scratch>,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, n) = if quick { (3, 200) } else { (7, 500) };
    let dir = jobhost_tests::guests::workspace_root()
        .join("target")
        .join("bench-store");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench folder");
    // `bench_server` prints the SKIPPED line on stderr when the variable is
    // unset (under `CI` too: benchmarks are not part of CI).
    let pg_server = jobhost_tests::pg::bench_server("bench store (PostgreSQL half)");
    let pg_settings = pg_server.as_deref().map(postgres_settings);

    let job = JobName::new("bench").unwrap();
    let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let mut next_hour = 0i64;
    let mut windows = |count: usize| -> Vec<Window> {
        (0..count)
            .map(|_| {
                next_hour += 1;
                let t = start + SignedDuration::from_hours(next_hour);
                Window::containing(&job, WindowKind::Hour, &Zone::utc(), t).unwrap()
            })
            .collect()
    };

    // `-- --chain`: only the chain's cost and verify's speed.
    if std::env::args().any(|a| a == "--chain") {
        chain_cost(&dir, rounds, n, pg_server.is_some(), &mut windows);
        verify_speed(&dir, if quick { 10_000 } else { 100_000 });
        return;
    }
    // times[backend][work]: one per-window duration per round.
    let mut times: [[Vec<Duration>; 3]; 2] = Default::default();
    for round in 0..rounds {
        // A fresh SQLite file and a fresh PostgreSQL schema every round:
        // each round starts from empty tables on both backends, so the
        // rounds are alike and the two backends always hold the same number
        // of rows when they are compared. Opening (and migrating) is not
        // timed.
        let mut backends = vec![Backend {
            store: Box::new(SqliteStore::open(&dir.join(format!("r{round}.db"))).unwrap()),
            _scratch: None,
        }];
        if pg_server.is_some() {
            let scratch = Scratch::for_bench("bench store").expect("PostgreSQL scratch schema");
            let store = PostgresStore::open(&PostgresUrl::new(scratch.url()))
                .unwrap_or_else(|e| panic!("cannot open the PostgreSQL store: {e}"));
            backends.push(Backend {
                store: Box::new(store),
                _scratch: Some(scratch),
            });
        }
        // Swap who goes first every round, so neither always runs on a
        // machine the other has just warmed (or dirtied).
        let order: Vec<usize> = if round % 2 == 0 {
            (0..backends.len()).collect()
        } else {
            (0..backends.len()).rev().collect()
        };
        for (i, work) in WORK.into_iter().enumerate() {
            // The same windows for both backends: separate stores, so both
            // claim fresh windows with identical keys.
            let ws = windows(n);
            for &b in &order {
                times[b][i].push(measure(backends[b].store.as_mut(), &ws, work));
            }
        }
        drop(backends);
    }

    let med: Vec<[Duration; 3]> = times
        .iter()
        .take(if pg_server.is_some() { 2 } else { 1 })
        .map(|t| [median(&t[0]), median(&t[1]), median(&t[2])])
        .collect();
    println!(
        "store: {rounds} rounds of {n} fresh windows per measurement and backend, \
         backends interleaved; medians (fastest..slowest round)"
    );
    for (b, m) in med.iter().enumerate() {
        let c = m[0];
        match b {
            SQLITE => println!("SQLite, WAL, synchronous=FULL, file under target/bench-store"),
            _ => println!(
                "PostgreSQL, one connection, {}",
                pg_settings.as_deref().unwrap_or("")
            ),
        }
        println!(
            "  claim alone                              {:>8.3} ms/claim {:>7.0} claims/s  ({})",
            ms(c),
            per_s(c),
            spread(&times[b][0])
        );
        println!(
            "  claim + PREPARED + DONE                  {:>8.3} ms/run   {:>7.0} runs/s    ({}; {:.2}x its claim)",
            ms(m[1]),
            per_s(m[1]),
            spread(&times[b][1]),
            ratio(m[1], c)
        );
        println!(
            "  claim + PREPARED + lease check + DONE    {:>8.3} ms/run   {:>7.0} runs/s    ({}; {:.2}x its claim)",
            ms(m[2]),
            per_s(m[2]),
            spread(&times[b][2]),
            ratio(m[2], c)
        );
    }
    if med.len() == 2 {
        let (s, p) = (med[SQLITE], med[POSTGRES]);
        println!(
            "{} vs {} (time per claim or run; above 1 means PostgreSQL is slower)",
            NAMES[POSTGRES], NAMES[SQLITE]
        );
        println!(
            "  claim alone                              {:>6.2}x",
            ratio(p[0], s[0])
        );
        println!(
            "  claim + PREPARED + DONE                  {:>6.2}x",
            ratio(p[1], s[1])
        );
        println!(
            "  claim + PREPARED + lease check + DONE    {:>6.2}x",
            ratio(p[2], s[2])
        );
    } else {
        println!(
            "PostgreSQL: SKIPPED, {} is not set; set it to a PostgreSQL server \
             (for example postgres://postgres@127.0.0.1:5432/test) to measure it beside SQLite",
            jobhost_tests::pg::VAR
        );
    }
    chain_cost(&dir, rounds, n, pg_server.is_some(), &mut windows);
    verify_speed(&dir, if quick { 10_000 } else { 100_000 });
    let _ = std::fs::remove_dir_all(&dir);
}

/// How a store keeps its chain, for the side-by-side cost.
const CHAINS: [&str; 3] = ["no chain", "chain", "chain, signed"];

/// A store of `backend` (0 SQLite, 1 PostgreSQL) keeping its chain as
/// `CHAINS[mode]` says, with the scratch schema it lives in.
fn chained_store(dir: &std::path::Path, backend: usize, mode: usize, tag: &str) -> Backend {
    let signer = std::sync::Arc::new(
        jobhost::store::chain::Signer::from_pem(
            &jobhost::store::chain::Signer::generate().unwrap(),
            "bench key",
        )
        .unwrap(),
    );
    macro_rules! kept {
        ($s:expr) => {
            match mode {
                0 => Box::new($s.without_chain()) as Box<dyn Store>,
                1 => Box::new($s.signed_by(None)),
                _ => Box::new($s.signed_by(Some(signer))),
            }
        };
    }
    if backend == SQLITE {
        let s = SqliteStore::open(&dir.join(format!("chain-{tag}-{mode}.db"))).unwrap();
        Backend {
            store: kept!(s),
            _scratch: None,
        }
    } else {
        let scratch = Scratch::for_bench("bench store").expect("PostgreSQL scratch schema");
        let s = PostgresStore::open(&PostgresUrl::new(scratch.url())).unwrap();
        Backend {
            store: kept!(s),
            _scratch: Some(scratch),
        }
    }
}

/// A run's store traffic (claim, PREPARED, DONE) without the chain, with
/// it, and with it signed, side by side on each backend: fresh stores each
/// round, the three interleaved window batch by window batch, their order
/// turned every round.
fn chain_cost(
    dir: &std::path::Path,
    rounds: usize,
    n: usize,
    postgres: bool,
    windows: &mut dyn FnMut(usize) -> Vec<Window>,
) {
    let backends = if postgres { 2 } else { 1 };
    // times[backend][mode]: one per-run duration per round.
    let mut times: [[Vec<Duration>; 3]; 2] = Default::default();
    for round in 0..rounds {
        for (b, t) in times.iter_mut().take(backends).enumerate() {
            let mut stores: Vec<Backend> = (0..3)
                .map(|m| chained_store(dir, b, m, &format!("{round}")))
                .collect();
            let ws = windows(n);
            for k in 0..3 {
                let m = (round + k) % 3;
                t[m].push(measure(stores[m].store.as_mut(), &ws, Work::Whole));
            }
            stores.clear();
        }
    }
    println!(
        "the chain's cost: claim + PREPARED + DONE, {rounds} rounds of {n} fresh windows per store, the three stores of a backend interleaved; medians (fastest..slowest round)"
    );
    for (b, t) in times.iter().take(backends).enumerate() {
        let base = median(&t[0]);
        for (m, name) in CHAINS.iter().enumerate() {
            let med = median(&t[m]);
            println!(
                "  {:<10} {:<14} {:>8.3} ms/run  ({}; {:.3}x without the chain)",
                NAMES[b],
                name,
                ms(med),
                spread(&t[m]),
                ratio(med, base)
            );
        }
    }
}

/// How long `jobhost verify`'s walk takes over a SQLite store of about
/// `entries` entries (a run makes three: claim, report, done), unsigned
/// and signed.
fn verify_speed(dir: &std::path::Path, entries: usize) {
    let job = JobName::new("verified").unwrap();
    let start: Timestamp = "2020-01-01T00:00:00Z".parse().unwrap();
    let runs = entries.div_ceil(3);
    let ws: Vec<Window> = (0..runs)
        .map(|h| {
            let t = start + SignedDuration::from_hours(i64::try_from(h).unwrap());
            Window::containing(&job, WindowKind::Hour, &Zone::utc(), t).unwrap()
        })
        .collect();
    let signer = std::sync::Arc::new(
        jobhost::store::chain::Signer::from_pem(
            &jobhost::store::chain::Signer::generate().unwrap(),
            "bench key",
        )
        .unwrap(),
    );
    let public = jobhost::store::chain::PublicKey::from_pem(&signer.public_pem(), "pub").unwrap();
    let path = dir.join("verify.db");
    let made = Instant::now();
    {
        let mut store = SqliteStore::open(&path).unwrap().signed_by(Some(signer));
        measure(&mut store, &ws, Work::Whole);
    }
    let made = made.elapsed();
    let mut store = SqliteStore::open_read_only(&path).unwrap();
    for (what, keys) in [
        ("hashes, links and rows", vec![]),
        ("and signatures", vec![public]),
    ] {
        let t = Instant::now();
        let verdicts = jobhost::run::verify::verify_store(&mut store, None, &keys).unwrap();
        let took = t.elapsed();
        let v = &verdicts[0];
        assert!(v.findings.is_empty(), "{:?}", v.findings.first());
        println!(
            "verify: {} entries over {runs} runs ({what}): {:.2} s, {:.0} entries/s (the store was written in {:.1} s)",
            v.entries,
            took.as_secs_f64(),
            v.entries as f64 / took.as_secs_f64(),
            made.as_secs_f64()
        );
    }
}

/// The mean time per window of one pass of `work` over `ws`.
fn measure(store: &mut dyn Store, ws: &[Window], work: Work) -> Duration {
    let t = Instant::now();
    for w in ws {
        let lease = claim(store, w);
        match work {
            Work::Claim => {}
            Work::Whole => prepare_and_finish(store, w, &lease, false),
            Work::WholeChecked => prepare_and_finish(store, w, &lease, true),
        }
    }
    t.elapsed() / ws.len() as u32
}

/// The server's version and the settings that decide what a commit costs.
fn postgres_settings(server: &str) -> String {
    let mut c = postgres::Client::connect(server, postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot connect to the PostgreSQL server {server}: {e}"));
    let mut show = |name: &str| -> String {
        c.query_one(&format!("SHOW {name}"), &[])
            .map(|r| r.get(0))
            .unwrap_or_else(|e| format!("? ({e})"))
    };
    format!(
        "server {}, synchronous_commit={}, fsync={}",
        show("server_version"),
        show("synchronous_commit"),
        show("fsync")
    )
}

fn claim(store: &mut dyn Store, w: &Window) -> Lease {
    let now = w.end;
    match store
        .claim(&ClaimRequest {
            window: w,
            owner: "bench",
            component: "sha256:bench",
            now,
            lease: Duration::from_secs(300),
            max_attempts: 3,
            purpose: jobhost::store::Purpose::Asked,
            probe: &jobhost::store::LocalProcesses,
        })
        .unwrap()
    {
        Claim::Run { lease, .. } => lease,
        other => panic!("fresh window not claimable: {other:?}"),
    }
}

fn prepare_and_finish(store: &mut dyn Store, w: &Window, lease: &Lease, check: bool) {
    let message = StagedMessage {
        seq: 1,
        destination: "digest".into(),
        idempotency_key: format!("{}#1", w.key()),
        content_type: "application/json".into(),
        body: br#"{"orders":240,"revenue":18211.5}"#.to_vec(),
    };
    let report = StoredReport {
        summary: "240 orders".into(),
        cursor: Some("c".into()),
        prompt: None,
        described: true,
    };
    store
        .prepare(lease, &report, &[message], &[0; 2048], w.end)
        .unwrap();
    if check {
        store.check_lease(lease, w.end).unwrap();
    }
    let done = Attempted {
        seq: 1,
        tries: 1,
        status: "http 200",
    };
    store.finish(lease, Some(&done), w.end).unwrap();
}
