//! `jobhost status`: whether each job keeps up, for a person or a monitor
//! (jobhost's own exit codes, or a Nagios plugin's with `--nagios`).

use std::io::Write;
use std::path::PathBuf;

use super::{JobView, Out, job_view, written};
use crate::app::args::env;
use crate::core::clock::rfc3339;
use crate::core::error::Error;
use crate::core::text::{human_duration, json_line, printable};
use crate::store::RunRecord;

/// `jobhost status`.
#[derive(Debug, clap::Args)]
pub(super) struct StatusArgs {
    /// A TOML job config; give it once per job.
    #[arg(long, value_name = "FILE", required_unless_present = "jobs")]
    config: Vec<PathBuf>,
    /// A folder of job configs: every `*.toml` in it, as if each were given
    /// with --config.
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    jobs: Option<PathBuf>,
    /// As if it were this instant [default: the system clock].
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    /// The claim store, for every job [default: $JOBHOST_STORE, else each config's `store`, else state/jobhost.db beside each config].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// One JSON object per job instead of text.
    #[arg(long)]
    json: bool,
    /// Exit as a Nagios plugin does: 0 OK (healthy), 1 WARNING (late or
    /// paused), 2 CRITICAL (failed), 3 UNKNOWN (a store that cannot be
    /// read, bad input); the first line is `JOBHOST <STATE> - <summary>`.
    #[arg(long, conflicts_with = "json")]
    nagios: bool,
    /// Take a store that does not exist yet as one where nothing has run
    /// (a fresh deploy), instead of an error.
    #[arg(long)]
    allow_missing: bool,
}

/// Prints each job's status; returns the worst job's exit code.
/// Prints each job's status; the worst job sets the exit code. With
/// `--nagios` an error is UNKNOWN (3), said on the plugin's line too.
pub(super) fn main(args: StatusArgs) -> Result<i32, Error> {
    let nagios = args.nagios;
    match status(args) {
        Err(e) if nagios => {
            let line = printable(&e.chain()).into_owned();
            Out::stdout().line(&format!("JOBHOST UNKNOWN - {line}"))?;
            crate::core::text::say("error", &line);
            Ok(3)
        }
        other => other,
    }
}

fn status(args: StatusArgs) -> Result<i32, Error> {
    use crate::run::status::Health;
    let mut worst = Health::Healthy;
    let mut out = Out::stdout();
    let real_now = jiff::Timestamp::now();
    // With --nagios the job lines follow the one-line summary a plugin
    // prints first.
    let mut lines: Vec<String> = Vec::new();
    let mut by_health: Vec<(Health, String)> = Vec::new();
    let mut refused = None;
    for file in &super::flags::configs(&args.config, args.jobs.as_deref())? {
        let JobView {
            config,
            schedule,
            now,
            mut store,
        } = match job_view(file, &args.store, &args.now) {
            Ok(view) => view,
            // A folder's bad file is refused alone.
            Err(e) if args.jobs.is_some() => {
                super::flags::refuse_alone(file, e, &mut refused);
                continue;
            }
            Err(e) => return Err(e),
        };
        if store.is_none() && !args.allow_missing {
            return Err(Error::Store(
                format!(
                    "store `{}` of job `{}` does not exist: a mistyped path would read as a job \
                 that never ran; check --store or the config's `store`, or pass \
                 --allow-missing where nothing has run yet (a fresh deploy)",
                    config.store(&env)?,
                    schedule.job
                )
                .into(),
            ));
        }
        let target = crate::app::config::command_target(args.store.as_deref(), Some(file));
        // The same bounded reads as the dashboard's, whatever the length
        // of the job's history.
        let st = {
            let mut reads = store
                .as_mut()
                .map(|s| crate::run::reads::Reads::new(s.as_mut()));
            crate::run::status::status_bounded(&schedule, now, reads.as_mut())?
        };
        worst = worst.max(st.health);
        by_health.push((st.health, schedule.job.to_string()));
        let expected_state = st.expected_state.map_or("not claimed", |s| s.as_str());
        let last_done = st.last_done.as_ref().map(|r| r.key.to_string());
        let retry = |key: &crate::core::window::WindowKey| {
            target.command(&format!(
                "retry {}",
                crate::core::command::shell_quote(key.as_str())
            ))
        };
        // When an unfinished run can be taken over: its lease's end (on
        // the store's clock, which real time stands in for here).
        let resumable = |r: &RunRecord| {
            if r.lease_until <= real_now {
                "now".to_string()
            } else {
                format!("at {}", rfc3339(r.lease_until))
            }
        };
        if args.json {
            let report = st.report(&schedule, now, &target);
            let line = serde_json::to_string(&report)
                .map_err(|e| Error::host("cannot encode the status").because(e))?;
            out.line(&json_line(&line))?;
            continue;
        }
        let last = last_done.unwrap_or_else(|| "none".to_string());
        let waits = st
            .expected_waits_for
            .as_deref()
            .map(|w| format!(" for {}", crate::core::text::printable(w)))
            .unwrap_or_default();
        let expected = format!(
            "{} due {} is {expected_state}{waits}",
            st.expected.key(),
            rfc3339(st.expected_due)
        );
        let line = match st.health {
            Health::Healthy => format!("{}: healthy; {expected}; last done {last}", schedule.job),
            Health::Stale => {
                let marks: Vec<String> = st
                    .stale
                    .iter()
                    .take(3)
                    .map(|m| format!("{} (revision {}): {}", m.key, m.revision, m.cause))
                    .collect();
                let more = st.stale.len().saturating_sub(3);
                let windows: std::collections::BTreeSet<&str> =
                    st.stale.iter().map(|m| m.key.as_str()).collect();
                format!(
                    "{}: stale, {} DONE window(s) may be wrong now: {}{}; `{}` runs them again; \
                     {expected}; last done {last}",
                    schedule.job,
                    windows.len(),
                    marks.join("; "),
                    if more > 0 {
                        format!(" and {more} more mark(s)")
                    } else {
                        String::new()
                    },
                    target.command("rerun --stale --reason TEXT")
                )
            }
            Health::Paused => {
                let (since, by, note) = st
                    .paused
                    .as_ref()
                    .map(|p| (rfc3339(p.since), p.by.clone(), p.note.clone()))
                    .unwrap_or_default();
                format!(
                    "{}: paused since {since} by {by}: {note}; {expected}; last done {last}; \
                     `{}` lets it run",
                    schedule.job,
                    target.command(&format!("resume {}", schedule.job))
                )
            }
            Health::Late => {
                // Each late thing with its own age, the latest first: the
                // newest due window, the oldest hole.
                let mut late = Vec::new();
                if st.expected_late > st.grace {
                    late.push((st.expected_late, expected.clone()));
                }
                if let Some(h) = st.holes.first.first().filter(|_| st.hole_late > st.grace) {
                    late.push((
                        st.hole_late,
                        format!(
                            "{} due {} has no run (the oldest of {}{} hole(s))",
                            h.window.key(),
                            rfc3339(h.due),
                            if st.holes.truncated { "at least " } else { "" },
                            st.holes.count
                        ),
                    ));
                }
                late.sort_by_key(|l| std::cmp::Reverse(l.0));
                let mut parts: Vec<String> = late
                    .iter()
                    .enumerate()
                    .map(|(i, (by, what))| {
                        if i == 0 {
                            what.clone()
                        } else {
                            format!("also {what}, late by {}", human_duration(*by))
                        }
                    })
                    .collect();
                for r in st.waiting_late.iter().take(3) {
                    parts.push(format!(
                        "{} is WAITING past the grace for {}",
                        r.key,
                        crate::core::text::printable(r.skip_reason.as_deref().unwrap_or("?"))
                    ));
                }
                if st.stuck {
                    parts.push(
                        "an older run is stuck past the grace (its lease or retry time passed)"
                            .to_string(),
                    );
                }
                if st.expected_late <= st.grace {
                    parts.push(expected.clone());
                }
                let head = match late.first() {
                    Some((by, _)) => format!("late by {}", human_duration(*by)),
                    None => "late".to_string(),
                };
                format!(
                    "{}: {head} (grace {}): {}; last done {last}",
                    schedule.job,
                    human_duration(st.grace),
                    parts.join("; ")
                )
            }
            Health::Failed => {
                let people: Vec<String> = st
                    .needs_a_person
                    .iter()
                    .map(|r| {
                        format!(
                            "{} {}{} (`{}` tries it again)",
                            r.key,
                            r.state,
                            r.error
                                .as_deref()
                                .map(|e| format!(": {e}"))
                                .unwrap_or_default(),
                            retry(&r.key)
                        )
                    })
                    .collect();
                format!(
                    "{}: failed, a person must look: {}; last done {last}",
                    schedule.job,
                    people.join("; ")
                )
            }
        };
        let mut notes = Vec::new();
        if let Some(c) = &st.shadow {
            notes.push(format!(
                "shadow runs: {} agreed, {} differed, {} failed (`history KEY` shows a window's \
                 differences)",
                c.agreed, c.differed, c.failed
            ));
        }
        for r in st.unfinished.iter().take(3) {
            let what = match r.state {
                crate::store::RunState::Prepared => format!(
                    "PREPARED (report committed, {} of {} message(s) delivered)",
                    r.delivered, r.messages
                ),
                _ => format!("CLAIMED (attempt {})", r.attempt),
            };
            let when = resumable(r);
            notes.push(format!(
                "{} is {what}, held by {} until {}; it can be taken over {when} (the daemon \
                 does, or `{}`)",
                r.key,
                r.owner,
                rfc3339(r.lease_until),
                retry(&r.key)
            ));
        }
        if st.unfinished.len() > 3 {
            notes.push(format!(
                "{} more window(s) CLAIMED or PREPARED",
                st.unfinished.len() - 3
            ));
        }
        if let Some(r) = st.retrying.first() {
            notes.push(format!(
                "{} window(s) waiting to retry, the newest {} ({}attempt {}) at {}; `{}` tries \
                 it now",
                st.retrying.len(),
                r.key,
                if r.state == crate::store::RunState::Prepared {
                    "delivery of its committed report, "
                } else {
                    ""
                },
                r.attempt,
                r.retry_at.map(rfc3339).unwrap_or_default(),
                retry(&r.key)
            ));
        }
        if !st.skipped.is_empty() {
            notes.push(format!(
                "{} window(s) skipped by catch-up since the last done one",
                st.skipped.len()
            ));
        }
        if st.holes.count > 0 {
            notes.push(hole_note(&st.holes, &target));
        }
        for (incident, told) in &st.incidents {
            notes.push(crate::run::status::IncidentReport::of(incident, told).words());
        }
        // The line quotes errors a guest or a destination wrote.
        let line = if notes.is_empty() {
            line
        } else {
            format!("{line}; {}", notes.join("; "))
        };
        lines.push(printable(&line).into_owned());
    }
    if let (true, Some(e), false) = (args.nagios, &refused, worst == Health::Failed) {
        let line = printable(&format!("a job file is left out: {}", e.chain())).into_owned();
        writeln!(out, "JOBHOST UNKNOWN - {line}").map_err(written)?;
    } else if args.nagios {
        writeln!(out, "{}", nagios_summary(worst, &by_health)).map_err(written)?;
    }
    for line in &lines {
        writeln!(out, "{line}").map_err(written)?;
    }
    // A failed or late job is said first; else a job file left out.
    let urgent = matches!(worst, Health::Failed | Health::Late);
    Ok(match (&refused, args.nagios) {
        (Some(_), true) if worst != Health::Failed => 3,
        (Some(e), false) if !urgent => e.exit_code(),
        (_, true) => nagios_code(worst),
        (_, false) => worst.exit_code(),
    })
}

/// A Nagios plugin's exit code for the worst job's health: 0 OK, 1
/// WARNING (late, paused), 2 CRITICAL (failed); 3, UNKNOWN, is for an
/// error.
fn nagios_code(worst: crate::run::status::Health) -> i32 {
    use crate::run::status::Health;
    match worst {
        Health::Healthy => 0,
        Health::Stale | Health::Paused | Health::Late => 1,
        Health::Failed => 2,
    }
}

/// The line a Nagios plugin prints first: `JOBHOST CRITICAL - 1 failed
/// (sales), 1 late (weekly), 3 healthy`.
fn nagios_summary(
    worst: crate::run::status::Health,
    jobs: &[(crate::run::status::Health, String)],
) -> String {
    use crate::run::status::Health;
    let state = ["OK", "WARNING", "CRITICAL"][nagios_code(worst) as usize];
    let mut parts = Vec::new();
    for h in [
        Health::Failed,
        Health::Late,
        Health::Paused,
        Health::Stale,
        Health::Healthy,
    ] {
        let names: Vec<&str> = jobs
            .iter()
            .filter(|(j, _)| *j == h)
            .map(|(_, n)| n.as_str())
            .collect();
        if names.is_empty() {
            continue;
        }
        parts.push(if h == Health::Healthy {
            format!("{} healthy", names.len())
        } else {
            format!("{} {} ({})", names.len(), h.as_str(), names.join(", "))
        });
    }
    format!("JOBHOST {state} - {}", parts.join(", "))
}

/// The holes of a job in one sentence: how many, the first few, and the
/// command that runs the oldest.
fn hole_note(holes: &crate::run::plan::Holes, target: &crate::core::command::Target) -> String {
    let keys: Vec<String> = holes
        .first
        .iter()
        .map(|h| h.window.key().to_string())
        .collect();
    let more = holes.count.saturating_sub(keys.len());
    let run = holes.first.first().map_or_else(String::new, |h| {
        format!(
            "; `{}` runs the oldest",
            target.command(&format!(
                "run --for {}",
                crate::core::command::shell_quote(&h.window.label)
            ))
        )
    });
    format!(
        "{}{} window(s) due with no run (holes): {}{}{run}",
        if holes.truncated { "at least " } else { "" },
        holes.count,
        keys.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nagios_states_follow_the_worst_job() {
        use crate::run::status::Health;
        let jobs = [
            (Health::Healthy, "a".to_string()),
            (Health::Failed, "sales".to_string()),
            (Health::Late, "weekly".to_string()),
            (Health::Healthy, "b".to_string()),
        ];
        assert_eq!(
            nagios_summary(Health::Failed, &jobs),
            "JOBHOST CRITICAL - 1 failed (sales), 1 late (weekly), 2 healthy"
        );
        assert_eq!(
            [
                Health::Healthy,
                Health::Paused,
                Health::Late,
                Health::Failed
            ]
            .map(nagios_code),
            [0, 1, 1, 2]
        );
    }
}
