//! A guest that attacks the host through what it hands over (the test-only
//! `hostile` component): names, bodies, messages and errors far larger than
//! anything the host accepts, floods of calls whose answers the host
//! records, and text made to drive a terminal or forge the host's own
//! lines. Each is refused, cut, dropped or stopped within the job's limits,
//! and the run ends as the guest decided or with the limit named.

use std::path::Path;

use serde_json::Value;

use crate::harness::*;

/// A config for hostile mode `mode` (its job name) with `params` and extra
/// `[limits]` lines, delivering to a file; returns the folder and config.
fn hostile(mode: &str, params: &str, limits: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let cfg = config(
        dir.path(),
        &format!(
            "job = \"{mode}\"\ncomponent = \"{}\"\n\
             [source]\npath = \"sales.db\"\n\
             query = \"SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end\"\n\
             [destinations.sink]\ntype = \"file\"\npath = \"sink.jsonl\"\n\
             [limits]\n{limits}\n[params]\n{params}\n",
            guests().hostile.display()
        ),
    );
    (dir, cfg)
}

const NOW: &str = "2026-11-09T00:05:00Z";

fn store(dir: &Path) -> std::path::PathBuf {
    dir.join("s.db")
}

/// The store's file and its write-ahead log together.
fn store_bytes(dir: &Path) -> u64 {
    ["s.db", "s.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum()
}

#[test]
fn two_hundred_sends_to_a_one_mib_undeclared_name_keep_memory_store_and_journal_small() {
    let (dir, cfg) = hostile(
        "journal-flood",
        "bytes = 1048576\ncount = 200",
        "memory_mib = 64\ntimeout_seconds = 5",
    );
    let (run, peak_kib) = run_measured(job_command(&cfg, store(dir.path()), NOW));
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    // The refusal echoes the name cut to the longest a destination can have.
    assert_eq!(r["report"]["summary"], "unknown-destination (67 bytes)");
    // Documented bound: the guest's memory (64 MiB) plus 64 MiB of the
    // host's own. Before the bound, this guest took the host to 920 MiB.
    assert!(
        peak_kib < 128 << 10,
        "peak RSS {peak_kib} KiB, over 64 MiB + 64 MiB"
    );
    // 200 MiB of names were handed over; a few KiB were kept.
    let kept = store_bytes(dir.path());
    assert!(kept < 1 << 20, "the store holds {kept} bytes");
    // Each refused name is kept as its first 64 bytes and its length.
    let h = &history(store(dir.path()))[0];
    assert!(h["journal_bytes"].as_u64().unwrap() < 200 * 160, "{h}");
}

#[test]
fn a_long_content_type_is_refused_and_journalled_by_its_length_and_hash() {
    let (dir, cfg) = hostile(
        "content-type-flood",
        "bytes = 1048576\ncount = 50",
        "memory_mib = 64",
    );
    let run = run_job(&cfg, store(dir.path()), NOW);
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    assert_eq!(r["report"]["summary"], "invalid-content-type (259 bytes)");
    let key = jobhost::core::window::WindowKey::from_stored("content-type-flood:2026-11-08".into());
    let stored = {
        use jobhost::store::Ledger;
        jobhost::store::SqliteStore::open(&store(dir.path()))
            .unwrap()
            .journal(&key)
            .unwrap()
            .expect("a journal")
    };
    let journal = jobhost::guest::journal::Journal::decode(&stored).unwrap();
    let sends: Vec<_> = journal
        .entries
        .iter()
        .filter_map(|e| match e {
            jobhost::guest::journal::Entry::Send { content_type, .. } => Some(content_type),
            _ => None,
        })
        .collect();
    assert_eq!(sends.len(), 50);
    for ct in sends {
        let jobhost::guest::journal::Given::Cut { head, bytes, .. } = ct else {
            panic!("a 1 MiB content type is not kept whole: {ct:?}")
        };
        assert_eq!((head.len(), *bytes), (256, (1 << 20) + 5));
    }
}

#[test]
fn a_fifty_mib_error_is_cut_in_the_receipt_on_stderr_and_in_the_store() {
    let (dir, cfg) = hostile("huge-error", "bytes = 52428800", "");
    for attempt in 1..=2 {
        // Retryable: the second invocation (after the backoff) cuts it too.
        let now = if attempt == 1 {
            NOW
        } else {
            "2026-11-09T01:05:00Z"
        };
        let run = run_job(&cfg, store(dir.path()), now);
        let r = run.receipt();
        assert_eq!(r["error"]["kind"], "guest-error", "{attempt}");
        assert_eq!(r["attempt"], attempt);
        let message = r["error"]["message"].as_str().unwrap();
        assert!(
            message.len() < 9 << 10,
            "{attempt}: {} bytes",
            message.len()
        );
        assert!(
            message.ends_with("… (cut: 52428800 bytes in all)"),
            "{attempt}: the cut is said"
        );
        assert!(
            run.stdout.len() < 10 << 10,
            "{attempt}: receipt of {} bytes",
            run.stdout.len()
        );
        assert!(
            run.stderr.len() < 10 << 10,
            "{attempt}: stderr of {} bytes",
            run.stderr.len()
        );
        let stored = history(store(dir.path()))[0]["error"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            stored.len() < 9 << 10,
            "{attempt}: {} bytes stored",
            stored.len()
        );
    }
    assert!(store_bytes(dir.path()) < 1 << 20);
}

/// Forged lines, terminal escapes, carriage returns, NUL, BEL, BS, DEL, C1,
/// a line separator and a right-to-left override, as the guest writes them.
const FORGERY: &str = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J\r\njobhost: error: forged by the guest\u{8}\u{7f}\u{9b}31m\u{0}\u{2028}\u{202e}\u{200f}\u{61c}end";

#[test]
fn no_raw_control_character_from_a_guest_reaches_stderr_history_or_status() {
    for mode in [
        "control-log",
        "control-error",
        "control-panic",
        "control-report",
    ] {
        let (dir, cfg) = hostile(mode, "", "");
        let run = run_job(&cfg, store(dir.path()), NOW);
        let r = run.receipt();
        assert_eq!(
            raw_controls(&run.stderr),
            Vec::<char>::new(),
            "{mode}: stderr {:?}",
            run.stderr
        );
        assert_eq!(
            raw_controls(&run.stdout),
            Vec::<char>::new(),
            "{mode}: stdout {:?}",
            run.stdout
        );
        assert!(
            !run.stderr
                .lines()
                .any(|l| l.starts_with("jobhost: error: forged")),
            "{mode}: a guest forged a line of the host's: {}",
            run.stderr
        );
        // JSON keeps the exact text.
        match mode {
            "control-error" => {
                assert_eq!(
                    r["error"]["message"],
                    format!("the report failed: {FORGERY}")
                );
            }
            "control-report" => assert_eq!(r["report"]["summary"], FORGERY),
            "control-log" => {
                assert!(
                    run.stderr.contains("[warn] evil\\u{1b}]0;pwned"),
                    "{}",
                    run.stderr
                );
                assert!(
                    run.stderr.contains("[stdout] evil\\u{1b}]0;pwned"),
                    "{}",
                    run.stderr
                );
            }
            _ => {}
        }
        let table = jobhost(&["history", "--store", s(&store(dir.path()))]);
        assert_eq!(table.code, 0, "{}", table.stderr);
        assert_eq!(
            raw_controls(&table.stdout),
            Vec::<char>::new(),
            "{mode}: history {:?}",
            table.stdout
        );
        assert_eq!(
            table.stdout.lines().count(),
            2,
            "{mode}: a header and one row"
        );
        let json = jobhost(&["history", "--json", "--store", s(&store(dir.path()))]);
        assert_eq!(
            raw_controls(&json.stdout),
            Vec::<char>::new(),
            "{mode}: history --json"
        );
        let status = jobhost(&[
            "status",
            "--config",
            s(&cfg),
            "--store",
            s(&store(dir.path())),
            "--now",
            NOW,
        ]);
        assert_eq!(
            raw_controls(&status.stdout),
            Vec::<char>::new(),
            "{mode}: status {:?}",
            status.stdout
        );
        assert_eq!(status.stdout.lines().count(), 1, "{mode}: one line per job");
    }
}

#[test]
fn a_two_hundred_mib_log_message_is_dropped_and_a_two_hundred_mib_body_is_too_large() {
    // Past the 128 MiB wasmtime copies by default: the host answers first.
    for (mode, want) in [("huge-log", "logged"), ("huge-send", "too-large 4194304")] {
        let (dir, cfg) = hostile(mode, "bytes = 209715200", "memory_mib = 512");
        let (run, peak_kib) = run_measured(job_command(&cfg, store(dir.path()), NOW));
        let r = run.receipt();
        assert_eq!(r["event"], "ran", "{mode}: {}", run.stderr);
        assert_eq!(r["report"]["summary"], want, "{mode}");
        if mode == "huge-log" {
            assert_eq!(r["stats"]["log_dropped"], 1);
            assert!(
                run.stderr.len() < 4096,
                "{mode}: {} bytes of stderr",
                run.stderr.len()
            );
        }
        // The 200 MiB live in the guest's memory only: the host copied none.
        assert!(
            peak_kib < (200 + 96) << 10,
            "{mode}: peak RSS {peak_kib} KiB"
        );
    }
}

#[test]
fn a_message_of_newlines_is_measured_by_what_it_would_print() {
    let (dir, cfg) = hostile("newline-log", "bytes = 65000", "log_bytes = 65536");
    let run = run_job(&cfg, store(dir.path()), NOW);
    let r = run.receipt();
    assert_eq!(r["event"], "ran", "{}", run.stderr);
    assert_eq!(
        r["stats"]["log_dropped"], 1,
        "65,000 prefixed lines do not fit 64 KiB"
    );
    assert!(
        run.stderr.len() < 4096,
        "{} bytes of stderr",
        run.stderr.len()
    );
}

/// A run stopped at its journal's limit fails with the limit named, to be
/// tried again, and keeps nothing.
fn stopped_at_the_journal_limit(mode: &str, params: &str) {
    let (dir, cfg) = hostile(
        mode,
        params,
        "timeout_seconds = 30\nmax_report_bytes = 65536\nmax_journal_bytes = 1048576",
    );
    let run = run_job(&cfg, store(dir.path()), NOW);
    let r = run.receipt();
    assert_eq!(run.code, 1, "{mode}: {}", run.stderr);
    assert_eq!(r["error"]["kind"], "journal-limit", "{mode}: {r}");
    assert_eq!(
        r["error"]["retryable"], true,
        "the limit may be raised meanwhile"
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`limits.max_journal_bytes`"),
        "{r}"
    );
    let h: &Value = &history(store(dir.path()))[0];
    assert_eq!(h["state"], "FAILED");
    assert!(
        h["journal_bytes"].is_null(),
        "nothing of the journal was kept: {h}"
    );
    assert!(store_bytes(dir.path()) < 1 << 20);
}

#[test]
fn a_guest_that_logs_without_end_is_stopped_at_its_journal_limit() {
    stopped_at_the_journal_limit("log-call-flood", "count = 100000000");
}

#[test]
fn a_guest_that_reads_past_the_end_of_its_rows_is_stopped_at_its_journal_limit() {
    stopped_at_the_journal_limit("read-after-end", "count = 100000000");
}

#[test]
fn a_guest_that_reads_its_source_again_and_again_is_stopped_at_its_journal_limit() {
    stopped_at_the_journal_limit("reopen-flood", "count = 100000");
}

#[test]
fn a_describe_that_logs_without_end_stops_the_run_at_its_journal_limit() {
    // The journal holds what `describe` was answered too: a flood there
    // stops the run like any other (documented).
    stopped_at_the_journal_limit("describe-flood", "count = 100000000");
}

#[test]
fn an_out_of_range_journal_limit_is_refused_naming_the_key() {
    for (limits, why) in [
        ("max_journal_bytes = 100", "64 KiB more"),
        ("max_journal_bytes = 2147483648", "1 GiB"),
        // The context, and its cursor, must fit.
        (
            "max_report_bytes = 4194304\nmax_journal_bytes = 1048576",
            "max_report_bytes",
        ),
    ] {
        let (dir, cfg) = hostile("log-call-flood", "", limits);
        let run = run_job(&cfg, store(dir.path()), NOW);
        assert_eq!(run.code, 2, "{limits}");
        assert!(
            run.stderr.contains("limits.max_journal_bytes = ") && run.stderr.contains(why),
            "{limits}: {}",
            run.stderr
        );
        assert!(!store(dir.path()).exists(), "nothing was created");
    }
}
