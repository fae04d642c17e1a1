//! `jobhost forget KEY`: removes a FAILED, ABANDONED or SKIPPED window's
//! decision so that it runs again as if new, kept as an audit line.

use jiff::Timestamp;

use super::flags::{StoreFlags, needed_reason};
use crate::core::command::Target;
use crate::core::error::Error;
use crate::core::text::say;
use crate::run::operate;
use crate::store;

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
    let reason = needed_reason("--reason", &args.reason)?;
    operate::typed_key(&args.key)?;
    let mut store = store::open(&args.store.location()?)?;
    let changed = crate::run::verbs::forget(
        store.as_mut(),
        &args.key,
        &reason,
        args.force,
        &operate::actor_id(),
        &crate::core::command::process_target(),
        args.store.config().is_some(),
        Timestamp::now(),
    )?;
    super::print_json(&changed.line)?;
    say("forget", &changed.said);
    Ok(0)
}
