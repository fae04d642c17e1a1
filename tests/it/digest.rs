//! Digests from a language model, against a stub OpenAI-compatible server
//! on 127.0.0.1: made only after the run is DONE, cached on local disk with
//! a TTL (never in the store), never a gate on the run or its delivery,
//! never holding or leaking the API key; a replay compares what the
//! component asked to describe (it has no model to ask).

use std::path::{Path, PathBuf};

use jobhost_tests::sink::{Reply, Sink};
use serde_json::Value;

use crate::harness::*;

/// The API key, from the environment.
const KEY_VAR: &str = "JOBHOST_TEST_MODEL_KEY";
const API_KEY: &str = "sk-test-5b1f0c9e-never-to-be-seen";

const CONTENT: &str = "Sunday's orders were led by the North region; nothing unusual.";
const ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Sunday's orders were led by the North region; nothing unusual."},"finish_reason":"stop"}]}"#;
const ANSWER_2: &str = r#"{"choices":[{"message":{"role":"assistant","content":"A second take."},"finish_reason":"stop"}]}"#;
const MODEL_PATH: &str = "/v1/chat/completions";
const KEY: &str = "daily-report:2026-11-08";

/// A job over the reference report with an HTTP destination `report` at
/// the sink's `/report` (the report's own message goes there alone),
/// `extra_destinations`, and a `[digest]` model at the sink (its cache in
/// the job's folder) with `extra` lines.
fn job(dir: &Path, sink: &Sink, extra: &str, extra_destinations: &str) -> PathBuf {
    sales_db(dir, 300);
    config(
        dir,
        &format!(
            r#"job = "daily-report"
component = "{component}"

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.report]
type = "http"
url = "{report}"
tries = 1
timeout_seconds = 2
{extra_destinations}

[digest]
base_url = "{base}"
model = "stub-model"
api_key = "${{{KEY_VAR}}}"
timeout_seconds = 1
cache_ttl_seconds = 3600
cache_dir = "digests"
{extra}

[params]
destination = "report"
"#,
            component = guests().report.display(),
            report = sink.url("/report"),
            base = sink.url("/v1"),
        ),
    )
}

/// `jobhost run` in virtual time with the API key set.
fn run(cfg: &Path, store: &Path, now: &str) -> Run {
    to_run(
        job_command(cfg, store, now)
            .env(KEY_VAR, API_KEY)
            .output()
            .unwrap(),
    )
}

/// `jobhost digest KEY` in virtual time at `now`, with `more` flags.
fn digest(cfg: &Path, store: &Path, now: &str, more: &[&str]) -> Run {
    let mut args = vec![
        "digest",
        KEY,
        "--config",
        s(cfg),
        "--store",
        s(store),
        "--now",
        now,
    ];
    args.extend_from_slice(more);
    to_run(
        command(&root(), &args)
            .env("JOBHOST_TEST_VIRTUAL_TIME", "1")
            .env(KEY_VAR, API_KEY)
            .output()
            .unwrap(),
    )
}

/// `history --json` with the job's digest cache.
fn history_with_digests(dir: &Path, store: &Path) -> (Vec<Value>, String) {
    let digests = dir.join("digests");
    let out = jobhost(&[
        "history",
        "--json",
        "--store",
        s(store),
        "--digest-cache",
        s(&digests),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let table = jobhost(&[
        "history",
        "--store",
        s(store),
        "--digest-cache",
        s(&digests),
    ]);
    (
        out.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        table.stdout,
    )
}

fn paths(sink: &Sink) -> Vec<String> {
    sink.requests().into_iter().map(|r| r.path).collect()
}

fn model_calls(sink: &Sink) -> usize {
    paths(sink).iter().filter(|p| *p == MODEL_PATH).count()
}

#[test]
fn a_digest_is_made_once_the_run_is_done_then_reused_within_its_ttl_and_made_again_after_it() {
    let sink = Sink::start();
    sink.script(
        MODEL_PATH,
        &[
            Reply::Body(200, ANSWER),
            Reply::Body(200, ANSWER_2),
            Reply::Body(200, ANSWER),
        ],
    );
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "", "");
    let store = dir.path().join("s.db");
    let ran = run(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let r = ran.receipt();
    assert_eq!(r["event"], "ran");
    let d = &r["digest"];
    assert_eq!(d["status"], "generated", "{r}");
    assert_eq!(d["cache"], "miss");
    assert_eq!(d["model"], "stub-model");
    assert_eq!(d["text"], CONTENT);
    assert_eq!(
        paths(&sink),
        ["/report", MODEL_PATH],
        "the report was delivered before the model was asked"
    );
    // What the model was asked: the component's text, with the key.
    let ask = &sink.requests()[1];
    assert_eq!(
        ask.header("authorization"),
        Some(format!("Bearer {API_KEY}").as_str())
    );
    let body: Value = serde_json::from_slice(&ask.body).unwrap();
    assert_eq!(body["model"], "stub-model");
    assert_eq!(body["messages"][0]["role"], "system");
    let prompt = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        prompt.contains(KEY) && prompt.contains("Figures as JSON"),
        "{prompt}"
    );

    // The digest and its cache status are in history, from the cache.
    let (h, table) = history_with_digests(dir.path(), &store);
    assert_eq!(h[0]["digest"]["status"], "cached");
    assert_eq!(h[0]["digest"]["text"], CONTENT);
    assert!(table.contains("cached: Sunday's orders"), "{table}");
    // The job's config tells history where its digests are.
    let by_config = to_run(
        command(
            &root(),
            &[
                "history",
                "--json",
                "--store",
                s(&store),
                "--config",
                s(&cfg),
            ],
        )
        .env(KEY_VAR, API_KEY)
        .output()
        .unwrap(),
    );
    assert!(
        by_config.stdout.contains(CONTENT),
        "{}{}",
        by_config.stdout,
        by_config.stderr
    );

    // Within the TTL: the cache answers, no call.
    let again = digest(&cfg, &store, "2026-11-09T00:50:00Z", &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let d: Value = serde_json::from_str(again.stdout.trim()).unwrap();
    assert_eq!(
        (
            d["digest"]["status"].as_str(),
            d["digest"]["cache"].as_str()
        ),
        (Some("cached"), Some("hit"))
    );
    assert_eq!(d["digest"]["text"], CONTENT);
    assert_eq!(model_calls(&sink), 1);

    // After the TTL: the model is asked again.
    let later = digest(&cfg, &store, "2026-11-09T01:05:01Z", &[]);
    assert_eq!(later.code, 0, "{}", later.stderr);
    let d: Value = serde_json::from_str(later.stdout.trim()).unwrap();
    assert_eq!(d["digest"]["status"], "generated");
    assert_eq!(d["digest"]["text"], "A second take.");
    assert_eq!(model_calls(&sink), 2);

    // A deleted cache costs one call, nothing else.
    std::fs::remove_dir_all(dir.path().join("digests")).unwrap();
    let (h, _) = history_with_digests(dir.path(), &store);
    assert_eq!(h[0]["digest"]["status"], "missing");
    assert_eq!(h[0]["state"], "DONE");
    let remade = digest(&cfg, &store, "2026-11-09T01:10:00Z", &[]);
    assert_eq!(remade.code, 0, "{}", remade.stderr);
    assert_eq!(model_calls(&sink), 3);
    let (h, _) = history_with_digests(dir.path(), &store);
    assert_eq!(h[0]["digest"]["text"], CONTENT);
}

#[test]
fn a_model_that_times_out_fails_answers_garbage_refuses_or_is_rate_limited_never_holds_up_the_run()
{
    let refusal = r#"{"choices":[{"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}"#;
    for (reply, why) in [
        (Reply::Hang, "no answer within 1 s"),
        (
            Reply::Body(500, r#"{"error":{"message":"model overloaded"}}"#),
            "failed (500): model overloaded",
        ),
        (Reply::Body(200, "{\"choices\": [{\"mess"), "not JSON"),
        (
            Reply::RetryAfter(429, 30),
            "rate limited (429), retry after 30 s",
        ),
        (
            Reply::Body(200, refusal),
            "refused: I can't help with that.",
        ),
    ] {
        let sink = Sink::start();
        sink.script(MODEL_PATH, &[reply]);
        let dir = scratch();
        let cfg = job(dir.path(), &sink, "", "");
        let store = dir.path().join("s.db");
        let ran = run(&cfg, &store, "2026-11-09T00:05:00Z");
        assert_eq!(ran.code, 0, "{why}: {}", ran.stderr);
        let r = ran.receipt();
        assert_eq!(r["event"], "ran", "{why}: {r}");
        assert_eq!(r["destinations"]["report"]["status"], "delivered", "{why}");
        assert_eq!(
            paths(&sink),
            ["/report", MODEL_PATH],
            "{why}: delivered before the model was asked"
        );
        assert_eq!(r["digest"]["status"], "failed", "{why}: {r}");
        let error = r["digest"]["error"].as_str().unwrap();
        assert!(error.contains(why), "{why}: {error}");
        assert!(
            ran.stderr
                .contains("no digest of `daily-report:2026-11-08`"),
            "{}",
            ran.stderr
        );
        let h = history(&store);
        assert_eq!(h[0]["state"], "DONE", "{why}");
        assert_eq!(h[0]["delivered"], 1, "{why}");
        // `jobhost digest` asks again later.
        sink.script(MODEL_PATH, &[Reply::Body(200, ANSWER)]);
        let retried = digest(&cfg, &store, "2026-11-09T00:10:00Z", &[]);
        assert_eq!(retried.code, 0, "{why}: {}", retried.stderr);
        let d: Value = serde_json::from_str(retried.stdout.trim()).unwrap();
        assert_eq!(d["digest"]["status"], "generated", "{why}");
    }
}

#[test]
fn the_api_key_never_appears_in_the_store_a_receipt_history_a_log_or_the_cache() {
    let sink = Sink::start();
    // A server that echoes the Authorization header in its error pages,
    // once where an excerpt of 200 characters would cut the key in two,
    // then answers.
    sink.script(
        MODEL_PATH,
        &[
            Reply::Echo(500),
            Reply::EchoAfter(400, 160),
            Reply::Body(200, ANSWER),
        ],
    );
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "", "");
    let store = dir.path().join("s.db");
    let failed = run(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(failed.receipt()["digest"]["status"], "failed");
    assert!(
        failed.receipt()["digest"]["error"]
            .as_str()
            .unwrap()
            .contains("***"),
        "the echoed key is scrubbed: {}",
        failed.stdout
    );
    let cut = digest(&cfg, &store, "2026-11-09T00:08:00Z", &[]);
    assert_eq!(cut.code, 1, "{}", cut.stderr);
    let made = digest(&cfg, &store, "2026-11-09T00:10:00Z", &[]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    assert_eq!(
        sink.requests()[1].header("authorization"),
        Some(format!("Bearer {API_KEY}").as_str()),
        "the key reaches the model"
    );
    let (h, table) = history_with_digests(dir.path(), &store);
    let mut seen = vec![
        failed.stdout,
        failed.stderr,
        cut.stdout,
        cut.stderr,
        made.stdout,
        made.stderr,
        table,
        serde_json::to_string(&h).unwrap(),
    ];
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            seen.push(String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned());
        }
    }
    for entry in std::fs::read_dir(dir.path().join("digests")).unwrap() {
        seen.push(std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    // Not even a part of it.
    let part = &API_KEY[..12];
    for text in &seen {
        assert!(!text.contains(part), "the API key leaked: {text}");
    }
}

#[test]
fn the_digest_message_is_sent_once_a_digest_exists_with_its_own_key_and_never_twice() {
    let sink = Sink::start();
    sink.script(
        MODEL_PATH,
        &[
            Reply::Status(503),
            Reply::Body(200, ANSWER),
            Reply::Body(200, ANSWER_2),
            Reply::Body(200, ANSWER),
        ],
    );
    let dir = scratch();
    let chat = format!(
        "[destinations.chat]\ntype = \"http\"\nurl = \"{}\"\ntimeout_seconds = 2\n",
        sink.url("/chat")
    );
    let cfg = job(dir.path(), &sink, "destination = \"chat\"", &chat);
    let store = dir.path().join("s.db");
    // No digest: the report goes out, the chat gets nothing.
    let ran = run(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(ran.receipt()["digest"].get("message").is_none());
    assert_eq!(paths(&sink), ["/report", MODEL_PATH]);
    // Made later: then, and only then, the message.
    let made = digest(&cfg, &store, "2026-11-09T00:10:00Z", &[]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let d: Value = serde_json::from_str(made.stdout.trim()).unwrap();
    assert_eq!(d["digest"]["message"]["status"], "delivered", "{d}");
    let chat_msgs: Vec<_> = sink
        .requests()
        .into_iter()
        .filter(|r| r.path == "/chat")
        .collect();
    assert_eq!(chat_msgs.len(), 1);
    assert_eq!(
        chat_msgs[0].idempotency_key(),
        Some("daily-report:2026-11-08#digest")
    );
    let body: Value = serde_json::from_slice(&chat_msgs[0].body).unwrap();
    assert_eq!(body, serde_json::json!({ "text": CONTENT }));
    // Made again (the model says something else): not sent twice.
    let again = digest(&cfg, &store, "2026-11-09T00:20:00Z", &["--refresh"]);
    let d: Value = serde_json::from_str(again.stdout.trim()).unwrap();
    assert_eq!(d["digest"]["status"], "generated");
    assert_eq!(d["digest"]["message"]["status"], "already-sent");
    assert_eq!(
        sink.requests().iter().filter(|r| r.path == "/chat").count(),
        1
    );
    let (h, _) = history_with_digests(dir.path(), &store);
    assert!(h[0]["digest"]["sent_at"].is_string(), "{}", h[0]);
    // The next window, with the model answering at once: report, model,
    // then the digest message, in that order.
    let next = run(&cfg, &store, "2026-11-10T00:05:00Z");
    assert_eq!(next.code, 0, "{}", next.stderr);
    assert_eq!(next.receipt()["digest"]["message"]["status"], "delivered");
    let tail: Vec<String> = paths(&sink).into_iter().rev().take(3).collect();
    assert_eq!(tail, ["/chat", MODEL_PATH, "/report"]);
}

#[test]
fn a_replay_compares_what_the_component_asked_to_describe() {
    let sink = Sink::start();
    sink.script(MODEL_PATH, &[Reply::Body(200, ANSWER)]);
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "", "");
    let store = dir.path().join("s.db");
    assert_eq!(run(&cfg, &store, "2026-11-09T00:05:00Z").code, 0);
    let same = jobhost(&["replay", KEY, "--store", s(&store)]);
    assert_eq!(same.code, 0, "{}{}", same.stdout, same.stderr);
    assert!(same.stdout.contains("identical"), "{}", same.stdout);
    // A component that describes nothing: the difference is shown.
    let other = jobhost(&[
        "replay",
        KEY,
        "--store",
        s(&store),
        "--component",
        s(&guests().top_products),
    ]);
    assert_eq!(other.code, 1, "{}{}", other.stdout, other.stderr);
    assert!(
        other.stdout.contains("text to describe: \"") && other.stdout.contains("-> none"),
        "{}",
        other.stdout
    );
}

#[test]
fn a_daemon_makes_digests_beside_its_runs_so_a_hanging_model_holds_up_no_window() {
    let sink = Sink::start();
    // The model never answers; each digest waits out its 1 s timeout.
    sink.script(MODEL_PATH, &[Reply::Hang, Reply::Hang, Reply::Hang]);
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "", "");
    let store = dir.path().join("s.db");
    // Three days to catch up on, and nothing after them before `--until`.
    let out = to_run(
        daemon_command(
            &[&cfg],
            s(&store),
            "2026-11-09T00:30:00Z",
            "2026-11-09T01:00:00Z",
        )
        .args(["--since", "2026-11-06T00:00:00Z"])
        .env(KEY_VAR, API_KEY)
        .output()
        .unwrap(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ran = lines.iter().filter(|l| l["event"] == "ran").count();
    let digests: Vec<&Value> = lines.iter().filter(|l| l["event"] == "digest").collect();
    assert_eq!((ran, digests.len()), (3, 3), "{}", out.stdout);
    assert!(
        digests.iter().all(|d| d["digest"]["status"] == "failed"
            && d["digest"]["error"].as_str().unwrap().contains("no answer")),
        "{digests:?}"
    );
    // The three reports went out before the second question was asked:
    // the first digest's wait held none of them up.
    let p = paths(&sink);
    let third_report = p.iter().rposition(|x| x == "/report").unwrap();
    let second_ask = p
        .iter()
        .enumerate()
        .filter(|(_, x)| *x == MODEL_PATH)
        .nth(1)
        .map(|(i, _)| i)
        .unwrap();
    assert!(third_report < second_ask, "{p:?}");
}

#[test]
fn without_a_model_nothing_changes_and_a_component_that_describes_nothing_asks_nothing() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 100);
    let store = dir.path().join("s.db");
    let ran = run_job(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(ran.receipt().get("digest").is_none(), "{}", ran.stdout);
    assert!(history(&store)[0].get("digest").is_none());
    let no_model = jobhost(&["digest", KEY, "--config", s(&cfg), "--store", s(&store)]);
    assert_eq!(no_model.code, 2);
    assert!(
        no_model.stderr.contains("has no [digest] section"),
        "{}",
        no_model.stderr
    );

    let sink = Sink::start();
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "", "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace(
            &guests().report.display().to_string(),
            &guests().top_products.display().to_string(),
        ),
    )
    .unwrap();
    let store = dir.path().join("s.db");
    let ran = run(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let d = &ran.receipt()["digest"];
    assert_eq!(d["status"], "nothing", "{d}");
    assert!(d["error"].as_str().unwrap().contains("describe"));
    assert_eq!(model_calls(&sink), 0);
    let asked = digest(&cfg, &store, "2026-11-09T00:10:00Z", &[]);
    assert_eq!(asked.code, 2, "{}", asked.stderr);
    // Runs that are not DONE, and keys that are not runs, are bad input.
    // A run of another job is refused: its digest is that job's.
    let other_dir = scratch();
    let other = job(other_dir.path(), &sink, "", "");
    let text = std::fs::read_to_string(&other).unwrap();
    std::fs::write(&other, text.replace("daily-report", "weekly-report")).unwrap();
    let wrong = to_run(
        command(
            &root(),
            &["digest", KEY, "--config", s(&other), "--store", s(&store)],
        )
        .env(KEY_VAR, API_KEY)
        .output()
        .unwrap(),
    );
    assert_eq!(wrong.code, 2, "{}", wrong.stderr);
    assert!(
        wrong.stderr.contains("is of job `daily-report`"),
        "{}",
        wrong.stderr
    );
    let missing = to_run(
        command(
            &root(),
            &[
                "digest",
                "daily-report:2020-01-01",
                "--config",
                s(&cfg),
                "--store",
                s(&store),
            ],
        )
        .env(KEY_VAR, API_KEY)
        .output()
        .unwrap(),
    );
    assert_eq!(missing.code, 2);
    assert!(missing.stderr.contains("no run `daily-report:2020-01-01`"));
}

#[test]
fn the_run_page_of_serve_and_of_a_daemons_dashboard_shows_the_digest_text() {
    use crate::dashboard::{get, serve_with};
    let sink = Sink::start();
    sink.script(MODEL_PATH, &[Reply::Body(200, ANSWER)]);
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "", "");
    let store = dir.path().join("s.db");
    let ran = run(&cfg, &store, "2026-11-09T00:05:00Z");
    assert_eq!(
        ran.receipt()["digest"]["status"],
        "generated",
        "{}",
        ran.stderr
    );
    for verb in ["serve", "daemon"] {
        let srv = serve_with(
            &[
                verb,
                "--config",
                s(&cfg),
                "--store",
                s(&store),
                "--now",
                "2026-11-09T00:10:00Z",
            ],
            &[(KEY_VAR, API_KEY)],
        );
        let twin = get(&srv.addr, &format!("/runs/{KEY}.json"), &[]).json();
        assert_eq!(twin["digest"]["status"], "cached", "{verb}: {twin}");
        assert_eq!(twin["digest"]["text"], CONTENT, "{verb}");
        let page = get(&srv.addr, &format!("/runs/{KEY}"), &[]);
        assert_eq!(page.status, 200, "{verb}");
        // The page shows the text escaped: the apostrophe of "Sunday's".
        assert!(
            page.body
                .contains("Sunday&#x27;s orders were led by the North region"),
            "{verb}: {}",
            page.body
        );
    }
    assert_eq!(
        model_calls(&sink),
        1,
        "the dashboards asked the model nothing"
    );
}
