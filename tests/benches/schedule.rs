//! What one scheduling wake-up costs the store, and whether that grows
//! with the job's history. Once per job per wake-up the daemon reads the
//! job's unfinished runs, its `decided_until`, the rows after it, and
//! plans over them (`jobhost plan` does the same but for the unfinished
//! runs). Measured for an hourly job whose store holds 100, 1,000 and
//! 10,000 rows (four days, six weeks, fourteen months of hours), on SQLite
//! and PostgreSQL side by side in one process, beside a read of the whole
//! history (what `status` and `history` do, and what a wake-up did before
//! it read only the rows after `decided_until`); and the cost of recording
//! a three-day outage's 72 skips in one transaction.
//!
//! SQLite: WAL, `synchronous=FULL`, its file under `target/bench-schedule`.
//! PostgreSQL: the server named by `JOBHOST_TEST_POSTGRES`, skipped (and
//! said so) without it. Rounds interleave the backends and swap which goes
//! first; reported are medians with the fastest and slowest round.
//!
//! `cargo bench -p jobhost-tests --bench schedule` (add `-- --quick` for
//! fewer rounds).

use jobhost_tests::stats::{median, ms, ratio, spread};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use jobhost::app::config::{JobConfig, RunFlags};
use jobhost::core::window::{JobName, Window, WindowKind, Zone};
use jobhost::store::{PostgresStore, PostgresUrl, Skip, SqliteStore, Store};
use jobhost_tests::pg::Scratch;

const SIZES: [usize; 3] = [100, 1_000, 10_000];

struct Backend {
    store: Box<dyn Store>,
    _scratch: Option<Scratch>,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (rounds, plans) = if quick { (3, 5) } else { (5, 15) };
    let dir = jobhost_tests::guests::workspace_root()
        .join("target")
        .join("bench-schedule");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench folder");
    let pg_server = jobhost_tests::pg::bench_server("bench schedule (PostgreSQL half)");
    let backends_n = if pg_server.is_some() { 2 } else { 1 };

    let cfg_path = dir.join("job.toml");
    std::fs::write(
        &cfg_path,
        "job = \"bench\"\ncomponent = \"unused.wasm\"\nwindow = \"hour\"\ncatch_up = \"all\"\n",
    )
    .expect("config");
    let config = JobConfig::load(&RunFlags {
        config: Some(cfg_path),
        ..RunFlags::default()
    })
    .expect("config");
    let (schedule, catch_up) = (
        config.schedule().expect("schedule"),
        config.catch_up().expect("catch-up"),
    );
    let job = JobName::new("bench").unwrap();
    let start: Timestamp = "2025-01-01T00:00:00Z".parse().unwrap();
    let hours = |from: usize, count: usize| -> Vec<Window> {
        (from..from + count)
            .map(|h| {
                let t = start + SignedDuration::from_hours(h as i64);
                Window::containing(&job, WindowKind::Hour, &Zone::utc(), t).unwrap()
            })
            .collect()
    };

    // plan[backend][size], full[backend][size] and skips[backend]: one
    // per-operation time per round.
    let mut plan_times: Vec<Vec<Vec<Duration>>> = vec![vec![Vec::new(); SIZES.len()]; 2];
    let mut full_times: Vec<Vec<Vec<Duration>>> = vec![vec![Vec::new(); SIZES.len()]; 2];
    let mut skip_times: Vec<Vec<Duration>> = vec![Vec::new(); 2];
    for round in 0..rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..backends_n).collect()
        } else {
            (0..backends_n).rev().collect()
        };
        for (si, &size) in SIZES.iter().enumerate() {
            let mut backends: Vec<Backend> = Vec::new();
            backends.push(Backend {
                store: Box::new(
                    SqliteStore::open(&dir.join(format!("r{round}-{size}.db"))).unwrap(),
                ),
                _scratch: None,
            });
            if pg_server.is_some() {
                let scratch = Scratch::for_bench("bench schedule").expect("scratch schema");
                let store = PostgresStore::open(&PostgresUrl::new(scratch.url())).unwrap();
                backends.push(Backend {
                    store: Box::new(store),
                    _scratch: Some(scratch),
                });
            }
            // The history: `size` decided hours, then the mark after them.
            let ws = hours(0, size);
            let now = ws.last().unwrap().end + SignedDuration::from_mins(30);
            for b in &mut backends {
                for chunk in ws.chunks(1000) {
                    let skips: Vec<Skip<'_>> = chunk
                        .iter()
                        .map(|w| Skip {
                            window: w,
                            reason: "bench",
                        })
                        .collect();
                    b.store.record_skips(&skips, "bench", now).unwrap();
                }
                b.store
                    .set_decided_until(&job, ws.last().unwrap().end, now)
                    .unwrap();
            }
            for &b in &order {
                let store = backends[b].store.as_mut();
                let t = Instant::now();
                for _ in 0..plans {
                    let open = store.unfinished("bench").unwrap();
                    let plan =
                        jobhost::run::plan::plan(&schedule, catch_up, now, None, Some(&mut *store))
                            .unwrap();
                    std::hint::black_box((open, plan));
                }
                plan_times[b][si].push(t.elapsed() / plans as u32);
                let t = Instant::now();
                for _ in 0..plans {
                    std::hint::black_box(store.history(Some("bench")).unwrap());
                }
                full_times[b][si].push(t.elapsed() / plans as u32);
            }
            if si == 0 {
                // A three-day outage's skips, after the history.
                let outage = hours(size + 10, 72);
                for &b in &order {
                    let skips: Vec<Skip<'_>> = outage
                        .iter()
                        .map(|w| Skip {
                            window: w,
                            reason: "bench",
                        })
                        .collect();
                    let t = Instant::now();
                    backends[b]
                        .store
                        .record_skips(&skips, "bench", now)
                        .unwrap();
                    skip_times[b].push(t.elapsed());
                }
            }
        }
    }

    println!(
        "schedule: {rounds} rounds, {plans} plans per measurement; medians (fastest..slowest round)"
    );
    let names = [
        "SQLite (WAL, synchronous=FULL)",
        "PostgreSQL (one connection)",
    ];
    for b in 0..backends_n {
        println!("{}", names[b]);
        for (si, size) in SIZES.iter().enumerate() {
            let m = median(&plan_times[b][si]);
            println!(
                "  one wake-up, {size:>6} rows held        {:>9.3} ms  ({}; {:.1}x the 100-row one)",
                ms(m),
                spread(&plan_times[b][si]),
                ratio(m, median(&plan_times[b][0]))
            );
            let f = median(&full_times[b][si]);
            println!(
                "  the whole history, {size:>6} rows       {:>9.3} ms  ({}; {:.1}x the wake-up)",
                ms(f),
                spread(&full_times[b][si]),
                ratio(f, m)
            );
        }
        println!(
            "  72 skips in one transaction            {:>9.3} ms  ({})",
            ms(median(&skip_times[b])),
            spread(&skip_times[b])
        );
    }
    if backends_n == 2 {
        println!("PostgreSQL vs SQLite (above 1: PostgreSQL is slower)");
        for (si, size) in SIZES.iter().enumerate() {
            println!(
                "  wake-up, {size:>6} rows held          {:>6.2}x",
                ratio(median(&plan_times[1][si]), median(&plan_times[0][si]))
            );
        }
        println!(
            "  72 skips                               {:>6.2}x",
            ratio(median(&skip_times[1]), median(&skip_times[0]))
        );
    } else {
        println!(
            "PostgreSQL: SKIPPED, {} is not set; set it to a PostgreSQL server to measure it beside SQLite",
            jobhost_tests::pg::VAR
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
