//! The alert rules and scrape configs under `deploy/prometheus/` are right:
//! `promtool test rules` passes its cases (one job failed and another
//! healthy with a window waiting to retry, a late job, a host down, a store
//! unreachable, two hosts on one store counted once), and a real Prometheus
//! scraping two daemons on one store by the documented config keeps the
//! `jobhost_job` label and sums what the docs say to sum. Under `CI` a
//! missing Prometheus fails the test; elsewhere it skips, saying so.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::dashboard::{Served, get, serve};
use crate::harness::*;

/// `name` on the PATH, or `None` after saying why the test skips (a
/// failure under `CI`, where `.ci/run` installs it).
fn prometheus_tool(test: &str, name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file());
    if found.is_none() {
        jobhost_tests::skip::missing(
            &format!("alerts::{test}"),
            &format!("{name} is not installed"),
            "Debian: apt-get install prometheus; .ci/run installs it",
        );
    }
    found
}

fn rules_dir() -> PathBuf {
    root().join("deploy/prometheus")
}

#[test]
fn the_alert_rules_pass_their_promtool_cases() {
    let Some(promtool) = prometheus_tool("the_alert_rules_pass_their_promtool_cases", "promtool")
    else {
        return;
    };
    for args in [
        &["check", "rules", "rules.yaml"][..],
        &["test", "rules", "rules.test.yaml"][..],
        &["check", "config", "--syntax-only", "prometheus.yaml"][..],
    ] {
        let out = Command::new(&promtool)
            .current_dir(rules_dir())
            .args(args)
            .output()
            .unwrap();
        let run = to_run(out);
        assert_eq!(
            run.code, 0,
            "promtool {args:?}: {}{}",
            run.stdout, run.stderr
        );
    }
}

#[test]
fn every_documented_scrape_config_names_its_job_jobhost_and_sends_the_token() {
    let docs = [
        ("prometheus.yaml", "static_configs"),
        ("prometheus-kubernetes.yaml", "kubernetes_sd_configs"),
    ];
    for (file, discovery) in docs {
        let text = std::fs::read_to_string(rules_dir().join(file)).unwrap();
        let config: serde_norway::Value = serde_norway::from_str(&text).unwrap();
        let job = &config["scrape_configs"][0];
        assert_eq!(
            job["job_name"], "jobhost",
            "{file}: the name JobhostDown matches"
        );
        assert!(
            job["authorization"]["credentials_file"].is_string(),
            "{file}: the bearer token"
        );
        assert!(!job[discovery].is_null(), "{file}");
        // Nothing renames or drops jobhost's own labels.
        let relabels = serde_norway::to_string(&job["relabel_configs"]).unwrap();
        assert!(
            !relabels.contains("jobhost_job"),
            "{file} relabels jobhost_job"
        );
        assert!(!relabels.contains("labeldrop"), "{file} drops labels");
        assert_eq!(
            config["rule_files"][0], "rules.yaml",
            "{file} loads the rules"
        );
    }
    let monitor: serde_norway::Value = serde_norway::from_str(
        &std::fs::read_to_string(rules_dir().join("podmonitor.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(monitor["kind"], "PodMonitor");
    assert_eq!(monitor["spec"]["jobLabel"], "app.kubernetes.io/name");
    let endpoint = &monitor["spec"]["podMetricsEndpoints"][0];
    assert_eq!(
        endpoint["authorization"]["credentials"]["key"],
        "dashboard-token"
    );
    // The pods it selects carry that label with the value `jobhost`, and
    // the port it names.
    let deployment =
        std::fs::read_to_string(root().join("deploy/kubernetes/deployment.yaml")).unwrap();
    assert!(deployment.contains("app.kubernetes.io/name: jobhost"));
    assert!(deployment.contains("name: dashboard"));
}

/// A Prometheus server on a port of its own, killed when dropped.
struct Prometheus {
    child: Child,
    base: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// `promql` evaluated now: the result's samples (labels and value).
    fn query(&self, promql: &str) -> Vec<(Value, f64)> {
        let addr = self.base.trim_start_matches("http://");
        let q: String = url::form_urlencoded::byte_serialize(promql.as_bytes()).collect();
        let answer = get(addr, &format!("/api/v1/query?query={q}"), &[]);
        let v = answer.json();
        v["data"]["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|s| {
                (
                    s["metric"].clone(),
                    s["value"][1].as_str().unwrap().parse::<f64>().unwrap(),
                )
            })
            .collect()
    }

    /// Polls `promql` until `done` holds of its samples, or fails after a
    /// minute.
    fn until(&self, promql: &str, done: impl Fn(&[(Value, f64)]) -> bool) -> Vec<(Value, f64)> {
        let start = Instant::now();
        loop {
            let samples = self.query(promql);
            if done(&samples) {
                return samples;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{promql} never settled: {samples:?}"
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// Prometheus with the documented static config, its targets and token
/// replaced, scraping and evaluating every second.
fn start_prometheus(bin: &Path, dir: &Path, targets: &[&str], token_file: &Path) -> Prometheus {
    let documented = std::fs::read_to_string(rules_dir().join("prometheus.yaml")).unwrap();
    let mut config: serde_norway::Value = serde_norway::from_str(&documented).unwrap();
    config["global"]["scrape_interval"] = "1s".into();
    config["global"]["evaluation_interval"] = "1s".into();
    config["rule_files"][0] = rules_dir().join("rules.yaml").display().to_string().into();
    let job = &mut config["scrape_configs"][0];
    job["authorization"]["credentials_file"] = token_file.display().to_string().into();
    job["static_configs"][0]["targets"] = serde_norway::to_value(targets).unwrap();
    let file = dir.join("prometheus.yaml");
    std::fs::write(&file, serde_norway::to_string(&config).unwrap()).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", file.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus starts");
    // Ready once its readiness endpoint says so.
    let start = Instant::now();
    let addr = format!("127.0.0.1:{port}");
    while std::net::TcpStream::connect(&addr).is_err() || get(&addr, "/-/ready", &[]).status != 200
    {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "prometheus did not become ready"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Prometheus {
        child,
        base: format!("http://127.0.0.1:{port}"),
    }
}

#[test]
fn prometheus_scraping_two_daemons_on_one_store_keeps_the_job_label_and_counts_once() {
    let test = "prometheus_scraping_two_daemons_on_one_store_keeps_the_job_label_and_counts_once";
    let Some(bin) = prometheus_tool(test, "prometheus") else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 200);
    let db = dir.path().join("s.db");
    let token = dir.path().join("token");
    std::fs::write(&token, "a-token-of-thirty-two-characters\n").unwrap();
    // The day four days ago ran from cron...
    let days = jiff::Timestamp::now().as_second().div_euclid(86_400);
    let earlier = jiff::Timestamp::from_second((days - 4) * 86_400)
        .unwrap()
        .to_string();
    let ran = jobhost(&[
        "run",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--for",
        &earlier[..10],
    ]);
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    // ...then two daemons on that store, on the real clock: between them
    // they run the three windows missed since (catch_up "all", 3), each
    // once.
    let daemons: Vec<Served> = (0..2)
        .map(|_| {
            serve(&[
                "daemon",
                "--config",
                s(&cfg),
                "--store",
                s(&db),
                "--token-file",
                s(&token),
            ])
        })
        .collect();
    let targets: Vec<&str> = daemons.iter().map(|d| d.addr.as_str()).collect();
    let prom = start_prometheus(&bin, dir.path(), &targets, &token);

    // Each host's series keeps jobhost's own job label, beside the scrape
    // job's.
    let up = prom.until("jobhost_up", |s| s.len() == 2);
    for (labels, _) in &up {
        assert_eq!(labels["jobhost_job"], "daily-report", "{labels}");
        assert_eq!(labels["job"], "jobhost", "{labels}");
        assert!(labels.get("exported_job").is_none(), "{labels}");
    }
    // The store's gauges, counted once as the rules do; the daemons' run
    // counters summed.
    let done = prom.until("sum(jobhost_job:windows:max{state=\"DONE\"})", |s| {
        s.first().is_some_and(|(_, v)| *v == 4.0)
    });
    assert_eq!(done.len(), 1);
    let ran = prom.until("sum(jobhost_runs_total{event=\"ran\"})", |s| {
        s.first().is_some_and(|(_, v)| *v >= 3.0)
    });
    assert_eq!(
        ran[0].1, 3.0,
        "each window ran once, on one host or the other"
    );
    // Summed instead, the store's gauge would count every window twice.
    let doubled = prom.until("sum(jobhost_windows{state=\"DONE\"})", |s| {
        s.first().is_some_and(|(_, v)| *v == 8.0)
    });
    assert_eq!(doubled.len(), 1);
    assert_eq!(history(&db).len(), 4);
}
