//! `jobhost forget KEY`: removes a FAILED, ABANDONED or SKIPPED window's
//! decision so that it runs again as if new, kept as an audit line.

use jiff::Timestamp;

use super::flags::{StoreFlags, needed_reason};
use crate::core::command::Target;
use crate::core::error::Error;
use crate::core::text::{printable, say};
use crate::run::operate;
use crate::run::outputs::EventLine;
use crate::store::{self, Actor};

/// `jobhost forget`.
#[derive(Debug, clap::Args)]
pub(super) struct ForgetArgs {
    /// The window's key, as `history` shows it.
    #[arg(value_name = "KEY")]
    key: String,
    /// Why (kept in the audit line `history --all` shows).
    #[arg(long, value_name = "TEXT")]
    reason: String,
    /// Also forget a PREPARED window whose claim ran out: its undelivered
    /// messages are then never delivered.
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    store: StoreFlags,
}

impl ForgetArgs {
    /// How the commands this prints name the store.
    pub(super) fn target(&self) -> Target {
        self.store.target()
    }
}

/// `jobhost forget KEY`: 0 forgotten, 2 refused.
pub(super) fn main(args: ForgetArgs) -> Result<i32, Error> {
    let config_given = args.store.config().is_some();
    let reason = needed_reason("--reason", &args.reason)?;
    let key = operate::typed_key(&args.key)?;
    let mut store = store::open(&args.store.location()?)?;
    let by = operate::actor_id();
    let actor = Actor {
        by: &by,
        reason: &reason,
    };
    let f = store.forget(&key, args.force, actor, Timestamp::now())?;
    let line = EventLine::forgotten(key.as_str(), &f, &reason, &by);
    super::print_json(&line)?;
    let label = key
        .as_str()
        .split_once(':')
        .map_or(key.as_str(), |(_, l)| l);
    let run = crate::core::command::process_target().command(&format!(
        "run --for {}{}",
        crate::core::command::shell_quote(label),
        if config_given { "" } else { " --config FILE" }
    ));
    let mut said = format!(
        "forgot {key} ({}); the daemon decides it again by the job's catch_up policy, and `{run}` \
         runs it as if new",
        f.old_state
    );
    if f.undelivered > 0 {
        said.push_str(&format!(
            "; {} message(s) of its committed report will never be delivered",
            f.undelivered
        ));
    }
    if f.archived {
        said.push_str(
            "; its report is kept as an earlier revision, and its next run sends with new \
             idempotency keys",
        );
    }
    say("forget", &printable(&said));
    Ok(0)
}
