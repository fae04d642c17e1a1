//! One `jobhost daemon --jobs DIR` over a folder of 1,000 hourly jobs, all
//! due when it starts: how long each job waits from its window's due
//! moment to its run (the receipt's `now`, the instant the run read, less
//! the due moment), how many runs a second the daemon sustains, its peak
//! memory, and how long a SIGHUP takes to take in 10 new files (from the
//! signal to the tenth `joins the daemon` line on stderr). Side by side in
//! one run: `--max-concurrent-runs 1` (one run at a time, as before bounded
//! concurrency), the machine's cores (at least 2) and twice as many.
//!
//! The daemon runs in real time: its clock starts at the due moment
//! (`--now`). The wait grows with a job's place in the folder; the
//! percentiles say how much.
//!
//! Then `jobhost backfill` of 480 hourly windows with `--parallel 1` and
//! `--parallel 4`, interleaved: the median time of each, and that both
//! delivered the same messages.
//!
//! `cargo bench -p jobhost-tests --bench folder` (`-- --quick`: 200 jobs).
//! Run with `RUST_BACKTRACE=0`, which this bench sets for itself and its
//! children.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use jobhost_tests::guests;
use jobhost_tests::stats::{ms, percentile};

const DUE: &str = "2026-11-09T01:00:00Z";
const HOUR_START: i64 = 1_794_182_400; // 2026-11-09T00:00:00Z
const QUERY: &str = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id";

fn job_file(dir: &Path, name: &str, component: &Path) {
    std::fs::write(
        dir.join(format!("{name}.toml")),
        format!(
            "job = \"{name}\"\nwindow = \"hour\"\ncomponent = \"{}\"\n[source]\npath = \"../sales.db\"\n\
             query = \"{QUERY}\"\n[destinations.digest]\ntype = \"file\"\n\
             path = \"../out/{name}.jsonl\"\n",
            component.display()
        ),
    )
    .expect("job file");
}

/// The process's peak resident memory, from /proc.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    // SAFETY: set before any thread starts.
    unsafe { std::env::set_var("RUST_BACKTRACE", "0") };
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--against PATH`: another build of the host (the code before a
    // change), measured in turn with this one.
    let against = jobhost_tests::stats::flag_value("--against").map(PathBuf::from);
    let jobs = if quick { 200 } else { 1000 };

    let root = guests::workspace_root();
    let target = root.join("target").join("bench-guests");
    let built = guests::build(&target).unwrap_or_else(|e| panic!("building guests failed:\n{e}"));
    let work = root.join("target").join("bench-folder");
    let _ = std::fs::remove_dir_all(&work);
    let dir = work.join("jobs");
    std::fs::create_dir_all(&dir).expect("bench folder");
    std::fs::create_dir_all(work.join("out")).expect("out folder");
    jobhost_tests::sample::write_sales(
        &work.join("sales.db"),
        HOUR_START,
        HOUR_START + 3600,
        200,
        11,
    )
    .expect("sample data");
    for i in 0..jobs {
        job_file(&dir, &format!("job-{i:04}"), &built.report);
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_jobhost-under-test"));
    let mut builds = vec![("this build", bin.clone())];
    if let Some(other) = against {
        builds.push(("--against", other));
    }
    let cache = target.join("compile-cache");
    // Side by side, each on a fresh store: one run at a time (as before
    // bounded concurrency), the machine's cores (the default) and twice
    // the cores, where runs wait on the disk more than on the CPU.
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let mut rows = Vec::new();
    for concurrency in [1, cores.max(2), 2 * cores.max(2)] {
        for (name, bin) in &builds {
            let store = work.join(format!("s-{concurrency}.db"));
            for stale in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(work.join(format!("s-{concurrency}.db{stale}")));
            }
            let _ = std::fs::remove_dir_all(work.join("out"));
            std::fs::create_dir_all(work.join("out")).expect("out folder");
            for i in 0..10 {
                let _ = std::fs::remove_file(dir.join(format!("new-{i:02}.toml")));
            }
            rows.push((
                *name,
                concurrency,
                daemon(bin, &dir, &store, &cache, concurrency, jobs, &built.report),
            ));
        }
    }
    println!("jobhost daemon --jobs DIR: {jobs} hourly jobs, all due at start (one process)");
    for (name, concurrency, m) in &rows {
        println!("  {name}, --max-concurrent-runs {concurrency}");
        println!(
            "    due-to-run wait      p50 {:>9.0} ms   p99 {:>9.0} ms   max {:>9.0} ms",
            ms(percentile(&m.waits, 50)),
            ms(percentile(&m.waits, 99)),
            ms(percentile(&m.waits, 100))
        );
        println!(
            "    all {jobs} ran after   {:>9.0} ms from spawn: {:.0} runs/s",
            ms(m.all_ran),
            jobs as f64 / m.all_ran.as_secs_f64()
        );
        println!("    peak RSS             {:>9.1} MiB", m.rss);
        println!(
            "    SIGHUP with 10 new files: all 10 joined after {:.0} ms",
            ms(m.reload)
        );
    }
    let this: Vec<_> = rows.iter().filter(|r| r.0 == "this build").collect();
    if let Some((_, _, one)) = this.first() {
        for (_, n, many) in &this[1..] {
            println!(
                "  {n} at once against 1: p99 wait x{:.2}, all ran x{:.2}",
                ms(percentile(&many.waits, 99)) / ms(percentile(&one.waits, 99)).max(1.0),
                many.all_ran.as_secs_f64() / one.all_ran.as_secs_f64()
            );
        }
    }
    for pair in rows.chunks(2).filter(|p| p.len() == 2 && builds.len() == 2) {
        let ((_, n, new), (_, _, old)) = (&pair[0], &pair[1]);
        println!(
            "  {n} at once, this build against --against: p99 wait x{:.2}, all ran x{:.2}",
            ms(percentile(&new.waits, 99)) / ms(percentile(&old.waits, 99)).max(1.0),
            new.all_ran.as_secs_f64() / old.all_ran.as_secs_f64()
        );
    }
    for (name, bin) in &builds {
        println!("{name}:");
        backfills(bin, &work, &cache, &built.probe);
    }
}

/// What one daemon over the folder measured.
struct Measured {
    waits: Vec<Duration>,
    all_ran: Duration,
    rss: f64,
    reload: Duration,
}

/// One daemon over `dir` with `concurrency` runs at once, until every job
/// ran and ten new files joined after a SIGHUP.
fn daemon(
    bin: &Path,
    dir: &Path,
    store: &Path,
    cache: &Path,
    concurrency: usize,
    jobs: usize,
    report: &Path,
) -> Measured {
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(["daemon", "--jobs"])
        .arg(dir)
        .arg("--store")
        .arg(store)
        .args(["--now", DUE])
        .args(["--max-concurrent-runs", &concurrency.to_string()])
        .env("JOBHOST_CACHE_DIR", cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the daemon starts");
    let pid = child.id();
    let (tx, rx) = mpsc::channel::<(bool, String, Instant)>();
    for (is_out, stream) in [
        (
            true,
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        ),
        (false, Box::new(child.stderr.take().unwrap())),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                let _ = tx.send((is_out, line, Instant::now()));
            }
        });
    }
    let due: jiff::Timestamp = DUE.parse().unwrap();
    let mut waits = Vec::new();
    let mut last = started;
    let deadline = Duration::from_secs(1800);
    while waits.len() < jobs {
        let (is_out, line, at) = rx
            .recv_timeout(deadline)
            .unwrap_or_else(|_| panic!("only {} of {jobs} runs came", waits.len()));
        if !is_out {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
        assert_eq!(v["event"], "ran", "{line}");
        let now: jiff::Timestamp = v["now"].as_str().unwrap().parse().unwrap();
        waits.push(Duration::try_from(now.duration_since(due)).unwrap_or_default());
        last = at;
    }
    let all_ran = last.duration_since(started);
    let rss = peak_rss_mib(pid);

    // Ten new files, then SIGHUP: the time until the daemon says each
    // joined.
    for i in 0..10 {
        job_file(dir, &format!("new-{i:02}"), report);
    }
    let hup = Instant::now();
    // SAFETY: signalling a child process we own.
    unsafe { libc::kill(pid as i32, libc::SIGHUP) };
    let mut joined = 0;
    let mut reload = Duration::ZERO;
    while joined < 10 {
        let (is_out, line, at) = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the new jobs join");
        if !is_out && line.contains("joins the daemon") {
            joined += 1;
            reload = at.duration_since(hup);
        }
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let _ = child.wait();

    Measured {
        waits,
        all_ran,
        rss,
        reload,
    }
}

/// How many days of hourly windows the backfills run.
const BACKFILL_DAYS: i64 = 20;

/// `jobhost backfill` over 20 days of hourly windows (480) of a job whose
/// component keeps no cursor (the probe reading its window's rows and
/// sending two messages), with `--parallel 1` and `--parallel 4`, each on
/// a fresh store, interleaved over 3 rounds: the median time of each, and
/// that both delivered the same lines.
fn backfills(bin: &Path, work: &Path, cache: &Path, probe: &Path) {
    let windows = (BACKFILL_DAYS * 24) as usize;
    let data = work.join("backfill-sales.db");
    jobhost_tests::sample::write_sales(
        &data,
        HOUR_START - BACKFILL_DAYS * 86_400,
        HOUR_START,
        (windows * 50) as u64,
        11,
    )
    .expect("sample data");
    let from = jiff::Timestamp::from_second(HOUR_START - BACKFILL_DAYS * 86_400)
        .expect("a time")
        .to_string();
    let mut took: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut delivered: Vec<Vec<String>> = Vec::new();
    for round in 0..3 {
        for (i, parallel) in ["1", "4"].into_iter().enumerate() {
            let dir = work.join(format!("backfill-{parallel}"));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("backfill folder");
            let cfg = dir.join("job.toml");
            std::fs::write(
                &cfg,
                format!(
                    "job = \"reader\"\nwindow = \"hour\"\ncomponent = \"{}\"\n\
                     [params]\nmode = \"send-twice\"\n\
                     [source]\npath = \"{}\"\nquery = \"{QUERY}\"\n\
                     [destinations.out]\ntype = \"file\"\npath = \"out.jsonl\"\n",
                    probe.display(),
                    data.display()
                ),
            )
            .expect("job file");
            let started = Instant::now();
            let out = Command::new(bin)
                .arg("backfill")
                .arg("--config")
                .arg(&cfg)
                .args(["--from", &from, "--to", "2026-11-09T00:00:00Z"])
                .args(["--now", DUE, "--parallel", parallel])
                .env("JOBHOST_CACHE_DIR", cache)
                .output()
                .expect("backfill runs");
            took[i].push(started.elapsed());
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            if round == 0 {
                let mut lines: Vec<String> = std::fs::read_to_string(dir.join("out.jsonl"))
                    .expect("delivered")
                    .lines()
                    .map(str::to_string)
                    .collect();
                lines.sort();
                assert_eq!(
                    lines.len(),
                    2 * windows,
                    "2 messages a window: --parallel {parallel} said {}",
                    String::from_utf8_lossy(&out.stderr)
                        .lines()
                        .filter(|l| !l.contains(" run: ran (exit 0)"))
                        .collect::<Vec<_>>()
                        .join("\n")
                );
                delivered.push(lines);
            }
        }
    }
    assert_eq!(delivered[0], delivered[1], "the same messages either way");
    println!(
        "jobhost backfill: {windows} hourly windows of a job without a cursor, {} messages \
         (median of 3, interleaved)",
        2 * windows
    );
    let (one, four) = (percentile(&took[0], 50), percentile(&took[1], 50));
    println!("  --parallel 1   {:>9.0} ms", ms(one));
    println!("  --parallel 4   {:>9.0} ms", ms(four));
    println!(
        "  --parallel 4 against 1: x{:.2} the time, the same {} lines delivered",
        four.as_secs_f64() / one.as_secs_f64(),
        2 * windows
    );
}
