//! `jobhost plan`: what each job would do now, without running or
//! creating anything.

use std::io::Write;
use std::path::PathBuf;

use super::{JobView, Out, job_view, lend, written};
use crate::core::clock::rfc3339;
use crate::core::error::Error;
use crate::core::text::printable;
use crate::run::needs::Needs;
use crate::run::plan::What;

/// `jobhost plan`.
#[derive(Debug, clap::Args)]
pub(super) struct PlanArgs {
    /// A TOML job config; give it once per job.
    #[arg(long, value_name = "FILE", required_unless_present = "jobs")]
    config: Vec<PathBuf>,
    /// A folder of job configs: every `*.toml` in it, as if each were given
    /// with --config.
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    jobs: Option<PathBuf>,
    /// Plan as if it were this instant [default: the system clock].
    #[arg(long, value_name = "TIME")]
    now: Option<String>,
    /// Also consider every window from this instant on that the store does
    /// not hold yet (a fresh store otherwise considers only the newest due
    /// window).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// The claim store, for every job [default: $JOBHOST_STORE, else each config's `store`, else state/jobhost.db beside each config].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// One JSON object per window instead of text.
    #[arg(long)]
    json: bool,
}

/// Prints each job's plan: 0, or the error.
pub(super) fn main(args: PlanArgs) -> Result<i32, Error> {
    let since = args
        .since
        .as_deref()
        .map(|t| crate::core::clock::parse_instant("--since", t))
        .transpose()?;
    let mut out = Out::stdout();
    let mut refused = None;
    for file in &super::flags::configs(&args.config, args.jobs.as_deref())? {
        let view = job_view(file, &args.store, &args.now)
            .and_then(|view| Ok((view.config.catch_up()?, view.config.needs()?, view)));
        let (
            catch_up,
            needs,
            JobView {
                schedule: s,
                now,
                mut store,
                ..
            },
        ) = match view {
            Ok(view) => view,
            // A folder's bad file is refused alone.
            Err(e) if args.jobs.is_some() => {
                super::flags::refuse_alone(file, e, &mut refused);
                continue;
            }
            Err(e) => return Err(e),
        };
        let plan = crate::run::plan::plan(&s, catch_up, now, since, lend(&mut store))?;
        // A window that would run now but needs upstream windows that are
        // not DONE would be recorded WAITING: said as such, with what it
        // waits for (the same two reads per upstream job a run makes).
        let mut waits = std::collections::HashMap::new();
        let due: Vec<crate::core::window::Window> = plan
            .entries
            .iter()
            .filter(|e| e.what == What::Run)
            .map(|e| e.window.clone())
            .collect();
        if !needs.is_empty() && !due.is_empty() {
            let checked = match lend(&mut store) {
                Some(st) => crate::run::needs::check_each(st, &due, &needs),
                // No store: no upstream job has run.
                None => Ok(due.iter().map(|_| Needs::never_ran(&needs)).collect()),
            };
            let checked = match checked {
                Ok(checked) => checked,
                // A folder's job whose upstream cannot be judged is
                // refused alone, as a run of it would fail.
                Err(e) if args.jobs.is_some() => {
                    super::flags::refuse_alone(file, e, &mut refused);
                    continue;
                }
                Err(e) => return Err(e),
            };
            for (w, n) in due.iter().zip(checked) {
                if !n.met() {
                    waits.insert(w.key().to_string(), n.words());
                }
            }
        }
        let target = crate::app::config::command_target(args.store.as_deref(), Some(file));
        // Runs another invocation started and did not finish, and
        // deliveries waiting out a backoff: when each can go on.
        let unfinished = match lend(&mut store) {
            Some(st) => st.unfinished(s.job.as_str())?,
            None => Vec::new(),
        };
        if !args.json {
            writeln!(
                out,
                "{}: {} windows in {}, delay {} s, jitter up to {} s, catch_up {catch_up}; now {}",
                s.job,
                s.kind,
                s.zone.name(),
                s.delay.as_secs(),
                s.jitter.as_secs(),
                rfc3339(now)
            )
            .map_err(written)?;
            if plan.truncated {
                writeln!(
                    out,
                    "  (only the newest {} due windows are shown)",
                    crate::run::plan::MAX_WINDOWS
                )
                .map_err(written)?;
            }
        }
        let report = crate::run::outputs::plan_report(&s, &plan, &waits, &unfinished, &target);
        let last_hole = plan.holes.first.last().map(|h| h.window.key().to_string());
        for line in &report.lines {
            if args.json {
                super::write_json(&mut out, line)?;
                continue;
            }
            let detail = line
                .detail
                .as_deref()
                .map(|d| format!("  {d}"))
                .unwrap_or_default();
            let text = match (&line.due, &line.at) {
                (Some(due), _) => format!(
                    "  {:<9} {:<32} due {due}{detail}",
                    line.decision.as_str(),
                    line.key
                ),
                (None, at) => format!(
                    "  {:<9} {:<32} at  {}{detail}",
                    line.decision.as_str(),
                    line.key,
                    at.as_deref().unwrap_or_default()
                ),
            };
            writeln!(out, "{}", printable(&text)).map_err(written)?;
            if report.more_holes > 0 && last_hole.as_deref() == Some(line.key.as_str()) {
                writeln!(
                    out,
                    "  {:<9} and {}{} more hole(s) after these",
                    "",
                    if plan.holes.truncated {
                        "at least "
                    } else {
                        ""
                    },
                    report.more_holes
                )
                .map_err(written)?;
            }
        }
    }
    Ok(refused.map_or(0, |e| e.exit_code()))
}
