//! What the commands print, one typed struct per output. The CLI writes
//! these as JSON lines (and renders its text from the same values); the
//! dashboard serves the same structs as its pages' JSON twins where it
//! shows the same thing (`status`: [`StatusReport`](super::status::StatusReport),
//! `history KEY`: [`RunDetail`](super::board::RunDetail)). A field added
//! here is added to every place that prints it.

use jiff::Timestamp;
use serde::Serialize;

use crate::core::clock::rfc3339;
use crate::core::command::{Target, shell_quote};
use crate::core::schedule::Schedule;
use crate::effects::digest::DigestInfo;
use crate::effects::digest::cache::DigestCache;
use crate::run::board::{DigestFacts, digest_facts};
use crate::run::operate::Planned;
use crate::run::plan::{Plan, What};
use crate::run::receipt::SkipReason;
use crate::run::replay::{Overridden, Verdict};
use crate::store::{AuditAction, AuditLine, Forgotten, Pause, Pruned, RunRecord, RunState};

/// A window's bounds and zone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Span {
    /// Its start, RFC 3339.
    pub start: String,
    /// Its end (exclusive), RFC 3339.
    pub end: String,
    /// Its zone, when the output names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tz: Option<String>,
}

/// A committed report, as `history` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportFacts {
    /// The report's summary.
    pub summary: String,
    /// The job's cursor after the run.
    pub cursor: Option<String>,
    /// The text the component asked a model to describe.
    pub describe: Option<String>,
}

/// One row of `history` (`--json`: one line each).
#[derive(Debug, Clone, Serialize)]
pub struct HistoryRow {
    /// The window key.
    pub key: String,
    /// The job.
    pub job: String,
    /// The window.
    pub window: Span,
    /// Where it stands.
    pub state: RunState,
    /// Attempts made.
    pub attempt: u32,
    /// Its fence.
    pub fence: i64,
    /// The current or last owner.
    pub owner: String,
    /// The lease's end.
    pub lease_until: String,
    /// The next attempt, after a retryable failure.
    pub retry_at: Option<String>,
    /// `sha256:...` of the latest attempt's component.
    pub component: String,
    /// The committed report.
    pub report: Option<ReportFacts>,
    /// The stored journal's size.
    pub journal_bytes: Option<u64>,
    /// Messages staged.
    pub messages: u32,
    /// Messages delivered.
    pub delivered: u32,
    /// The last error (never a skip's reason).
    pub error: Option<String>,
    /// Why the scheduler skipped the window, when it is SKIPPED; what it
    /// waits for, when it is WAITING.
    pub reason: Option<String>,
    /// When the row was made.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// The revision, from 1.
    pub revision: u32,
    /// Why this revision was made (a rerun).
    pub revision_reason: Option<String>,
    /// When `jobhost prune` dropped its journal.
    pub pruned_at: Option<String>,
    /// When it ran: its row's last change; `None` for a skipped window.
    pub ran_at: Option<String>,
    /// Its digest, from the store's note and this host's cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<DigestFacts>,
    /// Why its answer may be wrong now, when it is stale: each cause.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<String>,
}

impl HistoryRow {
    /// The row of run `r`, its digest looked up in `cache`.
    pub fn of(r: &RunRecord, cache: Option<&DigestCache>) -> HistoryRow {
        HistoryRow {
            key: r.key.to_string(),
            job: r.job.clone(),
            window: Span {
                start: rfc3339(r.window_start),
                end: rfc3339(r.window_end),
                tz: Some(r.timezone.clone()),
            },
            state: r.state,
            attempt: r.attempt,
            fence: r.fence.0,
            owner: r.owner.clone(),
            lease_until: rfc3339(r.lease_until),
            retry_at: r.retry_at.map(rfc3339),
            component: r.component.clone(),
            report: r.report.as_ref().map(|rep| ReportFacts {
                summary: rep.summary.clone(),
                cursor: rep.cursor.clone(),
                describe: rep.prompt.clone(),
            }),
            journal_bytes: r.journal_bytes,
            messages: r.messages,
            delivered: r.delivered,
            error: r.error.clone(),
            reason: r.skip_reason.clone(),
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
            revision: r.revision,
            revision_reason: r.reason.clone(),
            pruned_at: r.pruned_at.map(rfc3339),
            ran_at: (!matches!(r.state, RunState::Skipped | RunState::Waiting))
                .then(|| rfc3339(r.updated_at)),
            digest: digest_facts(r, cache),
            stale: Vec::new(),
        }
    }
}

/// One audit line (`history --all --json`).
#[derive(Debug, Clone, Serialize)]
pub struct AuditEntry {
    /// What was done.
    pub audit: AuditAction,
    /// When.
    pub at: String,
    /// The job.
    pub job: String,
    /// The window, when the action was on one.
    pub key: Option<String>,
    /// The window's state before.
    pub old_state: Option<String>,
    /// The reason or note given.
    pub reason: String,
    /// What else is worth knowing.
    pub detail: Option<String>,
    /// Who (user and host).
    pub by: String,
}

impl AuditEntry {
    /// The entry of audit line `a`.
    pub fn of(a: &AuditLine) -> AuditEntry {
        AuditEntry {
            audit: a.action,
            at: rfc3339(a.at),
            job: a.job.clone(),
            key: a.key.clone(),
            old_state: a.old_state.clone(),
            reason: a.reason.clone(),
            detail: a.detail.clone(),
            by: a.by.clone(),
        }
    }
}

/// What `plan` decides for one window, or for one unfinished run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Due with no run, older than the newest due window: nothing fills it
    /// on its own.
    Hole,
    /// Due: it would run now.
    Run,
    /// Due: its catch-up policy skips it.
    Skip,
    /// The store holds it already.
    Recorded,
    /// The next window to come due.
    Next,
    /// Claimed or prepared by a process; taken over when its lease ends.
    Resume,
    /// Waiting out a backoff before its next attempt.
    Retry,
    /// WAITING for upstream windows it needs (or due, with no row, and
    /// would be if run now); runs once they are DONE.
    Wait,
}

impl Decision {
    /// The decision's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Hole => "hole",
            Decision::Run => "run",
            Decision::Skip => "skip",
            Decision::Recorded => "recorded",
            Decision::Next => "next",
            Decision::Resume => "resume",
            Decision::Retry => "retry",
            Decision::Wait => "wait",
        }
    }
}

/// One line of `plan`.
#[derive(Debug, Clone, Serialize)]
pub struct PlanLine {
    /// The job.
    pub job: String,
    /// The window key.
    pub key: String,
    /// When the window is (or was) due; a window's line only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due: Option<String>,
    /// What would happen.
    pub decision: Decision,
    /// An unfinished run's state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<RunState>,
    /// An unfinished run's owner.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// When an unfinished run can go on: its lease's end or its next
    /// attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// Why, and the command that acts on it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The instant planned for.
    pub now: String,
    /// Only the newest due windows are shown.
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
    /// On a hole's line: how many holes there are in all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub holes: Option<usize>,
    /// On a hole's line: not every hole was counted.
    #[serde(skip_serializing_if = "is_false")]
    pub holes_truncated: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A job's plan: its schedule's facts and its lines, in the order `plan`
/// prints them (holes, windows, unfinished runs).
#[derive(Debug, Clone)]
pub struct PlanReport {
    /// The lines.
    pub lines: Vec<PlanLine>,
    /// Holes beyond the listed ones: how many.
    pub more_holes: usize,
}

/// The plan of the job `s` plans with: `plan`'s windows and the job's
/// `unfinished` runs, with commands that name `target`. A window `waits`
/// holds (by key) would wait for the upstream windows its words name.
pub fn plan_report(
    s: &Schedule,
    plan: &Plan,
    waits: &std::collections::HashMap<String, String>,
    unfinished: &[RunRecord],
    target: &Target,
) -> PlanReport {
    let now = rfc3339(plan.now);
    let job = s.job.as_str().to_string();
    let mut lines = Vec::new();
    for e in plan.holes.first.iter().chain(&plan.entries) {
        let (decision, detail) = match &e.what {
            What::Hole => (
                Decision::Hole,
                Some(format!(
                    "due with no run; `{}` runs it",
                    target.command(&format!("run --for {}", shell_quote(&e.window.label)))
                )),
            ),
            What::Run => match waits.get(e.window.key().as_str()) {
                Some(words) => (
                    Decision::Wait,
                    Some(format!(
                        "needs {words}: a run now would record it WAITING; it runs once \
                         every upstream window it needs is DONE"
                    )),
                ),
                None => (Decision::Run, None),
            },
            What::Skip(why) => (Decision::Skip, Some(why.clone())),
            What::Recorded(state) => (Decision::Recorded, Some(state.to_string())),
            What::Next => (Decision::Next, None),
        };
        let hole = decision == Decision::Hole;
        lines.push(PlanLine {
            job: job.clone(),
            key: e.window.key().to_string(),
            due: Some(rfc3339(e.due)),
            decision,
            state: None,
            owner: None,
            at: None,
            detail,
            now: now.clone(),
            truncated: plan.truncated,
            holes: hole.then_some(plan.holes.count),
            holes_truncated: hole && plan.holes.truncated,
        });
    }
    for r in unfinished {
        let retry = target.command(&format!("retry {}", shell_quote(r.key.as_str())));
        let (decision, at, detail) = match r.retry_at {
            _ if r.state == RunState::Waiting => (
                Decision::Wait,
                r.updated_at,
                format!(
                    "WAITING for {}; it runs once they are DONE (a daemon of the job looks \
                     again every {} s)",
                    r.skip_reason.as_deref().unwrap_or("its upstream"),
                    crate::run::needs::WAITING_POLL.as_secs()
                ),
            ),
            Some(t) => (
                Decision::Retry,
                t,
                format!(
                    "{} attempt {} failed; the next one at this time; `{retry}` tries it now",
                    r.state, r.attempt
                ),
            ),
            None => (
                Decision::Resume,
                r.lease_until,
                format!(
                    "{} by {}: can be taken over when its lease ends, at this time; `{retry}` then",
                    r.state, r.owner
                ),
            ),
        };
        lines.push(PlanLine {
            job: job.clone(),
            key: r.key.to_string(),
            due: None,
            decision,
            state: Some(r.state),
            owner: Some(r.owner.clone()),
            at: Some(rfc3339(at)),
            detail: Some(detail),
            now: now.clone(),
            truncated: false,
            holes: None,
            holes_truncated: false,
        });
    }
    PlanReport {
        lines,
        more_holes: plan.holes.count.saturating_sub(plan.holes.first.len()),
    }
}

/// A JSON line a command prints that is not a run's receipt: what an
/// operator's verb did (`rerun`, `retry` and `backfill`'s runs print run
/// receipts instead), what the daemon decided without running, a digest.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum EventLine {
    /// `forget`.
    Forgotten {
        /// The window.
        key: String,
        /// Its state before.
        old_state: RunState,
        /// Messages that were never delivered.
        undelivered: u32,
        /// Its report was archived as a revision (the next run of the
        /// window is a new revision, with new idempotency keys).
        archived_revision: bool,
        /// The point up to which the daemon decided every window now
        /// (moved back when it covered the window).
        decided_until: Option<String>,
        /// The reason given.
        reason: String,
        /// Who.
        by: String,
    },
    /// `pause`.
    Paused {
        /// The job.
        job: String,
        /// The note given.
        note: Option<String>,
        /// Who.
        by: String,
        /// It was paused already (the note is replaced).
        was_paused: bool,
    },
    /// `resume`.
    Resumed {
        /// The job.
        job: String,
        /// The note given.
        note: Option<String>,
        /// Who.
        by: String,
        /// It was paused (otherwise nothing changed).
        was_paused: bool,
    },
    /// `prune`, and the daemon's `[retention]`.
    Pruned {
        /// The job, or every job.
        job: Option<String>,
        /// The instant it was done.
        now: String,
        /// Runs whose window ended before this were pruned.
        before: String,
        /// Runs and revisions pruned.
        runs: u64,
        /// Journal bytes freed.
        journal_bytes: u64,
        /// Delivered message bytes freed.
        body_bytes: u64,
    },
    /// `backfill --dry-run`: one line per window.
    Plan {
        /// The job.
        job: String,
        /// The window.
        key: String,
        /// Its bounds.
        window: Span,
        /// Its state now, when the store holds it.
        state: Option<RunState>,
        /// Its revision now.
        revision: Option<u32>,
        /// What the backfill would do.
        action: &'static str,
        /// The instant planned for.
        now: String,
    },
    /// A window (or a paused job) the daemon did not run.
    Skipped {
        /// Why.
        reason: SkipReason,
        /// The job.
        job: String,
        /// The window, unless the whole job was passed over.
        #[serde(skip_serializing_if = "Option::is_none")]
        key: Option<String>,
        /// The instant.
        now: String,
        /// What a person reads: the policy or the pause, and the command
        /// that acts on it.
        detail: String,
    },
    /// `digest`, and a digest the daemon made after a run.
    Digest {
        /// The job.
        job: String,
        /// The window.
        key: String,
        /// The instant.
        now: String,
        /// What became of the digest.
        digest: DigestInfo,
    },
}

impl EventLine {
    /// `forget`'s receipt.
    pub fn forgotten(key: &str, f: &Forgotten, reason: &str, by: &str) -> EventLine {
        EventLine::Forgotten {
            key: key.to_string(),
            old_state: f.old_state,
            undelivered: f.undelivered,
            archived_revision: f.archived,
            decided_until: f.decided_until.map(rfc3339),
            reason: reason.to_string(),
            by: by.to_string(),
        }
    }

    /// A window (or with no key, a job) the daemon did not run.
    pub fn skipped(
        reason: SkipReason,
        job: &str,
        key: Option<&str>,
        now: Timestamp,
        detail: String,
    ) -> EventLine {
        EventLine::Skipped {
            reason,
            job: job.to_string(),
            key: key.map(str::to_string),
            now: rfc3339(now),
            detail,
        }
    }

    /// `pause`'s or `resume`'s receipt; `before` is the pause that was in
    /// force.
    pub fn paused(
        pausing: bool,
        job: &str,
        note: &str,
        by: &str,
        before: Option<&Pause>,
    ) -> EventLine {
        let (job, note, by) = (
            job.to_string(),
            (!note.is_empty()).then(|| note.to_string()),
            by.to_string(),
        );
        let was_paused = before.is_some();
        if pausing {
            EventLine::Paused {
                job,
                note,
                by,
                was_paused,
            }
        } else {
            EventLine::Resumed {
                job,
                note,
                by,
                was_paused,
            }
        }
    }

    /// `prune`'s receipt.
    pub fn pruned(job: Option<&str>, now: Timestamp, before: Timestamp, p: &Pruned) -> EventLine {
        EventLine::Pruned {
            job: job.map(str::to_string),
            now: rfc3339(now),
            before: rfc3339(before),
            runs: p.runs,
            journal_bytes: p.journal_bytes,
            body_bytes: p.body_bytes,
        }
    }

    /// One line of `backfill --dry-run`.
    pub fn planned(p: &Planned, now: Timestamp) -> EventLine {
        EventLine::Plan {
            job: p.window.job.as_str().to_string(),
            key: p.window.key().to_string(),
            window: Span {
                start: rfc3339(p.window.start),
                end: rfc3339(p.window.end),
                tz: None,
            },
            state: p.state,
            revision: p.revision,
            action: p.act.as_str(),
            now: rfc3339(now),
        }
    }
}

/// `compile`'s line for one component.
#[derive(Debug, Clone, Serialize)]
pub struct Compiled {
    /// The component file.
    pub component: String,
    /// `sha256:...` of it.
    pub digest: String,
    /// `hit` when it was compiled already, else `miss`.
    pub cache: crate::guest::cache::CacheOutcome,
    /// How long compiling took, in seconds (none on a hit).
    pub compile_seconds: Option<f64>,
    /// The compiled artifact's path.
    pub artifact: Option<String>,
    /// Its size.
    pub artifact_bytes: Option<u64>,
    /// Functions whose compiled code was reused from components compiled
    /// before into the same cache (none on a hit, or with Winch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functions_reused: Option<usize>,
    /// Functions compiled now (and kept for later components).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub functions_compiled: Option<usize>,
}

/// `replay`'s line for one window.
#[derive(Debug, Clone, Serialize)]
pub struct Replayed {
    /// The window.
    pub key: String,
    /// `identical`, `different`, `diverged` or `failed`.
    pub verdict: &'static str,
    /// What differs, one line each.
    pub differences: Vec<String>,
    /// Why it diverged or failed.
    pub reason: Option<String>,
    /// Messages compared, when identical.
    pub messages: Option<usize>,
    /// The recorded run's component.
    pub recorded_component: Option<String>,
    /// The component replayed.
    pub component: String,
    /// Parameters the replay gave other values than the recorded run.
    pub overridden: Vec<OverriddenParam>,
}

/// A parameter a replay overrode.
#[derive(Debug, Clone, Serialize)]
pub struct OverriddenParam {
    /// Its name.
    pub name: String,
    /// The recorded value.
    pub recorded: Option<String>,
    /// The value replayed.
    pub replayed: String,
}

impl Replayed {
    /// The line of window `key`.
    pub fn of(
        key: &str,
        verdict: &Verdict,
        recorded: Option<&str>,
        component: &str,
        overridden: &[Overridden],
    ) -> Replayed {
        let (differences, reason, messages) = match verdict {
            Verdict::Identical { messages, .. } => (Vec::new(), None, Some(*messages)),
            Verdict::Different(d) => (d.clone(), None, None),
            Verdict::Diverged(r) | Verdict::Failed(r) => (Vec::new(), Some(r.clone()), None),
        };
        Replayed {
            key: key.to_string(),
            verdict: verdict.name(),
            differences,
            reason,
            messages,
            recorded_component: recorded.map(str::to_string),
            component: component.to_string(),
            overridden: overridden
                .iter()
                .map(|o| OverriddenParam {
                    name: o.name.clone(),
                    recorded: o.recorded.clone(),
                    replayed: o.replayed.clone(),
                })
                .collect(),
        }
    }
}

/// `replay`'s last line: the tally, the job and the component.
#[derive(Debug, Clone, Serialize)]
pub struct ReplaySummary {
    /// How many windows ended which way.
    #[serde(flatten)]
    pub tally: crate::run::replay::Tally,
    /// The job.
    pub job: String,
    /// The component replayed.
    pub component: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_name_their_event_first_and_keep_their_documented_fields() {
        let line = serde_json::to_value(EventLine::Pruned {
            job: None,
            now: "2026-09-01T00:00:00Z".into(),
            before: "2026-08-01T00:00:00Z".into(),
            runs: 3,
            journal_bytes: 10,
            body_bytes: 2,
        })
        .unwrap();
        assert_eq!(
            line,
            serde_json::json!({"event": "pruned", "job": null, "now": "2026-09-01T00:00:00Z", "before": "2026-08-01T00:00:00Z",
                "runs": 3, "journal_bytes": 10, "body_bytes": 2})
        );
        let text = serde_json::to_string(&EventLine::paused(true, "j", "", "me", None)).unwrap();
        assert!(
            text.starts_with(r#"{"event":"paused","job":"j","note":null"#),
            "{text}"
        );
    }

    #[test]
    fn a_plan_line_leaves_out_what_its_decision_does_not_have() {
        let line = PlanLine {
            job: "j".into(),
            key: "j:2026-11-08".into(),
            due: Some("2026-11-09T00:05:00Z".into()),
            decision: Decision::Run,
            state: None,
            owner: None,
            at: None,
            detail: None,
            now: "2026-11-09T01:00:00Z".into(),
            truncated: false,
            holes: None,
            holes_truncated: false,
        };
        assert_eq!(
            serde_json::to_value(&line).unwrap(),
            serde_json::json!({"job": "j", "key": "j:2026-11-08", "due": "2026-11-09T00:05:00Z",
                "decision": "run", "now": "2026-11-09T01:00:00Z"})
        );
    }
}
