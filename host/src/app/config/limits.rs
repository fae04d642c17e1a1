//! `[limits]` and `[params]`: what a job's guest may use and is given, and
//! how long its claim lasts. Every limit is checked against its range; a
//! value out of range is refused naming the key and the range, never
//! clamped.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::time::Duration;

use serde::Deserialize;

use crate::core::error::{Error, Result};
use crate::effects::destination::Destination;
use crate::effects::ping::Pings;
use crate::guest::journal::MAX_PLAIN;
use crate::guest::limits::{GuestLimits, GuestSettings, MAX_MEMORY_MIB, MAX_TIMEOUT_SECONDS};
use crate::guest::outbox::OutboxLimits;

/// The journal's limit when the config names none: room for about sixteen
/// million rows of the reference report's kind.
pub const DEFAULT_JOURNAL_BYTES: u64 = 256 << 20;

/// The smallest journal limit a config may ask for: room for the context
/// and a few answers.
const MIN_JOURNAL_BYTES: u64 = 64 << 10;

/// The longest lease, and the longest wait between attempts, a config may
/// ask for.
pub(crate) const MAX_LEASE_SECONDS: u64 = 7 * 86_400;

/// The most rows a batch may hold.
const MAX_BATCH_ROWS: u32 = 1 << 20;

/// The most messages a run may stage.
const MAX_MESSAGES: u32 = 100_000;

/// The largest message body: well under what one host call can carry.
const MAX_MESSAGE_BYTES: u64 = 64 << 20;

/// The most a run's messages may hold together: committed in one
/// transaction with the report.
const MAX_STAGED_BYTES: u64 = 1 << 30;

/// The largest report summary plus cursor.
const MAX_REPORT_BYTES: u64 = 64 << 20;

/// The most guest log shown, and guest stdout or stderr kept.
const MAX_SHOWN_BYTES: u64 = 16 << 20;

/// `[limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsFile {
    /// Guest memory, MiB (default 256).
    pub memory_mib: Option<u64>,
    /// Guest compute time, seconds (default 30).
    pub timeout_seconds: Option<f64>,
    /// Messages a run may stage (default 100).
    pub max_messages: Option<u32>,
    /// Bytes per message (default 4 MiB).
    pub max_message_bytes: Option<u64>,
    /// Bytes of report summary plus cursor (default 1 MiB).
    pub max_report_bytes: Option<u64>,
    /// Bytes of all of a run's messages together (default 16 MiB).
    pub max_staged_bytes: Option<u64>,
    /// Bytes of guest log messages shown (default 64 KiB).
    pub log_bytes: Option<u64>,
    /// Bytes of guest stdout and of stderr kept (default 64 KiB).
    pub output_bytes: Option<u64>,
    /// Rows per batch, at most (default 8192).
    pub batch_rows: Option<u32>,
    /// Seconds a claim stays live without renewal (default: the timeout plus 5 minutes).
    pub lease_seconds: Option<u64>,
    /// Bytes the run's journal may hold before the run is stopped
    /// (default 256 MiB).
    pub max_journal_bytes: Option<u64>,
}

/// `value`, or `default` when the key is not set, when it is within
/// `range`; else an error naming `limits.KEY` and the range.
fn within<T>(
    key: &str,
    value: Option<T>,
    default: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T>
where
    T: PartialOrd + Copy + std::fmt::Display,
{
    let v = value.unwrap_or(default);
    if range.contains(&v) {
        return Ok(v);
    }
    Err(Error::input(format!(
        "invalid `limits.{key} = {v}`: use {} to {}",
        range.start(),
        range.end()
    )))
}

/// The guest's settings from `[limits]` and `[params]`.
///
/// # Errors
///
/// `Error::Input` naming the key and its range, or the parameter.
pub fn guest(l: &LimitsFile, params: &BTreeMap<String, toml::Value>) -> Result<GuestSettings> {
    let timeout_s = l.timeout_seconds.unwrap_or(30.0);
    if !(timeout_s.is_finite() && timeout_s > 0.0 && timeout_s <= MAX_TIMEOUT_SECONDS as f64) {
        return Err(Error::input(format!(
            "invalid `limits.timeout_seconds = {timeout_s}`: use a number of seconds above 0 and \
             at most {MAX_TIMEOUT_SECONDS}"
        )));
    }
    let memory_mib = within("memory_mib", l.memory_mib, 256, 1..=MAX_MEMORY_MIB)?;
    let report_bytes = within(
        "max_report_bytes",
        l.max_report_bytes,
        1 << 20,
        1..=MAX_REPORT_BYTES,
    )?;
    // The journal starts with the context, which holds the cursor (up to
    // the report's limit).
    let journal_bytes = l.max_journal_bytes.unwrap_or(DEFAULT_JOURNAL_BYTES);
    let least = MIN_JOURNAL_BYTES + report_bytes;
    if !(least..=MAX_PLAIN).contains(&journal_bytes) {
        return Err(Error::input(format!(
            "invalid `limits.max_journal_bytes = {journal_bytes}`: use {least} (64 KiB more \
             than `limits.max_report_bytes`, which a cursor may fill) to {MAX_PLAIN} (1 GiB, \
             the most a replay reads)"
        )));
    }
    let message_bytes = within(
        "max_message_bytes",
        l.max_message_bytes,
        4 << 20,
        1..=MAX_MESSAGE_BYTES,
    )?;
    let staged = l.max_staged_bytes.unwrap_or((16 << 20).max(message_bytes));
    if !(message_bytes..=MAX_STAGED_BYTES).contains(&staged) {
        return Err(Error::input(format!(
            "invalid `limits.max_staged_bytes = {staged}`: use {message_bytes} (at least \
             `limits.max_message_bytes`, or no message fits) to {MAX_STAGED_BYTES}"
        )));
    }
    let shown = |key, v| within(key, v, 64 << 10, 0..=MAX_SHOWN_BYTES).map(|v| v as usize);
    Ok(GuestSettings {
        limits: GuestLimits {
            memory_bytes: (memory_mib as usize) << 20,
            timeout: Duration::from_secs_f64(timeout_s),
            output_bytes: shown("output_bytes", l.output_bytes)?,
            report_bytes: report_bytes as usize,
            journal_bytes,
        },
        outbox: OutboxLimits {
            max_messages: within("max_messages", l.max_messages, 100, 1..=MAX_MESSAGES)?,
            max_message_bytes: message_bytes,
            max_staged_bytes: staged,
        },
        log_bytes: shown("log_bytes", l.log_bytes)?,
        batch_rows: NonZeroU32::new(within(
            "batch_rows",
            l.batch_rows,
            8192,
            1..=MAX_BATCH_ROWS,
        )?)
        .ok_or_else(|| Error::input("invalid `limits.batch_rows = 0`: use 1 or more"))?,
        params: params_of(params)?,
    })
}

/// The guest's parameters, each a string.
fn params_of(params: &BTreeMap<String, toml::Value>) -> Result<Vec<(String, String)>> {
    params
        .iter()
        .map(|(k, v)| {
            let v = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(Error::input(format!(
                        "invalid `params.{k}`: use a string, number or boolean, not {}",
                        other.type_str()
                    )));
                }
            };
            Ok((k.clone(), v))
        })
        .collect()
}

/// How long a claim lasts unrenewed: `limits.lease_seconds`, else long
/// enough for the guest's run and a send with the longest wait before it,
/// with five minutes to spare. A lease is renewed before every send, so it
/// must cover the longer of the guest's run (with the start ping, sent
/// under the claim before the guest runs) and one send plus its wait.
///
/// # Errors
///
/// `Error::Input` for a lease too short to cover them, or over 7 days.
pub fn lease(
    l: &LimitsFile,
    timeout: Duration,
    pings: &Pings,
    destinations: &BTreeMap<String, Destination>,
) -> Result<Duration> {
    let send_window = destinations
        .values()
        .map(|d| d.retry.max_backoff + d.timeout())
        .max()
        .unwrap_or_default();
    let run_time = timeout + pings.start_budget();
    let must_outlive = run_time.max(send_window);
    match l.lease_seconds {
        Some(s) if Duration::from_secs(s) <= must_outlive => Err(Error::input(format!(
            "invalid `limits.lease_seconds = {s}`: a lease must outlive the guest's time limit \
             ({} s{}) and a destination's timeout plus its longest backoff ({} s); raise it \
             above {} s",
            timeout.as_secs_f64(),
            if pings.start_budget().is_zero() {
                String::new()
            } else {
                format!(
                    " plus {} s for the start ping",
                    pings.start_budget().as_secs_f64()
                )
            },
            send_window.as_secs_f64(),
            must_outlive.as_secs_f64()
        ))),
        Some(s) if s > MAX_LEASE_SECONDS => Err(Error::input(format!(
            "invalid `limits.lease_seconds = {s}`: at most {MAX_LEASE_SECONDS} (7 days), or a \
             crashed run would keep its window busy that long"
        ))),
        Some(s) => Ok(Duration::from_secs(s)),
        None => Ok(must_outlive + Duration::from_secs(300)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(text: &str) -> Result<GuestSettings> {
        let l: LimitsFile = toml::from_str(text).unwrap();
        guest(&l, &BTreeMap::new())
    }

    #[test]
    fn the_defaults_are_the_documented_ones() {
        let g = limits("").unwrap();
        assert_eq!(g.limits.memory_bytes, 256 << 20);
        assert_eq!(g.limits.timeout, Duration::from_secs(30));
        assert_eq!(g.limits.report_bytes, 1 << 20);
        assert_eq!(g.limits.journal_bytes, DEFAULT_JOURNAL_BYTES);
        assert_eq!(g.outbox.max_messages, 100);
        assert_eq!(g.outbox.max_message_bytes, 4 << 20);
        assert_eq!(g.outbox.max_staged_bytes, 16 << 20);
        assert_eq!((g.log_bytes, g.limits.output_bytes), (64 << 10, 64 << 10));
        assert_eq!(g.batch_rows.get(), 8192);
    }

    #[test]
    fn a_limit_out_of_range_is_refused_naming_the_key_and_the_range() {
        for (text, want) in [
            (
                "batch_rows = 0",
                "invalid `limits.batch_rows = 0`: use 1 to 1048576",
            ),
            (
                "batch_rows = 2000000",
                "`limits.batch_rows = 2000000`: use 1 to 1048576",
            ),
            (
                "max_messages = 0",
                "invalid `limits.max_messages = 0`: use 1 to 100000",
            ),
            (
                "max_message_bytes = 0",
                "`limits.max_message_bytes = 0`: use 1 to 67108864",
            ),
            (
                "max_report_bytes = 0",
                "`limits.max_report_bytes = 0`: use 1 to 67108864",
            ),
            (
                "log_bytes = 999999999",
                "`limits.log_bytes = 999999999`: use 0 to 16777216",
            ),
            (
                "output_bytes = 999999999",
                "`limits.output_bytes = 999999999`: use 0 to 16777216",
            ),
            ("memory_mib = 0", "`limits.memory_mib = 0`: use 1 to 4096"),
            (
                "max_message_bytes = 2000000\nmax_staged_bytes = 1000000",
                "`limits.max_staged_bytes = 1000000`: use 2000000 (at least `limits.max_message_bytes`",
            ),
            (
                "max_staged_bytes = 99999999999",
                "`limits.max_staged_bytes = 99999999999`: use 4194304",
            ),
        ] {
            let err = limits(text).unwrap_err();
            assert!(matches!(err, Error::Input(_)), "{text}: {err}");
            assert!(err.to_string().contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn a_message_limit_above_the_staged_default_raises_that_default_with_it() {
        let g = limits("max_message_bytes = 33554432").unwrap();
        assert_eq!(g.outbox.max_staged_bytes, 32 << 20);
    }

    #[test]
    fn the_edges_of_each_range_are_accepted() {
        let g =
            limits("batch_rows = 1\nmax_messages = 1\nlog_bytes = 0\noutput_bytes = 0").unwrap();
        assert_eq!(
            (g.batch_rows.get(), g.outbox.max_messages, g.log_bytes),
            (1, 1, 0)
        );
        let g = limits("batch_rows = 1048576\nmax_messages = 100000").unwrap();
        assert_eq!(g.batch_rows.get(), 1 << 20);
    }
}
