//! Reports written in JavaScript (componentize-js, bundled with the SDK by
//! esbuild): the reference report gives the Rust reference's figures and
//! message byte for byte, runs, skips, replays and swaps with it; a
//! JavaScript report gets nothing from the sandbox but the run's clock; its
//! uncaught errors read as its own in the receipt; the SDK's permanent
//! error is not retried; the SDK and the reference pass their tests under
//! node.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

/// A job over `sales.db` in `dir` with `component` (see [`reference_job`]).
fn job(dir: &Path, tag: &str, component: &Path, extra: &str) -> PathBuf {
    reference_job(dir, tag, component, extra, (256, 60))
}

#[test]
fn the_javascript_reference_gives_the_rust_figures_and_message_byte_for_byte() {
    gives_the_rust_references_output(js_report(), "javascript", (256, 60));
}

#[test]
fn a_javascript_report_runs_skips_replays_and_swaps_with_the_rust_one() {
    runs_skips_replays_and_swaps_with_the_rust_one(js_report(), (256, 60));
}

fn probe(dir: &Path, what: &str) -> (Run, PathBuf) {
    sales_db(dir, 200);
    let cfg = job(
        dir,
        what,
        js_probe(),
        &format!("[params]\nprobe = \"{what}\"\n"),
    );
    let store = dir.join(format!("{what}.db"));
    (run_job(&cfg, &store, "2026-11-05T00:05:00Z"), store)
}

#[test]
fn a_javascript_report_sees_the_runs_clock_and_the_hosts_refusals_as_their_cases() {
    let dir = scratch();
    let (run, _) = probe(dir.path(), "escape");
    let got: Value =
        serde_json::from_str(ran(&run)["report"]["summary"].as_str().unwrap()).unwrap();
    assert_eq!(got["Date.now()"], 1_793_837_100_000_i64, "{got}");
    assert_eq!(got["typeof process"], "undefined");
    assert_eq!(got["typeof require"], "undefined");

    // In a zone with daylight saving: the host's offsets reach the SDK.
    let cfg = job(
        dir.path(),
        "local",
        js_probe(),
        "timezone = \"Europe/Berlin\"\n[params]\nprobe = \"local\"\n",
    );
    let run = run_job(&cfg, dir.path().join("local.db"), "2026-10-26T00:05:00Z");
    let got: Value =
        serde_json::from_str(ran(&run)["report"]["summary"].as_str().unwrap()).unwrap();
    assert_eq!(
        got,
        serde_json::json!(["2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00"]),
        "{}",
        run.stderr
    );

    let (run, _) = probe(dir.path(), "host-errors");
    let got: Value =
        serde_json::from_str(ran(&run)["report"]["summary"].as_str().unwrap()).unwrap();
    let send = |reason: &str, message: &str| serde_json::json!({"error": "SendFailed", "reason": reason, "message": message});
    assert_eq!(
        got,
        serde_json::json!({
            "unknown-destination": send("unknown-destination", "unknown destination `nowhere`"),
            "invalid-content-type": send("invalid-content-type", "invalid content type `plain`"),
            "too-large": send("too-large", "body is larger than 4194304 bytes"),
            "too-many-messages": send(
                "too-many-messages",
                "the run already staged the maximum of 100 messages"
            ),
            "open-twice": {
                "error": "SourceFailed",
                "reason": null,
                "message": "invalid state: a cursor is already open; drop it before opening another"
            },
        }),
        "{}",
        run.stderr
    );
}

#[test]
fn an_uncaught_javascript_error_names_its_type_message_and_function() {
    let dir = scratch();
    let (run, store) = probe(dir.path(), "throw");
    let r = failed(&run);
    assert_eq!(
        r["error"]["message"],
        "the report threw an uncaught JavaScript error: TypeError: bad row 7: amount is negative \
         (in inner); its stack is on stderr"
    );
    assert_eq!(r["error"]["kind"], "guest-trap");
    assert_eq!(r["error"]["retryable"], false);
    assert!(
        run.stderr
            .contains("[stderr] Uncaught TypeError: bad row 7: amount is negative"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("invalid variant tag"),
        "{}",
        run.stderr
    );
    assert_eq!(history(&store)[0]["state"], "FAILED");

    let (run, store) = probe(dir.path(), "invalid");
    let r = run.receipt();
    assert_eq!(
        r["error"]["message"],
        "the report refused the data: region is missing"
    );
    assert_eq!(r["error"]["retryable"], false);
    assert_eq!(history(&store)[0]["state"], "FAILED");
}

#[test]
fn the_javascript_sdk_and_reference_tests_pass_natively() {
    let out = std::process::Command::new("node")
        .current_dir(root())
        .args([
            "--import",
            "./sdk/js/src/testing/register.js",
            "--test",
            "sdk/js/test/",
            "guest-js/test/",
        ])
        .output()
        .expect("node runs (install Node.js 20 or later)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let passed: u32 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("# pass ")?.trim().parse().ok())
        .unwrap_or(0);
    assert!(
        passed >= 15,
        "the SDK's and the reference's tests ran ({passed})\n{stdout}"
    );
}
