//! `/metrics`: per job, its windows by state, its last DONE window's end,
//! how late it is and whether it is healthy, from the same bounded reads
//! as the pages; inside the daemon also counters of runs by event and of
//! deliveries by destination and status, and a histogram of run
//! durations. Encoded by `prometheus-client`.

use std::time::Duration;

use jiff::Timestamp;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::Worker;
use super::pages::with_reads;
use crate::core::error::{Error, Result};
use crate::run::board::ReadCount;
use crate::run::receipt::Receipt;
use crate::run::status::{Health, status_bounded};
use crate::store::RunState;

// The job's label is `jobhost_job`, never `job`: Prometheus gives every
// scraped series a `job` label of its own (the scrape job's name), and
// renames an exported one to `exported_job` unless the scrape says
// `honor_labels`, which would make every rule that joins on it wrong.

/// A job's gauges, read from its store: the same on every host sharing
/// the store, so aggregated across hosts with `max`, never `sum`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreJob {
    jobhost_job: String,
    store: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreJobState {
    jobhost_job: String,
    store: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreJobHealth {
    jobhost_job: String,
    store: String,
    health: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreJobVerdict {
    jobhost_job: String,
    store: String,
    verdict: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StoreLabel {
    store: String,
}

/// What one daemon did: counted by the host that did it, so summed
/// across hosts.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct JobLabel {
    jobhost_job: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabel {
    jobhost_job: String,
    event: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeliveryLabel {
    jobhost_job: String,
    destination: String,
    status: String,
}

/// A run-duration histogram's buckets: 5 ms to about 3 min.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 16))
}

/// What the daemon counts as it runs (shared with the server's threads).
pub struct DaemonMetrics {
    runs: Family<RunLabel, Counter>,
    deliveries: Family<DeliveryLabel, Counter>,
    durations: Family<JobLabel, Histogram, fn() -> Histogram>,
}

impl Default for DaemonMetrics {
    fn default() -> DaemonMetrics {
        DaemonMetrics {
            runs: Family::default(),
            deliveries: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
        }
    }
}

impl DaemonMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "jobhost_runs",
            "Runs the daemon made, by job and receipt event",
            self.runs.clone(),
        );
        registry.register(
            "jobhost_deliveries",
            "Messages the daemon's runs handled, by job, destination and status",
            self.deliveries.clone(),
        );
        registry.register(
            "jobhost_run_duration_seconds",
            "How long each of the daemon's runs took, by job",
            self.durations.clone(),
        );
    }
}

impl crate::run::daemon::Observer for DaemonMetrics {
    fn ran(&self, job: &str, receipt: &Receipt, took: Duration) {
        self.runs
            .get_or_create(&RunLabel {
                jobhost_job: job.to_string(),
                event: receipt.event.as_str().to_string(),
            })
            .inc();
        for m in receipt.messages.iter().flatten() {
            let status = serde_json::to_value(m.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            self.deliveries
                .get_or_create(&DeliveryLabel {
                    jobhost_job: job.to_string(),
                    destination: m.destination.clone(),
                    status,
                })
                .inc();
        }
        self.durations
            .get_or_create(&JobLabel {
                jobhost_job: job.to_string(),
            })
            .observe(took.as_secs_f64());
    }
}

/// The metrics at `now`. A store that cannot be read costs only its own
/// jobs: they are exported as not up, the store as unreachable, and every
/// other job as usual.
///
/// # Errors
///
/// `Error::Host` when the text cannot be encoded.
pub(super) fn render(worker: &mut Worker, now: Timestamp) -> Result<String> {
    let mut registry = Registry::default();
    let windows = Family::<StoreJobState, Gauge>::default();
    let last_done = Family::<StoreJob, Gauge>::default();
    let late = Family::<StoreJob, Gauge>::default();
    let up = Family::<StoreJob, Gauge>::default();
    let health = Family::<StoreJobHealth, Gauge>::default();
    let holes = Family::<StoreJob, Gauge>::default();
    let stale = Family::<StoreJob, Gauge>::default();
    let shadows = Family::<StoreJobVerdict, Gauge>::default();
    let incidents = Family::<StoreJob, Gauge>::default();
    let undelivered = Family::<StoreJobState, Gauge>::default();
    let reachable = Family::<StoreLabel, Gauge>::default();
    let queries = Gauge::<i64>::default();
    let mut count = ReadCount::default();
    let settings = worker.settings.clone();
    // A store that failed once in this scrape is not tried again for its
    // other jobs (a database that is down costs one connect timeout).
    let mut down: Vec<String> = Vec::new();
    let listed = settings.listed();
    for j in &listed.jobs {
        let job = j.schedule.job.as_str().to_string();
        let store = j.location.to_string();
        let label = StoreJob {
            jobhost_job: job.clone(),
            store: store.clone(),
        };
        if down.contains(&store) {
            up.get_or_create(&label).set(0);
            continue;
        }
        let read = with_reads(worker, &j.location, &mut count, |r| match r {
            Some(r) => {
                let st = status_bounded(&j.schedule, now, Some(r))?;
                let counts = r.counts(&job, None, None)?;
                Ok((st, counts))
            }
            None => Ok((status_bounded(&j.schedule, now, None)?, Vec::new())),
        });
        let (st, counts) = match read {
            Ok(read) => read,
            Err(e) => {
                // Said once per scrape on stderr; the gauges say it to
                // Prometheus.
                let line = crate::core::text::printable(&e.chain()).into_owned();
                crate::core::text::say("error", &format!("metrics: job `{job}`: {line}"));
                reachable
                    .get_or_create(&StoreLabel {
                        store: store.clone(),
                    })
                    .set(0);
                up.get_or_create(&label).set(0);
                down.push(store);
                continue;
            }
        };
        reachable
            .get_or_create(&StoreLabel {
                store: store.clone(),
            })
            .set(1);
        for s in RunState::ALL {
            let n = counts.iter().find(|(c, _)| *c == s).map_or(0, |(_, n)| *n);
            windows
                .get_or_create(&StoreJobState {
                    jobhost_job: job.clone(),
                    store: store.clone(),
                    state: s.as_str().to_string(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        for h in Health::ALL {
            health
                .get_or_create(&StoreJobHealth {
                    jobhost_job: job.clone(),
                    store: store.clone(),
                    health: h.as_str().to_string(),
                })
                .set(i64::from(st.health == h));
        }
        if let Some(d) = &st.last_done {
            last_done
                .get_or_create(&label)
                .set(d.window_end.as_second());
        }
        late.get_or_create(&label).set(st.late_by.as_secs());
        up.get_or_create(&label)
            .set(i64::from(st.health == Health::Healthy));
        holes
            .get_or_create(&label)
            .set(i64::try_from(st.holes.count).unwrap_or(i64::MAX));
        let stale_windows: std::collections::BTreeSet<&str> =
            st.stale.iter().map(|m| m.key.as_str()).collect();
        stale
            .get_or_create(&label)
            .set(i64::try_from(stale_windows.len()).unwrap_or(i64::MAX));
        incidents
            .get_or_create(&label)
            .set(i64::try_from(st.incidents.len()).unwrap_or(i64::MAX));
        // Of the open incidents' notifications, those not sent: to be tried
        // again (`pending`) and given up (`failed`).
        for state in ["PENDING", "FAILED"] {
            let n = st
                .incidents
                .iter()
                .flat_map(|(_, told)| told)
                .filter(|n| n.state == state)
                .count();
            undelivered
                .get_or_create(&StoreJobState {
                    jobhost_job: job.clone(),
                    store: store.clone(),
                    state: state.to_ascii_lowercase(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        for (verdict, n) in st.shadow.iter().flat_map(|c| c.by_verdict()) {
            shadows
                .get_or_create(&StoreJobVerdict {
                    jobhost_job: job.clone(),
                    store: store.clone(),
                    verdict: verdict.to_string(),
                })
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
    }
    queries.set(i64::from(count.queries));
    let refused = Gauge::<i64>::default();
    refused.set(i64::try_from(listed.refused.len()).unwrap_or(i64::MAX));
    registry.register(
        "jobhost_job_files_refused",
        "Job files of the --jobs folder this host does not run (a config error, a duplicate job \
         name, a broken component); the dashboard lists them",
        refused,
    );
    registry.register(
        "jobhost_windows",
        "Windows the store holds for the job, by state (the same on every host sharing the \
         store: aggregate with max)",
        windows,
    );
    registry.register(
        "jobhost_last_done_window_end_seconds",
        "End of the job's newest DONE window, in Unix seconds",
        last_done,
    );
    registry.register(
        "jobhost_late_seconds",
        "How long the job's newest due window (or oldest hole) has been due without being DONE",
        late,
    );
    registry.register(
        "jobhost_up",
        "1 when the job is healthy as `jobhost status` says, else 0 (also 0 when its store \
         cannot be read)",
        up,
    );
    registry.register(
        "jobhost_health",
        "1 for the job's health as `jobhost status` says it (healthy, stale, paused, late, \
         failed), 0 for the others",
        health,
    );
    registry.register(
        "jobhost_holes",
        "Due windows of the job with no run that nothing will decide",
        holes,
    );
    registry.register(
        "jobhost_stale_windows",
        "DONE windows of the job whose answer may be wrong now (an upstream window they used \
         got a new revision), up to 200",
        stale,
    );
    registry.register(
        "jobhost_shadow_runs",
        "Runs of the job's [shadow] candidate beside its live runs (current revisions), by \
         verdict: agreed, differed, failed",
        shadows,
    );
    registry.register(
        "jobhost_incidents_open",
        "The job's open incidents ([[notify]]: failed, abandoned, late, stale, paused)",
        incidents,
    );
    registry.register(
        "jobhost_notifications_undelivered",
        "Notifications of the job's open incidents not sent, by state: pending (to be tried \
         again) or failed (given up: that [[notify]] target was not told)",
        undelivered,
    );
    registry.register(
        "jobhost_store_up",
        "1 when this scrape read the store, 0 when it could not",
        reachable,
    );
    registry.register(
        "jobhost_scrape_store_queries",
        "Store queries this scrape made",
        queries,
    );
    if let Some(d) = &settings.daemon {
        d.register(&mut registry);
    }
    // This process's trace export (`[telemetry]`), when it has one: what
    // the receiver took and what was dropped (a full queue, a batch the
    // receiver did not take). Never a run's cost: export does not wait.
    let (exported, dropped) = (Counter::<u64>::default(), Counter::<u64>::default());
    exported.inc_by(crate::effects::telemetry::exported());
    dropped.inc_by(crate::effects::telemetry::dropped());
    registry.register(
        "jobhost_trace_spans_exported",
        "Spans of this process's runs the OTLP receiver ([telemetry]) took",
        exported,
    );
    registry.register(
        "jobhost_trace_spans_dropped",
        "Spans of this process's runs dropped, never sent: the export queue was full or the \
         OTLP receiver did not take their batch",
        dropped,
    );
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .map_err(|e| Error::host("cannot encode the metrics").because(e))?;
    Ok(out)
}
