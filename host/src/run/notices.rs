//! What a person hears of a job's trouble (`[[notify]]`), and when jobhost
//! pauses a job that keeps failing (`pause_after_failures`).
//!
//! After each run that reached the store (never on the skip path), and at
//! each of the daemon's wake-ups, [`notice`] judges the job as `jobhost
//! status` does ([`status_bounded`]) and keeps its incidents in step with
//! what it finds: a kind of trouble that is there and has no open incident
//! opens one, staging its notifications in the same transaction; one that
//! is gone closes its incident, staging `recovered`. At most one incident
//! of a kind is open per job, so of the hosts that see the same trouble,
//! one stages its notifications. Then the job's due notifications are
//! leased and sent, one try each (a failed send waits 1, 2, 4, ... minutes
//! for the next pass). Nothing here changes a run's outcome or exit code.
//!
//! The kinds of trouble:
//! - `failed`: a window failed for good (its attempts used up) after the
//!   job's newest DONE window was decided; over (`recovered`) once a
//!   window is DONE after it, or it is run again or forgotten.
//! - `abandoned`: the same for a window the host gave up on.
//! - `late`: the job is late as `status` judges lateness (whatever else
//!   its health says: an old failed window does not hide it), and not
//!   paused; over once it is not.
//! - `stale`: DONE windows whose inputs changed; over once none is.
//! - `paused`: jobhost paused the job after `pause_after_failures` windows
//!   in a row ended FAILED or ABANDONED (the pause, its audit line, chain
//!   entry and incident in one transaction); over, silently, once a
//!   person resumes it. Only windows after the newest one such a pause
//!   counted count towards the next.

use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;

use crate::core::error::Result;
use crate::core::window::WindowKey;
use crate::effects::notify::{self, Answer, Event, Notice};
use crate::run::job::Job;
use crate::run::reads::Reads;
use crate::run::status::status_bounded;
use crate::store::{
    Actor, Incident, NewNotification, RangeQuery, RunRecord, RunState, Sent, Store,
};

/// Who a pause made by `pause_after_failures` is by.
pub const AUTO_PAUSE_BY: &str = "jobhost (pause_after_failures)";

/// How long a host holds a notification it is sending.
const SEND_LEASE: Duration = Duration::from_secs(120);

/// The most notifications one pass sends.
const SENDS_PER_PASS: usize = 20;

/// One notification sent (or tried) in a pass, as the receipt shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Notified {
    /// `failed`, ..., `recovered`, `paused`.
    pub event: String,
    /// The `[[notify]]` URL, as written.
    pub to: String,
    /// `sent`, `retrying` (tried again at a later pass) or `failed` (given
    /// up).
    pub status: &'static str,
    /// The receiver's answer, or why there was none.
    pub detail: String,
}

/// Whether the job's notices need a pass at all.
pub fn wanted(job: &Job) -> bool {
    !job.notify.targets.is_empty() || job.pause_after_failures.is_some()
}

/// Keeps `job`'s incidents in step with how it stands at `now` in
/// `store`, pausing it when `pause_after_failures` says, and sends its
/// due notifications; what was sent.
///
/// # Errors
///
/// The store's; a receiver that cannot be reached is a `retrying` entry,
/// not an error.
pub fn notice(job: &Job, store: &mut dyn Store, now: Timestamp) -> Result<Vec<Notified>> {
    if !wanted(job) {
        return Ok(Vec::new());
    }
    let name = job.name().as_str();
    if let Some(n) = job.pause_after_failures {
        pause_if_failing(job, store, n, now)?;
    }
    let status = {
        let mut reads = Reads::new(&mut *store);
        status_bounded(&job.schedule, now, Some(&mut reads))?
    };
    let last_done = status.last_done.as_ref();
    let since_done =
        |r: &&RunRecord| last_done.is_none_or(|d| r.updated_at > d.updated_at && r.key != d.key);
    let gave_up = |state: RunState| {
        status
            .needs_a_person
            .iter()
            .filter(|r| r.state == state)
            .find(since_done)
            .map(|r| {
                let why = r.error.as_deref().unwrap_or("no error was recorded");
                (Some(r.key.to_string()), why.to_string())
            })
    };
    // Late as `status` judges it, whatever else the job is (its health
    // says the worst thing only: a window that failed long ago would hide
    // that it is late now); a paused job is not late.
    let is_late = status.paused.is_none()
        && (status.late_by > status.grace || status.stuck || !status.waiting_late.is_empty());
    let late = is_late.then(|| {
        let human = crate::core::text::human_duration;
        let why = if status.late_by > status.grace {
            let what = if status.late_for_hole {
                "an older window that nothing will run"
            } else {
                "its newest due window"
            };
            format!(
                "{what} is {} past the job's grace of {}",
                human(status.late_by - status.grace),
                human(status.grace)
            )
        } else if status.stuck {
            "a run of it is stuck: its lease or retry time passed longer ago than the job's \
             grace"
                .to_string()
        } else {
            "a window waits for upstream windows past the job's grace".to_string()
        };
        let state = status.expected_state.map_or("not run yet", |s| s.as_str());
        (
            Some(status.expected.key().to_string()),
            format!(
                "window {} ({state}) has been due since {}; {why}",
                status.expected.key(),
                status.expected_due,
            ),
        )
    });
    let stale = status.stale.first().map(|m| {
        (
            Some(m.key.to_string()),
            format!(
                "{} DONE window(s) may be wrong, newest {}: {}",
                status.stale.len(),
                m.key,
                m.cause
            ),
        )
    });
    let auto_paused = status.paused.as_ref().filter(|p| p.by == AUTO_PAUSE_BY);
    // The open incidents, as the status read them.
    let open: Vec<&crate::store::Incident> = status.incidents.iter().map(|(i, _)| i).collect();
    let kinds = [
        (Event::Failed, gave_up(RunState::Failed)),
        (Event::Abandoned, gave_up(RunState::Abandoned)),
        (Event::Late, late),
        (Event::Stale, stale),
    ];
    for (event, now_there) in kinds {
        let was = open.iter().find(|i| i.kind == event.as_str());
        match (now_there, was) {
            (Some((key, detail)), None) => {
                store.open_incident(name, event.as_str(), key.as_deref(), &detail, now, &|id| {
                    notifications(job, event, key.as_deref(), id, &detail, now)
                })?;
            }
            (None, Some(incident)) => {
                let by = match (event, last_done) {
                    (Event::Failed | Event::Abandoned, Some(d)) => {
                        format!("window {} is DONE", d.key)
                    }
                    (Event::Failed | Event::Abandoned, None) => {
                        "the window was run again or forgotten".to_string()
                    }
                    (Event::Late, _) => "the job is no longer late".to_string(),
                    _ => "no DONE window is stale".to_string(),
                };
                store.close_incident(incident.id, &by, now, &|i| recovered(job, i, &by, now))?;
            }
            _ => {}
        }
    }
    // A pause jobhost made, ended by a person: its incident is over, and
    // nobody needs telling.
    if auto_paused.is_none()
        && let Some(i) = open.iter().find(|i| i.kind == Event::Paused.as_str())
    {
        store.close_incident(i.id, "resumed", now, &|_| Vec::new())?;
    }
    send_due(job, store, now)
}

/// Pauses the job when its newest `n` ended windows after those the last
/// such pause counted all ended FAILED (for good) or ABANDONED, naming
/// them in the pause's note.
fn pause_if_failing(job: &Job, store: &mut dyn Store, n: u32, now: Timestamp) -> Result<()> {
    let name = job.name().as_str();
    if store.paused(name)?.is_some() {
        return Ok(());
    }
    // Windows up to the newest one the last such pause counted are spent.
    let after = match store.last_incident(name, Event::Paused.as_str())? {
        Some(Incident { key: Some(k), .. }) => store
            .peek(&WindowKey::from_stored(k))?
            .map(|r| r.window_start),
        _ => None,
    };
    let n = n as usize;
    let rows = store.runs_in_range(&RangeQuery {
        job: name,
        from: after,
        until: None,
        states: &[RunState::Done, RunState::Failed, RunState::Abandoned],
        oldest_first: false,
        limit: n.saturating_mul(4).saturating_add(8),
    })?;
    let ended: Vec<&RunRecord> = rows
        .iter()
        .filter(|r| after.is_none_or(|a| r.window_start > a))
        // A failed window with a retry ahead has not ended yet.
        .filter(|r| !(r.state == RunState::Failed && r.retry_at.is_some()))
        .take(n)
        .collect();
    if ended.len() < n || ended.iter().any(|r| r.state == RunState::Done) {
        return Ok(());
    }
    let named: Vec<String> = ended
        .iter()
        .map(|r| format!("{} ({})", r.key, r.state.as_str()))
        .collect();
    let note = format!(
        "paused by jobhost after {n} window(s) in a row ended FAILED or ABANDONED: {}; fix the \
         cause, then `jobhost resume`",
        named.join(", ")
    );
    let newest = ended[0].key.to_string();
    store.auto_pause(
        name,
        Actor {
            by: AUTO_PAUSE_BY,
            reason: &note,
        },
        &newest,
        now,
        &|id| notifications(job, Event::Paused, None, id, &note, now),
    )?;
    crate::core::text::say("warning", &format!("job `{name}`: {note}"));
    Ok(())
}

/// The notifications of `event` of incident `id` for every block that
/// wants it.
fn notifications(
    job: &Job,
    event: Event,
    window: Option<&str>,
    id: i64,
    detail: &str,
    now: Timestamp,
) -> Vec<NewNotification> {
    told(job, event, None, window, id, detail, now)
}

/// The notifications of `event` of incident `id` for every block whose
/// `on` names it, and `about` too when given (a block hears that an
/// incident is over only if it heard of that kind).
fn told(
    job: &Job,
    event: Event,
    about: Option<Event>,
    window: Option<&str>,
    id: i64,
    detail: &str,
    now: Timestamp,
) -> Vec<NewNotification> {
    let name = job.name().as_str();
    let notice = Notice::new(
        event,
        name,
        window,
        id,
        detail,
        now,
        job.notify.public_url.as_deref(),
        &job.redactor,
    );
    job.notify
        .targets
        .iter()
        .filter(|t| t.on.contains(&event) && about.is_none_or(|a| t.on.contains(&a)))
        .map(|t| NewNotification {
            event: event.as_str().to_string(),
            target: t.target.shown_url().to_string(),
            idempotency_key: format!("jobhost:{name}:incident:{id}:{}", event.as_str()),
            body: notice.body(t.style),
        })
        .collect()
}

/// The `recovered` notifications of closing `incident`, for the blocks
/// that were told of its kind (none for a pause a person ended).
fn recovered(job: &Job, incident: &Incident, by: &str, now: Timestamp) -> Vec<NewNotification> {
    let Some(kind) = Event::parse(&incident.kind).filter(|k| *k != Event::Paused) else {
        return Vec::new();
    };
    let detail = format!(
        "{by}; the `{}` incident opened at {} is over",
        incident.kind, incident.opened_at
    );
    told(
        job,
        Event::Recovered,
        Some(kind),
        incident.key.as_deref(),
        incident.id,
        &detail,
        now,
    )
}

/// Leases and sends the job's due notifications, one try each.
fn send_due(job: &Job, store: &mut dyn Store, now: Timestamp) -> Result<Vec<Notified>> {
    let owner = crate::run::owner_id();
    let due =
        store.take_notifications(job.name().as_str(), &owner, SEND_LEASE, SENDS_PER_PASS, now)?;
    let mut out = Vec::with_capacity(due.len());
    for n in due {
        let target = job
            .notify
            .targets
            .iter()
            .find(|t| t.target.shown_url() == n.target);
        let sent = match target {
            None => Sent::GivenUp(
                "the job has no `[[notify]]` block with this URL any more".to_string(),
            ),
            Some(t) => match t.send(&n.body, &n.idempotency_key, &job.redactor) {
                Answer::Delivered(d) => Sent::Delivered(d),
                Answer::Refused(d) => Sent::GivenUp(d),
                Answer::Again(d) if n.attempts >= notify::MAX_ATTEMPTS => Sent::GivenUp(d),
                Answer::Again(d) => Sent::Later(d, notify::backoff(n.attempts)),
            },
        };
        store.notification_sent(n.id, &owner, &sent, now)?;
        let (status, detail) = match sent {
            Sent::Delivered(d) => ("sent", d),
            Sent::Later(d, _) => ("retrying", d),
            Sent::GivenUp(d) => ("failed", d),
        };
        if status != "sent" {
            crate::core::text::say(
                "warning",
                &format!(
                    "the `{}` notification of job `{}` to {} was not delivered: {detail}{}",
                    n.event,
                    job.name(),
                    n.target,
                    if status == "retrying" {
                        "; it is tried again later"
                    } else {
                        ""
                    }
                ),
            );
        }
        out.push(Notified {
            event: n.event,
            to: n.target,
            status,
            detail,
        });
    }
    Ok(out)
}
