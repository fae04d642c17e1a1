//! What a person with an `operate` token does from the dashboard or its
//! JSON API: run a window, rerun a DONE one, retry a failed one, forget
//! one, backfill a range (in the background, its progress on a page of its
//! own), pause and resume a job. Each goes through the same function of
//! `run::operate` (or `run::run_for`) as the command line's verb, with the
//! token's name as who acted, and answers with the line that verb prints.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use serde::Serialize;

use super::ServedJob;
use crate::core::error::{Error, Result};
use crate::run::operate::{self, Only};
use crate::run::receipt::ReceiptLevel;
use crate::run::{Job, Outcome, Runtime};

/// How a served job's full `Job` is made when an action needs to run it
/// (its credentials filled in then, as `jobhost run` does).
pub type LoadJob = Arc<dyn Fn() -> Result<Arc<Job>> + Send + Sync>;

/// What a server that acts has: the runtime its runs share (one engine
/// and linker), and the backfills it started.
pub struct Actions {
    /// The runtime every run started from the dashboard is made in.
    pub runtime: Runtime,
    pub(super) tasks: Tasks,
}

impl Actions {
    /// Actions run in `runtime`.
    pub fn new(runtime: Runtime) -> Actions {
        Actions {
            runtime,
            tasks: Tasks::default(),
        }
    }
}

/// What a request asks to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Act {
    Pause(String),
    Resume(String),
    Run(String),
    Backfill(String),
    Rerun(String),
    Retry(String),
    Forget(String),
    StopTask(u64),
}

impl Act {
    /// The action a POST to `path` (without `/api`) asks for.
    pub(super) fn parse(path: &str) -> Option<Act> {
        let decode = |s: &str| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .ok()
                .map(|c| c.into_owned())
        };
        if let Some(rest) = path.strip_prefix("/jobs/") {
            let (name, verb) = rest.rsplit_once('/')?;
            let name = decode(name)?;
            return match verb {
                "pause" => Some(Act::Pause(name)),
                "resume" => Some(Act::Resume(name)),
                "run" => Some(Act::Run(name)),
                "backfill" => Some(Act::Backfill(name)),
                _ => None,
            };
        }
        if let Some(rest) = path.strip_prefix("/runs/") {
            let (key, verb) = rest.rsplit_once('/')?;
            let key = decode(key)?;
            return match verb {
                "rerun" => Some(Act::Rerun(key)),
                "retry" => Some(Act::Retry(key)),
                "forget" => Some(Act::Forget(key)),
                _ => None,
            };
        }
        let id = path.strip_prefix("/tasks/")?.strip_suffix("/stop")?;
        id.parse().ok().map(Act::StopTask)
    }

    /// The job the action is about (a window key's job for a run's).
    fn job(&self) -> Option<&str> {
        match self {
            Act::Pause(j) | Act::Resume(j) | Act::Run(j) | Act::Backfill(j) => Some(j),
            Act::Rerun(k) | Act::Retry(k) | Act::Forget(k) => {
                Some(k.split_once(':').map_or("", |(j, _)| j))
            }
            Act::StopTask(_) => None,
        }
    }
}

/// How an action ended, before it is shown.
pub(super) struct Acted {
    /// The HTTP status: 200 done (a run whose receipt says it failed is
    /// 200 too, with its exit code in `Jobhost-Exit-Code`), 202 a backfill
    /// started, 400 refused, 404 no such job, 409 another backfill of the
    /// job runs.
    pub status: u16,
    /// The line the command line's verb prints (a receipt, an event line).
    pub line: String,
    /// The sentence it says on standard error, if any.
    pub said: Option<String>,
    /// The command line's exit code.
    pub exit_code: i32,
    /// Where the result is seen (a backfill's page).
    pub href: Option<String>,
}

impl Acted {
    fn refused(e: &Error) -> Acted {
        let outcome = Outcome::refused(e);
        Acted {
            status: if matches!(e, Error::Input(_)) {
                400
            } else {
                503
            },
            line: outcome.receipt.line(ReceiptLevel::Full),
            said: Some(crate::core::text::printable(&format!("{e:#}")).into_owned()),
            exit_code: outcome.exit_code,
            href: None,
        }
    }

    fn ran(outcome: &Outcome) -> Acted {
        Acted {
            status: if outcome.exit_code == 2 { 400 } else { 200 },
            line: outcome.receipt.line(ReceiptLevel::Full),
            said: outcome.receipt.error.as_ref().map(|e| e.message.clone()),
            exit_code: outcome.exit_code,
            href: None,
        }
    }

    fn changed(changed: &crate::run::verbs::Changed) -> Acted {
        Acted {
            status: 200,
            line: serde_json::to_string(&changed.line)
                .map(|l| crate::core::text::json_line(&l).into_owned())
                .unwrap_or_default(),
            said: Some(changed.said.clone()),
            exit_code: 0,
            href: None,
        }
    }
}

/// The fields of a request: a form's, or a JSON object's (strings, numbers
/// and booleans, as text).
pub(super) type Fields = HashMap<String, String>;

/// `body` as fields: form-encoded, or a JSON object when `json`.
///
/// # Errors
///
/// The sentence a 400 answer says.
pub(super) fn fields(body: &[u8], json: bool) -> std::result::Result<Fields, String> {
    if !json {
        return Ok(form_urlencoded::parse(body).into_owned().collect());
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Fields::new());
    }
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        format!("the body is not JSON ({e}); send an object such as {{\"reason\": \"...\"}}")
    })?;
    let serde_json::Value::Object(map) = value else {
        return Err("the body is not a JSON object; send one such as {\"reason\": \"...\"}".into());
    };
    map.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k, s)),
            serde_json::Value::Bool(b) => Ok((k, b.to_string())),
            serde_json::Value::Number(n) => Ok((k, n.to_string())),
            _ => Err(format!(
                "field `{}` is not a string, a number or a boolean",
                crate::core::text::printable(&k)
            )),
        })
        .collect()
}

/// A yes-or-no field: absent or empty is no; a form's checkbox sends `on`,
/// JSON `true` or `false`. Anything else is refused rather than read as no.
fn flag(fields: &Fields, name: &str) -> Result<bool> {
    match fields.get(name).map(|v| v.trim()).unwrap_or_default() {
        "" | "false" | "off" | "0" | "no" => Ok(false),
        "true" | "on" | "1" | "yes" => Ok(true),
        other => Err(Error::input(format!(
            "field `{name}` is `{}`; send true or false",
            crate::core::text::printable(other)
        ))),
    }
}

/// Carries out `act` for `who` on the jobs `jobs`, at the instant `now`.
pub(super) fn act(
    actions: &Actions,
    jobs: &[ServedJob],
    act: &Act,
    fields: &Fields,
    who: &str,
    now: Timestamp,
) -> Acted {
    if let Act::StopTask(id) = act {
        return stop_task(actions, *id);
    }
    let name = act.job().unwrap_or_default();
    let Some(served) = jobs.iter().find(|j| j.schedule.job.as_str() == name) else {
        let e = Error::input(format!(
            "no job `{}` is served here; the jobs page lists them",
            crate::core::text::printable(name)
        ));
        return Acted {
            status: 404,
            ..Acted::refused(&e)
        };
    };
    let field = |k: &str| fields.get(k).map(String::as_str).unwrap_or_default();
    let runtime = actions.runtime.at(Some(now));
    let result = match act {
        Act::Pause(_) | Act::Resume(_) => crate::store::open(&served.location).and_then(|mut s| {
            crate::run::verbs::pause_or_resume(
                s.as_mut(),
                &served.schedule.job,
                field("note"),
                who,
                matches!(act, Act::Pause(_)),
                true,
                &served.target,
                now,
            )
            .map(|c| Acted::changed(&c))
        }),
        Act::Forget(key) => flag(fields, "force").and_then(|force| {
            let mut s = crate::store::open(&served.location)?;
            crate::run::verbs::forget(
                s.as_mut(),
                key,
                field("reason"),
                force,
                who,
                &served.target,
                true,
                now,
            )
            .map(|c| Acted::changed(&c))
        }),
        Act::Run(_) => full_job(served).map(|job| {
            let window = field("window");
            Acted::ran(&crate::run::run_for(&job, window, who, &runtime))
        }),
        Act::Rerun(key) => full_job(served).and_then(|job| {
            let reason = operate::needed_reason("the reason", field("reason"))?;
            operate::rerun(&job, key, &reason, who, &runtime).map(|o| Acted::ran(&o))
        }),
        Act::Retry(key) => full_job(served).and_then(|job| {
            let reason = match field("reason").trim() {
                "" => "retry from the dashboard".to_string(),
                r => operate::reason_text("the reason", r)?,
            };
            operate::retry(&job, key, &reason, who, &runtime).map(|o| Acted::ran(&o))
        }),
        Act::Backfill(_) => {
            full_job(served).and_then(|job| backfill(actions, job, fields, who, runtime, now))
        }
        Act::StopTask(id) => Ok(stop_task(actions, *id)),
    };
    result.unwrap_or_else(|e| Acted::refused(&e))
}

/// Asks backfill `id` to stop after the windows it is running.
fn stop_task(actions: &Actions, id: u64) -> Acted {
    match actions.tasks.get(id) {
        Some(task) => {
            task.stop.store(true, Ordering::SeqCst);
            Acted {
                status: 200,
                line: serde_json::to_string(&task.view()).unwrap_or_default(),
                said: Some(format!(
                    "backfill {id} stops after the windows it is running now"
                )),
                exit_code: 0,
                href: Some(format!("/tasks/{id}")),
            }
        }
        None => {
            let said = format!("no backfill {id} on this server");
            Acted {
                status: 404,
                line: serde_json::json!({ "error": said }).to_string(),
                said: Some(said),
                exit_code: 2,
                href: None,
            }
        }
    }
}

/// The served job's full `Job`, or why it cannot run from here.
fn full_job(served: &ServedJob) -> Result<Arc<Job>> {
    let load = served.load.as_ref().ok_or_else(|| {
        Error::input(format!(
            "job `{}` cannot be run from this server; run it with jobhost on a host that has \
             its config",
            served.schedule.job
        ))
    })?;
    let job = load()?;
    crate::run::refuse_ephemeral_store(&job)?;
    Ok(job)
}

/// Starts a backfill of `fields` (`from`, `to`, `only`, `reason`) on a
/// thread of its own: 202 with the task's page.
fn backfill(
    actions: &Actions,
    job: Arc<Job>,
    fields: &Fields,
    who: &str,
    runtime: Runtime,
    now: Timestamp,
) -> Result<Acted> {
    let field = |k: &str| fields.get(k).map(String::as_str).unwrap_or_default();
    let only = match field("only") {
        "" => Only::Missing,
        o => Only::parse(o)?,
    };
    let reason = Some(field("reason")).filter(|r| !r.trim().is_empty());
    let prepared = {
        let mut store = crate::store::open(&job.store)?;
        operate::prepare_backfill(
            &job,
            store.as_mut(),
            (field("from"), field("to")),
            only,
            reason,
            now,
        )?
    };
    let task = match actions.tasks.start(
        job.name().as_str(),
        who,
        &prepared.summary,
        prepared.todo,
        now,
    ) {
        Ok(task) => task,
        Err(running) => {
            return Ok(Acted {
                status: 409,
                line: serde_json::to_string(&running.view()).unwrap_or_default(),
                said: Some(format!(
                    "backfill {} of job `{}` is still running; wait for it, or stop it on its \
                     page",
                    running.id,
                    job.name()
                )),
                exit_code: 2,
                href: Some(format!("/tasks/{}", running.id)),
            });
        }
    };
    let href = format!("/tasks/{}", task.id);
    let (t, by) = (task.clone(), who.to_string());
    let spawned = std::thread::Builder::new()
        .name(format!("jobhost-backfill-{}", task.id))
        .spawn(move || {
            // However the thread ends (a panic too), the task ends with it.
            let guard = Ending(t.clone());
            let runtime = match runtime.sharing_sandbox() {
                Ok(r) => r,
                Err(e) => {
                    t.end(None, Some(e.chain()));
                    return;
                }
            };
            let ended = operate::backfill(
                &job,
                &prepared.plan,
                &prepared.reason,
                &runtime,
                Some(&t.stop),
                std::num::NonZeroUsize::MIN,
                &by,
                &mut |_, p, outcome| t.step(p.window.key().as_str(), outcome),
            );
            t.end(Some(&ended), None);
            drop(guard);
        });
    match spawned {
        Ok(handle) => *task.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle),
        Err(e) => {
            task.end(None, Some(format!("cannot start its thread: {e}")));
            return Err(Error::host("cannot start the backfill's thread").because(e));
        }
    }
    Ok(Acted {
        status: 202,
        line: serde_json::to_string(&task.view()).unwrap_or_default(),
        said: Some(format!("backfill {}: {}", task.id, prepared.summary)),
        exit_code: 0,
        href: Some(href),
    })
}

/// The backfills a server started, the newest last; the oldest finished
/// ones are forgotten past [`KEPT_TASKS`].
#[derive(Default)]
pub(super) struct Tasks {
    next: AtomicU64,
    list: Mutex<Vec<Arc<Task>>>,
}

/// How many backfills a server remembers.
const KEPT_TASKS: usize = 32;

/// How many of a backfill's last windows its page lists.
const LAST_WINDOWS: usize = 20;

/// Ends its task when dropped, if nothing else did (a panic).
struct Ending(Arc<Task>);

impl Drop for Ending {
    fn drop(&mut self) {
        if !self.0.finished() {
            self.0
                .end(None, Some("its thread stopped unexpectedly".to_string()));
        }
    }
}

impl Tasks {
    /// A new task of `job`, or the one of `job` still running (one at a
    /// time per job), decided under one lock.
    fn start(
        &self,
        job: &str,
        by: &str,
        summary: &str,
        total: usize,
        now: Timestamp,
    ) -> std::result::Result<Arc<Task>, Arc<Task>> {
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(running) = list.iter().find(|t| t.job == job && !t.finished()) {
            return Err(running.clone());
        }
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let task = Arc::new(Task {
            id,
            job: job.to_string(),
            by: by.to_string(),
            summary: summary.to_string(),
            total,
            started: crate::core::clock::rfc3339(now),
            stop: AtomicBool::new(false),
            progress: Mutex::new(Progress::default()),
            thread: Mutex::new(None),
        });
        list.push(task.clone());
        while list.len() > KEPT_TASKS {
            match list.iter().position(|t| t.finished()) {
                Some(i) => {
                    list.remove(i);
                }
                None => break,
            }
        }
        Ok(task)
    }

    /// Asks every backfill to stop after the windows it is running, and
    /// waits for them (the server is stopping).
    pub(super) fn stop_all(&self) {
        let list: Vec<Arc<Task>> = self.list.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for t in &list {
            t.stop.store(true, Ordering::SeqCst);
        }
        for t in &list {
            let handle = t.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(h) = handle {
                let _ = h.join();
            }
        }
    }

    pub(super) fn get(&self, id: u64) -> Option<Arc<Task>> {
        let list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        list.iter().find(|t| t.id == id).cloned()
    }

    /// The views of the backfills of `job`, newest first.
    pub(super) fn of_job(&self, job: &str) -> Vec<TaskView> {
        let list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        list.iter()
            .rev()
            .filter(|t| t.job == job)
            .map(|t| t.view())
            .collect()
    }
}

/// One backfill started from the dashboard.
pub(super) struct Task {
    pub id: u64,
    job: String,
    by: String,
    summary: String,
    total: usize,
    started: String,
    stop: AtomicBool,
    progress: Mutex<Progress>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[derive(Default)]
struct Progress {
    done: usize,
    ran: usize,
    failed: usize,
    skipped: usize,
    last: VecDeque<WindowDone>,
    ended: Option<String>,
    exit_code: Option<i32>,
}

/// One window a backfill ran, as its page lists it.
#[derive(Debug, Clone, Serialize)]
pub(super) struct WindowDone {
    key: String,
    event: String,
    exit_code: i32,
}

/// A backfill's progress, as its page and its JSON show it.
#[derive(Debug, Clone, Serialize)]
pub(super) struct TaskView {
    pub id: u64,
    pub job: String,
    pub by: String,
    pub started: String,
    pub summary: String,
    /// Windows it runs in all.
    pub total: usize,
    /// Of those, how many have run.
    pub done: usize,
    pub ran: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Whether a stop was asked for.
    pub stopping: bool,
    /// How it ended (`None`: still running).
    pub ended: Option<String>,
    /// Its worst exit code, as `jobhost backfill` would exit, once ended.
    pub exit_code: Option<i32>,
    /// Its last windows, newest first.
    pub last: Vec<WindowDone>,
}

impl Task {
    fn finished(&self) -> bool {
        self.progress
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ended
            .is_some()
    }

    fn step(&self, key: &str, outcome: &Outcome) {
        let mut p = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        p.done += 1;
        match (outcome.receipt.event, outcome.exit_code) {
            (crate::run::receipt::Event::Skipped, _) => p.skipped += 1,
            (_, 0) => p.ran += 1,
            _ => p.failed += 1,
        }
        p.last.push_front(WindowDone {
            key: key.to_string(),
            event: outcome.receipt.event.as_str().to_string(),
            exit_code: outcome.exit_code,
        });
        p.last.truncate(LAST_WINDOWS);
    }

    fn end(&self, ended: Option<&operate::Backfilled>, error: Option<String>) {
        let mut p = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        let (text, code) = match (ended, error) {
            (_, Some(e)) => (format!("could not start: {e}"), 1),
            (Some(b), None) => (
                format!(
                    "{}: {} ran, {} failed, {} skipped, {} left as they were, {} not closed yet",
                    if b.stopped { "stopped" } else { "finished" },
                    b.ran,
                    b.failed,
                    b.skipped_total(),
                    b.left,
                    b.not_closed
                ),
                b.exit_code,
            ),
            (None, None) => ("finished".to_string(), 0),
        };
        p.ended = Some(crate::core::text::printable(&text).into_owned());
        p.exit_code = Some(code);
    }

    pub(super) fn view(&self) -> TaskView {
        let p = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        TaskView {
            id: self.id,
            job: self.job.clone(),
            by: self.by.clone(),
            started: self.started.clone(),
            summary: self.summary.clone(),
            total: self.total,
            done: p.done,
            ran: p.ran,
            failed: p.failed,
            skipped: p.skipped,
            stopping: self.stop.load(Ordering::SeqCst),
            ended: p.ended.clone(),
            exit_code: p.exit_code,
            last: p.last.iter().cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_is_named_by_its_path() {
        assert_eq!(
            Act::parse("/jobs/daily-sales/pause"),
            Some(Act::Pause("daily-sales".into()))
        );
        assert_eq!(
            Act::parse("/runs/daily-sales%3A2026-11-08/rerun"),
            Some(Act::Rerun("daily-sales:2026-11-08".into()))
        );
        assert_eq!(Act::parse("/tasks/7/stop"), Some(Act::StopTask(7)));
        assert_eq!(Act::parse("/jobs/daily-sales/delete"), None);
        assert_eq!(Act::parse("/jobs/daily-sales"), None);
        assert_eq!(Act::parse("/metrics"), None);
    }

    #[test]
    fn fields_come_from_a_form_or_a_json_object() {
        let f = fields(b"reason=late+data&force=on", false).unwrap();
        assert_eq!(f["reason"], "late data");
        let j = fields(br#"{"reason": "late data", "force": true, "n": 3}"#, true).unwrap();
        assert_eq!(
            (j["reason"].as_str(), j["force"].as_str()),
            ("late data", "true")
        );
        assert_eq!(j["n"], "3");
        assert!(
            fields(b"[1]", true)
                .unwrap_err()
                .contains("not a JSON object")
        );
        assert!(fields(br#"{"a": [1]}"#, true).is_err());
        assert!(fields(b"", true).unwrap().is_empty());
    }

    #[test]
    fn a_yes_or_no_field_is_read_or_refused_never_guessed() {
        let f = |body: &str| flag(&fields(body.as_bytes(), true).unwrap(), "force");
        assert!(!f("{}").unwrap());
        assert!(f(r#"{"force": true}"#).unwrap());
        assert!(!f(r#"{"force": false}"#).unwrap());
        assert!(f(r#"{"force": "on"}"#).unwrap());
        let e = f(r#"{"force": "ture"}"#).unwrap_err().to_string();
        assert!(
            e.contains("field `force` is `ture`; send true or false"),
            "{e}"
        );
        assert!(f(r#"{"force": 2}"#).is_err());
    }
}
