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

use serde::Serialize;

use crate::core::clock::Clock;
use crate::core::redact::Redactor;
use crate::effects::destination::HttpTarget;

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
    /// The URL of each signal that has one.
    pub targets: BTreeMap<Signal, HttpTarget>,
    /// POST a line saying what happened (else GET).
    pub post: bool,
    /// The longest one ping may take.
    pub timeout: Duration,
    /// Sends of one ping, the first included.
    pub tries: u32,
}

impl Pings {
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

    #[test]
    fn a_start_ping_budget_covers_every_try_and_the_waits_between() {
        let mut targets = BTreeMap::new();
        targets.insert(
            Signal::Start,
            HttpTarget::new("http://127.0.0.1:9/s".into(), "http://127.0.0.1:9/s".into()).unwrap(),
        );
        let p = Pings {
            targets,
            post: true,
            timeout: Duration::from_secs(2),
            tries: 3,
        };
        assert_eq!(p.start_budget(), Duration::from_secs(2 * 3 + 1 + 2));
    }
}
