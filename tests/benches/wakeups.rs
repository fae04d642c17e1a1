//! What a daemon's wake-up costs against the number of jobs due at it, and
//! against the size of the folder: a folder of `total` jobs, `due` of them
//! with 1-minute windows and the rest hourly, so every minute `due` jobs
//! are due and the others are not. The daemon runs in virtual time (its
//! waits move its clock; nothing sleeps) over 30 minutes past the hour,
//! on a store where every job's newest window is already done. Its wall
//! time less that of the same daemon stopped after its first wake-up (the
//! one that looks at every job, as any daemon's first does) is what the 30
//! wake-ups after it cost, each looking at its due jobs and running them.
//!
//! Goal: a wake-up's cost grows with the jobs due, not with the folder
//! (the same `due` in a folder of 100 and of 1,000 costs the same).
//!
//! `cargo bench -p jobhost-tests --bench wakeups` (`-- --quick`: fewer
//! rounds). Run with `RUST_BACKTRACE=0`, which this bench sets for itself
//! and its children.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use jobhost_tests::guests;
use jobhost_tests::stats::{ms, percentile};

/// The first instant the daemons see: the hour's windows have all closed
/// and been run (by the set-up), and the minute windows go on.
const START: &str = "2026-11-09T01:00:30Z";
/// 30 minutes later.
const END: &str = "2026-11-09T01:30:30Z";
const WAKE_UPS: u32 = 30;

fn job_file(dir: &Path, name: &str, window: &str, probe: &Path) {
    std::fs::write(
        dir.join(format!("{name}.toml")),
        format!(
            "job = \"{name}\"\nwindow = \"{window}\"\ntimezone = \"UTC\"\ncomponent = \"{}\"\n\
             catch_up = \"latest\"\n[params]\nmode = \"clock\"\n",
            probe.display()
        ),
    )
    .expect("job file");
}

/// A daemon over `dir` on `store` from START until `until`, in virtual
/// time: its wall time.
fn daemon(bin: &Path, dir: &Path, store: &Path, cache: &Path, until: &str) -> Duration {
    let started = Instant::now();
    let out = Command::new(bin)
        .args(["daemon", "--jobs"])
        .arg(dir)
        .arg("--store")
        .arg(store)
        .args([
            "--now",
            START,
            "--until",
            until,
            "--max-concurrent-runs",
            "1",
        ])
        .env("JOBHOST_CACHE_DIR", cache)
        .env("JOBHOST_TEST_VIRTUAL_TIME", "1")
        .output()
        .expect("the daemon runs");
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    took
}

fn main() {
    // SAFETY: set before any thread starts.
    unsafe { std::env::set_var("RUST_BACKTRACE", "0") };
    let quick = std::env::args().any(|a| a == "--quick");
    let rounds = if quick { 1 } else { 3 };
    let root = guests::workspace_root();
    let target = root.join("target").join("bench-guests");
    let built = guests::build(&target).unwrap_or_else(|e| panic!("building guests failed:\n{e}"));
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_jobhost-under-test"));
    let cache = target.join("compile-cache");
    let work = root.join("target").join("bench-wakeups");
    println!(
        "jobhost daemon: what each of {WAKE_UPS} wake-ups costs (virtual time, one run at a time)"
    );
    println!(
        "  jobs in the folder   due each minute   per wake-up (median of {rounds})   \
         first wake-up, every job looked at (whole process)"
    );
    for (total, due) in [(100, 1), (1000, 1), (100, 10), (1000, 10), (1000, 100)] {
        let _ = std::fs::remove_dir_all(&work);
        let dir = work.join("jobs");
        std::fs::create_dir_all(&dir).expect("bench folder");
        for i in 0..total {
            let window = if i < due { "1m" } else { "hour" };
            job_file(&dir, &format!("job-{i:04}"), window, &built.probe);
        }
        // Every job's newest window done, once, on a store each round
        // starts from a copy of.
        let seeded = work.join("seeded.db");
        daemon(&bin, &dir, &seeded, &cache, START);
        let mut per_wake = Vec::new();
        let mut first = Vec::new();
        for _ in 0..rounds {
            let mut took = [Duration::ZERO; 2];
            for (i, until) in [START, END].into_iter().enumerate() {
                let store = work.join(format!("s-{i}.db"));
                for suffix in ["", "-wal", "-shm"] {
                    let to = PathBuf::from(format!("{}{suffix}", store.display()));
                    let _ = std::fs::remove_file(&to);
                    let from = PathBuf::from(format!("{}{suffix}", seeded.display()));
                    if from.exists() {
                        std::fs::copy(&from, &to).expect("copy the store");
                    }
                }
                took[i] = daemon(&bin, &dir, &store, &cache, until);
            }
            per_wake.push(took[1].saturating_sub(took[0]) / WAKE_UPS);
            first.push(took[0]);
        }
        println!(
            "  {total:>19}   {due:>15}   {:>9.1} ms   {:>9.1} ms",
            ms(percentile(&per_wake, 50)),
            ms(percentile(&first, 50))
        );
    }
}
