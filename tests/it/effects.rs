//! Delivery to a real HTTP endpoint (an in-test sink on 127.0.0.1): every
//! request carries its idempotency key, transient answers are retried with
//! backoff in virtual time, permanent ones are not, at-most-once never
//! resends an uncertain message, and credentials reach the wire only.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use jobhost_tests::sink::{Reply, Sink};

use crate::harness::*;

/// The reference report over `sales.db` in `dir`, sending its digest to
/// each `[destinations.*]` in `destinations` (TOML text).
pub fn http_config(dir: &Path, extra: &str, destinations: &str) -> PathBuf {
    sales_db(dir, 500);
    config(
        dir,
        &format!(
            r#"job = "daily-report"
component = "{}"
retry_delay_seconds = 0
{extra}

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

{destinations}
"#,
            guests().report.display()
        ),
    )
}

/// One HTTP destination `digest` at the sink's `/digest`.
fn digest_to(sink: &Sink, extra: &str) -> String {
    format!(
        "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntimeout_seconds = 2\n{extra}\n",
        sink.url("/digest")
    )
}

/// `run_job` in virtual time, with extra environment.
fn run_virtual(cfg: &Path, store: &Path, now: &str, env: &[(&str, &str)]) -> Run {
    let mut cmd = job_command(cfg, store, now);
    cmd.env("JOBHOST_TEST_VIRTUAL_TIME", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    to_run(cmd.output().expect("jobhost runs"))
}

const NOW: &str = "2026-11-09T00:05:00Z";

/// The run's receipt, after checking its exit code and event.
fn expect(run: &Run, code: i32, event: &str) -> serde_json::Value {
    let r = run.receipt();
    assert_eq!(
        (run.code, r["event"].as_str()),
        (code, Some(event)),
        "{}",
        run.stderr
    );
    r
}

#[test]
fn a_retry_after_given_as_an_http_date_is_waited_on_the_runs_clock() {
    let sink = Sink::start();
    // 30 s after the run's (virtual) now; long past on the machine's clock.
    sink.script(
        "/digest",
        &[
            Reply::RetryAt(429, "Mon, 09 Nov 2026 00:05:30 GMT"),
            Reply::Status(200),
        ],
    );
    let dir = scratch();
    let cfg = http_config(dir.path(), "", &digest_to(&sink, ""));
    let store = dir.path().join("s.db");
    let run = run_virtual(&cfg, &store, NOW, &[]);
    let r = expect(&run, 0, "ran");
    assert_eq!(r["messages"][0]["attempts"], 2);
    // The virtual clock moved by the wait: the run's last write is 30 s
    // after its start.
    let h = &history(&store)[0];
    assert_eq!(h["updated_at"], "2026-11-09T00:05:30Z", "{h}");
}

#[test]
fn a_500_then_a_429_then_a_200_is_one_delivery_after_three_sends() {
    let sink = Sink::start();
    // The 429 asks for 30 s: in virtual time that wait costs nothing.
    sink.script(
        "/digest",
        &[
            Reply::Status(500),
            Reply::RetryAfter(429, 30),
            Reply::Status(200),
        ],
    );
    let dir = scratch();
    let cfg = http_config(dir.path(), "", &digest_to(&sink, ""));
    let store = dir.path().join("s.db");
    let run = run_virtual(&cfg, &store, NOW, &[]);
    let r = expect(&run, 0, "ran");
    let m = &r["messages"][0];
    assert_eq!(m["status"], "delivered");
    assert_eq!(m["attempts"], 3);
    assert_eq!(m["http_status"], 200);
    assert_eq!(r["destinations"]["digest"]["status"], "delivered");
    assert_eq!(r["destinations"]["digest"]["attempts"], 3);
    assert_eq!(r["destinations"]["digest"]["delivery"], "at-least-once");

    let requests = sink.requests();
    assert_eq!(requests.len(), 3);
    for q in &requests {
        assert_eq!(q.idempotency_key(), Some("daily-report:2026-11-08#1"));
        assert_eq!(q.header("content-type"), Some("application/json"));
        // The window and the claim's fence, for an endpoint that refuses a
        // stale sender.
        assert_eq!(q.header("jobhost-window"), Some("daily-report:2026-11-08"));
        assert_eq!(q.header("jobhost-fence"), Some("1"));
        assert_eq!(
            q.body, requests[0].body,
            "every send carries the same bytes"
        );
    }
    let body: serde_json::Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert!(body["totals"].is_object(), "{body}");
    let h = &history(&store)[0];
    assert_eq!(
        (h["state"].as_str(), h["delivered"].as_u64()),
        (Some("DONE"), Some(1))
    );
}

#[test]
fn a_400_is_a_permanent_failure_without_retries_and_the_next_window_still_runs() {
    let sink = Sink::start();
    sink.script("/digest", &[Reply::Status(400)]);
    let dir = scratch();
    let cfg = http_config(dir.path(), "", &digest_to(&sink, ""));
    let store = dir.path().join("s.db");
    let run = run_virtual(&cfg, &store, NOW, &[]);
    let r = expect(&run, 1, "failed");
    assert_eq!(r["error"]["retryable"], false);
    assert!(
        r["error"]["message"].as_str().unwrap().contains("400"),
        "{r}"
    );
    assert_eq!(r["messages"][0]["status"], "failed");
    assert_eq!(r["messages"][0]["attempts"], 1);
    assert_eq!(sink.requests().len(), 1, "no retry loop");
    assert_eq!(history(&store)[0]["state"], "FAILED");

    let again = run_virtual(&cfg, &store, "2026-11-09T06:00:00Z", &[]);
    assert_eq!(again.receipt()["reason"], "gave-up", "{}", again.stderr);
    assert_eq!(
        sink.requests().len(),
        1,
        "a permanent failure is never resent"
    );

    let next = run_virtual(&cfg, &store, "2026-11-10T00:05:00Z", &[]);
    assert_eq!(next.event(), "ran", "{}", next.stderr);
    let keys: Vec<_> = sink
        .requests()
        .iter()
        .map(|q| q.idempotency_key().unwrap().to_string())
        .collect();
    assert_eq!(
        keys,
        ["daily-report:2026-11-08#1", "daily-report:2026-11-09#1"]
    );
}

#[test]
fn at_least_once_resends_an_uncertain_send_with_the_same_key() {
    let sink = Sink::start();
    // The connection closes after the request arrived: it may have been
    // processed, so the retry must let the endpoint deduplicate.
    // A 409 says a request with this key is still being processed.
    sink.script(
        "/digest",
        &[Reply::Close, Reply::Status(409), Reply::Status(201)],
    );
    let dir = scratch();
    let cfg = http_config(dir.path(), "", &digest_to(&sink, ""));
    let run = run_virtual(&cfg, &dir.path().join("s.db"), NOW, &[]);
    assert_eq!(run.event(), "ran", "{}", run.stderr);
    assert_eq!(run.receipt()["messages"][0]["http_status"], 201);
    let requests = sink.requests();
    assert_eq!(requests.len(), 3);
    for q in &requests {
        assert_eq!(q.idempotency_key(), Some("daily-report:2026-11-08#1"));
        assert_eq!(q.body, requests[0].body);
    }
}

#[test]
fn at_most_once_with_an_uncertain_outcome_is_abandoned_and_never_resent() {
    let sink = Sink::start();
    sink.script("/digest", &[Reply::Hang]);
    let dir = scratch();
    let cfg = http_config(
        dir.path(),
        "",
        &digest_to(&sink, "delivery = \"at-most-once\""),
    );
    let store = dir.path().join("s.db");
    let run = run_virtual(&cfg, &store, NOW, &[]);
    let r = expect(&run, 1, "abandoned");
    assert_eq!(r["messages"][0]["status"], "abandoned");
    assert_eq!(r["destinations"]["digest"]["delivery"], "at-most-once");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("never sent again"),
        "{r}"
    );
    assert_eq!(history(&store)[0]["state"], "ABANDONED");

    let later = run_virtual(&cfg, &store, "2026-11-09T12:00:00Z", &[]);
    assert_eq!(later.receipt()["reason"], "gave-up", "{}", later.stderr);
    assert_eq!(sink.requests().len(), 1, "no second request, ever");
}

#[test]
fn at_most_once_still_retries_what_certainly_did_not_arrive() {
    let sink = Sink::start();
    sink.script("/digest", &[Reply::Status(429), Reply::Status(200)]);
    let dir = scratch();
    let cfg = http_config(
        dir.path(),
        "",
        &digest_to(&sink, "delivery = \"at-most-once\""),
    );
    let run = run_virtual(&cfg, &dir.path().join("s.db"), NOW, &[]);
    assert_eq!(run.event(), "ran", "{}", run.stderr);
    assert_eq!(run.receipt()["messages"][0]["attempts"], 2);
    assert_eq!(sink.requests().len(), 2);
}

#[test]
fn sends_that_keep_failing_leave_the_report_for_a_later_invocation() {
    let sink = Sink::start();
    sink.script("/digest", &[Reply::Status(503); 3]);
    let dir = scratch();
    let cfg = http_config(
        dir.path(),
        "",
        &digest_to(&sink, "tries = 3").replace("retry_delay_seconds = 0", ""),
    );
    let cfg_text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("retry_delay_seconds = 0", "retry_delay_seconds = 120");
    std::fs::write(&cfg, cfg_text).unwrap();
    let store = dir.path().join("s.db");
    let run = run_virtual(&cfg, &store, NOW, &[]);
    let r = expect(&run, 1, "failed");
    assert_eq!(r["error"]["retryable"], true);
    assert_eq!(r["messages"][0]["status"], "pending");
    assert_eq!(r["messages"][0]["attempts"], 3);
    let h = &history(&store)[0];
    assert_eq!(h["state"], "PREPARED", "the report is kept");
    // Two minutes after the failure, which came after two jittered waits
    // of at most 1 s and 2 s of (virtual) time.
    let retry_at = h["retry_at"].as_str().unwrap();
    assert!(
        ("2026-11-09T00:07:00Z"..="2026-11-09T00:07:03Z").contains(&retry_at),
        "{h}"
    );

    let early = run_virtual(&cfg, &store, "2026-11-09T00:06:00Z", &[]);
    assert_eq!(early.receipt()["reason"], "retry-later", "{}", early.stderr);
    assert_eq!(sink.requests().len(), 3);

    let resumed = run_virtual(&cfg, &store, "2026-11-09T00:08:00Z", &[]);
    let r2 = resumed.receipt();
    assert_eq!(r2["event"], "resumed", "{}", resumed.stderr);
    assert_eq!(r2["attempt"], 2);
    assert_eq!(
        r2["report"], r["report"],
        "the stored report, not a new one"
    );
    let requests = sink.requests();
    assert_eq!(requests.len(), 4);
    assert!(
        requests.iter().all(|q| q.body == requests[0].body
            && q.idempotency_key() == Some("daily-report:2026-11-08#1"))
    );
    assert_eq!(history(&store)[0]["state"], "DONE");
}

#[test]
fn an_unset_variable_in_a_url_or_header_is_bad_input_before_anything_runs() {
    let sink = Sink::start();
    for (field, dest) in [
        (
            "headers.Authorization",
            format!(
                "{}headers = {{ Authorization = \"Bearer ${{JOBHOST_TEST_UNSET_TOKEN}}\" }}\n",
                digest_to(&sink, "")
            ),
        ),
        (
            "url",
            digest_to(&sink, "").replace("/digest", "/digest/${JOBHOST_TEST_UNSET_TOKEN}"),
        ),
    ] {
        let dir = scratch();
        let cfg = http_config(dir.path(), "", &dest);
        let store = dir.path().join("state").join("s.db");
        let run = run_virtual(&cfg, &store, NOW, &[]);
        let r = run.receipt();
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert_eq!(r["error"]["kind"], "invalid-input");
        let msg = r["error"]["message"].as_str().unwrap();
        assert!(msg.contains("JOBHOST_TEST_UNSET_TOKEN"), "{msg}");
        assert!(
            msg.contains(&format!("destinations.digest.{field}")),
            "{msg}"
        );
        assert!(!store.exists(), "nothing was claimed");
    }
    assert!(sink.requests().is_empty());
}

#[test]
fn credentials_from_the_environment_reach_the_wire_and_nowhere_else() {
    const SECRET: &str = "tok-7f3a9c1e5b2d";
    let sink = Sink::start();
    // A refusal that echoes the request's headers makes the host write an
    // error about this destination that would quote the token.
    sink.script(&format!("/digest?key={SECRET}"), &[Reply::Echo(400)]);
    let dir = scratch();
    let dest = format!(
        "{}headers = {{ Authorization = \"Bearer ${{JOBHOST_TEST_TOKEN}}\", X-Tenant = \"acme\" }}\n",
        digest_to(&sink, "").replace("/digest", "/digest?key=${JOBHOST_TEST_TOKEN}")
    );
    let cfg = http_config(dir.path(), "", &dest);
    let store = dir.path().join("s.db");
    let run = run_virtual(&cfg, &store, NOW, &[("JOBHOST_TEST_TOKEN", SECRET)]);
    assert_eq!(run.event(), "failed", "{}", run.stderr);
    let q = &sink.requests()[0];
    assert_eq!(
        q.header("authorization"),
        Some(&*format!("Bearer {SECRET}"))
    );
    assert_eq!(q.header("x-tenant"), Some("acme"));
    assert_eq!(q.path, format!("/digest?key={SECRET}"));
    assert!(
        run.stdout.contains("${JOBHOST_TEST_TOKEN}"),
        "the URL is shown as written"
    );
    assert!(
        run.stdout.contains("x-tenant: acme"),
        "the echo is quoted: {}",
        run.stdout
    );
    assert!(
        run.stdout.contains("Bearer ***"),
        "its token is scrubbed: {}",
        run.stdout
    );

    let shown = format!(
        "{}{}{}",
        run.stdout,
        run.stderr,
        jobhost(&["history", "--store", s(&store), "--json"]).stdout
    );
    assert!(!shown.contains(SECRET), "secret in output: {shown}");
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("s.db")
        {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
                "secret stored in {}",
                path.display()
            );
        }
    }
}

/// The set of distinct idempotency keys the sink saw, checking that every
/// request with a key carried the same body.
pub fn distinct_keys(sink: &Sink) -> BTreeSet<String> {
    let mut bodies: std::collections::BTreeMap<String, Vec<u8>> = Default::default();
    for q in sink.requests() {
        let key = q
            .idempotency_key()
            .expect("every request has a key")
            .to_string();
        let first = bodies.entry(key.clone()).or_insert_with(|| q.body.clone());
        assert!(
            *first == q.body,
            "two different bodies were sent under {key}"
        );
    }
    bodies.into_keys().collect()
}

#[test]
fn a_delivery_that_outlasts_the_lease_renews_it_and_keeps_its_claim() {
    let sink = Sink::start();
    // Three answers that each ask for 4 s: 12 s of (virtual) retrying
    // against a 10 s lease.
    sink.script("/digest", &[Reply::RetryAfter(503, 4); 3]);
    let dir = scratch();
    let cfg = http_config(
        dir.path(),
        "[limits]\ntimeout_seconds = 5\nlease_seconds = 10",
        &digest_to(&sink, "max_backoff_seconds = 4"),
    );
    let store = dir.path().join("s.db");
    let run = run_virtual(&cfg, &store, NOW, &[]);
    assert_eq!(run.event(), "ran", "{}", run.stderr);
    assert_eq!(run.receipt()["messages"][0]["attempts"], 4);
    let h = &history(&store)[0];
    let lease_until = h["lease_until"].as_str().unwrap();
    assert!(
        lease_until > "2026-11-09T00:05:10Z",
        "the lease was renewed past the claim's 10 s: {h}"
    );
}

#[test]
fn after_a_permanent_refusal_the_runs_later_messages_are_not_sent() {
    let sink = Sink::start();
    sink.script("/audit", &[Reply::Status(422)]);
    let dir = scratch();
    let dests = format!(
        "{}[destinations.audit]\ntype = \"http\"\nurl = \"{}\"\n",
        digest_to(&sink, ""),
        sink.url("/audit")
    );
    let cfg = http_config(dir.path(), "", &dests);
    let run = run_virtual(&cfg, &dir.path().join("s.db"), NOW, &[]);
    let r = run.receipt();
    assert_eq!(r["event"], "failed", "{}", run.stderr);
    // `audit` sorts first, so its message is #1.
    assert_eq!(r["messages"][0]["status"], "failed");
    assert_eq!(r["messages"][1]["status"], "not-sent");
    assert_eq!(r["destinations"]["audit"]["status"], "failed");
    assert_eq!(r["destinations"]["digest"]["status"], "not-sent");
    assert_eq!(sink.requests().len(), 1);
}

#[test]
fn an_at_most_once_message_refused_with_429_is_not_abandoned_by_a_crash_during_the_wait() {
    let sink = Sink::start();
    sink.script("/digest", &[Reply::RetryAfter(429, 30)]);
    let dir = scratch();
    let cfg = http_config(
        dir.path(),
        "",
        &digest_to(&sink, "delivery = \"at-most-once\""),
    );
    let store = dir.path().join("s.db");
    // Killed just before the second send, after the 429 and its wait.
    let killed = job_command(&cfg, &store, NOW)
        .env("JOBHOST_TEST_FAILPOINT", "before-send@2:kill")
        .output()
        .unwrap();
    assert!(killed.status.code().is_none(), "killed");
    let next = run_virtual(&cfg, &store, "2026-11-09T00:30:00Z", &[]);
    let r = next.receipt();
    assert_eq!(r["event"], "resumed", "{}", next.stderr);
    assert_eq!(r["messages"][0]["status"], "delivered");
    assert_eq!(sink.requests().len(), 2, "one refused send, one delivered");
}

#[test]
fn a_401_names_the_credentials_and_quotes_nothing_the_server_said() {
    let sink = Sink::start();
    sink.script("/digest", &[Reply::Echo(401)]);
    let dir = scratch();
    let dest = format!(
        "{}headers = {{ Authorization = \"Bearer ${{JOBHOST_TEST_TOKEN}}\" }}\n",
        digest_to(&sink, "")
    );
    let cfg = http_config(dir.path(), "", &dest);
    let run = run_virtual(
        &cfg,
        &dir.path().join("s.db"),
        NOW,
        &[("JOBHOST_TEST_TOKEN", "abc")],
    );
    let r = run.receipt();
    assert_eq!(r["error"]["retryable"], false, "{}", run.stderr);
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("401") && msg.contains("check the credentials"),
        "{msg}"
    );
    assert!(
        !msg.contains("rejected request"),
        "the body is left out: {msg}"
    );
    assert!(!run.stdout.contains("Bearer abc"), "{}", run.stdout);
}
