//! The read-only dashboard (`jobhost serve`, `jobhost daemon --listen`)
//! through the real binary over HTTP: the pages and their JSON twins on a
//! store with DONE, SKIPPED, FAILED and ABANDONED windows and holes,
//! `/metrics` against `status --json`, guest text escaped, the auth rules,
//! and bounded reads on a store of 100,000 windows.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};

use serde_json::Value;

use jobhost_tests::sink::{Reply, Sink};

use crate::effects::http_config;
use crate::harness::*;

const NOW: &str = "2026-12-02T00:00:00Z";

/// A `jobhost serve` (or `daemon --listen`) child on a port of its own,
/// killed when dropped.
pub struct Served {
    child: Child,
    pub addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `jobhost ARGS --listen 127.0.0.1:0` and waits for the address
/// it says it serves on.
pub fn serve(args: &[&str]) -> Served {
    serve_with(args, &[])
}

/// [`serve`] with the environment variables `env` set.
pub fn serve_with(args: &[&str], env: &[(&str, &str)]) -> Served {
    let mut all: Vec<&str> = args.to_vec();
    if !args.contains(&"--listen") {
        all.extend(["--listen", "127.0.0.1:0"]);
    }
    let mut child = command(&root(), &all)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("jobhost starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let addr = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("jobhost stopped before serving"))
            .expect("stderr line");
        if let Some(rest) = line.split("serving the dashboard on http://").nth(1) {
            break rest.trim_end_matches('/').to_string();
        }
    };
    // Keep draining stderr so the child never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    Served { child, addr }
}

/// An HTTP answer.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        assert_eq!(self.status, 200, "{}", self.body);
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

/// `GET path` with `headers`, over a connection of its own.
pub fn get(addr: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut conn = TcpStream::connect(addr).expect("connects");
    // A server that never answers fails the test rather than hanging it.
    conn.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .expect("a read timeout");
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    conn.write_all(req.as_bytes()).expect("request sent");
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).expect("answer read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let mut head_lines = head.lines();
    let status = head_lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let headers = head_lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut body = body.to_string();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    Answer {
        status,
        headers,
        body,
    }
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    out
}

/// The reference report delivering to `sink`'s `/d`, with one attempt.
fn sink_job(dir: &Path, sink: &Sink) -> std::path::PathBuf {
    http_config(
        dir,
        "max_attempts = 1",
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntimeout_seconds = 2\ntries = 1\n",
            sink.url("/d")
        ),
    )
}

fn run_for(cfg: &Path, store: &str, day: &str) -> Run {
    let mut cmd = job_command(cfg, store, NOW);
    cmd.args(["--for", day]);
    to_run(cmd.output().expect("jobhost runs"))
}

/// A SKIPPED row for `day`, as a daemon's catch-up records it.
fn record_skip(store: &Path, day: &str) {
    use jobhost::core::window::{JobName, Window, WindowKind, Zone};
    use jobhost::store::{Ledger, Skip, SqliteStore};
    let w = Window::containing(
        &JobName::new("daily-report").unwrap(),
        WindowKind::Day,
        &Zone::utc(),
        format!("{day}T12:00:00Z").parse().unwrap(),
    )
    .unwrap();
    let mut s = SqliteStore::open(store).unwrap();
    s.record_skips(
        &[Skip {
            window: &w,
            reason: "catch_up = \"latest\"",
        }],
        "test",
        "2026-12-01T00:00:00Z".parse().unwrap(),
    )
    .unwrap();
}

/// A store of the daily report with DONE (11-03, 11-10, 11-20), FAILED
/// (11-05: refused with 400), ABANDONED (11-06: 503 on its only attempt)
/// and SKIPPED (11-15) windows, and holes between them.
pub fn every_state(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, Sink) {
    let sink = Sink::start();
    let cfg = sink_job(dir, &sink);
    let db = dir.join("s.db");
    let store = s(&db).to_string();
    for day in ["2026-11-03", "2026-11-10", "2026-11-20"] {
        assert_eq!(run_for(&cfg, &store, day).event(), "ran");
    }
    sink.script("/d", &[Reply::Status(400)]);
    assert_eq!(run_for(&cfg, &store, "2026-11-05").event(), "failed");
    sink.script("/d", &[Reply::Status(503)]);
    assert_eq!(run_for(&cfg, &store, "2026-11-06").event(), "abandoned");
    record_skip(&db, "2026-11-15");
    (cfg, db, sink)
}

fn cell_states(cells: &Value) -> std::collections::BTreeMap<String, String> {
    cells
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["label"].as_str().unwrap().to_string(),
                c["state"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn the_pages_and_their_json_twins_show_every_window_state_and_the_replay_command() {
    let dir = scratch();
    let (cfg, db, _sink) = every_state(dir.path());
    let srv = serve(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
    ]);
    let jobs = get(&srv.addr, "/jobs.json", &[]).json();
    let job = &jobs["jobs"][0];
    assert_eq!(job["job"], "daily-report");
    assert_eq!(job["health"], "failed");
    assert_eq!(job["last_done"]["key"], "daily-report:2026-11-20");
    assert_eq!(job["next_due"]["key"], "daily-report:2026-12-02");
    assert_eq!(job["needs_a_person"], 2);
    let strip = cell_states(&job["strip"]);
    assert_eq!(strip.len(), 30);
    assert_eq!(strip["2026-11-05"], "failed");
    assert_eq!(strip["2026-11-06"], "abandoned");
    assert_eq!(strip["2026-11-15"], "skipped");
    assert_eq!(strip["2026-11-20"], "done");
    assert_eq!(strip["2026-11-21"], "hole");
    assert_eq!(strip["2026-11-02"], "before");
    // The same facts by content negotiation.
    let negotiated = get(&srv.addr, "/jobs", &[("Accept", "application/json")]).json();
    assert_eq!(negotiated["jobs"][0]["health"], "failed");

    let grid = get(&srv.addr, "/jobs/daily-report.json?at=2026-11-10", &[]).json();
    let cells: Vec<Value> = grid["rows"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["cells"].as_array().unwrap().clone())
        .collect();
    let states = cell_states(&Value::Array(cells));
    assert_eq!(states["2026-11-03"], "done");
    assert_eq!(states["2026-11-04"], "hole");
    assert_eq!(states["2026-11-05"], "failed");
    assert_eq!(states["2026-11-06"], "abandoned");
    // Rows are calendar weeks of seven days.
    assert!(
        grid["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["cells"].as_array().unwrap().len() == 7)
    );
    // Nothing is older than the job's first row, so no older page.
    assert!(grid["older"].is_null(), "{grid}");
    assert!(grid["newer"].is_string(), "{grid}");
    let now_page = get(&srv.addr, "/jobs/daily-report.json", &[]).json();
    let cells: Vec<Value> = now_page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["cells"].as_array().unwrap().clone())
        .collect();
    assert_eq!(cell_states(&Value::Array(cells))["2026-12-02"], "not-due");

    let run = get(&srv.addr, "/runs/daily-report:2026-11-05.json", &[]).json();
    assert_eq!(run["current"]["state"], "FAILED");
    assert!(
        run["current"]["error"].as_str().unwrap().contains("400"),
        "{run}"
    );
    // The printed command names the job's config and store, and pastes.
    assert_eq!(
        run["replay"],
        format!(
            "jobhost replay daily-report:2026-11-05 --config {} --store {}",
            s(&cfg),
            s(&db)
        )
    );
    let pasted = paste(&root(), run["replay"].as_str().unwrap());
    assert_eq!(pasted.code, 0, "{}{}", pasted.stdout, pasted.stderr);
    assert!(pasted.stdout.contains("identical"), "{}", pasted.stdout);
    assert_eq!(run["current"]["messages"][0]["destination"], "digest");
    assert!(
        run["current"]["messages"][0]["last_status"]
            .as_str()
            .unwrap()
            .contains("400")
    );
    let skipped = get(&srv.addr, "/runs/daily-report:2026-11-15.json", &[]).json();
    assert_eq!(skipped["current"]["skip_reason"], "catch_up = \"latest\"");

    for path in [
        "/",
        "/jobs/daily-report",
        "/jobs/daily-report?at=2026-11-10",
        "/runs/daily-report:2026-11-05",
    ] {
        let page = get(&srv.addr, path, &[]);
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        assert!(
            page.header("Content-Type")
                .unwrap()
                .starts_with("text/html")
        );
        let csp = page.header("Content-Security-Policy").unwrap();
        assert!(csp.contains("script-src 'self'"), "{csp}");
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert!(
            !page.body.contains("<script>"),
            "{path} has an inline script"
        );
    }
    let run_page = get(&srv.addr, "/runs/daily-report:2026-11-05", &[]).body;
    assert_eq!(
        run_page
            .matches("jobhost replay daily-report:2026-11-05 --config")
            .count(),
        1,
        "the replay command once: {run_page}"
    );
    assert_eq!(get(&srv.addr, "/healthz", &[]).body, "ok\n");
    assert_eq!(
        get(&srv.addr, "/runs/daily-report:2030-01-01", &[]).status,
        404
    );
    assert_eq!(get(&srv.addr, "/jobs/nope", &[]).status, 404);
    let bad = get(&srv.addr, "/jobs/daily-report?at=yesterday", &[]);
    assert_eq!(bad.status, 400, "{}", bad.body);
}

#[test]
fn metrics_parse_as_prometheus_text_and_agree_with_status_json() {
    let dir = scratch();
    let (cfg, db, _sink) = every_state(dir.path());
    let srv = serve(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
    ]);
    let text = get(&srv.addr, "/metrics", &[]).body;
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("Prometheus text");
    let value = |name: &str, labels: &[(&str, &str)]| -> f64 {
        let s = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"));
        match s.value {
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => panic!("{name} is not a number"),
        }
    };
    let status = jobhost(&[
        "status",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
        "--json",
    ]);
    let st: Value = serde_json::from_str(status.stdout.trim()).expect("status JSON");
    let job = [("jobhost_job", "daily-report"), ("store", s(&db))];
    assert_eq!(st["health"], "failed");
    assert_eq!(value("jobhost_up", &job), 0.0);
    assert_eq!(
        value("jobhost_late_seconds", &job),
        st["late_seconds"].as_f64().unwrap()
    );
    assert_eq!(
        value("jobhost_holes", &job),
        st["holes"]["count"].as_f64().unwrap()
    );
    // The end of 2026-11-20, the last DONE window.
    assert_eq!(
        value("jobhost_last_done_window_end_seconds", &job),
        1_795_219_200.0
    );
    let states = history(&db);
    for state in [
        "DONE",
        "FAILED",
        "ABANDONED",
        "SKIPPED",
        "CLAIMED",
        "PREPARED",
    ] {
        let n = states.iter().filter(|r| r["state"] == state).count() as f64;
        assert_eq!(
            value(
                "jobhost_windows",
                &[("jobhost_job", "daily-report"), ("state", state)]
            ),
            n,
            "{state}"
        );
    }
}

#[test]
fn guest_text_in_a_summary_an_error_and_a_log_is_shown_as_text() {
    let dir = scratch();
    sales_db(dir.path(), 200);
    let db = dir.path().join("s.db");
    let mut configs = Vec::new();
    for mode in ["html-report", "html-error"] {
        let sub = dir.path().join(mode);
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::copy(dir.path().join("sales.db"), sub.join("sales.db")).unwrap();
        let cfg = config(
            &sub,
            &format!(
                "job = \"{mode}\"\ncomponent = \"{}\"\nmax_attempts = 1\n\
                 [source]\npath = \"sales.db\"\n\
                 query = \"SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end\"\n\
                 [destinations.sink]\ntype = \"file\"\npath = \"sink.jsonl\"\n",
                guests().hostile.display()
            ),
        );
        let r = run_job(&cfg, &db, "2026-11-09T00:05:00Z");
        assert!(r.code <= 1, "{}", r.stderr);
        configs.push(cfg);
    }
    let srv = serve(&[
        "serve",
        "--config",
        s(&configs[0]),
        "--config",
        s(&configs[1]),
        "--store",
        s(&db),
        "--now",
        "2026-11-09T00:05:00Z",
    ]);
    for path in [
        "/",
        "/jobs/html-report",
        "/runs/html-report:2026-11-08",
        "/runs/html-error:2026-11-08",
        "/jobs/html-error",
    ] {
        let page = get(&srv.addr, path, &[]);
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        let body = &page.body;
        assert!(!body.contains("<script>window"), "{path}: {body}");
        assert!(!body.contains("<img"), "{path}: {body}");
        assert!(!body.contains("<b>bold"), "{path}: {body}");
        assert!(!body.contains('\u{1b}'), "{path}: a raw escape");
    }
    let summary = get(&srv.addr, "/runs/html-report:2026-11-08", &[]).body;
    assert!(
        summary.contains("&lt;script&gt;window.__pwned=1"),
        "{summary}"
    );
    assert!(summary.contains("\\u{1b}[31mred"), "{summary}");
    let error = get(&srv.addr, "/runs/html-error:2026-11-08", &[]).body;
    assert!(error.contains("&lt;img src=x onerror="), "{error}");
    // The JSON twin keeps the exact text.
    let twin = get(&srv.addr, "/runs/html-report:2026-11-08.json", &[]).json();
    assert!(
        twin["current"]["summary"]
            .as_str()
            .unwrap()
            .starts_with("<script>")
    );
}

#[test]
fn off_loopback_a_token_is_required_and_requests_without_it_learn_nothing() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 10);
    let db = dir.path().join("s.db");
    let refused = jobhost(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--listen",
        "0.0.0.0:0",
    ]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert_eq!(
        refused.stderr.trim().lines().count(),
        1,
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("--token-file"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stderr.contains("--insecure-no-auth"),
        "{}",
        refused.stderr
    );

    let short = dir.path().join("short");
    std::fs::write(&short, "abc\n").unwrap();
    let bad = jobhost(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--listen",
        "0.0.0.0:0",
        "--token-file",
        s(&short),
    ]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("16 characters"), "{}", bad.stderr);

    let token = "s3cr3t-t0ken-of-some-length";
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{token}\n")).unwrap();
    assert_eq!(run_job(&cfg, &db, "2026-11-09T00:05:00Z").event(), "ran");
    let srv = serve(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--listen",
        "127.0.0.1:0",
        "--token-file",
        s(&file),
        "--now",
        "2026-11-09T00:05:00Z",
    ]);
    for path in [
        "/",
        "/jobs.json",
        "/jobs/daily-report",
        "/runs/daily-report:2026-11-08",
        "/metrics",
    ] {
        for auth in [
            None,
            Some("Bearer wrong-token-of-some-length"),
            Some("Basic czNjcjN0"),
        ] {
            let headers: Vec<(&str, &str)> =
                auth.map(|a| ("Authorization", a)).into_iter().collect();
            let a = get(&srv.addr, path, &headers);
            assert_eq!(a.status, 401, "{path} {auth:?}");
            assert!(!a.body.contains("daily-report"), "{path}: {}", a.body);
        }
        let bearer = format!("Bearer {token}");
        let ok = get(&srv.addr, path, &[("Authorization", &bearer)]);
        assert_eq!(ok.status, 200, "{path}: {}", ok.body);
        assert!(ok.body.contains("daily-report"), "{path}");
    }
    assert_eq!(get(&srv.addr, "/healthz", &[]).status, 200);
}

#[test]
fn on_a_store_of_100k_windows_a_page_reads_a_bounded_number_of_rows() {
    use jobhost::core::window::{JobName, Window, WindowKind, Zone};
    use jobhost::store::{Ledger, NewNotification, Notices, Skip, SqliteStore};
    let dir = scratch();
    let db = dir.path().join("big.db");
    let job = JobName::new("big").unwrap();
    let mut w = Window::containing(
        &job,
        WindowKind::Hour,
        &Zone::utc(),
        "2015-01-01T00:00:00Z".parse().unwrap(),
    )
    .unwrap();
    let mut windows = Vec::with_capacity(100_000);
    for _ in 0..100_000 {
        let next = w.next().unwrap();
        windows.push(w);
        w = next;
    }
    let now = jobhost::core::clock::rfc3339(w.start);
    {
        let mut store = SqliteStore::open(&db).unwrap();
        let skips: Vec<Skip<'_>> = windows
            .iter()
            .map(|w| Skip {
                window: w,
                reason: "catch_up = \"latest\"",
            })
            .collect();
        store
            .record_skips(&skips, "test", "2026-01-01T00:00:00Z".parse().unwrap())
            .unwrap();
        // Two open incidents, each told to three targets, over a thousand
        // closed ones (each told twice): the pages read the open ones only.
        let at: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let told = |id: i64, event: &str, n: usize| -> Vec<NewNotification> {
            (0..n)
                .map(|t| NewNotification {
                    event: event.to_string(),
                    target: format!("https://hooks.example.com/{t}"),
                    idempotency_key: format!("jobhost:big:incident:{id}:{event}"),
                    body: "{}".to_string(),
                })
                .collect()
        };
        for _ in 0..1_000 {
            let id = store
                .open_incident("big", "late", None, "late", at, &|id| told(id, "late", 2))
                .unwrap()
                .unwrap();
            store
                .close_incident(id, "no longer late", at, &|i| told(i.id, "recovered", 2))
                .unwrap();
        }
        for kind in ["stale", "late"] {
            store
                .open_incident("big", kind, None, kind, at, &|id| told(id, kind, 3))
                .unwrap()
                .unwrap();
        }
    }
    let cfg = config(
        dir.path(),
        "job = \"big\"\nwindow = \"hour\"\ncomponent = \"none.wasm\"\n",
    );
    let srv = serve(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        &now,
    ]);
    for path in [
        "/jobs.json",
        "/jobs/big.json",
        "/runs/big:2020-01-01T00:00Z.json",
    ] {
        let a = get(&srv.addr, path, &[]);
        if path.starts_with("/runs/") && a.status == 404 {
            continue;
        }
        let v = a.json();
        if path != "/runs/big:2020-01-01T00:00Z.json" {
            let job = if path == "/jobs.json" {
                &v["jobs"][0]
            } else {
                &v["job"]
            };
            let incidents = job["status"]["incidents"].as_array().unwrap();
            assert_eq!(incidents.len(), 2, "{path}");
            assert!(
                incidents
                    .iter()
                    .all(|i| i["notifications"].as_array().unwrap().len() == 3),
                "{path}: {incidents:?}"
            );
        }
        let reads = &v["reads"];
        assert!(reads["queries"].as_u64().unwrap() <= 20, "{path}: {reads}");
        assert!(reads["rows"].as_u64().unwrap() <= 500, "{path}: {reads}");
        assert!(a.body.len() < 256 * 1024, "{path}: {} bytes", a.body.len());
    }
    let grid = get(&srv.addr, "/jobs/big.json", &[]).json();
    let status = jobhost(&[
        "status",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        &now,
        "--json",
    ]);
    let st: Value = serde_json::from_str(status.stdout.trim()).expect("status JSON");
    assert_eq!(grid["job"]["health"], st["health"]);
    assert_eq!(grid["job"]["late_seconds"], st["late_seconds"]);
    assert!(grid["older"].is_string(), "{}", grid["older"]);
    let html = get(&srv.addr, "/jobs/big", &[]);
    assert!(html.body.len() < 512 * 1024, "{} bytes", html.body.len());
    let metrics = get(&srv.addr, "/metrics", &[]).body;
    assert!(
        metrics.contains("jobhost_windows{jobhost_job=\"big\",store=\"")
            && metrics.contains("state=\"SKIPPED\"} 100000"),
        "{metrics}"
    );
}

#[test]
fn the_daemon_serves_its_jobs_and_counts_its_runs() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 50);
    let db = dir.path().join("s.db");
    let srv = serve(&[
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
    // The daemon runs the due window at once; wait for its receipt to
    // show in the counters.
    let mut text = String::new();
    for _ in 0..600 {
        text = get(&srv.addr, "/metrics", &[]).body;
        if text.contains("jobhost_runs_total{jobhost_job=\"daily-report\",event=\"ran\"} 1") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        text.contains("jobhost_runs_total{jobhost_job=\"daily-report\",event=\"ran\"} 1"),
        "{text}"
    );
    assert!(text.contains("jobhost_deliveries_total{jobhost_job=\"daily-report\",destination=\"digest\",status=\"delivered\"} 1"), "{text}");
    assert!(
        text.contains("jobhost_run_duration_seconds_count{jobhost_job=\"daily-report\"} 1"),
        "{text}"
    );
    let jobs = get(&srv.addr, "/jobs.json", &[]).json();
    assert_eq!(jobs["jobs"][0]["health"], "healthy");
    assert_eq!(
        jobs["jobs"][0]["last_done"]["key"],
        "daily-report:2026-11-08"
    );
}

#[test]
fn a_store_that_cannot_be_read_costs_only_its_own_jobs() {
    let dir = scratch();
    for sub in ["good", "down", "newer"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    // A healthy job on a store of its own; one whose PostgreSQL cannot be
    // reached; one whose SQLite store a newer jobhost migrated.
    let good = report_config_with(
        &dir.path().join("good"),
        50,
        "job = \"good\"\nstore = \"good.db\"",
    );
    let text = std::fs::read_to_string(&good).unwrap();
    std::fs::write(&good, text.replacen("job = \"daily-report\"\n", "", 1)).unwrap();
    assert_eq!(
        run_job(
            &good,
            dir.path().join("good/good.db"),
            "2026-11-09T00:05:00Z"
        )
        .event(),
        "ran"
    );
    let unreachable = config(
        &dir.path().join("down"),
        "job = \"down\"\nstore = \"postgres://nobody@127.0.0.1:1/none\"\n",
    );
    let newer_dir = dir.path().join("newer");
    let newer = config(&newer_dir, "job = \"newer\"\nstore = \"newer.db\"\n");
    rusqlite::Connection::open(newer_dir.join("newer.db"))
        .unwrap()
        .execute_batch("CREATE TABLE runs (key TEXT PRIMARY KEY); PRAGMA user_version = 999;")
        .unwrap();
    let srv = serve(&[
        "serve",
        "--config",
        s(&good),
        "--config",
        s(&unreachable),
        "--config",
        s(&newer),
        "--now",
        "2026-11-09T00:30:00Z",
    ]);
    let metrics = get(&srv.addr, "/metrics", &[]);
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    let m = &metrics.body;
    assert!(
        m.contains("jobhost_store_up{store=\"postgres://nobody@127.0.0.1:1/none\"} 0"),
        "{m}"
    );
    assert!(m.contains("jobhost_up{jobhost_job=\"down\""), "{m}");
    assert!(
        m.lines()
            .any(|l| l.starts_with("jobhost_up{jobhost_job=\"newer\"") && l.ends_with(" 0")),
        "{m}"
    );
    assert!(
        m.lines()
            .any(|l| l.starts_with("jobhost_up{jobhost_job=\"good\"") && l.ends_with(" 1")),
        "the other job answers as usual: {m}"
    );
    assert!(
        m.lines()
            .any(|l| l.starts_with("jobhost_windows{jobhost_job=\"good\"")
                && l.contains("state=\"DONE\"")
                && l.ends_with(" 1")),
        "{m}"
    );
    // A page of a job whose store cannot be read is the server's
    // condition: 503, not 400.
    for job in ["down", "newer"] {
        let page = get(&srv.addr, &format!("/jobs/{job}.json"), &[]);
        assert_eq!(page.status, 503, "{job}: {}", page.body);
    }
    assert_eq!(get(&srv.addr, "/jobs/good.json", &[]).status, 200);
}

#[test]
fn the_dashboard_carries_the_status_json_exactly_as_status_prints_it() {
    let dir = scratch();
    let (cfg, db, _sink) = every_state(dir.path());
    let srv = serve(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
    ]);
    let status = jobhost(&[
        "status",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
        "--json",
    ]);
    let printed: Value = serde_json::from_str(status.stdout.trim()).expect("status JSON");
    assert_eq!(printed["health"], "failed", "{printed}");
    for path in ["/jobs.json", "/jobs/daily-report.json"] {
        let page = get(&srv.addr, path, &[]).json();
        let job = if path == "/jobs.json" {
            &page["jobs"][0]
        } else {
            &page["job"]
        };
        assert_eq!(job["status"], printed, "{path}");
    }
}

#[test]
fn history_key_json_is_the_run_page_json_twin_for_every_state_and_revision() {
    let dir = scratch();
    let (cfg, db, _sink) = every_state(dir.path());
    // A rerun, so that a window has an earlier revision with its messages.
    let rerun = jobhost(&[
        "rerun",
        "daily-report:2026-11-10",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
        "--reason",
        "late rows",
    ]);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    let srv = serve(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        NOW,
    ]);
    for day in [
        "2026-11-03",
        "2026-11-05",
        "2026-11-06",
        "2026-11-10",
        "2026-11-15",
    ] {
        let key = format!("daily-report:{day}");
        let cli = jobhost(&[
            "history",
            &key,
            "--json",
            "--config",
            s(&cfg),
            "--store",
            s(&db),
        ]);
        assert_eq!(cli.code, 0, "{key}: {}", cli.stderr);
        let printed: Value = serde_json::from_str(cli.stdout.trim()).expect("history KEY JSON");
        let mut page = get(&srv.addr, &format!("/runs/{key}.json"), &[]).json();
        page.as_object_mut().unwrap().remove("reads");
        assert_eq!(printed, page, "{key}");
        assert_eq!(printed["key"], key.as_str());
    }
    let rerun = jobhost(&[
        "history",
        "daily-report:2026-11-10",
        "--json",
        "--store",
        s(&db),
    ]);
    let rerun: Value = serde_json::from_str(rerun.stdout.trim()).unwrap();
    assert_eq!(rerun["current"]["revision"], 2, "{rerun}");
    assert_eq!(rerun["current"]["revision_reason"], "late rows");
    assert_eq!(rerun["earlier"][0]["revision"], 1, "{rerun}");
    assert_eq!(rerun["earlier"][0]["state"], "DONE", "{rerun}");
    assert_eq!(
        rerun["earlier"][0]["messages"].as_array().map(Vec::len),
        Some(1),
        "{rerun}"
    );
}
