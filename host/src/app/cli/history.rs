//! `jobhost history`: what the claim store holds, as a table or JSON lines,
//! one window in detail (`history KEY`, through `app::detail`), and the
//! audit lines (`--all`).

use std::io::Write;
use std::path::PathBuf;

use super::{Out, written};
use crate::app::args::store_location;
use crate::app::config::{JobConfig, RunFlags};
use crate::app::detail::human_bytes;
use crate::core::clock::rfc3339;
use crate::core::command::Target;
use crate::core::error::Error;
use crate::core::text::printable;
use crate::run::board::DigestFacts;
use crate::run::outputs::HistoryRow;
use crate::store::{self, RunRecord};

/// `jobhost history`.
#[derive(Debug, clap::Args)]
pub(super) struct HistoryArgs {
    /// One window in detail: every revision and attempt, each message, the
    /// digest, the journal and the component.
    #[arg(value_name = "KEY")]
    key: Option<String>,
    /// Also the audit lines: what people did on purpose (forget, rerun,
    /// retry, pause, resume, prune), who and why.
    #[arg(long)]
    all: bool,
    /// The claim store: a SQLite file or a postgres:// URL [default: $JOBHOST_STORE, else the store of --config, else ~/.local/state/jobhost/jobhost.db].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// Where runs' digests are looked up [default: the cache of the job
    /// --config names, else digests/ in $JOBHOST_CACHE_DIR, $XDG_CACHE_HOME/jobhost or ~/.cache/jobhost].
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    digest_cache: Option<PathBuf>,
    /// A job config: its store (unless --store names one) and its digest
    /// cache (`digest.cache_dir`, or its `cache_dir`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Only this job's runs.
    #[arg(long, value_name = "NAME")]
    job: Option<String>,
    /// Only the newest N windows.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
}

impl HistoryArgs {
    /// How the commands this prints name the store.
    pub(super) fn target(&self) -> Target {
        crate::app::config::command_target(self.store.as_deref(), self.config.as_deref())
    }
}

/// Prints what the store holds: 0, or the error.
pub(super) fn main(args: HistoryArgs) -> Result<i32, Error> {
    let location = store_location(args.store, args.config.as_deref())?;
    let mut store = store::open_read_only(&location)?;
    let runs = match (&args.key, args.limit) {
        (Some(_), _) => Vec::new(),
        // Newest window first: the newest N, read as N rows.
        (None, Some(n)) => store.newest(args.job.as_deref(), n)?,
        (None, None) => store.history(args.job.as_deref())?,
    };
    let from_config = match &args.config {
        Some(file) => JobConfig::load(&RunFlags {
            config: Some(file.clone()),
            ..RunFlags::default()
        })?
        .digest_cache_dir(),
        None => None,
    };
    let cache = args
        .digest_cache
        .or(from_config)
        .or_else(|| {
            std::env::var_os("JOBHOST_CACHE_DIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(crate::guest::cache::CompileCache::default_dir)
                .map(|d| crate::effects::digest::digest_dir(&d))
        })
        .map(crate::effects::digest::cache::DigestCache::new);
    let mut out = Out::stdout();
    if let Some(key) = &args.key {
        let key = crate::run::operate::typed_key(key)?;
        let mut reads = crate::run::reads::Reads::new(store.as_mut());
        let target = crate::core::command::process_target();
        let detail = crate::run::board::run_detail(&key, &mut reads, cache.as_ref(), &target)?
            .ok_or_else(|| store::no_such_run(&key))?;
        if args.json {
            super::write_json(&mut out, &detail)?;
        } else {
            crate::app::detail::show(&detail, &mut out).map_err(written)?;
        }
        if args.all {
            let lines: Vec<_> = store
                .audit(None)?
                .into_iter()
                .filter(|a| a.key.as_deref() == Some(key.as_str()))
                .collect();
            audit(&lines, args.json, &mut out)?;
        }
        return Ok(0);
    }
    // Stale marks, read once for the rows listed.
    let mut stale: std::collections::HashMap<String, Vec<String>> =
        std::collections::HashMap::new();
    if !runs.is_empty() {
        for m in store.stale(args.job.as_deref(), None, STALE_READ)? {
            stale.entry(m.key.to_string()).or_default().push(m.cause);
        }
    }
    if args.json {
        for r in &runs {
            if out.closed() {
                break;
            }
            let row = HistoryRow {
                stale: stale.get(r.key.as_str()).cloned().unwrap_or_default(),
                ..HistoryRow::of(r, cache.as_ref())
            };
            super::write_json(&mut out, &row)?;
        }
    } else {
        write_table(&mut out, &runs, &stale, cache.as_ref()).map_err(written)?;
    }
    if args.all && !out.closed() {
        let lines = store.audit(args.job.as_deref())?;
        audit(&lines, args.json, &mut out)?;
    }
    Ok(0)
}

/// The audit lines, one JSON object each or as text.
fn audit(lines: &[crate::store::AuditLine], json: bool, out: &mut Out) -> Result<(), Error> {
    if !json {
        return crate::app::detail::audit(lines, out).map_err(written);
    }
    for a in lines {
        super::write_json(out, &crate::run::outputs::AuditEntry::of(a))?;
    }
    Ok(())
}

/// A run's digest in a table cell: its status and the start of its text.
fn digest_cell(
    r: &RunRecord,
    cache: Option<&crate::effects::digest::cache::DigestCache>,
) -> String {
    let Some(DigestFacts {
        status,
        text,
        error,
        ..
    }) = crate::run::board::digest_facts(r, cache)
    else {
        return String::new();
    };
    let mut status = status.to_string();
    if status != "failed" && error.is_some() {
        status.push_str(" (the last try failed)");
    }
    match text {
        Some(text) => {
            // The start of a model's text (the table escapes it, as every
            // cell).
            let short: String = text.chars().take(40).collect();
            let more = if text.chars().count() > 40 { "…" } else { "" };
            format!("{status}: {short}{more}")
        }
        None => status,
    }
}

/// The most stale marks `history` reads.
const STALE_READ: usize = 100_000;

fn write_table(
    out: &mut impl Write,
    runs: &[RunRecord],
    stale: &std::collections::HashMap<String, Vec<String>>,
    cache: Option<&crate::effects::digest::cache::DigestCache>,
) -> std::io::Result<()> {
    if runs.is_empty() {
        return writeln!(out, "no runs recorded");
    }
    // Every cell is escaped: errors and reasons quote guests and
    // destinations, and a store is a file anyone with access can edit.
    let rows: Vec<[String; 13]> = runs
        .iter()
        .map(|r| {
            let component = r.component.strip_prefix("sha256:").unwrap_or(&r.component);
            let component = if component.is_empty() {
                "-".to_string()
            } else {
                format!("sha256:{}", component.chars().take(12).collect::<String>())
            };
            [
                r.key.to_string(),
                rfc3339(r.window_start),
                rfc3339(r.window_end),
                if stale.contains_key(r.key.as_str()) {
                    format!("{} (STALE)", r.state)
                } else {
                    r.state.to_string()
                },
                r.revision.to_string(),
                if matches!(r.state, store::RunState::Skipped | store::RunState::Waiting) {
                    "-".to_string()
                } else {
                    rfc3339(r.updated_at)
                },
                r.attempt.to_string(),
                r.fence.to_string(),
                format!("{}/{}", r.delivered, r.messages),
                component,
                r.journal_bytes.map(human_bytes).unwrap_or_default(),
                digest_cell(r, cache),
                r.skip_reason
                    .clone()
                    .or_else(|| r.error.clone())
                    .unwrap_or_default(),
            ]
            .map(|cell| printable(&cell).into_owned())
        })
        .collect();
    let header = [
        "KEY",
        "START",
        "END",
        "STATE",
        "REV",
        "RAN",
        "ATTEMPT",
        "FENCE",
        "SENT",
        "COMPONENT",
        "JOURNAL",
        "DIGEST",
        "DETAIL",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[&str]| {
        let mut s = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = widths[i]));
            }
        }
        s.trim_end().to_string()
    };
    writeln!(out, "{}", line(&header))?;
    for row in &rows {
        let cells: Vec<&str> = row.iter().map(String::as_str).collect();
        writeln!(out, "{}", line(&cells))?;
    }
    Ok(())
}
