//! `jobhost check`: reads each DONE window's source again and marks the
//! windows whose rows changed since their run STALE.

use super::Out;
use super::flags::JobFlags;
use crate::app::args::env;
use crate::core::error::Error;
use crate::core::text::{printable, say};
use crate::run::Runtime;

/// `jobhost check`.
#[derive(Debug, clap::Args)]
pub(super) struct CheckArgs {
    #[command(flatten)]
    job: JobFlags,
    /// The first window checked: its label (2026-11-03) or an RFC 3339
    /// instant [default: the windows of the last 7 days].
    #[arg(long, value_name = "LABEL|INSTANT")]
    since: Option<String>,
    /// One JSON object per window instead of text.
    #[arg(long)]
    json: bool,
}

/// How far back a check looks by default.
const DEFAULT_SINCE: jiff::SignedDuration = jiff::SignedDuration::from_hours(7 * 24);

/// Exit 0 when no window's rows changed, 6 when some did (and are marked
/// STALE now, or were already), 2 for bad input, 1 when the store or the
/// source cannot be read.
pub(super) fn main(args: CheckArgs, runtime: &Runtime) -> Result<i32, Error> {
    let config = args.job.load()?;
    let job = config.job(&env)?;
    let runtime = runtime.at(config.now()?.or(runtime.now));
    let now = runtime.clock().now();
    let since = match &args.since {
        Some(text) => job.schedule.bound("--since", text, now)?,
        None => now.checked_sub(DEFAULT_SINCE).unwrap_or(now),
    };
    let mut out = Out::stdout();
    let mut written = Ok(());
    let (mut changed, mut unknown) = (0usize, 0usize);
    let checked = crate::run::check::check(&job, (Some(since), None), &runtime, &mut |c| {
        match c.result {
            "changed" => changed += 1,
            "unknown" => unknown += 1,
            _ => {}
        }
        if written.is_err() {
            return false;
        }
        written = if args.json {
            super::write_json(&mut out, c)
        } else {
            let detail = c
                .detail
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            let what = match c.result {
                "changed" => "STALE",
                "same" => "same",
                _ => "unknown",
            };
            out.line(&printable(&format!("{what:<8} {}{detail}", c.key)))
        };
        written.is_ok()
    })?;
    written?;
    say(
        "note",
        &format!(
            "{} window(s) checked: {} unchanged, {changed} changed (marked STALE), {unknown} \
             could not be compared",
            checked.len(),
            checked.len() - changed - unknown
        ),
    );
    Ok(if changed > 0 { 6 } else { 0 })
}
