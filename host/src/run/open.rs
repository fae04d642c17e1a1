//! Opening a job's store for a run: refused (or warned about) when it is
//! on a filesystem that dies with its machine, warned about when hosts
//! share it but the job's file destinations are each host's own, and said
//! when this invocation created it.

use crate::core::error::{Error, Result};
use crate::core::failpoint::Failpoints;
use crate::effects::destination::Target;
use crate::run::job::Job;
use crate::run::receipt::{Receipt, Warning, WarningKind};
use crate::store::durable::ephemeral_filesystem;
use crate::store::{Store, StoreLocation};

/// Opens (creating and migrating if need be) the job's store, after the
/// durability check, so that a refusal leaves nothing behind.
pub(crate) fn open_store(
    job: &Job,
    failpoints: Option<std::sync::Arc<dyn Failpoints>>,
    receipt: &mut Receipt,
) -> Result<Box<dyn Store>> {
    receipt.store = Some(job.store.to_string());
    check_durable(job, receipt)?;
    warn_local_destinations(job, receipt);
    let store = crate::store::open_with(&job.store, failpoints)?;
    if store.created() {
        receipt.store_created = true;
        crate::core::text::say("note", &store_created(&job.store));
    }
    Ok(store)
}

/// A SQLite store on a filesystem that dies with its machine or container
/// loses every claim with it, and the next host runs every window again:
/// warn in the receipt and on stderr, or refuse when the job requires a
/// durable store.
///
/// # Errors
///
/// `Error::Input` when the store is ephemeral and a durable one is required.
fn check_durable(job: &Job, receipt: &mut Receipt) -> Result<()> {
    let Some((problem, fix)) = ephemeral_problem(job) else {
        return Ok(());
    };
    if job.require_durable_store {
        return Err(Error::input(format!(
            "{problem}; {fix} (refused because a durable store is required)"
        )));
    }
    crate::core::text::say(
        "warning",
        &format!("{problem}; {fix}, or pass --require-durable-store to refuse such a store"),
    );
    receipt.warnings.push(Warning {
        kind: WarningKind::EphemeralStore,
        message: format!("{problem}; {fix}"),
    });
    Ok(())
}

/// A PostgreSQL store is one hosts share, so any of them may run a
/// window; a `file` destination is written on the disk of the host that
/// ran it, so a fleet's lines end up split over its hosts. Every receipt
/// says so; stderr says it once per job in a process (a daemon's or a
/// backfill's runs would repeat it at every window).
fn warn_local_destinations(job: &Job, receipt: &mut Receipt) {
    if let Some(message) = say_local_destinations(job) {
        receipt.warnings.push(Warning {
            kind: WarningKind::LocalDestination,
            message,
        });
    }
}

/// Says on stderr, the first time in this process for `job`, that its
/// file destinations are each host's own while its store is shared (see
/// [`warn_local_destinations`]); the message, whenever that is so. The
/// daemon says it at start-up, before any window runs.
pub fn say_local_destinations(job: &Job) -> Option<String> {
    let message = local_destinations(job)?;
    static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let mut said = SAID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let name = job.name().as_str();
    if !said.iter().any(|n| n == name) {
        said.push(name.to_string());
        crate::core::text::say("warning", &message);
    }
    Some(message)
}

/// What is wrong with a job whose store hosts share and which writes
/// files, and the fix; `None` when it is not such a job.
fn local_destinations(job: &Job) -> Option<String> {
    if !matches!(job.store, StoreLocation::Postgres(_)) {
        return None;
    }
    let files: Vec<String> = job
        .destinations
        .iter()
        .filter_map(|(name, d)| match &d.target {
            Target::File { path } => Some(format!("`{name}` (`{}`)", path.display())),
            Target::Http(_) => None,
        })
        .collect();
    if files.is_empty() {
        return None;
    }
    let (noun, verb) = if files.len() == 1 {
        ("destination", "is")
    } else {
        ("destinations", "are")
    };
    Some(format!(
        "job `{}` keeps its claims in the PostgreSQL store `{}`, which other hosts may share, \
         but its file {noun} {} {verb} written on the disk of whichever host runs a window, so \
         a fleet's lines are split over its hosts; deliver over HTTP (type = \"http\") or \
         write the file on storage every host mounts",
        job.name(),
        job.store,
        files.join(", ")
    ))
}

/// For the commands that open a job's store before running its windows
/// (`backfill`, `rerun`): refuses an ephemeral SQLite store, before it is
/// opened or created, when the job requires a durable one. (Each run they
/// make then warns as `run` does when it is not required.)
///
/// # Errors
///
/// `Error::Input` when the store is ephemeral and a durable one is required.
pub fn refuse_ephemeral_store(job: &Job) -> Result<()> {
    match ephemeral_problem(job) {
        Some((problem, fix)) if job.require_durable_store => Err(Error::input(format!(
            "{problem}; {fix} (refused because a durable store is required)"
        ))),
        _ => Ok(()),
    }
}

/// What is wrong with the job's store, and the fix, when it is a SQLite
/// store on a filesystem that dies with its machine or container.
fn ephemeral_problem(job: &Job) -> Option<(String, &'static str)> {
    let StoreLocation::Sqlite(path) = &job.store else {
        return None;
    };
    let fs = ephemeral_filesystem(path)?;
    let problem = format!(
        "store `{}` is on {}: {}, and with it every claim, so a later host would run \
         every window again",
        path.display(),
        fs.name(),
        fs.dies_with()
    );
    let fix = "put the store on a persistent volume, or use a PostgreSQL store \
               (--store postgres://...)";
    Some((problem, fix))
}

/// What is said of a store that was just created: nothing has run in it,
/// so a job that ran before used another store (the field report's
/// duplicate starts exactly like this).
pub fn store_created(store: &StoreLocation) -> String {
    format!(
        "created a new store `{store}`; nothing has run in it yet, so if this \
         job ran before, it kept its claims in another store: pass that one with --store (or \
         `store` in the job config) before its windows run twice"
    )
}
