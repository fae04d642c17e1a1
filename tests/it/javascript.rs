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

/// A job over `sales.db` in `dir` with `component`, delivering to
/// `out-<tag>.jsonl`; `extra` is added at the top level (window, params).
fn job(dir: &Path, tag: &str, component: &Path, extra: &str) -> PathBuf {
    let path = dir.join(format!("{tag}.toml"));
    std::fs::write(
        &path,
        format!(
            r#"job = "daily-report"
component = "{}"
max_attempts = 3
{extra}
[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "file"
path = "out-{tag}.jsonl"

[limits]
memory_mib = 256
timeout_seconds = 60
"#,
            component.display()
        ),
    )
    .unwrap();
    path
}

fn ran(run: &Run) -> Value {
    let r = run.receipt();
    assert_eq!(
        (run.code, r["event"].as_str()),
        (0, Some("ran")),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    r
}

#[test]
fn the_javascript_reference_gives_the_rust_figures_and_message_byte_for_byte() {
    let dir = scratch();
    sales_db(dir.path(), 4000);
    let js = js_report();
    let rust = &guests().report;
    // Days, an hour in a zone with an offset, a week; the default digest,
    // a `top` parameter, and a window with no rows.
    let cases = [
        ("", "2026-11-04T00:05:00Z"),
        ("[params]\ntop = 3\n", "2026-11-09T00:05:00Z"),
        (
            "window = \"hour\"\ntimezone = \"Europe/Berlin\"\n",
            "2026-11-06T13:10:00Z",
        ),
        ("window = \"week\"\n", "2026-11-10T00:05:00Z"),
        ("", "2026-11-20T00:05:00Z"),
    ];
    for (i, (extra, now)) in cases.iter().enumerate() {
        let mut got = Vec::new();
        for (tag, component) in [("js", js), ("rust", rust)] {
            let tag = format!("{tag}{i}");
            let cfg = job(dir.path(), &tag, component, extra);
            let store = dir.path().join(format!("{tag}.db"));
            let r = ran(&run_job(&cfg, &store, now));
            let message = std::fs::read(dir.path().join(format!("out-{tag}.jsonl"))).unwrap();
            got.push((r["report"].clone(), r["stats"]["rows"].clone(), message));
        }
        assert_eq!(
            got[0].0, got[1].0,
            "case {i} ({extra:?} at {now}): the same summary and cursor"
        );
        assert_eq!(got[0].1, got[1].1, "case {i}: the same rows");
        assert!(
            got[0].2 == got[1].2,
            "case {i}: the same message bytes\njavascript: {}\nrust:       {}",
            String::from_utf8_lossy(&got[0].2),
            String::from_utf8_lossy(&got[1].2)
        );
    }
}

#[test]
fn a_javascript_report_runs_skips_replays_and_swaps_with_the_rust_one() {
    let dir = scratch();
    sales_db(dir.path(), 2000);
    let store = dir.path().join("s.db");
    let js = job(dir.path(), "js", js_report(), "");
    let rust = job(dir.path(), "rust", &guests().report, "");

    let first = ran(&run_job(&js, &store, "2026-11-05T00:05:00Z"));
    let js_digest = first["component"].as_str().unwrap().to_string();
    let again = run_job(&js, &store, "2026-11-05T00:05:00Z");
    let r = again.receipt();
    assert_eq!((again.code, r["event"].as_str()), (0, Some("skipped")));
    assert_eq!(r["reason"], "done");
    assert_eq!(r["component"], js_digest.as_str(), "the digest recorded");

    let second = ran(&run_job(&rust, &store, "2026-11-06T00:05:00Z"));
    assert_ne!(second["component"], js_digest.as_str());
    let third = ran(&run_job(&js, &store, "2026-11-07T00:05:00Z"));
    assert_eq!(third["component"], js_digest.as_str());
    let rows = history(&store);
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.iter().all(|r| r["state"] == "DONE"), "{rows:?}");

    // A replay of the JavaScript run with its recorded clock is identical.
    let replay = jobhost(&[
        "replay",
        "daily-report:2026-11-05",
        "--store",
        s(&store),
        "--component",
        s(js_report()),
    ]);
    assert_eq!(replay.code, 0, "{}\n{}", replay.stdout, replay.stderr);
    assert!(replay.stdout.contains("identical"), "{}", replay.stdout);
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
    let r = run.receipt();
    assert_eq!(
        (run.code, r["event"].as_str()),
        (1, Some("failed")),
        "{}",
        run.stderr
    );
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
