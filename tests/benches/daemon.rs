//! One `jobhost daemon` wake-up with 50 jobs due at once: a process that
//! starts, checks the jobs' components, runs each job's newest window (the
//! reference report over a small day of rows, delivered to a file) and
//! exits, timed from spawn to exit, with the CPU time (user and system)
//! the process used, which leaves out the waits for the store's fsyncs.
//! Every sample starts on a fresh store, so each of the 50 jobs has its
//! window to run.
//!
//! To compare a change with the code before it, build the older tree's
//! `jobhost` and name it in `JOBHOST_BENCH_BASELINE`: both binaries are
//! then measured, interleaved sample by sample (which goes first
//! alternates), and the ratio of the medians is printed. Beside it, in
//! process and in this build alone: the same 50 runs through `run_window`,
//! as the daemon makes them, each building an engine and linker of its own
//! (what every run did before) against all sharing one, interleaved; and
//! what building one engine and linker costs, and loading the cached
//! component into it (still once per run).
//!
//! `cargo bench -p jobhost-tests --bench daemon` (add `-- --quick` for
//! fewer samples). Run with `RUST_BACKTRACE=0`, which this bench sets for
//! itself and its children.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jobhost::app::config::{JobConfig, RunFlags};
use jobhost::guest::cache::CompileCache;
use jobhost::guest::sandbox::{ComponentFile, Sandbox};
use jobhost::run::{Job, Runtime};
use jobhost_tests::guests;
use jobhost_tests::process::measure;
use jobhost_tests::stats::{median, ms, ratio, report};

/// Jobs due at the one wake-up.
const JOBS: usize = 50;
/// Rows in each job's day.
const ROWS_PER_DAY: u64 = 200;
const DAY_START: i64 = 1_794_096_000; // 2026-11-08T00:00:00Z
const NOW: &str = "2026-11-09T00:05:00Z";
const QUERY: &str = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id";

fn main() {
    // SAFETY: set before any thread starts.
    unsafe { std::env::set_var("RUST_BACKTRACE", "0") };
    let quick = std::env::args().any(|a| a == "--quick");
    let samples = if quick { 5 } else { 21 };

    let root = guests::workspace_root();
    let target = root.join("target").join("bench-guests");
    let built = guests::build(&target).unwrap_or_else(|e| panic!("building guests failed:\n{e}"));
    let cache = target.join("compile-cache");
    // On the project's disk, as a daemon's store would be: its commits are
    // fsync'd for real.
    let work = root.join("target").join("bench-daemon");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("bench folder");
    jobhost_tests::sample::write_sales(
        &work.join("sales.db"),
        DAY_START - 86_400,
        DAY_START + 86_400,
        2 * ROWS_PER_DAY,
        11,
    )
    .expect("sample data");
    let configs: Vec<PathBuf> = (1..=JOBS)
        .map(|i| {
            let path = work.join(format!("job-{i:02}.toml"));
            std::fs::write(
                &path,
                format!(
                    "job = \"job-{i:02}\"\ncomponent = \"{}\"\n[source]\npath = \"sales.db\"\n\
                     query = \"{QUERY}\"\n[destinations.digest]\ntype = \"file\"\n\
                     path = \"out/job-{i:02}.jsonl\"\n",
                    built.report.display()
                ),
            )
            .expect("bench config");
            path
        })
        .collect();

    let this = PathBuf::from(env!("CARGO_BIN_EXE_jobhost-under-test"));
    let mut bins = vec![("this build", this)];
    if let Some(b) = std::env::var_os("JOBHOST_BENCH_BASELINE") {
        bins.push(("baseline", PathBuf::from(b)));
    }
    // Warm the compile cache once, outside any measurement.
    wake_up(&bins[0].1, &configs, &work, &work.join("warm.db"), &cache);

    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); bins.len()];
    let mut cpu: Vec<Vec<Duration>> = vec![Vec::new(); bins.len()];
    for i in 0..samples {
        let order: Vec<usize> = if i % 2 == 0 {
            (0..bins.len()).collect()
        } else {
            (0..bins.len()).rev().collect()
        };
        for b in order {
            let store = work.join(format!("s-{i}-{b}.db"));
            let (wall, used) = wake_up(&bins[b].1, &configs, &work, &store, &cache);
            times[b].push(wall);
            cpu[b].push(used);
        }
    }

    // In process, the same binary: a wake-up's 50 runs through
    // `run_window` as the daemon makes them, each building its own engine
    // and linker (as every run did before) or all sharing one (as the
    // daemon's now do), interleaved.
    let shared = Arc::new(Sandbox::new().expect("engine"));
    let mut in_process: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for i in 0..samples {
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for v in order {
            let store = work.join(format!("p-{i}-{v}.db"));
            let jobs = load_jobs(&configs, &store, &cache);
            let runtime = Runtime {
                now: Some(NOW.parse().expect("instant")),
                sandbox: (v == 1).then(|| shared.clone()),
                ..Runtime::default()
            };
            let _ = std::fs::remove_dir_all(work.join("out"));
            let t = Instant::now();
            for job in &jobs {
                let window = job.schedule.last_due(runtime.now.unwrap()).expect("window");
                let outcome = jobhost::run::run_window(job, Some(&window), &runtime);
                assert_eq!(outcome.exit_code, 0, "{:?}", outcome.receipt.error);
            }
            in_process[v].push(t.elapsed());
        }
    }

    // In process: the engine and linker alone, and one load of the cached
    // component into them.
    let builds: Vec<Duration> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(Sandbox::new().expect("engine"));
            t.elapsed()
        })
        .collect();
    let compile_cache = CompileCache::new(Some(cache.clone()));
    let loads: Vec<Duration> = (0..samples)
        .map(|_| {
            let t = Instant::now();
            let mut file = ComponentFile::open(&built.report, &compile_cache).expect("component");
            std::hint::black_box(shared.load(&mut file, &compile_cache).expect("load"));
            t.elapsed()
        })
        .collect();

    println!(
        "daemon wake-up benchmarks (medians, p25-p75; {samples} samples of one `jobhost daemon` \
         process, {JOBS} jobs due, {ROWS_PER_DAY} rows each)"
    );
    for ((name, _), t) in bins.iter().zip(&times) {
        report(&format!("one wake-up, {JOBS} runs: {name}"), t);
        println!(
            "  {:<52} {:>9.2} ms",
            format!("  per run: {name}"),
            ms(median(t)) / JOBS as f64
        );
    }
    if times.len() == 2 {
        println!(
            "  this build / baseline = {:.3}",
            ratio(median(&times[0]), median(&times[1]))
        );
    }
    // CPU time leaves out the waits for the store's fsyncs, the noisiest
    // part of a wake-up.
    for ((name, _), t) in bins.iter().zip(&cpu) {
        report(&format!("the same wake-up's CPU time: {name}"), t);
    }
    if cpu.len() == 2 {
        println!(
            "  CPU time, this build / baseline = {:.3}",
            ratio(median(&cpu[0]), median(&cpu[1]))
        );
    }
    report(
        &format!("in process, {JOBS} runs: an engine and linker each"),
        &in_process[0],
    );
    report(
        &format!("in process, {JOBS} runs: one engine and linker"),
        &in_process[1],
    );
    println!(
        "  shared / each its own = {:.3}",
        ratio(median(&in_process[1]), median(&in_process[0]))
    );
    report("in process: one engine and linker built", &builds);
    report("in process: the cached component loaded into them", &loads);
    let _ = std::fs::remove_dir_all(&work);
}

/// The jobs of `configs`, on `store`.
fn load_jobs(configs: &[PathBuf], store: &Path, cache: &Path) -> Vec<Job> {
    configs
        .iter()
        .map(|c| {
            JobConfig::load(&RunFlags {
                config: Some(c.clone()),
                store: Some(store.to_path_buf()),
                cache_dir: Some(cache.to_path_buf()),
                ..RunFlags::default()
            })
            .and_then(|config| config.job(&|v| std::env::var_os(v)))
            .expect("bench job")
        })
        .collect()
}

/// Runs one wake-up of `bin` over `configs` on a fresh `store`, checks that
/// every job ran, and returns how long the process took and the CPU time
/// (user and system) it used.
fn wake_up(
    bin: &Path,
    configs: &[PathBuf],
    work: &Path,
    store: &Path,
    cache: &Path,
) -> (Duration, Duration) {
    // Each sample is a first run of every window, into empty files (a
    // file that already held a key would be refused as another store's).
    let _ = std::fs::remove_dir_all(work.join("out"));
    let mut cmd = Command::new(bin);
    cmd.arg("daemon");
    for c in configs {
        cmd.arg("--config").arg(c);
    }
    cmd.arg("--store")
        .arg(store)
        .args(["--now", NOW, "--until", NOW])
        .env("JOBHOST_CACHE_DIR", cache)
        .env("RUST_BACKTRACE", "0");
    let m = measure(cmd);
    let ran = m
        .stdout
        .lines()
        .filter(|l| l.contains("\"event\":\"ran\"") && !l.contains("\"error\""))
        .count();
    assert_eq!(ran, configs.len(), "every job ran: {}", m.stdout);
    (m.wall, m.cpu)
}
