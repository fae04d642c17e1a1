//! Traces (`[telemetry] otlp_endpoint`): each run's spans reach an
//! OTLP/HTTP receiver (the test's own, taking JSON bodies) under the trace
//! id its receipt names; an HTTP delivery carries its step's
//! `traceparent`; a daemon's wake-up is linked from the runs it started;
//! and a receiver that is down costs a run nothing but its spans.

use std::path::{Path, PathBuf};

use jobhost_tests::sink::Sink;
use serde_json::Value;

use crate::harness::*;

/// A job delivering to `sink`'s `/digest`, exporting its traces to
/// `endpoint`.
fn job(dir: &Path, sink: &Sink, endpoint: &str) -> PathBuf {
    crate::effects::http_config(
        dir,
        &format!("[telemetry]\notlp_endpoint = \"{endpoint}\"\n"),
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntries = 1\ntimeout_seconds = 2\n",
            sink.url("/digest")
        ),
    )
}

/// One span as the receiver got it.
#[derive(Debug, Clone)]
struct Span {
    trace: String,
    id: String,
    parent: String,
    name: String,
    attributes: Value,
    links: Vec<(String, String)>,
    error: bool,
}

impl Span {
    /// The value of attribute `key`, as text.
    fn attr(&self, key: &str) -> Option<String> {
        let a = self
            .attributes
            .as_array()?
            .iter()
            .find(|a| a["key"] == key)?;
        let v = &a["value"];
        v["stringValue"]
            .as_str()
            .map(str::to_string)
            .or_else(|| v["intValue"].as_str().map(str::to_string))
            .or_else(|| v["intValue"].as_i64().map(|n| n.to_string()))
    }
}

/// Every span the OTLP receiver `sink` was sent.
fn spans(sink: &Sink) -> Vec<Span> {
    let mut out = Vec::new();
    for q in sink.requests().iter().filter(|q| q.path == "/v1/traces") {
        assert_eq!(q.header("content-type"), Some("application/json"));
        let body: Value = serde_json::from_slice(&q.body).unwrap();
        for rs in body["resourceSpans"].as_array().unwrap() {
            let service = rs["resource"]["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == "service.name")
                .map(|a| a["value"]["stringValue"].clone());
            assert_eq!(
                service,
                Some(Value::from("jobhost")),
                "{}",
                String::from_utf8_lossy(&q.body)
            );
            for ss in rs["scopeSpans"].as_array().unwrap() {
                for s in ss["spans"].as_array().unwrap() {
                    out.push(Span {
                        trace: s["traceId"].as_str().unwrap().to_string(),
                        id: s["spanId"].as_str().unwrap().to_string(),
                        parent: s["parentSpanId"].as_str().unwrap_or_default().to_string(),
                        name: s["name"].as_str().unwrap().to_string(),
                        attributes: s["attributes"].clone(),
                        links: s["links"]
                            .as_array()
                            .map(|l| {
                                l.iter()
                                    .map(|l| {
                                        (
                                            l["traceId"].as_str().unwrap().to_string(),
                                            l["spanId"].as_str().unwrap().to_string(),
                                        )
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                        error: s["status"]["code"] == 2
                            || s["status"]["code"] == "STATUS_CODE_ERROR",
                    });
                }
            }
        }
    }
    out
}

#[test]
fn a_runs_spans_reach_the_receiver_under_the_receipts_trace_id_and_its_delivery_carries_it() {
    let sink = Sink::start();
    let dir = scratch();
    let cfg = job(dir.path(), &sink, &sink.url(""));
    let store = dir.path().join("s.db");
    let ran = to_run(
        job_command(&cfg, &store, "2026-11-09T00:05:00Z")
            .output()
            .unwrap(),
    );
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    let trace = ran.receipt()["trace_id"].as_str().unwrap().to_string();
    assert_eq!(trace.len(), 32, "{trace}");
    assert!(trace.chars().all(|c| c.is_ascii_hexdigit()) && trace != "0".repeat(32));

    // Sent before the process exited.
    let got: Vec<Span> = spans(&sink)
        .into_iter()
        .filter(|s| s.trace == trace)
        .collect();
    let named = |n: &str| {
        got.iter()
            .find(|s| s.name == n)
            .unwrap_or_else(|| panic!("no `{n}` span in {got:#?}"))
    };
    let root = named("jobhost.run");
    assert!(root.parent.is_empty(), "{root:?}");
    assert_eq!(root.attr("jobhost.job").as_deref(), Some("daily-report"));
    assert_eq!(
        root.attr("jobhost.window").as_deref(),
        Some("daily-report:2026-11-08")
    );
    assert_eq!(root.attr("jobhost.event").as_deref(), Some("ran"));
    assert!(!root.error);
    for step in ["source", "component", "claim", "guest", "commit", "deliver"] {
        assert_eq!(named(step).parent, root.id, "{step} is a step of the run");
    }
    assert_eq!(
        named("source").attr("jobhost.rows"),
        Some(ran.receipt()["stats"]["rows"].to_string()),
        "the rows the run read"
    );
    let deliver = named("deliver");
    assert_eq!(
        deliver.attr("jobhost.destination").as_deref(),
        Some("digest")
    );
    assert_eq!(
        deliver.attr("http.response.status_code").as_deref(),
        Some("200")
    );
    // The delivery carried the deliver step's traceparent.
    let delivered = sink
        .requests()
        .into_iter()
        .find(|q| q.path == "/digest")
        .unwrap();
    assert_eq!(
        delivered.header("traceparent"),
        Some(&*format!("00-{trace}-{}-01", deliver.id))
    );
}

#[test]
fn a_failed_delivery_is_an_error_span_with_its_status_and_the_run_an_error_trace() {
    let sink = Sink::start();
    sink.script("/digest", &[jobhost_tests::sink::Reply::Status(422)]);
    let dir = scratch();
    let cfg = job(dir.path(), &sink, &sink.url(""));
    let ran = to_run(
        job_command(&cfg, dir.path().join("s.db"), "2026-11-09T00:05:00Z")
            .output()
            .unwrap(),
    );
    assert_eq!(ran.event(), "failed", "{}", ran.stderr);
    let trace = ran.receipt()["trace_id"].as_str().unwrap().to_string();
    let got: Vec<Span> = spans(&sink)
        .into_iter()
        .filter(|s| s.trace == trace)
        .collect();
    let deliver = got.iter().find(|s| s.name == "deliver").unwrap();
    assert!(deliver.error, "{deliver:?}");
    assert_eq!(
        deliver.attr("http.response.status_code").as_deref(),
        Some("422")
    );
    let root = got.iter().find(|s| s.name == "jobhost.run").unwrap();
    assert!(root.error, "{root:?}");
    assert_eq!(root.attr("jobhost.event").as_deref(), Some("failed"));
}

#[test]
fn with_the_receiver_down_a_run_is_done_carries_its_trace_id_and_sends_only_its_message() {
    let sink = Sink::start();
    let dir = scratch();
    // Nothing listens there.
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let cfg = job(dir.path(), &sink, &down);
    let ran = to_run(
        job_command(&cfg, dir.path().join("s.db"), "2026-11-09T00:05:00Z")
            .output()
            .unwrap(),
    );
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    assert_eq!(ran.code, 0);
    assert!(ran.receipt()["trace_id"].is_string());
    assert_eq!(sink.requests().len(), 1, "the delivery, and no more");
}

#[test]
fn the_runs_a_daemons_wake_up_starts_link_to_its_span() {
    let sink = Sink::start();
    let dir = scratch();
    let cfg = job(dir.path(), &sink, &sink.url(""));
    let store = dir.path().join("s.db");
    let run = to_run(
        daemon_command(
            &[&cfg],
            s(&store),
            "2026-11-09T00:05:00Z",
            "2026-11-10T00:10:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let got = spans(&sink);
    let wakes: Vec<&Span> = got.iter().filter(|s| s.name == "jobhost.wake").collect();
    let runs: Vec<&Span> = got.iter().filter(|s| s.name == "jobhost.run").collect();
    assert_eq!(runs.len(), 2, "two windows ran: {got:#?}");
    for r in &runs {
        assert_eq!(r.links.len(), 1, "{r:?}");
        let (trace, span) = &r.links[0];
        assert!(
            wakes.iter().any(|w| &w.trace == trace && &w.id == span),
            "{r:?} links to no wake-up of {wakes:#?}"
        );
        assert_ne!(&r.trace, trace, "a run is a trace of its own");
    }
}

#[test]
fn a_daemon_counts_the_spans_it_could_not_send_in_its_metrics() {
    let dir = scratch();
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let cfg = report_config(dir.path(), 50);
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        format!("{text}\n[telemetry]\notlp_endpoint = \"{down}\"\n"),
    )
    .unwrap();
    let db = dir.path().join("s.db");
    let srv = crate::dashboard::serve(&[
        "daemon",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        "2026-11-09T00:05:00Z",
        "--listen",
        "127.0.0.1:0",
    ]);
    // The run's spans go to a receiver that is down: dropped, and counted.
    let mut text = String::new();
    for _ in 0..600 {
        text = crate::dashboard::get(&srv.addr, "/metrics", &[]).body;
        let dropped = text
            .lines()
            .find_map(|l| l.strip_prefix("jobhost_trace_spans_dropped_total "))
            .and_then(|n| n.trim().parse::<u64>().ok());
        if dropped.is_some_and(|n| n >= 5) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        text.contains("jobhost_runs_total{jobhost_job=\"daily-report\",event=\"ran\"} 1"),
        "{text}"
    );
    let dropped: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("jobhost_trace_spans_dropped_total "))
        .unwrap_or_else(|| panic!("{text}"))
        .trim()
        .parse()
        .unwrap();
    assert!(dropped >= 5, "the run's spans: {text}");
    assert!(
        text.contains("jobhost_trace_spans_exported_total 0"),
        "{text}"
    );
}
