//! Notifications (`[[notify]]`) and `pause_after_failures`: a person hears
//! once of each incident (however many hosts see it), hears that it is
//! over, and a job that keeps failing is paused until a person resumes it.

use std::path::{Path, PathBuf};

use jobhost_tests::sink::{Reply, Request, Sink};
use serde_json::Value;

use crate::harness::*;

/// A job whose report goes to the sink's `/digest` (refused with 422 while
/// the sink is scripted so: a failure for good with `max_attempts = 1`),
/// with a Slack block and a webhook block at the sink, links to a
/// dashboard, and `extra` top-level lines.
fn job(dir: &Path, sink: &Sink, extra: &str) -> PathBuf {
    crate::effects::http_config(
        dir,
        &format!(
            "max_attempts = 1\n{extra}\n\
             [dashboard]\npublic_url = \"https://jobs.example.com\"\n\n\
             [[notify]]\ntype = \"slack\"\nurl = \"{slack}\"\n\n\
             [[notify]]\ntype = \"webhook\"\non = [\"failed\", \"recovered\", \"paused\"]\n\
             url = \"{web}\"\nheaders = {{ Authorization = \"Bearer ${{JOBHOST_TEST_HOOK_TOKEN}}\" }}\n",
            slack = sink.url("/hooks/slack"),
            web = sink.url("/hooks/web"),
        ),
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntries = 1\ntimeout_seconds = 2\n",
            sink.url("/digest")
        ),
    )
}

const HOOK_TOKEN: &str = "hook-token-2b9d41";

/// `jobhost run` of the window before `day`'s midnight, in virtual time.
fn run_on(cfg: &Path, store: &str, day: &str) -> Run {
    to_run(
        job_command(cfg, store, &format!("{day}T00:05:00Z"))
            .env("JOBHOST_TEST_HOOK_TOKEN", HOOK_TOKEN)
            .output()
            .unwrap(),
    )
}

/// The requests that reached `path`.
fn at(sink: &Sink, path: &str) -> Vec<Request> {
    sink.requests()
        .into_iter()
        .filter(|q| q.path == path)
        .collect()
}

/// The job's status, as `jobhost status --json` says at `now`.
fn status_json(cfg: &Path, store: &str, now: &str) -> Value {
    let st = jobhost(&[
        "status",
        "--config",
        s(cfg),
        "--store",
        store,
        "--now",
        now,
        "--json",
    ]);
    let v: Value = serde_json::from_str(st.stdout.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("{e}: {}", st.stdout));
    if v["jobs"].is_array() {
        v["jobs"][0].clone()
    } else {
        v
    }
}

/// Who paused the job, as `jobhost status --json` says at `now` (`None`:
/// not paused).
fn paused_by(cfg: &Path, store: &str, now: &str) -> Option<String> {
    status_json(cfg, store, now)["paused"]["by"]
        .as_str()
        .map(str::to_string)
}

fn json(q: &Request) -> Value {
    serde_json::from_slice(&q.body).unwrap_or_else(|e| panic!("{e}: {:?}", q.body))
}

#[test]
fn a_failure_is_told_once_jobhost_pauses_after_three_and_a_done_window_says_recovered() {
    let sink = Sink::start();
    sink.script("/digest", &[Reply::Status(422); 3]);
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "pause_after_failures = 3");
    let store = dir.path().join("s.db");
    let store = s(&store);

    // The first failure for good opens an incident: one Slack message, one
    // webhook call, each with the incident's idempotency key.
    let first = run_on(&cfg, store, "2026-11-09");
    assert_eq!(first.event(), "failed", "{}", first.stderr);
    let told = first.receipt()["notifications"].clone();
    assert_eq!(told.as_array().map(Vec::len), Some(2), "{told}");
    assert!(
        told.as_array()
            .unwrap()
            .iter()
            .all(|n| n["status"] == "sent"),
        "{told}"
    );
    let slack = at(&sink, "/hooks/slack");
    let web = at(&sink, "/hooks/web");
    assert_eq!((slack.len(), web.len()), (1, 1));
    let text = json(&slack[0])["text"].as_str().unwrap().to_string();
    assert!(
        text.starts_with("jobhost: window daily-report:2026-11-08 failed: "),
        "{text}"
    );
    assert!(text.contains("422"), "the error is quoted: {text}");
    assert!(
        text.ends_with("<https://jobs.example.com/runs/daily%2Dreport%3A2026%2D11%2D08|open>"),
        "{text}"
    );
    let body = json(&web[0]);
    assert_eq!(body["event"], "failed");
    assert_eq!(body["job"], "daily-report");
    assert_eq!(body["window"], "daily-report:2026-11-08");
    let incident = body["incident"].as_i64().unwrap();
    let key = format!("jobhost:daily-report:incident:{incident}:failed");
    assert_eq!(web[0].header("idempotency-key"), Some(&*key));
    assert_eq!(slack[0].header("idempotency-key"), Some(&*key));
    assert_eq!(
        web[0].header("authorization"),
        Some(&*format!("Bearer {HOOK_TOKEN}"))
    );

    // A second failure is the same incident: nobody is told again.
    let second = run_on(&cfg, store, "2026-11-10");
    assert_eq!(second.event(), "failed", "{}", second.stderr);
    assert!(
        second.receipt().get("notifications").is_none(),
        "{}",
        second.stdout
    );
    assert_eq!(at(&sink, "/hooks/slack").len(), 1);

    // The third in a row pauses the job, with a note naming the three, and
    // says so.
    let third = run_on(&cfg, store, "2026-11-11");
    assert_eq!(third.event(), "failed", "{}", third.stderr);
    let slack = at(&sink, "/hooks/slack");
    let web = at(&sink, "/hooks/web");
    assert_eq!((slack.len(), web.len()), (2, 2));
    let paused = json(&web[1]);
    assert_eq!(paused["event"], "paused");
    let note = paused["detail"].as_str().unwrap();
    for day in ["2026-11-08", "2026-11-09", "2026-11-10"] {
        assert!(
            note.contains(&format!("daily-report:{day} (FAILED)")),
            "{note}"
        );
    }
    assert_eq!(
        paused_by(&cfg, store, "2026-11-11T00:10:00Z").as_deref(),
        Some("jobhost (pause_after_failures)")
    );
    let audit = jobhost(&["history", "--all", "--store", store]);
    assert!(
        audit.stdout.contains("jobhost (pause_after_failures)"),
        "the pause is audited: {}",
        audit.stdout
    );
    // Paused: the next window is not run, and nobody is told anything.
    let skipped = run_on(&cfg, store, "2026-11-12");
    assert_eq!(skipped.event(), "skipped", "{}", skipped.stdout);
    assert_eq!(at(&sink, "/hooks/slack").len(), 2);

    // A person resumes it; the next window is DONE: "recovered", once, to
    // both blocks; the pause's incident closes without a word.
    let resumed = to_run(
        command(&root(), &["resume", "daily-report", "--store", store])
            .env("JOBHOST_TEST_VIRTUAL_TIME", "1")
            .output()
            .unwrap(),
    );
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let done = run_on(&cfg, store, "2026-11-12");
    assert_eq!(done.event(), "ran", "{}", done.stderr);
    let slack = at(&sink, "/hooks/slack");
    let web = at(&sink, "/hooks/web");
    assert_eq!((slack.len(), web.len()), (3, 3), "{slack:?}");
    let recovered = json(&web[2]);
    assert_eq!(recovered["event"], "recovered");
    assert_eq!(
        recovered["incident"], incident,
        "it closes the incident it told of"
    );
    assert!(
        recovered["detail"]
            .as_str()
            .unwrap()
            .starts_with("window daily-report:2026-11-11 is DONE"),
        "{recovered}"
    );
    assert_eq!(
        web[2].header("idempotency-key"),
        Some(&*format!(
            "jobhost:daily-report:incident:{incident}:recovered"
        ))
    );
    // And then quiet: a DONE window is nothing to tell.
    let quiet = run_on(&cfg, store, "2026-11-13");
    assert_eq!(quiet.event(), "ran", "{}", quiet.stderr);
    assert_eq!(at(&sink, "/hooks/slack").len(), 3);
    // The token went to the receiver and nowhere else.
    for r in [&first, &second, &third, &done] {
        assert!(!r.stdout.contains(HOOK_TOKEN) && !r.stderr.contains(HOOK_TOKEN));
    }
    // The pause jobhost made is in the chain as any pause: the store
    // verifies.
    let verified = jobhost(&["verify", "--store", store]);
    assert_eq!(verified.code, 0, "{}{}", verified.stdout, verified.stderr);
}

#[test]
fn after_a_resume_only_new_failures_count_towards_the_next_pause() {
    let sink = Sink::start();
    sink.script("/digest", &[Reply::Status(422); 5]);
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "pause_after_failures = 2");
    let store = dir.path().join("s.db");
    let store = s(&store);
    for day in ["2026-11-09", "2026-11-10"] {
        assert_eq!(run_on(&cfg, store, day).event(), "failed");
    }
    let paused = |now: &str| paused_by(&cfg, store, now).is_some();
    assert!(paused("2026-11-10T01:00:00Z"));
    let resumed = jobhost(&["resume", "daily-report", "--store", store]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    // One more failure is one, not three: the job stays unpaused.
    assert_eq!(run_on(&cfg, store, "2026-11-11").event(), "failed");
    assert!(
        !paused("2026-11-11T01:00:00Z"),
        "paused again on old failures"
    );
    // A second new one pauses it again.
    assert_eq!(run_on(&cfg, store, "2026-11-12").event(), "failed");
    assert!(paused("2026-11-12T01:00:00Z"));
    let web = at(&sink, "/hooks/web");
    let events: Vec<String> = web
        .iter()
        .map(|q| json(q)["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(events, ["failed", "paused", "paused"], "{events:?}");
}

#[test]
fn a_receiver_that_is_down_gets_the_notification_at_a_later_pass_and_the_run_is_unaffected() {
    let sink = Sink::start();
    sink.script("/digest", &[Reply::Status(422)]);
    sink.script("/hooks/slack", &[Reply::Status(503)]);
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "");
    let store = dir.path().join("s.db");
    let store = s(&store);
    let failed = run_on(&cfg, store, "2026-11-09");
    assert_eq!(failed.event(), "failed", "{}", failed.stderr);
    assert_eq!(failed.code, 1, "the run's own exit code");
    let told = &failed.receipt()["notifications"];
    let slack = told
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["to"].as_str().unwrap().ends_with("/hooks/slack"))
        .unwrap();
    assert_eq!(slack["status"], "retrying", "{told}");
    assert!(
        failed.stderr.contains("was not delivered") && failed.stderr.contains("503"),
        "{}",
        failed.stderr
    );
    // `status` and the dashboard show the open incident and what became
    // of each notification: the webhook's sent, Slack's not delivered.
    let st = status_json(&cfg, store, "2026-11-09T00:10:00Z");
    let incidents = st["incidents"].as_array().expect("incidents");
    assert_eq!(incidents.len(), 1, "{st}");
    let incident = &incidents[0];
    assert_eq!(incident["kind"], "failed", "{incident}");
    assert_eq!(incident["key"], "daily-report:2026-11-08");
    let told = incident["notifications"].as_array().unwrap();
    let to = |path: &str| {
        told.iter()
            .find(|n| n["to"].as_str().unwrap().ends_with(path))
            .unwrap_or_else(|| panic!("no notification to {path}: {incident}"))
    };
    assert_eq!(to("/hooks/web")["state"], "sent", "{incident}");
    let slack = to("/hooks/slack");
    assert_eq!(slack["state"], "pending", "{incident}");
    assert_eq!(slack["attempts"], 1);
    assert!(
        slack["detail"].as_str().unwrap().contains("503"),
        "{incident}"
    );
    let text = jobhost(&[
        "status",
        "--config",
        s(&cfg),
        "--store",
        store,
        "--now",
        "2026-11-09T00:10:00Z",
    ]);
    assert!(
        text.stdout.contains("incident `failed` open since")
            && text
                .stdout
                .contains("/hooks/slack not delivered yet (1 attempt(s): ")
            && text.stdout.contains("/hooks/web sent"),
        "{}",
        text.stdout
    );
    {
        let srv = crate::dashboard::serve_with(
            &["serve", "--config", s(&cfg), "--store", store],
            &[("JOBHOST_TEST_HOOK_TOKEN", HOOK_TOKEN)],
        );
        let jobs = crate::dashboard::get(&srv.addr, "/jobs.json", &[]).json();
        assert_eq!(
            jobs["jobs"][0]["status"]["incidents"][0]["kind"], "failed",
            "{jobs}"
        );
        let page = crate::dashboard::get(&srv.addr, "/jobs/daily-report", &[]);
        assert!(
            page.body.contains("data-incident=\"failed\"")
                && page
                    .body
                    .contains("hooks&#x2f;slack: pending (1 attempt(s)); last answer: ")
                && page.body.contains("hooks&#x2f;web: sent (1 attempt(s))")
                && page.body.contains("answered 503"),
            "{}",
            page.body
        );
        // The jobs page names the notification not delivered, not the sent one.
        let jobs_page = crate::dashboard::get(&srv.addr, "/jobs", &[]).body;
        let incident_line = jobs_page
            .lines()
            .find(|l| l.contains("data-incident=\"failed\""))
            .unwrap_or_else(|| panic!("{jobs_page}"));
        assert!(
            incident_line.contains("hooks&#x2f;slack: not delivered")
                && !incident_line.contains("hooks&#x2f;web"),
            "{incident_line}"
        );
        // The metrics an alert rule reads: one open incident, one
        // notification to be tried again, none given up.
        let metrics = crate::dashboard::get(&srv.addr, "/metrics", &[]).body;
        let value = |name: &str, state: Option<&str>| -> f64 {
            metrics
                .lines()
                .find(|l| {
                    l.starts_with(&format!("{name}{{"))
                        && l.contains("jobhost_job=\"daily-report\"")
                        && state.is_none_or(|s| l.contains(&format!("state=\"{s}\"")))
                })
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} {state:?} in {metrics}"))
        };
        assert_eq!(value("jobhost_incidents_open", None), 1.0);
        assert_eq!(
            value("jobhost_notifications_undelivered", Some("pending")),
            1.0
        );
        assert_eq!(
            value("jobhost_notifications_undelivered", Some("failed")),
            0.0
        );
    }

    // The next pass (the next day's run, long past the minute's wait) sends
    // it; the receiver sees the same key twice.
    let again = run_on(&cfg, store, "2026-11-10");
    assert_eq!(again.event(), "ran", "{}", again.stderr);
    let slack = at(&sink, "/hooks/slack");
    let keys: Vec<&str> = slack
        .iter()
        .filter_map(|q| q.header("idempotency-key"))
        .collect();
    assert!(keys.len() >= 2, "{keys:?}");
    assert_eq!(keys[0], keys[1], "the same notification, sent again");
    // A DONE window closed the incident: nothing open is shown.
    let st = status_json(&cfg, store, "2026-11-10T00:10:00Z");
    assert_eq!(st["incidents"], serde_json::json!([]), "{st}");
}

#[test]
fn two_hosts_that_see_the_same_failures_tell_of_them_once() {
    let Some(db) = jobhost_tests::pg::Scratch::new(
        "notify::two_hosts_that_see_the_same_failures_tell_of_them_once",
    ) else {
        return;
    };
    let sink = Sink::start();
    sink.script("/digest", &[Reply::Status(422); 4]);
    let dir = scratch();
    let cfg = job(dir.path(), &sink, "");
    // Two hosts fail two windows of the job at the same moment, then each
    // fails one more.
    for days in [["2026-11-09", "2026-11-10"], ["2026-11-11", "2026-11-12"]] {
        let children: Vec<_> = days
            .iter()
            .map(|day| {
                job_command(&cfg, db.url(), &format!("{day}T00:05:00Z"))
                    .env("JOBHOST_TEST_HOOK_TOKEN", HOOK_TOKEN)
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let run = to_run(c.wait_with_output().unwrap());
            assert_eq!(run.event(), "failed", "{}", run.stderr);
        }
    }
    let slack = at(&sink, "/hooks/slack");
    assert_eq!(slack.len(), 1, "one incident, one message: {slack:?}");
    assert!(
        json(&slack[0])["text"]
            .as_str()
            .unwrap()
            .contains(" failed: "),
        "{:?}",
        slack[0]
    );
    // A later window DONE on either host: recovered, once.
    let done = run_on(&cfg, &db.url(), "2026-11-13");
    assert_eq!(done.event(), "ran", "{}", done.stderr);
    let other = run_on(&cfg, &db.url(), "2026-11-14");
    assert_eq!(other.event(), "ran", "{}", other.stderr);
    let texts: Vec<String> = at(&sink, "/hooks/slack")
        .iter()
        .map(|q| json(q)["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[1].starts_with("jobhost: job daily-report recovered: "),
        "{texts:?}"
    );
}

#[test]
fn a_daemon_tells_once_of_a_job_that_turns_late_while_nothing_runs() {
    let sink = Sink::start();
    let dir = scratch();
    // The window waits for an upstream job nothing runs: due at 00:00,
    // late once its 10 minutes of grace are over.
    let cfg = crate::effects::http_config(
        dir.path(),
        &format!(
            "grace_seconds = 600\n\
             [[needs]]\njob = \"upstream\"\n\n\
             [[notify]]\ntype = \"slack\"\non = [\"late\", \"recovered\"]\nurl = \"{}\"\n",
            sink.url("/hooks/slack")
        ),
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntries = 1\ntimeout_seconds = 2\n",
            sink.url("/digest")
        ),
    );
    let store = dir.path().join("s.db");
    let run = to_run(
        daemon_command(
            &[&cfg],
            s(&store),
            "2026-11-09T00:01:00Z",
            "2026-11-09T00:40:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let slack = at(&sink, "/hooks/slack");
    assert_eq!(slack.len(), 1, "{slack:?}\n{}", run.stderr);
    let text = json(&slack[0])["text"].as_str().unwrap().to_string();
    assert!(
        text.starts_with(
            "jobhost: job daily-report is late: window daily-report:2026-11-08 (WAITING)"
        ),
        "{text}"
    );
    assert!(
        text.contains("its newest due window is ") && text.contains(" past the job's grace"),
        "{text}"
    );
    assert!(
        sink.requests().iter().all(|q| q.path != "/digest"),
        "nothing ran"
    );
}

#[test]
fn an_abandoned_window_is_told_as_such_and_once() {
    let sink = Sink::start();
    // An at-most-once send whose outcome is unknown is never sent again:
    // the window is abandoned.
    sink.script("/digest", &[Reply::Hang]);
    let dir = scratch();
    let cfg = crate::effects::http_config(
        dir.path(),
        &format!(
            "[[notify]]\ntype = \"slack\"\non = [\"abandoned\", \"recovered\"]\nurl = \"{}\"\n",
            sink.url("/hooks/slack")
        ),
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ndelivery = \"at-most-once\"\n\
             timeout_seconds = 1\n",
            sink.url("/digest")
        ),
    );
    let store = dir.path().join("s.db");
    let store = s(&store);
    let abandoned = run_on(&cfg, store, "2026-11-09");
    assert_eq!(abandoned.event(), "abandoned", "{}", abandoned.stderr);
    let later = run_on(&cfg, store, "2026-11-09");
    assert_eq!(later.receipt()["reason"], "gave-up", "{}", later.stdout);
    let slack = at(&sink, "/hooks/slack");
    assert_eq!(slack.len(), 1, "{slack:?}");
    let text = json(&slack[0])["text"].as_str().unwrap().to_string();
    assert!(
        text.starts_with("jobhost: window daily-report:2026-11-08 was abandoned: "),
        "{text}"
    );
}

#[test]
fn a_job_that_failed_long_ago_is_still_told_late_now() {
    let sink = Sink::start();
    // The 8th is refused for good (422); the 9th fails with 503 and waits
    // for a retry, two hours past its grace.
    sink.script("/digest", &[Reply::Status(422), Reply::Status(503)]);
    let dir = scratch();
    let cfg = crate::effects::http_config(
        dir.path(),
        &format!(
            "max_attempts = 3\ngrace_seconds = 600\n\
             [[notify]]\ntype = \"slack\"\non = [\"late\"]\nurl = \"{}\"\n",
            sink.url("/hooks/slack")
        ),
        &format!(
            "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\ntries = 1\ntimeout_seconds = 2\n",
            sink.url("/digest")
        ),
    );
    let store = dir.path().join("s.db");
    let store = s(&store);
    let first = run_on(&cfg, store, "2026-11-09");
    assert_eq!(first.event(), "failed", "{}", first.stderr);
    assert_eq!(
        first.receipt()["error"]["kind"],
        "delivery",
        "{}",
        first.stdout
    );
    let late = to_run(
        job_command(&cfg, store, "2026-11-10T02:00:00Z")
            .output()
            .unwrap(),
    );
    assert_eq!(late.event(), "failed", "{}", late.stderr);
    let slack = at(&sink, "/hooks/slack");
    assert_eq!(slack.len(), 1, "{slack:?} {}", late.stdout);
    let text = json(&slack[0])["text"].as_str().unwrap().to_string();
    assert!(
        text.starts_with("jobhost: job daily-report is late: window daily-report:2026-11-09"),
        "{text}"
    );
    assert!(text.contains("past the job's grace of 10m"), "{text}");
}
