//! `[ping]`: the URLs a job's monitor is told at when a run starts,
//! succeeds or fails. Their `${VAR}`s are filled in only for a command that
//! runs the job.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::core::env::{Env, expand};
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::effects::destination::HttpTarget;
use crate::effects::ping::{Pings, Signal};

/// `[ping]` in the job config, as written.
#[derive(Debug, Clone, Default, Deserialize)]
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

/// The longest timeout a ping may ask for: a ping must not hold a run up.
const MAX_TIMEOUT_SECONDS: f64 = 60.0;

/// Validates `[ping]`, taking `${VAR}` values from `env` (and giving
/// them to `redactor`).
///
/// # Errors
///
/// `Error::Input` naming the field: a URL that is not `http(s)://`, an
/// unset variable, an unknown method, a timeout or tries out of range.
pub fn pings(file: &PingFile, env: &Env<'_>, redactor: &mut Redactor) -> Result<Pings> {
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
        (Signal::Start, &file.start),
        (Signal::Success, &file.success),
        (Signal::Failure, &file.failure),
    ] {
        let Some(url) = url else { continue };
        let what = format!("`ping.{}`", signal.as_str());
        let full = expand(&what, url, env, redactor)?;
        let mut target = HttpTarget::new(full, url.clone())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, env: &[(&str, &str)]) -> Result<Pings> {
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
        pings(&file, &lookup, &mut Redactor::default())
    }

    #[test]
    fn ping_urls_take_credentials_from_the_environment_and_show_them_as_written() {
        let p = parse(
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
            let err = parse(text, &[]).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
