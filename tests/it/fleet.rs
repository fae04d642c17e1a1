//! A fleet: several daemons on one PostgreSQL store, given the same folder
//! of jobs with a backlog, share the work. Every window runs once and is
//! delivered once (counted at the endpoint by idempotency key), none is
//! lost, and the runs spread over the hosts. Each daemon claims a window
//! only when one of its workers starts it, so a host never holds a claim
//! it is not running. A host killed mid-backlog (SIGKILL) has the windows
//! it held taken over once their lease runs out; a host frozen (SIGSTOP)
//! past its lease sends nothing once it goes on. (The hosts are processes
//! on one machine; a partition harness would put them in network
//! namespaces.)

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use jobhost_tests::pg::Scratch;
use jobhost_tests::sink::Sink;
use serde_json::Value;

use crate::harness::*;

/// Hourly jobs, each with a backlog of six windows (the daemons start at
/// 06:30 with `--since` midnight), posting two messages per window.
const JOBS: usize = 12;
const WINDOWS_EACH: usize = 6;
const HOSTS: usize = 3;

#[test]
fn daemons_on_one_store_share_a_backlog_with_no_window_run_or_delivered_twice_or_lost() {
    let Some(db) = Scratch::new("fleet") else {
        return;
    };
    let sink = Sink::start();
    let tmp = scratch();
    let dir = tmp.path().join("jobs");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..JOBS {
        std::fs::write(
            dir.join(format!("job-{i:02}.toml")),
            format!(
                "job = \"job-{i:02}\"\nwindow = \"hour\"\ntimezone = \"UTC\"\ncomponent = \"{}\"\n\
                 catch_up = \"all\"\nmax_catch_up = 24\n[params]\nmode = \"send-twice\"\n\
                 [destinations.hook]\ntype = \"http\"\nurl = \"{}\"\n",
                guests().probe.display(),
                sink.url("/hook")
            ),
        )
        .unwrap();
    }
    let store = db.url();
    let hosts: Vec<_> = (0..HOSTS)
        .map(|_| {
            command(
                &root(),
                &[
                    "daemon",
                    "--jobs",
                    s(&dir),
                    "--store",
                    &store,
                    "--since",
                    "2026-11-09T00:00:00Z",
                    "--now",
                    "2026-11-09T06:30:00Z",
                    "--until",
                    "2026-11-09T06:30:00Z",
                    "--max-concurrent-runs",
                    "2",
                ],
            )
            .env("JOBHOST_TEST_VIRTUAL_TIME", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    // Each host's output is read on a thread of its own: a pipe nobody
    // reads fills up and stops the host writing to it.
    let runs = wait_all(hosts);
    let mut ran_by_host = Vec::new();
    let mut ran_keys: HashMap<String, usize> = HashMap::new();
    for run in &runs {
        assert_eq!(run.code, 0, "{}", run.stderr);
        let mut ran = 0;
        for line in run.stdout.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if v["event"] == "ran" {
                ran += 1;
                *ran_keys
                    .entry(v["key"].as_str().unwrap().to_string())
                    .or_default() += 1;
            } else {
                // What another host held or had done: never a failure.
                assert_eq!(v["event"], "skipped", "{line}\n{}", run.stderr);
            }
        }
        ran_by_host.push(ran);
    }
    // Every window ran exactly once, on one host or another.
    assert_eq!(ran_keys.len(), JOBS * WINDOWS_EACH, "{ran_by_host:?}");
    assert!(ran_keys.values().all(|n| *n == 1), "{ran_keys:?}");
    let h = history(&store);
    assert_eq!(h.len(), JOBS * WINDOWS_EACH);
    assert!(h.iter().all(|r| r["state"] == "DONE" && r["fence"] == 1));
    // Delivered once each: two messages per window, no key twice.
    let requests = sink.requests();
    let mut keys: HashMap<String, usize> = HashMap::new();
    for r in &requests {
        *keys
            .entry(r.idempotency_key().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(keys.len(), JOBS * WINDOWS_EACH * 2);
    assert!(keys.values().all(|n| *n == 1), "a message sent twice");
    eprintln!("runs per host: {ran_by_host:?}");
    // The work spread: more than one host ran windows.
    assert!(
        ran_by_host.iter().filter(|n| **n > 0).count() >= 2,
        "runs per host: {ran_by_host:?}"
    );
}

/// Waits for every host, each one's output read on a thread of its own: a
/// pipe nobody reads fills up and stops the host writing to it.
fn wait_all(hosts: Vec<Child>) -> Vec<Run> {
    hosts
        .into_iter()
        .map(|h| std::thread::spawn(move || to_run(h.wait_with_output().unwrap())))
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect()
}

/// A folder of `jobs` hourly jobs posting two messages per window to
/// `sink` (the probe's `send-twice`), with `limits` in each file.
fn job_folder(dir: &Path, jobs: usize, sink: &Sink, limits: &str) -> PathBuf {
    let folder = dir.join("jobs");
    std::fs::create_dir(&folder).unwrap();
    for i in 0..jobs {
        std::fs::write(
            folder.join(format!("job-{i:02}.toml")),
            format!(
                "job = \"job-{i:02}\"\nwindow = \"hour\"\ntimezone = \"UTC\"\ncomponent = \"{}\"\n\
                 catch_up = \"all\"\nmax_catch_up = 24\nmax_attempts = 100\n\
                 [params]\nmode = \"send-twice\"\n[limits]\n{limits}\n\
                 [destinations.hook]\ntype = \"http\"\nurl = \"{}\"\ntimeout_seconds = 1\n\
                 backoff_seconds = 0.2\nmax_backoff_seconds = 0.5\n",
                guests().probe.display(),
                sink.url("/hook")
            ),
        )
        .unwrap();
    }
    folder
}

/// A daemon over `folder` on `store` in real time (leases must run out
/// for real), from 04:30 with every window since midnight, until 04:31.
fn host(folder: &Path, store: &str, failpoint: Option<&str>) -> Child {
    let mut cmd = command(
        &root(),
        &[
            "daemon",
            "--jobs",
            s(folder),
            "--store",
            store,
            "--since",
            "2026-11-09T00:00:00Z",
            "--now",
            "2026-11-09T04:30:00Z",
            "--until",
            "2026-11-09T04:31:00Z",
            "--max-concurrent-runs",
            "2",
        ],
    );
    cmd.env_remove("JOBHOST_TEST_VIRTUAL_TIME")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(f) = failpoint {
        cmd.env("JOBHOST_TEST_FAILPOINT", f);
    }
    cmd.spawn().unwrap()
}

/// Every window DONE, every message delivered at least once, and a key
/// delivered twice only for a window another host took over (fence above
/// 1), with the same body each time; returns the windows taken over.
fn all_done_and_delivered(store: &str, sink: &Sink, windows: usize) -> usize {
    let h = history(store);
    assert_eq!(h.len(), windows);
    assert!(h.iter().all(|r| r["state"] == "DONE"), "{h:?}");
    let taken_over: Vec<String> = h
        .iter()
        .filter(|r| r["fence"].as_i64().unwrap() > 1)
        .map(|r| r["key"].as_str().unwrap().to_string())
        .collect();
    let mut bodies: HashMap<String, Vec<Vec<u8>>> = HashMap::new();
    for r in sink.requests() {
        if r.stale {
            continue;
        }
        bodies
            .entry(r.idempotency_key().unwrap().to_string())
            .or_default()
            .push(r.body.clone());
    }
    assert_eq!(bodies.len(), windows * 2, "every message delivered");
    for (key, sent) in &bodies {
        if sent.len() > 1 {
            assert!(
                taken_over.iter().any(|w| key.starts_with(&format!("{w}#"))),
                "{key} delivered {} times, and its window was not taken over",
                sent.len()
            );
            assert!(sent.iter().all(|b| *b == sent[0]), "{key}: the same bytes");
        }
    }
    taken_over.len()
}

#[test]
fn a_daemon_killed_mid_backlog_has_the_windows_it_held_taken_over_after_their_lease() {
    let Some(db) = Scratch::new("fleet_kill") else {
        return;
    };
    let sink = Sink::start();
    let tmp = scratch();
    let folder = job_folder(
        tmp.path(),
        6,
        &sink,
        "timeout_seconds = 1\nlease_seconds = 2",
    );
    let store = db.url();
    // The first host kills itself right after a destination accepted its
    // third message, before the store knows: the claim it held is left
    // to run out, and the message is sent again by the host that takes
    // the window over (the endpoint deduplicates on the key).
    let victim = host(&folder, &store, Some("after-send@3:kill"));
    let others: Vec<Child> = (0..2).map(|_| host(&folder, &store, None)).collect();
    let others = std::thread::spawn(move || wait_all(others));
    let victim = victim.wait_with_output().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&victim.status),
        Some(libc::SIGKILL),
        "the first host reached its third send and died: {}",
        String::from_utf8_lossy(&victim.stderr)
    );
    for run in others.join().unwrap() {
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let taken_over = all_done_and_delivered(&store, &sink, 6 * 4);
    assert!(
        taken_over >= 1,
        "the window the dead host held was taken over"
    );
}

#[test]
fn a_daemon_frozen_past_its_lease_sends_nothing_once_it_goes_on() {
    let Some(db) = Scratch::new("fleet_stop") else {
        return;
    };
    let sink = Sink::start();
    sink.refuse_stale_fences();
    let tmp = scratch();
    let folder = job_folder(
        tmp.path(),
        6,
        &sink,
        "timeout_seconds = 1\nlease_seconds = 2",
    );
    let store = db.url();
    // The first host freezes itself with its claim checked and a message
    // about to go out (a long pause, a suspended VM).
    let victim = host(&folder, &store, Some("in-send@3:stop"));
    wait_until_stopped(&victim, "in-send@3");
    let others: Vec<Child> = (0..2).map(|_| host(&folder, &store, None)).collect();
    let others = std::thread::spawn(move || wait_all(others));
    // Frozen until another host has taken a window over from it.
    let mut c = db.client();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let n: i64 = c
            .query_one("SELECT count(*) FROM jobhost_runs WHERE fence > 1", &[])
            .unwrap()
            .get(0);
        if n > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no host took a window over");
        std::thread::sleep(Duration::from_millis(100));
    }
    let victim = resume(victim);
    assert_eq!(victim.code, 0, "{}", victim.stderr);
    for run in others.join().unwrap() {
        assert_eq!(run.code, 0, "{}", run.stderr);
    }
    let stale: Vec<_> = sink.requests().into_iter().filter(|r| r.stale).collect();
    assert!(
        stale.is_empty(),
        "the frozen host sent {} message(s) after its window was taken over",
        stale.len()
    );
    let taken_over = all_done_and_delivered(&store, &sink, 6 * 4);
    assert!(taken_over >= 1);
}
