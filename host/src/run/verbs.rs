//! The verbs a person uses that change only the store: `pause`, `resume`
//! and `forget`, each with its checks, its one transaction (with an audit
//! line and a chain entry), the event line the command line prints and the
//! dashboard's API answers, and the sentence for a person. The command
//! line and the dashboard call the same function, with who acts.

use jiff::Timestamp;

use crate::core::command::shell_quote;
use crate::core::error::{Error, Result};
use crate::run::operate::{needed_reason, reason_text, typed_key};
use crate::store::Store;

/// What a change to the store a person made says: the event line the CLI
/// prints on standard output (and the API answers), and the sentence it
/// says on standard error.
#[derive(Debug)]
pub struct Changed {
    /// The event line.
    pub line: crate::run::outputs::EventLine,
    /// The sentence for a person.
    pub said: String,
}

/// `jobhost pause JOB` (`pausing`) and `jobhost resume JOB`: stops claiming
/// the job's windows on every host sharing `store`, or lets it run again,
/// with `note` and `by` in the audit line. `known` says that a job config
/// names the job; without one the store must know it, so that a typo
/// pauses nothing. `target` names the job in the command the sentence
/// prints.
///
/// # Errors
///
/// `Error::Input` for a pause without a note or a job the store does not
/// know; `Error::Store`.
#[allow(clippy::too_many_arguments)]
pub fn pause_or_resume(
    store: &mut dyn Store,
    name: &crate::core::window::JobName,
    note: &str,
    by: &str,
    pausing: bool,
    known: bool,
    target: &crate::core::command::Target,
    now: Timestamp,
) -> Result<Changed> {
    let what = if pausing { "pause" } else { "resume" };
    let note = reason_text("the note", note)?;
    if pausing && note.is_empty() {
        return Err(Error::input(
            "the note is empty: say why the job is paused, for whoever finds it so".to_string(),
        ));
    }
    if !known
        && store.history_from(name.as_str(), None)?.is_empty()
        && store.paused(name.as_str())?.is_none()
    {
        return Err(Error::input(format!(
            "no run of job `{name}` is in the store; check the name (`jobhost history` lists the \
             jobs), or give --config FILE of the job to {what} it before its first run"
        )));
    }
    let actor = crate::store::Actor { by, reason: &note };
    let before = if pausing {
        store.pause(name.as_str(), actor, now)?
    } else {
        store.resume(name.as_str(), actor, now)?
    };
    let line =
        crate::run::outputs::EventLine::paused(pausing, name.as_str(), &note, by, before.as_ref());
    let since = |p: &crate::store::Pause| crate::core::clock::rfc3339(p.since);
    let said = match (pausing, &before) {
        (true, None) => format!(
            "paused {name}: nothing of it is claimed, on any host sharing the store, until `{}`",
            target.command(&format!("resume {name}"))
        ),
        (true, Some(p)) => format!(
            "{name} was already paused (since {} by {}); its note is now: {note}",
            since(p),
            p.by
        ),
        (false, Some(p)) => format!(
            "resumed {name} (paused since {} by {}: {}); the windows that fell due meanwhile \
             are decided by its catch_up policy",
            since(p),
            p.by,
            p.note
        ),
        (false, None) => format!("{name} was not paused; nothing changed"),
    };
    Ok(Changed {
        line,
        said: crate::core::text::printable(&said).into_owned(),
    })
}

/// `jobhost forget KEY`: removes a FAILED, ABANDONED or SKIPPED window's
/// decision (with `force`, also a PREPARED one whose claim ran out) so that
/// it runs again as if new, kept as an audit line with `reason` and `by`.
/// `config_given` says whether the commands the sentence prints need
/// `--config FILE` added.
///
/// # Errors
///
/// `Error::Input` for a bad key, an empty reason, or a window in a state
/// forget does not take; `Error::Store`.
#[allow(clippy::too_many_arguments)]
pub fn forget(
    store: &mut dyn Store,
    key: &str,
    reason: &str,
    force: bool,
    by: &str,
    target: &crate::core::command::Target,
    config_given: bool,
    now: Timestamp,
) -> Result<Changed> {
    let reason = needed_reason("the reason", reason)?;
    let key = typed_key(key)?;
    let actor = crate::store::Actor {
        by,
        reason: &reason,
    };
    let f = store.forget(&key, force, actor, now)?;
    let line = crate::run::outputs::EventLine::forgotten(key.as_str(), &f, &reason, by);
    let label = key
        .as_str()
        .split_once(':')
        .map_or(key.as_str(), |(_, l)| l);
    let run = target.command(&format!(
        "run --for {}{}",
        shell_quote(label),
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
    Ok(Changed {
        line,
        said: crate::core::text::printable(&said).into_owned(),
    })
}
