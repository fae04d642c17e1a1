//! Partitions: two daemons, each in a network namespace of its own, share
//! a PostgreSQL store and an HTTP endpoint over links the test can cut.
//! The first host is frozen at a point of its run (its guest running, a
//! message about to have its claim checked and renewed, a message about
//! to go out), its link is cut, and it is let go: it can reach neither the
//! store nor the endpoint. The second host takes the window over once the
//! lease runs out and delivers it; then the link heals. No message arrives
//! from the cut host after the takeover (the endpoint refuses and counts a
//! stale fence), every message is delivered, and every window is DONE.
//!
//! A fourth case cuts only the first host's path to the store, with the
//! endpoint still in reach: the message whose claim it had just confirmed
//! goes out, and nothing after it until it can confirm the claim again.
//!
//! Namespaces need root and iproute2: without them the tests say SKIPPED
//! (under `CI` they fail).

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use jobhost_tests::netns::{Island, Relay};
use jobhost_tests::pg::Scratch;
use jobhost_tests::sink::Sink;

use crate::harness::*;

/// Two islands, or a skip (a failure under CI) saying why not.
fn islands(test: &str) -> Option<(Island, Island)> {
    match Island::new().and_then(|a| Ok((a, Island::new()?))) {
        Ok(pair) => Some(pair),
        Err(why) => {
            jobhost_tests::skip::missing(
                test,
                &format!("network namespaces cannot be made here ({why})"),
                "run the tests as root on Linux with iproute2 (`ip`)",
            );
            None
        }
    }
}

/// `url` (a `postgres://` or `http://` URL on 127.0.0.1) with its host
/// and port replaced by `addr`.
fn through(url: &str, addr: SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, rest) = rest.rsplit_once('@').map_or(("", rest), |(u, r)| (u, r));
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    let user = if user.is_empty() {
        String::new()
    } else {
        format!("{user}@")
    };
    format!("{scheme}://{user}{addr}{path}")
}

/// Where `url` (on 127.0.0.1) listens.
fn socket_of(url: &str) -> SocketAddr {
    let rest = url.split_once("://").unwrap().1;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let authority = rest.split('/').next().unwrap();
    let authority = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:5432")
    };
    authority
        .replace("localhost", "127.0.0.1")
        .parse()
        .unwrap_or_else(|e| panic!("{authority}: {e}"))
}

/// One job, hourly, two windows behind, two messages per window to
/// `${HOOK_URL}` (each host is given the endpoint's address as its island
/// sees it), with a 3 s lease.
fn job_folder(dir: &Path) -> std::path::PathBuf {
    let folder = dir.join("jobs");
    std::fs::create_dir(&folder).unwrap();
    std::fs::write(
        folder.join("cut.toml"),
        format!(
            "job = \"cut\"\nwindow = \"hour\"\ntimezone = \"UTC\"\ncomponent = \"{}\"\n\
             catch_up = \"all\"\nmax_attempts = 100\n[params]\nmode = \"send-twice\"\n\
             [limits]\ntimeout_seconds = 1\nlease_seconds = 3\n\
             [destinations.hook]\ntype = \"http\"\nurl = \"${{HOOK_URL}}\"\ntimeout_seconds = 1\n\
             tries = 3\nbackoff_seconds = 0.2\nmax_backoff_seconds = 0.5\n",
            guests().probe.display()
        ),
    )
    .unwrap();
    folder
}

/// A host in `island`: a daemon over `folder` on `store`, posting to
/// `hook`, in real time (leases run out for real).
fn host(island: &Island, folder: &Path, store: &str, hook: &str, failpoint: Option<&str>) -> Child {
    let mut cmd = island.command(env!("CARGO_BIN_EXE_jobhost-under-test"));
    cmd.current_dir(root())
        .args(["daemon", "--jobs", s(folder), "--store", store])
        .args([
            "--since",
            "2026-11-09T02:00:00Z",
            "--now",
            "2026-11-09T04:30:00Z",
        ])
        .args([
            "--until",
            "2026-11-09T04:32:00Z",
            "--max-concurrent-runs",
            "1",
        ])
        .env("HOOK_URL", hook)
        .env("JOBHOST_CACHE_DIR", cache_dir())
        .env_remove("JOBHOST_STORE")
        .env_remove("JOBHOST_TEST_VIRTUAL_TIME")
        .env_remove("JOBHOST_TEST_FAILPOINT")
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(f) = failpoint {
        cmd.env("JOBHOST_TEST_FAILPOINT", f);
    }
    cmd.spawn().unwrap()
}

/// Waits for `child` to end, at most `limit`; kills it past that.
fn finish(child: Child, limit: Duration, what: &str) -> Run {
    let deadline = Instant::now() + limit;
    let pid = child.id();
    while std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
    {
        if Instant::now() > deadline {
            signal(&child, libc::SIGKILL);
            let run = to_run(child.wait_with_output().unwrap());
            panic!("{what} did not end within {limit:?}: {}", run.stderr);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    to_run(child.wait_with_output().unwrap())
}

/// What is cut.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// The host's link: neither the store nor the endpoint.
    Link,
    /// Only the path to the store: the endpoint is still reachable.
    Store,
}

/// The first host frozen at `failpoint`, cut off, let go; the second takes
/// over; the cut heals.
fn cut_at(test: &str, failpoint: &str, cut: Cut) {
    let Some(db) = Scratch::new(test) else {
        return;
    };
    let Some((a, b)) = islands(test) else {
        return;
    };
    let sink = Sink::start();
    sink.refuse_stale_fences();
    let tmp = scratch();
    let folder = job_folder(tmp.path());
    let (pg, hook) = (socket_of(&db.url()), socket_of(&sink.url("/")));
    let relays: Vec<(Relay, Relay)> = [&a, &b]
        .iter()
        .map(|i| (Relay::start(i.gateway, pg), Relay::start(i.gateway, hook)))
        .collect();
    let store_of = |n: usize| through(&db.url(), relays[n].0.addr);
    let hook_of = |n: usize| format!("http://{}/hook", relays[n].1.addr);

    let first = host(&a, &folder, &store_of(0), &hook_of(0), Some(failpoint));
    wait_until_stopped(&first, failpoint);
    match cut {
        Cut::Link => a.cut(),
        Cut::Store => relays[0].0.cut(),
    }
    signal(&first, libc::SIGCONT);
    let second = host(&b, &folder, &store_of(1), &hook_of(1), None);
    // The second host takes the window over once the lease runs out, and
    // finishes both windows while the first is still cut off.
    let mut c = db.client();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let done: i64 = c
            .query_one(
                "SELECT count(*) FROM jobhost_runs WHERE state = 'DONE'",
                &[],
            )
            .unwrap()
            .get(0);
        if done == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{failpoint}: the second host did not finish the windows"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    match cut {
        Cut::Link => a.heal(),
        Cut::Store => relays[0].0.heal(),
    }
    let second = finish(second, Duration::from_secs(120), "the second host");
    let first = finish(first, Duration::from_secs(120), "the healed host");
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(first.code, 0, "{}", first.stderr);
    // Healed, the cut host learns that its claim was taken over, and stops
    // without writing or sending.
    let lost: Vec<serde_json::Value> = first
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["event"] == "failed")
        .collect();
    assert_eq!(lost.len(), 1, "{failpoint}: {}", first.stdout);
    assert_eq!(
        lost[0]["error"]["kind"], "lease-lost",
        "{failpoint}: {}",
        lost[0]
    );

    let requests = sink.requests();
    let stale = requests.iter().filter(|r| r.stale).count();
    assert_eq!(
        stale, 0,
        "{failpoint}: the cut host sent after its window was taken over"
    );
    let mut keys: Vec<&str> = requests
        .iter()
        .filter_map(|r| r.idempotency_key())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(
        keys.len(),
        4,
        "{failpoint}: every message delivered: {keys:?}"
    );
    let h = history(db.url());
    assert_eq!(h.len(), 2);
    assert!(h.iter().all(|r| r["state"] == "DONE"), "{h:?}");
    assert!(
        h.iter().any(|r| r["fence"].as_i64() > Some(1)),
        "{failpoint}: the window the cut host held was taken over: {h:?}"
    );
}

#[test]
fn a_host_cut_off_while_its_guest_runs_loses_the_window_to_another_and_sends_nothing() {
    cut_at("partition_in_guest", "in-guest@1:stop", Cut::Link);
}

#[test]
fn a_host_cut_off_before_it_renews_its_claim_sends_nothing_after_the_takeover() {
    cut_at("partition_before_send", "before-send@1:stop", Cut::Link);
}

#[test]
fn a_host_cut_off_with_a_message_about_to_go_out_sends_nothing_after_the_takeover() {
    cut_at("partition_in_send", "in-send@1:stop", Cut::Link);
}

#[test]
fn a_host_cut_off_from_the_store_alone_sends_nothing_after_its_lease_though_the_endpoint_answers() {
    cut_at("partition_store_only", "in-send@1:stop", Cut::Store);
}
