//! Ping URLs, healthchecks-style: the host tells an outside monitor
//! (healthchecks.io, Cronitor, an Uptime Kuma push monitor, any dead man's
//! switch) when a run of a job starts, succeeds or fails, so a job that
//! goes quiet is noticed by something that does not depend on it.
//!
//! A ping is a signal, never an effect of the report: it carries the run's
//! outcome and key, not its data; it is tried a few times with a short
//! timeout; whatever happens to it never changes the run's outcome or exit
//! code; and its result is written into the receipt (and a failure, on
//! stderr). URLs may take credentials from the environment (`${VAR}`), as
//! destinations do, and are shown as written.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::core::clock::Clock;
use crate::core::env::{Env, expand};
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::effects::destination::HttpTarget;

/// `[ping]` in the job config, as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PingFile {
    /// Pinged when a run claims its window and starts (the guest runs, or
    /// a committed report's delivery resumes).
    pub start: Option<String>,
    /// Pinged when a run ends DONE (`ran` or `resumed`).
    pub success: Option<String>,
    /// Pinged when a run ends `failed` or `abandoned`.
    pub failure: Option<String>,
    /// `post` (default: the body is a line saying what happened) or `get`.
    pub method: Option<String>,
    /// Seconds one ping may take, connecting included (default 5).
    pub timeout_seconds: Option<f64>,
    /// Sends of one ping, the first included (default 3).
    pub tries: Option<u32>,
}

/// Which moment of a run a ping signals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Signal {
    /// The run claimed its window and starts.
    Start,
    /// The run ended DONE.
    Success,
    /// The run failed or was abandoned.
    Failure,
}

impl Signal {
    /// `start`, `success` or `failure`, as in the config and the receipt.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Start => "start",
            Signal::Success => "success",
            Signal::Failure => "failure",
        }
    }
}

/// Whether a ping reached its monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PingStatus {
    /// The monitor answered 2xx.
    Sent,
    /// It did not, after every try (see `detail`).
    Failed,
}

/// How a ping went, as the receipt shows it.
#[derive(Debug, Clone, Serialize)]
pub struct PingInfo {
    /// Whether the monitor has it.
    pub status: PingStatus,
    /// Requests made.
    pub attempts: u32,
    /// The monitor's last HTTP status, when it answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
    /// Why it failed, in one line (no credentials).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// A job's validated ping URLs.
#[derive(Debug, Clone, Default)]
pub struct Pings {
    targets: BTreeMap<Signal, HttpTarget>,
    post: bool,
    timeout: Duration,
    tries: u32,
}

/// The longest timeout a ping may ask for: a ping must not hold a run up.
const MAX_TIMEOUT_SECONDS: f64 = 60.0;

impl Pings {
    /// Validates `[ping]`, taking `${VAR}` values from `env` (and giving
    /// them to `redactor`).
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the field: a URL that is not `http(s)://`, an
    /// unset variable, an unknown method, a timeout or tries out of range.
    pub fn from_file(file: PingFile, env: &Env<'_>, redactor: &mut Redactor) -> Result<Pings> {
        let post = match file.method.as_deref().unwrap_or("post") {
            "post" | "POST" => true,
            "get" | "GET" => false,
            other => {
                return Err(Error::input(format!(
                    "invalid `ping.method = \"{other}\"`: use \"post\" or \"get\""
                )));
            }
        };
        let timeout_s = file.timeout_seconds.unwrap_or(5.0);
        if !(timeout_s.is_finite() && timeout_s > 0.0 && timeout_s <= MAX_TIMEOUT_SECONDS) {
            return Err(Error::input(format!(
                "invalid `ping.timeout_seconds = {timeout_s}`: use a number of seconds above 0 \
                 and at most {MAX_TIMEOUT_SECONDS}"
            )));
        }
        let tries = file.tries.unwrap_or(3);
        if !(1..=10).contains(&tries) {
            return Err(Error::input(format!(
                "invalid `ping.tries = {tries}`: use 1 to 10"
            )));
        }
        let timeout = Duration::from_secs_f64(timeout_s);
        let mut targets = BTreeMap::new();
        for (signal, url) in [
            (Signal::Start, file.start),
            (Signal::Success, file.success),
            (Signal::Failure, file.failure),
        ] {
            let Some(url) = url else { continue };
            let what = format!("`ping.{}`", signal.as_str());
            let full = expand(&what, &url, env, redactor)?;
            let mut target = HttpTarget::new(full, url)
                .map_err(|why| Error::input(format!("invalid {what}: {why}")))?;
            target.timeout = timeout;
            targets.insert(signal, target);
        }
        Ok(Pings {
            targets,
            post,
            timeout,
            tries,
        })
    }

    /// Whether any ping is configured.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// The longest a start ping can hold a run up, its retries included: a
    /// lease must cover it besides the guest's time limit.
    pub fn start_budget(&self) -> Duration {
        if !self.targets.contains_key(&Signal::Start) {
            return Duration::ZERO;
        }
        self.timeout * self.tries + waits(self.tries)
    }

    /// Sends the `signal` ping, if one is configured, with `line` (one line
    /// saying what happened) as its body when the method is POST. Tries up
    /// to `tries` times while the monitor cannot be reached or answers 5xx
    /// or 429, waiting through `clock`. Scrubs `redactor`'s values from
    /// what it reports.
    pub fn send(
        &self,
        signal: Signal,
        line: &str,
        clock: &dyn Clock,
        redactor: &Redactor,
    ) -> Option<PingInfo> {
        let target = self.targets.get(&signal)?;
        let agent = crate::effects::http::http_agent(Some(self.timeout));
        let shown = target.shown_url();
        let mut info = PingInfo {
            status: PingStatus::Failed,
            attempts: 0,
            http_status: None,
            detail: None,
        };
        loop {
            info.attempts += 1;
            let answer = if self.post {
                agent
                    .post(target.url())
                    .header("Content-Type", "text/plain; charset=utf-8")
                    .send(line.as_bytes())
            } else {
                agent.get(target.url()).call()
            };
            let again = match answer {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    info.http_status = Some(status);
                    if (200..300).contains(&status) {
                        info.status = PingStatus::Sent;
                        info.detail = None;
                        return Some(info);
                    }
                    let hint = if (300..400).contains(&status) {
                        "; jobhost does not follow redirects: give the final URL"
                    } else {
                        ""
                    };
                    info.detail = Some(format!(
                        "ping `{}` ({shown}) answered {status}{hint}",
                        signal.as_str()
                    ));
                    status == 429 || status >= 500
                }
                Err(e) => {
                    info.detail = Some(
                        redactor
                            .scrub(&format!("cannot ping `{}` ({shown}): {e}", signal.as_str())),
                    );
                    true
                }
            };
            if !again || info.attempts >= self.tries {
                return Some(info);
            }
            clock.sleep(wait(info.attempts));
        }
    }
}

/// The wait after the `n`th failed try: 1 s, 2 s, 4 s, ...
fn wait(n: u32) -> Duration {
    Duration::from_secs(1u64 << n.saturating_sub(1).min(5))
}

/// All the waits between `tries` tries.
fn waits(tries: u32) -> Duration {
    (1..tries).map(wait).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pings(text: &str, env: &[(&str, &str)]) -> Result<Pings> {
        let file: PingFile = toml::from_str(text).unwrap();
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = |k: &str| {
            env.iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| std::ffi::OsString::from(v))
        };
        Pings::from_file(file, &lookup, &mut Redactor::default())
    }

    #[test]
    fn ping_urls_take_credentials_from_the_environment_and_show_them_as_written() {
        let p = pings(
            "success = \"https://hc-ping.com/${HC}\"\nfailure = \"https://hc-ping.com/${HC}/fail\"",
            &[("HC", "0f1e2d3c")],
        )
        .unwrap();
        let t = &p.targets[&Signal::Failure];
        assert_eq!(t.url(), "https://hc-ping.com/0f1e2d3c/fail");
        assert_eq!(t.shown_url(), "https://hc-ping.com/${HC}/fail");
        assert!(!format!("{p:?}").contains("0f1e2d3c"));
        assert_eq!(p.start_budget(), Duration::ZERO, "no start ping");
    }

    #[test]
    fn bad_ping_settings_name_the_field_and_the_fix() {
        for (text, needle) in [
            ("start = \"ftp://x\"", "`ping.start`"),
            ("success = \"https://x/${UNSET}\"", "set UNSET"),
            ("method = \"put\"", "\"post\" or \"get\""),
            ("timeout_seconds = 0", "`ping.timeout_seconds = 0`"),
            ("tries = 0", "`ping.tries = 0`: use 1 to 10"),
        ] {
            let err = pings(text, &[]).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn a_start_ping_budget_covers_every_try_and_the_waits_between() {
        let p = pings(
            "start = \"http://127.0.0.1:9/s\"\ntimeout_seconds = 2\ntries = 3",
            &[],
        )
        .unwrap();
        assert_eq!(p.start_budget(), Duration::from_secs(2 * 3 + 1 + 2));
    }
}
