//! Jobs that build on jobs (`[[needs]]`): a window of a job that needs
//! upstream jobs runs only once every upstream window it covers is DONE.
//! Which upstream windows a window covers: every window of the upstream
//! job that overlaps it, in the upstream's own kind and zone (a day of a
//! daily job needs the 24 hours of an hourly one, a week needs 7 days, a
//! month its days, a window of the same size the one window; a day of a
//! job that needs a weekly one needs the week around it).
//!
//! The upstream's kind and zone are read from its newest row in the
//! store, so a job needs only the upstream's name, whichever host or file
//! runs it; an upstream with no row yet has run nothing a window could
//! use. What is missing is said by key and state, in the receipt, in the
//! WAITING row's words and on every page that shows it.

use std::collections::HashMap;

use jiff::Timestamp;
use serde::Serialize;

use crate::core::error::{Error, Result};
use crate::core::window::{JobName, MINUTES, Window, WindowKind, Zone};
use crate::guest::source::{Cell, ColumnInfo, ColumnKind, Table};
use crate::store::{Ledger, RangeQuery, RunRecord, RunState};

/// The most windows of one upstream job one window may need (a quarter
/// of 15-minute windows is 8,832): past it the upstream's windows are too
/// small to wait on one by one.
pub const MOST_NEEDED: usize = 10_000;

/// How soon the daemon looks again at a window WAITING for its upstream
/// when the upstream runs elsewhere (another host of a fleet, or `jobhost
/// run`); an upstream the same daemon runs wakes it at once.
pub const WAITING_POLL: std::time::Duration = std::time::Duration::from_secs(10);

/// How many missing upstream windows the words of a wait name; the rest
/// are counted.
const NAMED: usize = 3;

/// One upstream window a window needs that is not DONE.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Missing {
    /// The upstream window's key.
    pub key: String,
    /// Where it stands (`None`: no row, it has not run).
    pub state: Option<RunState>,
}

/// How many missing upstream windows a receipt lists.
pub const LISTED: usize = 100;

/// What a WAITING window waits for, as a receipt gives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitsFor {
    /// Upstream windows not DONE, oldest first, at most [`LISTED`].
    pub windows: Vec<Missing>,
    /// How many there are in all.
    pub count: usize,
    /// Upstream jobs that have no row in the store at all.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub jobs_never_run: Vec<String>,
}

/// One upstream window a window used: DONE, at this revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Used {
    /// The upstream job.
    pub job: String,
    /// The upstream window's key.
    pub key: String,
    /// Its revision when the window was checked.
    pub revision: u32,
    /// Its bounds.
    pub start: Timestamp,
    /// Its bounds.
    pub end: Timestamp,
    /// Its committed report (`None` if the store holds none).
    pub report: Option<String>,
}

impl Used {
    /// `sha256:<hex>` of the report as committed (of nothing, without one).
    pub fn report_digest(&self) -> String {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(self.report.as_deref().unwrap_or("").as_bytes());
        format!("sha256:{}", hex::encode(digest))
    }
}

/// The upstream windows a window used, as its guest reads them from an
/// upstream source: one row per window, in the order of `[[needs]]`, then
/// of the windows, with the columns `job`, `key`, `label`, `revision`,
/// `window_start` and `window_end` (Unix seconds, the end exclusive) and
/// `report` (the committed report's text).
pub fn table(done: &[Used]) -> Table {
    let column = |name: &str, kind| ColumnInfo {
        name: name.to_string(),
        kind,
    };
    Table {
        location: "the upstream jobs' reports".to_string(),
        columns: vec![
            column("job", ColumnKind::Text),
            column("key", ColumnKind::Text),
            column("label", ColumnKind::Text),
            column("revision", ColumnKind::Integer),
            column("window_start", ColumnKind::Integer),
            column("window_end", ColumnKind::Integer),
            column("report", ColumnKind::Text),
        ],
        rows: done
            .iter()
            .map(|u| {
                let label = u.key.split_once(':').map_or("", |(_, l)| l).to_string();
                vec![
                    Cell::Text(u.job.clone()),
                    Cell::Text(u.key.clone()),
                    Cell::Text(label),
                    Cell::Integer(i64::from(u.revision)),
                    Cell::Integer(u.start.as_second()),
                    Cell::Integer(u.end.as_second()),
                    u.report.clone().map_or(Cell::Null, Cell::Text),
                ]
            })
            .collect(),
    }
}

/// What a window's needs come to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// Upstream jobs that have no row at all.
    pub never_ran: Vec<JobName>,
    /// Upstream windows that are not DONE, in order.
    pub missing: Vec<Missing>,
    /// Upstream windows that are DONE, in order.
    pub done: Vec<Used>,
}

impl Needs {
    /// What a window needs of `jobs` when none of them has run (before
    /// the store exists).
    pub fn never_ran(jobs: &[JobName]) -> Needs {
        Needs {
            never_ran: jobs.to_vec(),
            ..Needs::default()
        }
    }

    /// Whether every upstream window is DONE.
    pub fn met(&self) -> bool {
        self.never_ran.is_empty() && self.missing.is_empty()
    }

    /// What the window waits for, as a receipt gives it.
    pub fn waits_for(&self) -> WaitsFor {
        WaitsFor {
            windows: self.missing.iter().take(LISTED).cloned().collect(),
            count: self.missing.len(),
            jobs_never_run: self.never_ran.iter().map(ToString::to_string).collect(),
        }
    }

    /// What the window waits for, in words: the upstream jobs with no run
    /// and the first missing windows with their states.
    pub fn words(&self) -> String {
        let mut parts: Vec<String> = self
            .never_ran
            .iter()
            .map(|j| format!("`{j}`, which has no window in the store yet"))
            .collect();
        parts.extend(self.missing.iter().take(NAMED).map(|m| {
            format!(
                "`{}` ({})",
                m.key,
                m.state.map_or("not run yet", RunState::as_str)
            )
        }));
        let more = self.missing.len().saturating_sub(NAMED);
        let mut text = parts.join(", ");
        if more > 0 {
            text.push_str(&format!(" and {more} more upstream window(s)"));
        }
        text
    }
}

/// What `window` needs of the upstream jobs `needs`, as `store` holds it
/// now: two bounded reads per upstream job (its newest row, then its
/// windows that overlap `window`).
///
/// # Errors
///
/// `Error::Store` when the store cannot be read; `Error::Input` when an
/// upstream's windows are so much smaller than `window` that more than
/// [`MOST_NEEDED`] of them would be needed.
pub fn check(store: &mut dyn Ledger, window: &Window, needs: &[JobName]) -> Result<Needs> {
    let mut all = check_each(store, std::slice::from_ref(window), needs)?;
    Ok(all.pop().unwrap_or_default())
}

/// [`check`] of each of `windows` (of one job), reading each upstream
/// job's newest row once: one read per upstream job, and one per window
/// and upstream job.
///
/// # Errors
///
/// As [`check`].
pub fn check_each(
    store: &mut dyn Ledger,
    windows: &[Window],
    needs: &[JobName],
) -> Result<Vec<Needs>> {
    let mut out: Vec<Needs> = windows.iter().map(|_| Needs::default()).collect();
    let Some(first) = windows.first() else {
        return Ok(out);
    };
    for upstream in needs {
        let Some(newest) = store.newest(Some(upstream.as_str()), 1)?.into_iter().next() else {
            for n in &mut out {
                n.never_ran.push(upstream.clone());
            }
            continue;
        };
        let Some((kind, zone)) = kind_of(upstream, &newest) else {
            return Err(Error::input(format!(
                "job `{}` needs `{upstream}`, whose newest window `{}` is of no kind jobhost \
                 knows; run `{upstream}` once with its current config",
                first.job, newest.key
            )));
        };
        for (window, out) in windows.iter().zip(&mut out) {
            let wanted = overlapping(upstream, kind, &zone, window)?;
            let rows = store.runs_in_range(&RangeQuery {
                job: upstream.as_str(),
                from: wanted.first().map(|w| w.start),
                until: Some(window.end),
                states: &[],
                oldest_first: true,
                limit: wanted.len().saturating_mul(2).saturating_add(16),
            })?;
            let by_key: HashMap<&str, &RunRecord> =
                rows.iter().map(|r| (r.key.as_str(), r)).collect();
            for w in &wanted {
                let key = w.key();
                match by_key.get(key.as_str()) {
                    Some(r) if r.state == RunState::Done => out.done.push(Used {
                        job: upstream.to_string(),
                        key: key.to_string(),
                        revision: r.revision,
                        start: r.window_start,
                        end: r.window_end,
                        report: r.report.as_ref().map(|rep| rep.summary.clone()),
                    }),
                    row => out.missing.push(Missing {
                        key: key.to_string(),
                        state: row.map(|r| r.state),
                    }),
                }
            }
        }
    }
    Ok(out)
}

/// The kind and zone of `row`'s window, as its job's config made it.
fn kind_of(job: &JobName, row: &RunRecord) -> Option<(WindowKind, Zone)> {
    let zone = Zone::new(&row.timezone).ok()?;
    let kinds = MINUTES.iter().map(|n| WindowKind::Minutes(*n)).chain([
        WindowKind::Hour,
        WindowKind::Day,
        WindowKind::Week,
        WindowKind::Month,
        WindowKind::Quarter,
    ]);
    for kind in kinds {
        let Ok(w) = Window::containing(job, kind, &zone, row.window_start) else {
            continue;
        };
        if w.start == row.window_start && w.end == row.window_end && w.key() == row.key {
            return Some((kind, zone));
        }
    }
    None
}

/// The windows of `job` (of `kind` in `zone`) that overlap `window`, in
/// order.
fn overlapping(
    job: &JobName,
    kind: WindowKind,
    zone: &Zone,
    window: &Window,
) -> Result<Vec<Window>> {
    let mut out = Vec::new();
    let mut w = Window::containing(job, kind, zone, window.start)?;
    while w.start < window.end {
        if out.len() == MOST_NEEDED {
            return Err(Error::input(format!(
                "job `{}` needs `{job}`, whose {kind} windows are too small to wait on one by \
                 one: window `{}` would need more than {MOST_NEEDED} of them; make the upstream \
                 a larger window, or have the job need a job that sums it up",
                window.job,
                window.key()
            )));
        }
        let next = w.next()?;
        out.push(w);
        w = next;
    }
    Ok(out)
}

/// The first cycle among `jobs`' needs (each job's name with the names it
/// needs), as the names along it from a job back to itself; `None` when
/// there is none. Needs of jobs not in the list are not followed: they are
/// another set's to check.
pub fn cycle(jobs: &[(JobName, Vec<JobName>)]) -> Option<Vec<JobName>> {
    let needs: HashMap<&JobName, &Vec<JobName>> = jobs.iter().map(|(j, n)| (j, n)).collect();
    // 0: not seen, 1: on the path, 2: done.
    let mut mark: HashMap<&JobName, u8> = HashMap::new();
    for (start, _) in jobs {
        if mark.get(start).copied().unwrap_or(0) != 0 {
            continue;
        }
        // An explicit stack of (job, index of the next need to follow).
        let mut path: Vec<(&JobName, usize)> = vec![(start, 0)];
        mark.insert(start, 1);
        while let Some((job, i)) = path.last_mut() {
            let job: &JobName = job;
            let next = needs.get(job).and_then(|n| n.get(*i));
            *i += 1;
            match next {
                None => {
                    mark.insert(job, 2);
                    path.pop();
                }
                Some(up) if !needs.contains_key(up) => {}
                Some(up) => match mark.get(up).copied().unwrap_or(0) {
                    0 => {
                        mark.insert(up, 1);
                        path.push((up, 0));
                    }
                    1 => {
                        let from = path.iter().position(|(j, _)| *j == up).unwrap_or(0);
                        let mut names: Vec<JobName> =
                            path[from..].iter().map(|(j, _)| (*j).clone()).collect();
                        names.push(up.clone());
                        return Some(names);
                    }
                    _ => {}
                },
            }
        }
    }
    None
}

/// The jobs among `jobs` (each job's name with the names it needs) that
/// need `name`, directly or through others, as indices into `jobs`, each
/// after every one of them it needs: the order their stale windows are
/// rerun in, so that a rerun's dependents are rerun after it. Jobs of a
/// cycle are left out (a daemon refuses them).
pub fn downstream_order(name: &JobName, jobs: &[(JobName, Vec<JobName>)]) -> Vec<usize> {
    // Every job reached from `name` through needs turned around.
    let mut reached: std::collections::HashSet<&JobName> = std::collections::HashSet::new();
    let mut todo = vec![name];
    while let Some(up) = todo.pop() {
        for (job, needs) in jobs {
            if needs.contains(up) && job != name && reached.insert(job) {
                todo.push(job);
            }
        }
    }
    // Kahn's order over those: a job goes once all it needs among them did.
    let mut order = Vec::new();
    let mut done: std::collections::HashSet<&JobName> = std::collections::HashSet::new();
    loop {
        let next = jobs.iter().enumerate().find(|(_, (job, needs))| {
            reached.contains(job)
                && !done.contains(job)
                && needs
                    .iter()
                    .all(|n| !reached.contains(n) || done.contains(n))
        });
        match next {
            Some((i, (job, _))) => {
                done.insert(job);
                order.push(i);
            }
            None => break,
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> JobName {
        JobName::new(s).unwrap()
    }

    #[test]
    fn a_week_needs_the_seven_days_and_a_day_the_week_around_it() {
        let utc = Zone::utc();
        let week = Window::labelled(&name("weekly"), WindowKind::Week, &utc, "2026-W45").unwrap();
        let days = overlapping(&name("daily"), WindowKind::Day, &utc, &week).unwrap();
        let labels: Vec<&str> = days.iter().map(|w| w.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "2026-11-02",
                "2026-11-03",
                "2026-11-04",
                "2026-11-05",
                "2026-11-06",
                "2026-11-07",
                "2026-11-08"
            ]
        );
        let day = Window::labelled(&name("daily"), WindowKind::Day, &utc, "2026-11-04").unwrap();
        let weeks = overlapping(&name("weekly"), WindowKind::Week, &utc, &day).unwrap();
        assert_eq!(weeks.len(), 1);
        assert_eq!(weeks[0].label, "2026-W45");
        // A day in another zone overlaps two UTC days.
        let paris = Zone::new("Europe/Paris").unwrap();
        let local =
            Window::labelled(&name("paris"), WindowKind::Day, &paris, "2026-11-04").unwrap();
        let utc_days = overlapping(&name("daily"), WindowKind::Day, &utc, &local).unwrap();
        let labels: Vec<&str> = utc_days.iter().map(|w| w.label.as_str()).collect();
        assert_eq!(labels, ["2026-11-03", "2026-11-04"]);
        // A day of a fall-back night has 25 hours.
        let ny = Zone::new("America/New_York").unwrap();
        let long = Window::labelled(&name("d"), WindowKind::Day, &ny, "2026-11-01").unwrap();
        assert_eq!(
            overlapping(&name("h"), WindowKind::Hour, &ny, &long)
                .unwrap()
                .len(),
            25
        );
    }

    #[test]
    fn a_row_tells_its_window_kind() {
        for (kind, label) in [
            (WindowKind::Day, "2026-11-04"),
            (WindowKind::Week, "2026-W45"),
            (WindowKind::Month, "2026-11"),
            (WindowKind::Quarter, "2026-Q4"),
            (WindowKind::Hour, "2026-11-04T13:00+00:00"),
            (WindowKind::Minutes(15), "2026-11-04T13:15+00:00"),
        ] {
            let w = Window::labelled(&name("up"), kind, &Zone::utc(), label).unwrap();
            let row = RunRecord {
                key: w.key(),
                job: "up".into(),
                window_start: w.start,
                window_end: w.end,
                timezone: "UTC".into(),
                state: RunState::Done,
                fence: crate::store::Fence(1),
                attempt: 1,
                owner: "host".into(),
                lease_until: w.end,
                retry_at: None,
                component: String::new(),
                report: None,
                error: None,
                skip_reason: None,
                journal_bytes: None,
                messages: 0,
                delivered: 0,
                created_at: w.end,
                updated_at: w.end,
                digest: None,
                revision: 1,
                reason: None,
                pruned_at: None,
            };
            assert_eq!(
                kind_of(&name("up"), &row).map(|(k, _)| k),
                Some(kind),
                "{label}"
            );
        }
    }

    #[test]
    fn jobs_that_need_a_job_come_after_every_job_they_need() {
        // daily <- weekly <- monthly, daily <- monthly, other alone.
        let jobs = vec![
            (name("monthly"), vec![name("weekly"), name("daily")]),
            (name("other"), vec![]),
            (name("weekly"), vec![name("daily")]),
            (name("daily"), vec![]),
        ];
        let order: Vec<&str> = downstream_order(&name("daily"), &jobs)
            .into_iter()
            .map(|i| jobs[i].0.as_str())
            .collect();
        assert_eq!(order, ["weekly", "monthly"]);
        assert!(downstream_order(&name("monthly"), &jobs).is_empty());
    }

    #[test]
    fn a_cycle_is_named_from_a_job_back_to_itself() {
        let jobs = vec![
            (name("a"), vec![name("b")]),
            (name("b"), vec![name("c"), name("elsewhere")]),
            (name("c"), vec![name("a")]),
            (name("d"), vec![name("a")]),
        ];
        let names: Vec<String> = cycle(&jobs)
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(names, ["a", "b", "c", "a"]);
        let fine = vec![
            (name("a"), vec![name("b"), name("c")]),
            (name("b"), vec![name("c")]),
            (name("c"), vec![]),
        ];
        assert_eq!(cycle(&fine), None);
    }
}
