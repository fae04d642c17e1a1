//! The sandbox holds: a test-only guest tries to reach the host's files,
//! environment and network, to run forever and to allocate without bound;
//! each attempt is refused or stopped, with the reason in the receipt.

use serde_json::Value;

use crate::harness::*;

fn probe(mode: &str, limits: &str) -> (Run, tempfile::TempDir) {
    let dir = scratch();
    let cfg = config(
        dir.path(),
        &format!(
            "job = \"{mode}\"\ncomponent = \"{}\"\n[destinations.sink]\ntype = \"file\"\npath = \"sink.jsonl\"\n[limits]\n{limits}\n",
            guests().probe.display()
        ),
    );
    let store = dir.path().join("s.db");
    let run = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    (run, dir)
}

fn summary(run: &Run) -> Value {
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "stderr: {}", run.stderr);
    serde_json::from_str(r["report"]["summary"].as_str().expect("summary"))
        .expect("summary is JSON")
}

fn assert_all_denied(summary: &Value) {
    let map = summary.as_object().expect("object");
    assert!(!map.is_empty());
    for (attempt, outcome) in map {
        let outcome = outcome.as_str().unwrap_or_default();
        assert!(
            !outcome.starts_with("ok"),
            "`{attempt}` should have been refused, got `{outcome}`"
        );
    }
}

#[test]
fn guest_cannot_read_or_write_the_host_filesystem() {
    let (run, _dir) = probe("probe-fs", "");
    let s = summary(&run);
    assert_all_denied(&s);
    assert!(
        s["read /etc/passwd"]
            .as_str()
            .unwrap()
            .starts_with("denied"),
        "{s}"
    );
    assert!(!std::path::Path::new("/tmp/jobhost-probe").exists());
}

#[test]
fn guest_cannot_read_the_host_environment_or_arguments() {
    // SAFETY of the assertion: the host process certainly has PATH and HOME.
    let (run, _dir) = probe("probe-env", "");
    let s = summary(&run);
    assert_all_denied(&s);
    assert!(
        !run.receipt()
            .to_string()
            .contains(&std::env::var("PATH").unwrap())
    );
}

#[test]
fn guest_cannot_open_sockets_or_resolve_names() {
    let (run, _dir) = probe("probe-net", "");
    assert_all_denied(&summary(&run));
}

#[test]
fn a_guest_that_loops_forever_is_stopped_at_its_time_limit() {
    let (run, dir) = probe("spin", "timeout_seconds = 1");
    let r = run.receipt();
    assert_eq!(run.code, 1);
    assert_eq!(r["event"], "failed");
    assert_eq!(r["error"]["kind"], "guest-timeout");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("time limit of 1 s"),
        "{r}"
    );
    let h = history(dir.path().join("s.db"));
    assert_eq!(h[0]["state"], "FAILED");
}

#[test]
fn a_guest_that_allocates_without_bound_is_stopped_at_its_memory_limit() {
    let (run, _dir) = probe("oom", "memory_mib = 32");
    let r = run.receipt();
    assert_eq!(run.code, 1);
    assert_eq!(r["error"]["kind"], "guest-memory", "{r}");
    assert!(
        r["error"]["message"].as_str().unwrap().contains("32 MiB"),
        "{r}"
    );
}

#[test]
fn a_guest_panic_is_a_failed_run_with_the_panic_message() {
    let (run, _dir) = probe("panic", "");
    let r = run.receipt();
    assert_eq!(run.code, 1);
    assert_eq!(r["error"]["kind"], "guest-trap");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("probe panicked on purpose"),
        "{r}"
    );
}

#[test]
fn a_guest_flooding_stdout_cannot_break_the_receipt() {
    let (run, _dir) = probe("stdout-flood", "output_bytes = 1024");
    let r = run.receipt(); // exactly one line on stdout
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    assert!(
        run.stderr.contains("more bytes to stdout, dropped"),
        "{}",
        &run.stderr[..run.stderr.len().min(2000)]
    );
}

#[test]
fn a_guest_flooding_the_log_is_capped_by_what_it_prints_and_counted() {
    let (run, _dir) = probe("log-flood", "log_bytes = 10000");
    let r = run.receipt();
    assert_eq!(r["event"], "ran");
    // Each 100-byte message prints as one line with its prefix.
    let line = "jobhost: guest log-flood [info] ".len() + 100 + 1;
    let shown = 10_000 / line;
    assert_eq!(r["stats"]["log_lines"], shown);
    assert_eq!(r["stats"]["log_dropped"], 100_000 - shown);
    let printed: usize = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("jobhost: guest log-flood [info] "))
        .map(|l| l.len() + 1)
        .sum();
    assert!(printed <= 10_000, "{printed} bytes of log printed");
}

#[test]
fn guest_wall_clock_is_pinned_to_now_and_random_is_seeded_from_the_key() {
    let (a, _d1) = probe("clock", "");
    let (b, _d2) = probe("clock", "");
    let (sa, sb) = (summary(&a), summary(&b));
    assert_eq!(sa, sb, "same key and clock, same bytes");
    assert_eq!(sa["wall_seconds"], 1_794_182_700, "wall clock reads --now");
    assert_eq!(sa["wall_nanos"], 0);
    assert_eq!(sa["ctx_now_seconds"], 1_794_182_700);

    // Another window (another key) draws other random numbers.
    let dir = scratch();
    let probe_wasm = guests().probe.clone();
    let store = dir.path().join("s.db");
    let other = jobhost(&[
        "run",
        "--component",
        s(&probe_wasm),
        "--job",
        "clock",
        "--store",
        s(&store),
        "--now",
        "2026-11-10T00:05:00Z",
    ]);
    let so = summary(&other);
    assert_ne!(
        so["random_hex"], sa["random_hex"],
        "random is seeded from the key"
    );
    assert_eq!(so["random_hex"].as_str().unwrap().len(), 32);
}

#[test]
fn sending_to_an_undeclared_destination_is_refused_at_send() {
    let (run, _dir) = probe("unknown-destination", "");
    let r = run.receipt();
    assert_eq!(r["event"], "ran");
    assert!(
        r["report"]["summary"]
            .as_str()
            .unwrap()
            .contains("unknown-destination: no-such-destination"),
        "{r}"
    );
    assert_eq!(r["messages"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_failed_guest_is_recorded_and_a_permanent_failure_is_not_retried() {
    let (run, dir) = probe("fail", "");
    let r = run.receipt();
    assert_eq!(run.code, 1);
    assert_eq!(r["error"]["kind"], "guest-error");
    assert_eq!(r["error"]["retryable"], false);
    let cfg = dir.path().join("job.toml");
    let again = jobhost(&[
        "run",
        "--config",
        s(&cfg),
        "--store",
        s(&dir.path().join("s.db")),
        "--now",
        "2026-11-09T00:06:00Z",
    ]);
    let r = again.receipt();
    assert_eq!(r["event"], "skipped");
    assert_eq!(r["reason"], "gave-up");
}

#[test]
fn a_guest_that_sleeps_for_a_day_does_not_hold_the_host_its_clock_just_moves() {
    let dir = scratch();
    let cfg = config(
        dir.path(),
        &format!(
            "job = \"sleep\"\ncomponent = \"{}\"\n[limits]\ntimeout_seconds = 5\n",
            guests().probe.display()
        ),
    );
    let store = dir.path().join("s.db");
    let mut child = job_command(&cfg, &store, "2026-11-09T00:05:00Z")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A real sleep would hold the host for a day: give up on it long before.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the guest's sleep held the host for real");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let run = to_run(child.wait_with_output().unwrap());
    let s = summary(&run);
    assert!(s["slept_seconds"].as_u64().unwrap() >= 86_400, "{s}");
    assert_eq!(
        s["wall_unchanged"], true,
        "the wall clock stays pinned to now"
    );
}

#[test]
fn a_source_query_that_never_returns_is_stopped_at_the_time_limit() {
    let dir = scratch();
    let cfg = config(
        dir.path(),
        &format!(
            r#"component = "{}"
[source]
path = "sales.db"
query = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x AS ts, 'r' AS region, 'p' AS product, 1 AS quantity, 1.0 AS amount FROM c WHERE x < 0 AND :start < :end"
[limits]
timeout_seconds = 1
"#,
            guests().report.display()
        ),
    );
    sales_db(dir.path(), 10);
    let store = dir.path().join("s.db");
    let run = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    let r = run.receipt();
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert_eq!(r["error"]["kind"], "guest-timeout", "{r}");
    assert_eq!(history(&store)[0]["state"], "FAILED");
}

#[test]
fn a_describe_that_panics_spins_returns_too_much_or_sends_leaves_the_run_as_it_is() {
    for (mode, limits, why) in [
        ("describe-panic", "", "`describe` failed"),
        ("describe-huge", "", "over the limit of 1048576"),
        (
            "describe-spin",
            "timeout_seconds = 1",
            "did not finish within the time limit",
        ),
    ] {
        let (run, dir) = probe(mode, limits);
        assert_eq!(run.code, 0, "{mode}: {}", run.stderr);
        let r = run.receipt();
        assert_eq!(r["event"], "ran", "{mode}: {r}");
        let warning = r["warnings"]
            .as_array()
            .and_then(|w| w.iter().find(|w| w["kind"] == "describe"))
            .unwrap_or_else(|| panic!("{mode}: no describe warning in {r}"));
        assert!(
            warning["message"].as_str().unwrap().contains(why),
            "{mode}: {warning}"
        );
        let h = history(dir.path().join("s.db"));
        assert_eq!(h[0]["state"], "DONE", "{mode}");
        assert!(h[0]["report"]["describe"].is_null(), "{mode}: {}", h[0]);
    }
    // Sending from describe is refused: no message, and the text says so.
    let (run, dir) = probe("describe-send", "");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let h = history(dir.path().join("s.db"));
    assert_eq!(h[0]["messages"], 0, "{}", h[0]);
    assert_eq!(h[0]["report"]["describe"], "unknown-destination: sink");
}
