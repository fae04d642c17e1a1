//! `[[notify]]`, `[dashboard] public_url` and `pause_after_failures`: who
//! hears of a job's trouble, where a notification links to, and when
//! jobhost pauses a job that keeps failing. The URLs' `${VAR}`s and
//! `${file:...}`s are filled in only for a command that runs the job.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;

use crate::core::env::{Env, expand};
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::effects::destination::HttpTarget;
use crate::effects::notify::{Event, NotifySettings, NotifyTarget, Style};

/// One `[[notify]]` block, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyFile {
    /// The events it is sent (default: every one).
    pub on: Option<Vec<String>>,
    /// `webhook` (default: a JSON object of the facts) or `slack`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Where it is POSTed; `${VAR}` and `${file:PATH}` are filled in.
    pub url: String,
    /// Extra request headers (`${VAR}` and `${file:PATH}` filled in).
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Seconds one send may take, connecting included (default 10).
    pub timeout_seconds: Option<f64>,
}

/// `[dashboard]`, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DashboardFile {
    /// The dashboard's address as people reach it, for links in
    /// notifications (`https://jobs.example.com`).
    pub public_url: Option<String>,
}

/// The most `[[notify]]` blocks a job may have.
const MAX_BLOCKS: usize = 16;

/// The longest a send may take: a notification is sent after a run, and
/// must not hold the next one up for long.
const MAX_TIMEOUT_SECONDS: f64 = 60.0;

/// Validates the `[[notify]]` blocks and `[dashboard] public_url`, filling
/// in the URLs' and headers' secrets from `env` (and giving them to
/// `redactor`).
///
/// # Errors
///
/// `Error::Input` naming the block and field that is wrong.
pub fn notify(
    blocks: &[NotifyFile],
    dashboard: Option<&DashboardFile>,
    env: &Env<'_>,
    redactor: &mut Redactor,
) -> Result<NotifySettings> {
    if blocks.len() > MAX_BLOCKS {
        return Err(Error::input(format!(
            "the job has {} `[[notify]]` blocks; at most {MAX_BLOCKS}: send to one receiver \
             that fans out",
            blocks.len()
        )));
    }
    let public_url = public_url(dashboard)?;
    let mut targets = Vec::with_capacity(blocks.len());
    let mut urls = BTreeSet::new();
    for (i, b) in blocks.iter().enumerate() {
        let name = format!("`notify` block {}", i + 1);
        let on = match &b.on {
            None => Event::ALL.into_iter().collect(),
            Some(list) if list.is_empty() => {
                return Err(Error::input(format!(
                    "{name} has `on = []`, so it is never sent: name events, or remove the block"
                )));
            }
            Some(list) => list
                .iter()
                .map(|e| {
                    Event::parse(e).ok_or_else(|| {
                        let known: Vec<&str> = Event::ALL.iter().map(|e| e.as_str()).collect();
                        Error::input(format!(
                            "invalid {name} `on` event \"{}\": use {}",
                            crate::core::text::printable(e),
                            known.join(", ")
                        ))
                    })
                })
                .collect::<Result<BTreeSet<Event>>>()?,
        };
        let style = match b.kind.as_deref().unwrap_or("webhook") {
            "webhook" => Style::Webhook,
            "slack" => Style::Slack,
            other => {
                return Err(Error::input(format!(
                    "invalid {name} `type = \"{}\"`: use \"webhook\" (a JSON object) or \
                     \"slack\" (an incoming webhook)",
                    crate::core::text::printable(other)
                )));
            }
        };
        if !urls.insert(b.url.clone()) {
            return Err(Error::input(format!(
                "{name} has the same `url` as a block before it; give each block its own URL \
                 (a notification is kept under it)"
            )));
        }
        let what = format!("`notify.url` of block {}", i + 1);
        let full = expand(&what, &b.url, env, redactor)?;
        let mut target = HttpTarget::new(full, b.url.clone())
            .map_err(|why| Error::input(format!("invalid {what}: {why}")))?;
        for (header, value) in &b.headers {
            let what = format!("`notify.headers.{header}` of block {}", i + 1);
            let value = expand(&what, value, env, redactor)?;
            target
                .add_header(header, value)
                .map_err(|why| Error::input(format!("invalid {what}: {why}")))?;
        }
        let timeout = b.timeout_seconds.unwrap_or(10.0);
        if !(timeout.is_finite() && timeout > 0.0 && timeout <= MAX_TIMEOUT_SECONDS) {
            return Err(Error::input(format!(
                "invalid {name} `timeout_seconds = {timeout}`: use a number of seconds above 0 \
                 and at most {MAX_TIMEOUT_SECONDS}"
            )));
        }
        target.timeout = Duration::from_secs_f64(timeout);
        targets.push(NotifyTarget { on, style, target });
    }
    Ok(NotifySettings {
        targets,
        public_url,
    })
}

/// `[dashboard] public_url`, checked: an `http(s)://` address.
fn public_url(dashboard: Option<&DashboardFile>) -> Result<Option<String>> {
    let Some(url) = dashboard.and_then(|d| d.public_url.as_deref()) else {
        return Ok(None);
    };
    HttpTarget::new(url.to_string(), url.to_string())
        .map_err(|why| Error::input(format!("invalid `dashboard.public_url`: {why}")))?;
    Ok(Some(url.trim_end_matches('/').to_string()))
}

/// `pause_after_failures`, checked: 1 to 1000 windows.
///
/// # Errors
///
/// `Error::Input` for 0 or more than 1000.
pub fn pause_after(n: Option<u32>) -> Result<Option<u32>> {
    match n {
        None => Ok(None),
        Some(n @ 1..=1000) => Ok(Some(n)),
        Some(n) => Err(Error::input(format!(
            "invalid `pause_after_failures = {n}`: use 1 to 1000 windows in a row (or leave it \
             out to never pause on failures)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<NotifySettings> {
        #[derive(Deserialize)]
        struct F {
            notify: Vec<NotifyFile>,
            dashboard: Option<DashboardFile>,
        }
        let f: F = toml::from_str(text).map_err(|e| Error::input(e.to_string()))?;
        let env = |n: &str| (n == "HOOK").then(|| "T000/B000/xyz".into());
        notify(
            &f.notify,
            f.dashboard.as_ref(),
            &env,
            &mut Redactor::default(),
        )
    }

    #[test]
    fn blocks_are_checked_and_named() {
        let ok = parse(
            "[dashboard]\npublic_url = \"https://jobs.example.com/\"\n\
             [[notify]]\ntype = \"slack\"\non = [\"failed\", \"recovered\"]\n\
             url = \"https://hooks.slack.com/services/${HOOK}\"\n\
             [[notify]]\nurl = \"https://ops.example.com/hook\"\n",
        )
        .unwrap();
        assert_eq!(ok.public_url.as_deref(), Some("https://jobs.example.com"));
        assert_eq!(ok.targets.len(), 2);
        assert_eq!(ok.targets[0].style, Style::Slack);
        assert_eq!(
            ok.targets[0].target.url(),
            "https://hooks.slack.com/services/T000/B000/xyz"
        );
        assert_eq!(ok.targets[1].on.len(), Event::ALL.len());
        for (text, want) in [
            (
                "[[notify]]\nurl = \"https://a\"\non = [\"boom\"]\n",
                "`on` event \"boom\"",
            ),
            ("[[notify]]\nurl = \"https://a\"\non = []\n", "never sent"),
            (
                "[[notify]]\nurl = \"https://a\"\ntype = \"teams\"\n",
                "type = \"teams\"",
            ),
            ("[[notify]]\nurl = \"ftp://a\"\n", "`notify.url` of block 1"),
            ("[[notify]]\nurl = \"https://a/${NOPE}\"\n", "${NOPE}"),
            (
                "[[notify]]\nurl = \"https://a\"\n[[notify]]\nurl = \"https://a\"\n",
                "same `url`",
            ),
            (
                "[dashboard]\npublic_url = \"jobs\"\n[[notify]]\nurl = \"https://a\"\n",
                "public_url",
            ),
        ] {
            let err = parse(text).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{text}");
            assert!(err.to_string().contains(want), "{text}: {err}");
        }
        assert!(pause_after(Some(0)).is_err());
        assert_eq!(pause_after(Some(3)).unwrap(), Some(3));
    }
}
