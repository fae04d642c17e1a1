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

/// What one drain measured.
struct Drained {
    took: std::time::Duration,
    claims: usize,
    ran_by_host: Vec<usize>,
    ran: HashMap<String, usize>,
    done: i64,
    requests: usize,
    keys: usize,
    sent_twice: usize,
    lost: usize,
    /// Transactions the database committed meanwhile (every statement
    /// outside a transaction is one): the store's round trips, roughly.
    commits: i64,
}

/// Transactions committed in the database `c` is connected to, once the
/// statistics of the sessions that just ended have reached the server.
fn commits(c: &mut postgres::Client) -> i64 {
    std::thread::sleep(std::time::Duration::from_millis(1500));
    c.batch_execute("SELECT pg_stat_clear_snapshot()")
        .expect("clear the snapshot");
    c.query_one(
        "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
        &[],
    )
    .expect("read the database's statistics")
    .get(0)
}

/// `hosts` daemons of `bin` draining `dir` into a fresh schema of `db`'s
/// server, with `sink` as the endpoint (its requests cleared first).
fn drain(bin: &Path, cache: &Path, dir: &Path, hosts: usize, sink: &Sink, jobs: usize) -> Drained {
    let db = Scratch::for_bench("fleet").expect("the server answered before");
    sink.clear();
    let store = db.url();
    let mut c = db.client();
    let before = commits(&mut c);
    let started = Instant::now();
    let children: Vec<_> = (0..hosts)
        .map(|_| {
            Command::new(bin)
                .args(["daemon", "--jobs"])
                .arg(dir)
                .args([
                    "--store", &store, "--since", SINCE, "--now", NOW, "--until", NOW,
                ])
                .env("JOBHOST_CACHE_DIR", cache)
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
    let took = started.elapsed();
    let commits = commits(&mut c) - before;

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
                Some("skipped") => {}
                _ => {
                    // Anything else (a failure) is shown: the bench then
                    // fails on the windows not done.
                    eprintln!("  a host printed: {line}");
                }
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
    ran_by_host.sort_unstable();
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
    let windows = jobs * WINDOWS;
    Drained {
        took,
        claims,
        ran_by_host,
        ran,
        done,
        requests: requests.len(),
        keys: keys.len(),
        sent_twice: keys.values().filter(|n| **n > 1).count(),
        lost: (2 * windows).saturating_sub(keys.len()),
        commits,
    }
}

fn main() {
    // SAFETY: set before any thread starts.
    unsafe { std::env::set_var("RUST_BACKTRACE", "0") };
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--against PATH`: another build of the host (the code before a
    // change), drained in turn with this one, for numbers side by side.
    let against = jobhost_tests::stats::flag_value("--against").map(PathBuf::from);
    let rounds: usize = jobhost_tests::stats::flag_value("--rounds")
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let (jobs, hosts) = if quick { (100, 4) } else { (1000, 8) };
    if Scratch::for_bench("fleet").is_none() {
        return;
    }
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
    let mut builds = vec![("this build", bin)];
    if let Some(other) = against {
        builds.push(("--against", other));
    }
    let cache = target.join("compile-cache");
    for (_, bin) in &builds {
        // The component compiled once, before the clock starts.
        let warm = Command::new(bin)
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
    }
    let windows = jobs * WINDOWS;
    println!(
        "{hosts} daemons on one PostgreSQL, {jobs} hourly jobs x {WINDOWS} windows behind = \
         {windows} windows, two messages each; {rounds} round(s), the builds in turn"
    );
    let mut took: Vec<Vec<f64>> = vec![Vec::new(); builds.len()];
    for round in 0..rounds {
        for (i, (name, bin)) in builds.iter().enumerate() {
            let d = drain(bin, &cache, &dir, hosts, &sink, jobs);
            let twice = d.ran.values().filter(|n| **n > 1).count();
            println!("  round {} {name}:", round + 1);
            println!(
                "    drained in {:>9.0} ms: {:.0} runs/s, {:.0} claims/s ({} claims); \
                 {} store transactions ({:.1} per window)",
                ms(d.took),
                d.ran.len() as f64 / d.took.as_secs_f64(),
                d.claims as f64 / d.took.as_secs_f64(),
                d.claims,
                d.commits,
                d.commits as f64 / windows as f64
            );
            println!("    runs per host (sorted): {:?}", d.ran_by_host);
            println!(
                "    store: {} of {windows} DONE at fence 1; receipts: {} windows ran, {twice} twice",
                d.done,
                d.ran.len()
            );
            println!(
                "    endpoint: {} requests, {} keys; {} delivered twice, {} lost",
                d.requests, d.keys, d.sent_twice, d.lost
            );
            assert_eq!(d.done as usize, windows, "every window DONE once");
            assert_eq!(twice, 0, "no window ran twice");
            assert_eq!(d.sent_twice, 0, "no message delivered twice");
            assert_eq!(d.lost, 0, "no message lost");
            took[i].push(ms(d.took));
        }
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    if builds.len() == 2 {
        let (a, b) = (median(&took[0]), median(&took[1]));
        println!(
            "  median drain: this build {a:.0} ms, --against {b:.0} ms (x{:.2})",
            a / b
        );
    }
}
