//! `[destinations.NAME]`: where a job's messages go. A destination's
//! `${VAR}`s are filled in only when a command needs the destination (a
//! run, or `jobhost digest` for the digest's own).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::core::env::{Env, expand};
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::effects::destination::{DeliveryMode, Destination, HttpTarget, RetryPolicy, Target};
use crate::effects::tls::{Roots, Trust};

/// Every destination in `written`, validated and its `${VAR}`s filled in
/// from `env` (their values go to `redactor`); `from_file` makes a path
/// relative to the config's folder.
///
/// # Errors
///
/// `Error::Input` naming the destination and the field.
pub fn destinations(
    written: &BTreeMap<String, DestinationFile>,
    from_file: &dyn Fn(&Path) -> PathBuf,
    env: &Env<'_>,
    redactor: &mut Redactor,
) -> Result<BTreeMap<String, Destination>> {
    let mut destinations = BTreeMap::new();
    for (name, d) in written {
        destinations.insert(
            name.clone(),
            destination(name, d, from_file, env, redactor)?,
        );
    }
    Ok(destinations)
}

/// `[destinations.NAME]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, tag = "type", rename_all = "lowercase")]
pub enum DestinationFile {
    /// Append JSON lines to a file.
    File {
        /// The file.
        path: PathBuf,
        /// `at-least-once` (default) or `at-most-once`.
        delivery: Option<DeliveryMode>,
    },
    /// POST each message to a URL.
    Http {
        /// `http://` or `https://` URL; `${VAR}` takes a value from the
        /// host's environment.
        url: String,
        /// Extra request headers; `${VAR}` as in `url`.
        #[serde(default)]
        headers: BTreeMap<String, String>,
        /// `at-least-once` (default) or `at-most-once`.
        delivery: Option<DeliveryMode>,
        /// Seconds one request may take, connection included (default 30).
        timeout_seconds: Option<f64>,
        /// Sends of one message per invocation, the first included (default 5).
        tries: Option<u32>,
        /// Seconds before the second send; doubled for each later one, with
        /// full jitter (default 1).
        backoff_seconds: Option<f64>,
        /// The longest wait between two sends, `Retry-After` included
        /// (default 60).
        max_backoff_seconds: Option<f64>,
        /// Whom an `https://` URL trusts.
        tls: Option<TlsFile>,
        /// At most this many sends of one host to this URL at once.
        max_concurrent: Option<i64>,
        /// At most this many sends of one host to this URL a second.
        max_per_second: Option<f64>,
    },
}

/// The highest `max_per_second` a destination may set.
const MAX_PER_SECOND: f64 = 10_000.0;

/// `[destinations.NAME.tls]`: the certificate authorities an `https://`
/// destination trusts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFile {
    /// `web` (the default: the Mozilla roots built into jobhost) or
    /// `system` (the operating system's).
    roots: Option<String>,
    /// A PEM file of CA certificates trusted besides the roots (a private
    /// CA); relative to the config's folder.
    ca_file: Option<PathBuf>,
}

/// One `[destinations.NAME]`, validated, its `${VAR}`s taken from the
/// environment now: a missing credential is bad input at start, not a
/// failed delivery after the report was rendered.
///
/// # Errors
///
/// `Error::Input` naming the destination and the field.
pub fn destination(
    name: &str,
    d: &DestinationFile,
    from_file: &dyn Fn(&Path) -> PathBuf,
    env: &Env<'_>,
    redactor: &mut Redactor,
) -> Result<Destination> {
    if name.is_empty()
        || name.len() > 64
        || name.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(Error::input(format!(
            "invalid destination name `{}`: use 1 to 64 characters without spaces",
            crate::core::text::printable(name)
        )));
    }
    let seconds = |what: &str, v: Option<f64>, default: f64, max: f64| -> Result<Duration> {
        let v = v.unwrap_or(default);
        if v.is_finite() && v >= 0.0 && v <= max {
            Ok(Duration::from_secs_f64(v))
        } else {
            Err(Error::input(format!(
                "invalid `destinations.{name}.{what} = {v}`: use 0 to {max} seconds"
            )))
        }
    };
    Ok(match d {
        DestinationFile::File { path, delivery } => Destination {
            target: Target::File {
                path: from_file(path),
            },
            mode: delivery.unwrap_or_default(),
            retry: RetryPolicy::once(),
            limit: crate::core::gate::Limit::default(),
        },
        DestinationFile::Http {
            url,
            headers,
            delivery,
            timeout_seconds,
            tries,
            backoff_seconds,
            max_backoff_seconds,
            tls,
            max_concurrent,
            max_per_second,
        } => {
            let key = format!("destinations.{name}.max_concurrent");
            let max_concurrent = super::source::max_concurrent(&key, *max_concurrent)?;
            let spacing = match max_per_second {
                None => None,
                Some(r) if r.is_finite() && *r > 0.0 && *r <= MAX_PER_SECOND => {
                    crate::core::gate::Limit::per_second(*r)
                }
                Some(r) => {
                    return Err(Error::input(format!(
                        "invalid `destinations.{name}.max_per_second = {r}`: give a rate above 0 \
                         and at most {MAX_PER_SECOND} (sends a second from one host, 0.5 for one \
                         every two seconds), or leave it out for no rate"
                    )));
                }
            };
            let timeout = seconds("timeout_seconds", *timeout_seconds, 30.0, 3600.0)?;
            if timeout.is_zero() {
                return Err(Error::input(format!(
                    "invalid `destinations.{name}.timeout_seconds = 0`: use a positive number of seconds"
                )));
            }
            let tries = tries.unwrap_or(5);
            if !(1..=100).contains(&tries) {
                return Err(Error::input(format!(
                    "invalid `destinations.{name}.tries = {tries}`: use 1 to 100"
                )));
            }
            let backoff = seconds("backoff_seconds", *backoff_seconds, 1.0, 3600.0)?;
            let max_backoff = seconds("max_backoff_seconds", *max_backoff_seconds, 60.0, 3600.0)?;
            let full_url = expand(&format!("`destinations.{name}.url`"), url, env, redactor)?;
            let mut target = HttpTarget::new(full_url, url.clone())
                .map_err(|why| Error::input(format!("invalid `destinations.{name}.url`: {why}")))?;
            for (header, value) in headers {
                let what = format!("`destinations.{name}.headers.{header}`");
                let value = expand(&what, value, env, redactor)?;
                target
                    .add_header(header, value)
                    .map_err(|why| Error::input(format!("invalid {what}: {why}")))?;
            }
            target.timeout = timeout;
            if let Some(tls) = tls {
                if !target.is_https() {
                    return Err(Error::input(format!(
                        "invalid `destinations.{name}.tls`: `{url}` is not an https:// URL, so \
                         the table would never be used; use https:// or remove the table"
                    )));
                }
                let roots = match tls.roots.as_deref() {
                    None => Roots::default(),
                    Some(written) => Roots::named(written).ok_or_else(|| {
                        Error::input(format!(
                            "invalid `destinations.{name}.tls.roots = \"{}\"`: use \"web\" (the \
                             roots built into jobhost, the default) or \"system\" (this \
                             machine's trust store)",
                            crate::core::text::printable(written)
                        ))
                    })?,
                };
                let ca_file = tls.ca_file.as_deref().map(from_file);
                let trust = Trust::load(roots, ca_file.as_deref()).map_err(|e| {
                    Error::input(format!(
                        "invalid `destinations.{name}.tls.{}`: {e}",
                        e.key()
                    ))
                })?;
                target.set_trust(trust);
            }
            Destination {
                target: Target::Http(target),
                mode: delivery.unwrap_or_default(),
                retry: RetryPolicy {
                    tries,
                    backoff,
                    max_backoff: max_backoff.max(backoff),
                },
                limit: crate::core::gate::Limit {
                    max_concurrent,
                    spacing,
                },
            }
        }
    })
}
