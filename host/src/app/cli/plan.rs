//! `jobhost plan`: what each job would do now, without running or
//! creating anything.

use std::io::Write;
use std::path::PathBuf;

use super::{JobView, Out, job_view, lend, written};
use crate::core::clock::rfc3339;
use crate::core::error::Error;
use crate::core::text::{json_line, printable};

/// `jobhost plan`.
#[derive(Debug, clap::Args)]
pub(super) struct PlanArgs {
    /// A TOML job config; give it once per job.
    #[arg(long, value_name = "FILE", required = true)]
    config: Vec<PathBuf>,
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
    use crate::run::plan::What;
    let since = args
        .since
        .as_deref()
        .map(|t| crate::core::clock::parse_instant("--since", t))
        .transpose()?;
    let mut out = Out::stdout();
    for file in &args.config {
        let JobView {
            config,
            schedule: s,
            now,
            mut store,
        } = job_view(file, &args.store, &args.now)?;
        let catch_up = config.catch_up()?;
        let plan = crate::run::plan::plan(&s, catch_up, now, since, lend(&mut store))?;
        let target = crate::app::config::command_target(args.store.as_deref(), Some(file));
        // Runs another invocation started and did not finish, and
        // deliveries waiting out a backoff: when each can go on.
        let unfinished = match lend(&mut store) {
            Some(st) => st.unfinished(s.job.as_str())?,
            None => Vec::new(),
        };
        if !args.json {
            let _ = writeln!(
                out,
                "{}: {} windows in {}, delay {} s, jitter up to {} s, catch_up {catch_up}; now {}",
                s.job,
                s.kind,
                s.zone.name(),
                s.delay.as_secs(),
                s.jitter.as_secs(),
                rfc3339(now)
            );
            if plan.truncated {
                writeln!(
                    out,
                    "  (only the newest {} due windows are shown)",
                    crate::run::plan::MAX_WINDOWS
                )
                .map_err(written)?;
            }
        }
        for e in plan.holes.first.iter().chain(&plan.entries) {
            let (what, detail) = match &e.what {
                What::Hole => (
                    "hole",
                    format!(
                        "due with no run; `{}` runs it",
                        target.command(&format!(
                            "run --for {}",
                            crate::core::command::shell_quote(&e.window.label)
                        ))
                    ),
                ),
                What::Run => ("run", String::new()),
                What::Skip(why) => ("skip", why.clone()),
                What::Recorded(state) => ("recorded", state.to_string()),
                What::Next => ("next", String::new()),
            };
            if args.json {
                let mut line = serde_json::json!({
                    "job": s.job.as_str(),
                    "key": e.window.key().as_str(),
                    "due": rfc3339(e.due),
                    "decision": what,
                    "now": rfc3339(now),
                });
                if !detail.is_empty() {
                    line["detail"] = detail.into();
                }
                if plan.truncated {
                    line["truncated"] = true.into();
                }
                if e.what == What::Hole {
                    line["holes"] = plan.holes.count.into();
                    if plan.holes.truncated {
                        line["holes_truncated"] = true.into();
                    }
                }
                writeln!(out, "{}", json_line(&line.to_string())).map_err(written)?;
            } else {
                let line = format!(
                    "  {what:<9} {:<32} due {}{}",
                    e.window.key().as_str(),
                    rfc3339(e.due),
                    if detail.is_empty() {
                        String::new()
                    } else {
                        format!("  {detail}")
                    }
                );
                writeln!(out, "{}", printable(&line)).map_err(written)?;
            }
            let last_hole = plan.holes.first.last().map(|h| h.window.key());
            let more = plan.holes.count.saturating_sub(plan.holes.first.len());
            if !args.json && more > 0 && last_hole.is_some_and(|k| k == e.window.key()) {
                writeln!(
                    out,
                    "  {:<9} and {}{more} more hole(s) after these",
                    "",
                    if plan.holes.truncated {
                        "at least "
                    } else {
                        ""
                    }
                )
                .map_err(written)?;
            }
        }
        for r in &unfinished {
            let retry = target.command(&format!(
                "retry {}",
                crate::core::command::shell_quote(r.key.as_str())
            ));
            let (what, at, detail) = match r.retry_at {
                Some(t) => (
                    "retry",
                    t,
                    format!(
                        "{} attempt {} failed; the next one at this time; `{retry}` tries it now",
                        r.state, r.attempt
                    ),
                ),
                None => (
                    "resume",
                    r.lease_until,
                    format!(
                        "{} by {}: can be taken over when its lease ends, at this time; `{retry}` \
                         then",
                        r.state, r.owner
                    ),
                ),
            };
            if args.json {
                let line = serde_json::json!({
                    "job": s.job.as_str(),
                    "key": r.key.as_str(),
                    "decision": what,
                    "state": r.state.as_str(),
                    "owner": r.owner,
                    "at": rfc3339(at),
                    "detail": detail,
                    "now": rfc3339(now),
                });
                writeln!(out, "{}", json_line(&line.to_string())).map_err(written)?;
            } else {
                let line = format!(
                    "  {what:<9} {:<32} at  {}  {detail}",
                    r.key.as_str(),
                    rfc3339(at)
                );
                writeln!(out, "{}", printable(&line)).map_err(written)?;
            }
        }
    }
    Ok(0)
}
