//! A fleet draining a backlog: 8 daemons on one PostgreSQL store, given the
//! same folder of 1,000 hourly jobs, each job 24 windows behind (24,000
//! windows), every window posting two messages to an HTTP endpoint. The
//! daemons start together (`--since` a day back, `--until` the start, in
//! real time) and each returns once nothing is left for it. Measured: the
//! time to drain, runs and claims a second (a claim is a run or a window
//! found taken), the spread of runs over the hosts, and, from the store and
//! the endpoint, that no window ran twice or was lost and no message was
//! delivered twice.
//!
//! `cargo bench -p jobhost-tests --bench fleet` (`-- --quick`: 100 jobs,
//! 4 hosts), with `JOBHOST_TEST_POSTGRES` naming the server. Run with
//! `RUST_BACKTRACE=0`, which this bench sets for itself and its children.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use jobhost_tests::guests;
use jobhost_tests::pg::Scratch;
use jobhost_tests::sink::Sink;
use jobhost_tests::stats::ms;

const SINCE: &str = "2026-11-08T00:00:00Z";
const NOW: &str = "2026-11-09T00:30:00Z";
const WINDOWS: usize = 24;

fn job_file(dir: &Path, name: &str, probe: &Path, url: &str) {
    std::fs::write(
        dir.join(format!("{name}.toml")),
        format!(
            "job = \"{name}\"\nwindow = \"hour\"\ntimezone = \"UTC\"\ncomponent = \"{}\"\n\
             catch_up = \"all\"\nmax_catch_up = {WINDOWS}\n[params]\nmode = \"send-twice\"\n\
             [destinations.hook]\ntype = \"http\"\nurl = \"{url}\"\n",
            probe.display()
        ),
    )
    .expect("job file");
}

fn main() {
    // SAFETY: set before any thread starts.
    unsafe { std::env::set_var("RUST_BACKTRACE", "0") };
    let quick = std::env::args().any(|a| a == "--quick");
    let (jobs, hosts) = if quick { (100, 4) } else { (1000, 8) };
    let Some(db) = Scratch::for_bench("fleet") else {
        return;
    };
    let root = guests::workspace_root();
    let target = root.join("target").join("bench-guests");
    let built = guests::build(&target).unwrap_or_else(|e| panic!("building guests failed:\n{e}"));
    let work = root.join("target").join("bench-fleet");
    let _ = std::fs::remove_dir_all(&work);
    let dir = work.join("jobs");
    std::fs::create_dir_all(&dir).expect("bench folder");
    let sink = Sink::start();
    for i in 0..jobs {
        job_file(
            &dir,
            &format!("job-{i:04}"),
            &built.probe,
            &sink.url("/hook"),
        );
    }
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_jobhost-under-test"));
    let cache = target.join("compile-cache");
    // The component compiled once, before the clock starts.
    let warm = Command::new(&bin)
        .arg("compile")
        .arg(&built.probe)
        .env("JOBHOST_CACHE_DIR", &cache)
        .output()
        .expect("compile");
    assert!(
        warm.status.success(),
        "{}",
        String::from_utf8_lossy(&warm.stderr)
    );
    let store = db.url();
    let started = Instant::now();
    let children: Vec<_> = (0..hosts)
        .map(|_| {
            Command::new(&bin)
                .args(["daemon", "--jobs"])
                .arg(&dir)
                .args([
                    "--store", &store, "--since", SINCE, "--now", NOW, "--until", NOW,
                ])
                .env("JOBHOST_CACHE_DIR", &cache)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("a daemon starts")
        })
        .collect();
    // Each host's output is read on a thread of its own: a pipe nobody
    // reads fills up and stops the host writing to it.
    let outputs: Vec<_> = children
        .into_iter()
        .map(|c| std::thread::spawn(move || c.wait_with_output().expect("the daemon ends")))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().expect("the reader"))
        .collect();
    let drained = started.elapsed();

    let mut ran_by_host = Vec::new();
    let mut claims = 0usize;
    let mut ran: HashMap<String, usize> = HashMap::new();
    for out in &outputs {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut mine = 0;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            match v["event"].as_str() {
                Some("ran") => {
                    mine += 1;
                    claims += 1;
                    *ran.entry(v["key"].as_str().unwrap_or_default().to_string())
                        .or_default() += 1;
                }
                Some("skipped") if v["reason"] != "catch-up" => claims += 1,
                _ => {}
            }
        }
        ran_by_host.push(mine);
        // What a host said on stderr besides the usual notes, for a reader
        // of the numbers.
        for line in String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| !l.contains("note:"))
            .take(3)
        {
            eprintln!("  a host said: {line}");
        }
    }
    let windows = jobs * WINDOWS;
    let twice = ran.values().filter(|n| **n > 1).count();
    let mut c = db.client();
    let done: i64 = c
        .query_one(
            "SELECT count(*) FROM jobhost_runs WHERE state = 'DONE' AND fence = 1",
            &[],
        )
        .expect("count the store's runs")
        .get(0);
    let requests = sink.requests();
    let mut keys: HashMap<String, usize> = HashMap::new();
    for r in &requests {
        *keys
            .entry(r.idempotency_key().unwrap_or_default().to_string())
            .or_default() += 1;
    }
    let sent_twice = keys.values().filter(|n| **n > 1).count();
    let lost = (2 * windows).saturating_sub(keys.len());

    println!(
        "{hosts} daemons on one PostgreSQL, {jobs} hourly jobs x {WINDOWS} windows behind = \
         {windows} windows, two messages each"
    );
    println!(
        "  drained in {:>9.0} ms: {:.0} runs/s, {:.0} claims/s ({claims} claims)",
        ms(drained),
        ran.len() as f64 / drained.as_secs_f64(),
        claims as f64 / drained.as_secs_f64()
    );
    ran_by_host.sort_unstable();
    println!("  runs per host (sorted): {ran_by_host:?}");
    println!(
        "  store: {done} of {windows} DONE at fence 1; receipts: {} windows ran, {twice} twice",
        ran.len()
    );
    println!(
        "  endpoint: {} requests, {} keys; {sent_twice} delivered twice, {lost} lost",
        requests.len(),
        keys.len()
    );
    assert_eq!(done as usize, windows, "every window DONE once");
    assert_eq!(twice, 0, "no window ran twice");
    assert_eq!(sent_twice, 0, "no message delivered twice");
    assert_eq!(lost, 0, "no message lost");
}
