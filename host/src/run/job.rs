//! What running one job needs, gathered from each capability's settings:
//! when it runs (the schedule and its catch-up policy), which component
//! and cache, which store, the guest's settings, the destinations, the
//! retry policy, the lease, the pings and the digest model. The `app`
//! layer builds a [`Job`] from a config file only for the commands that
//! run one (`run`, `daemon`); the commands that only read take the parts
//! they read.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::core::command::Target;
use crate::core::redact::Redactor;
use crate::core::schedule::{CatchUp, Schedule};
use crate::core::window::JobName;
use crate::effects::delivery::DeliverySettings;
use crate::effects::destination::Destination;
use crate::effects::digest::DigestSettings;
use crate::effects::ping::Pings;
use crate::guest::limits::GuestSettings;
use crate::guest::source::Source;
use crate::store::{Attempts, StoreLocation};

/// One job, ready to run.
#[derive(Debug, Clone)]
pub struct Job {
    /// When its windows are due (and the job's name).
    pub schedule: Schedule,
    /// What happens to windows missed while nothing ran them.
    pub catch_up: CatchUp,
    /// The component file.
    pub component: PathBuf,
    /// Compiled-code cache folder (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// The claim store.
    pub store: StoreLocation,
    /// Refuse an ephemeral SQLite store instead of warning about it.
    pub require_durable_store: bool,
    /// The data source.
    pub source: Option<Source>,
    /// The guest's limits, outbox, log budget, batch size and parameters.
    pub guest: GuestSettings,
    /// Destinations by name.
    pub destinations: BTreeMap<String, Destination>,
    /// Every credential the job's settings hold, to scrub from messages.
    pub redactor: Redactor,
    /// How many attempts a window gets, and the waits between them.
    pub attempts: Attempts,
    /// How long a claim lasts unrenewed.
    pub lease: Duration,
    /// URLs pinged when a run starts, succeeds or fails.
    pub pings: Pings,
    /// Who hears of the job's trouble (`[[notify]]`).
    pub notify: crate::effects::notify::NotifySettings,
    /// Pause the job after this many windows in a row end FAILED or
    /// ABANDONED (`pause_after_failures`).
    pub pause_after_failures: Option<u32>,
    /// The language model that writes a digest of each DONE run, if any.
    pub digest: Option<DigestSettings>,
    /// What the daemon prunes once a day (`[retention]`), if anything.
    pub retention: Option<Retention>,
    /// Upstream jobs in the same store whose windows a window of this job
    /// needs DONE before it runs (`[[needs]]`; see [`crate::run::needs`]).
    pub needs: Vec<JobName>,
    /// How far back the daemon reads DONE windows' sources again to find
    /// rows that changed after their run (`[freshness] recheck`).
    pub recheck: Option<Duration>,
    /// A candidate component run after each live run on its journaled
    /// input, its output stored beside the live one and never delivered
    /// (`[shadow]`).
    pub shadow: Option<PathBuf>,
    /// How the commands printed for this job name it (`--config FILE`),
    /// so that they paste.
    pub target: Target,
}

/// `[retention]`: the journals and delivered message bodies of DONE runs
/// whose window ended longer ago than `older_than` are dropped by the
/// daemon once a day (the rows stay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// The age past which a DONE run is pruned.
    pub older_than: Duration,
    /// Keep journals, drop only delivered bodies.
    pub keep_journals: bool,
}

impl Job {
    /// The job's name.
    pub fn name(&self) -> &JobName {
        &self.schedule.job
    }

    /// What delivering the job's messages needs of it.
    pub fn delivery(&self) -> DeliverySettings<'_> {
        DeliverySettings {
            destinations: &self.destinations,
            redactor: &self.redactor,
            lease: self.lease,
            attempts: self.attempts,
        }
    }

    /// The job's destination names, sorted.
    pub fn destination_names(&self) -> Vec<String> {
        self.destinations.keys().cloned().collect()
    }
}
