//! `[source]`: where a job's rows come from. `type` is `sqlite` (the
//! default: `path` names a database file, relative to the config) or
//! `postgres` (`url` names the database, with the store's URL rules:
//! `${VAR}`s filled in, `sslmode`, the password never shown). `query` is
//! checked here as far as it can be without opening the source; the source
//! itself checks the rest before anything is claimed. `naive_timestamps`
//! says how either kind reads a time written without a zone: `"utc"`, or
//! `"job-zone"` (the job's `timezone`); without it such a column is refused.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::store::postgres_url;
use crate::core::env::Env;
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::core::text::{echoed, printable};
use crate::core::window::Zone;
use crate::guest::source::postgres::{self, PostgresSpec};
use crate::guest::source::{NaiveTimes, Source, SourceSpec};
use crate::store::location::redacted;
use crate::store::postgres::connect::{Role, check_url};

/// `[source]`, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceFile {
    /// `sqlite` (the default), `postgres`, or `upstream` (the committed
    /// reports of the windows of the jobs in `[[needs]]`).
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// A SQLite source's database file.
    pub path: Option<PathBuf>,
    /// A PostgreSQL source's URL (which may take its password from `${VAR}`).
    pub url: Option<String>,
    /// The query over the window's rows (none for `upstream`).
    #[serde(default)]
    pub query: String,
    /// How a time written without a zone is read: `utc` or `job-zone`.
    pub naive_timestamps: Option<String>,
    /// At most this many runs of one host read this source at once.
    pub max_concurrent: Option<i64>,
}

/// The largest `max_concurrent` (of a source or a destination) a config
/// may set: far more than a host runs at once.
pub const MAX_CONCURRENT: i64 = 10_000;

/// A `max_concurrent` as written under `key`, checked.
///
/// # Errors
///
/// `Error::Input` naming the key for a value out of range.
pub fn max_concurrent(key: &str, written: Option<i64>) -> Result<Option<u32>> {
    match written {
        None => Ok(None),
        Some(n) if (1..=MAX_CONCURRENT).contains(&n) => Ok(u32::try_from(n).ok()),
        Some(n) => Err(Error::input(format!(
            "invalid `{key} = {n}`: give a number from 1 to {MAX_CONCURRENT} (how many runs of \
             one host may use it at once), or leave it out for no cap"
        ))),
    }
}

/// The data source `file` describes; paths go through `from_file`, the
/// URL's secrets to `redactor`, a PostgreSQL query's fetches may run
/// `timeout` (the guest's time limit), and `zone` is the job's.
///
/// # Errors
///
/// `Error::Input` naming the key that is wrong and how to fix it.
pub fn source(
    file: &SourceFile,
    from_file: &dyn Fn(&Path) -> PathBuf,
    env: &Env<'_>,
    redactor: &mut Redactor,
    timeout: Duration,
    zone: &Zone,
) -> Result<Source> {
    let naive = naive_times(file.naive_timestamps.as_deref(), zone)?;
    let at_most = max_concurrent("source.max_concurrent", file.max_concurrent)?;
    let kind = file.kind.as_deref().unwrap_or("sqlite");
    if kind == "upstream" {
        let extra = [
            ("path", file.path.is_some()),
            ("url", file.url.is_some()),
            ("query", !file.query.is_empty()),
            ("naive_timestamps", file.naive_timestamps.is_some()),
        ];
        if let Some((key, _)) = extra.iter().find(|(_, set)| *set) {
            return Err(Error::input(format!(
                "invalid `source.{key}`: an upstream source hands the guest the committed \
                 reports of the windows of the jobs in `[[needs]]`, and reads nothing else; \
                 remove `{key}`"
            )));
        }
        return Ok(Source::upstream().at_most(at_most));
    }
    if file.query.trim().is_empty() {
        return Err(Error::input(
            "`[source]` has no `query`: give the query over the window's rows, using :start \
             and :end (or $1 and $2 on PostgreSQL)",
        ));
    }
    let source: Source = match kind {
        "sqlite" => {
            if file.url.is_some() {
                return Err(Error::input(
                    "invalid `source.url`: a SQLite source reads the file `source.path`; for a \
                     PostgreSQL source set `type = \"postgres\"`",
                ));
            }
            let path = file.path.as_ref().ok_or_else(|| {
                Error::input(
                    "`[source]` has no `path`: name the SQLite database file, or set \
                     `type = \"postgres\"` and a `url`",
                )
            })?;
            SourceSpec {
                path: from_file(path),
                query: file.query.clone(),
                naive,
            }
            .into()
        }
        "postgres" => {
            if file.path.is_some() {
                return Err(Error::input(
                    "invalid `source.path`: a PostgreSQL source reads `source.url`; remove `path`",
                ));
            }
            let text = file.url.as_deref().ok_or_else(|| {
                Error::input(
                    "`[source]` of `type = \"postgres\"` has no `url`: give \
                     postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
                )
            })?;
            let url = postgres_url("`source.url`", text, env, redactor)?.ok_or_else(|| {
                Error::input(format!(
                    "invalid `source.url = \"{}\"`: not a postgres:// URL; give \
                     postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
                    redacted(text)
                ))
            })?;
            check_url(&url, Role::Source)?;
            postgres::check_query(&file.query).map_err(Error::input)?;
            PostgresSpec {
                url,
                query: file.query.clone(),
                timeout,
                naive,
            }
            .into()
        }
        other => {
            return Err(Error::input(format!(
                "invalid `source.type = \"{}\"`: use \"sqlite\" (the default), \"postgres\" or \
                 \"upstream\"",
                printable(&echoed(other, 40))
            )));
        }
    };
    Ok(source.at_most(at_most))
}

/// `naive_timestamps`, as the source reads it.
///
/// # Errors
///
/// `Error::Input` naming the value and the choices.
fn naive_times(written: Option<&str>, zone: &Zone) -> Result<NaiveTimes> {
    match written {
        None => Ok(NaiveTimes::Refused(zone.clone())),
        Some("utc") => Ok(NaiveTimes::Utc),
        Some("job-zone") => Ok(NaiveTimes::JobZone(zone.clone())),
        Some(other) => Err(Error::input(format!(
            "invalid `source.naive_timestamps = \"{}\"`: use \"utc\" (read times without a \
             zone as UTC) or \"job-zone\" (as local times in the job's `timezone`, {})",
            printable(&echoed(other, 40)),
            zone.name()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> SourceFile {
        toml::from_str(text).unwrap()
    }

    fn resolve(text: &str, env: &Env<'_>) -> Result<Source> {
        source(
            &file(text),
            &|p: &Path| Path::new("cfg").join(p),
            env,
            &mut Redactor::default(),
            Duration::from_secs(30),
            &Zone::utc(),
        )
    }

    fn no_env(_: &str) -> Option<std::ffi::OsString> {
        None
    }

    const Q: &str = "query = \"SELECT * FROM t WHERE ts >= $1 AND ts < $2\"\n";

    #[test]
    fn sqlite_is_the_default_and_postgres_takes_a_url_with_its_password_from_the_environment() {
        let spec = resolve("path = \"d.db\"\nquery = \"SELECT 1\"", &no_env).unwrap();
        assert_eq!(
            spec.location(),
            Path::new("cfg").join("d.db").display().to_string()
        );
        let env = |name: &str| (name == "PW").then(|| "s3cret-pw".into());
        let mut redactor = Redactor::default();
        let spec = source(
            &file(&format!(
                "type = \"postgres\"\nurl = \"postgres://r:${{PW}}@db/sales\"\n{Q}"
            )),
            &|p: &Path| p.to_path_buf(),
            &env,
            &mut redactor,
            Duration::from_secs(30),
            &Zone::utc(),
        )
        .unwrap();
        assert_eq!(spec.location(), "postgres://r:***@db/sales");
        assert_eq!(redactor.scrub("said s3cret-pw"), "said ***");
    }

    #[test]
    fn bad_source_settings_are_refused_naming_the_key() {
        for (text, says) in [
            (
                format!("type = \"mysql\"\n{Q}"),
                "`source.type = \"mysql\"`",
            ),
            (format!("type = \"postgres\"\n{Q}"), "has no `url`"),
            (
                format!("type = \"postgres\"\npath = \"d.db\"\nurl = \"postgres://h/d\"\n{Q}"),
                "`source.path`",
            ),
            (format!("url = \"postgres://h/d\"\n{Q}"), "`source.url`"),
            (Q.to_string(), "no `path`"),
            (
                format!("type = \"postgres\"\nurl = \"mysql://u:hunter2@h/d\"\n{Q}"),
                "not a postgres:// URL",
            ),
            (
                format!("type = \"postgres\"\nurl = \"postgres://u:${{NOPE}}@h/d\"\n{Q}"),
                "`source.url` uses `${NOPE}`",
            ),
            (
                format!("type = \"postgres\"\nurl = \"postgres://h/d?sslmode=allow\"\n{Q}"),
                "invalid `source.url` `postgres://h/d?sslmode=allow`",
            ),
            (
                "type = \"postgres\"\nurl = \"postgres://h/d\"\nquery = \"SELECT 1\"".to_string(),
                "a start and an end",
            ),
            (
                format!("path = \"d.db\"\nnaive_timestamps = \"local\"\n{Q}"),
                "invalid `source.naive_timestamps = \"local\"`: use \"utc\"",
            ),
            (
                format!("path = \"d.db\"\nmax_concurrent = 0\n{Q}"),
                "invalid `source.max_concurrent = 0`: give a number from 1 to 10000",
            ),
            (
                format!("path = \"d.db\"\nmax_concurrent = 10001\n{Q}"),
                "invalid `source.max_concurrent = 10001`",
            ),
        ] {
            let err = resolve(&text, &no_env).unwrap_err();
            assert!(matches!(err, Error::Input(_)), "{text}: {err}");
            assert!(err.to_string().contains(says), "{text}: {err}");
            assert!(!err.to_string().contains("hunter2"), "{err}");
        }
    }
}
