//! Where a claim store lives, as the user named it: a SQLite file path, or a
//! `postgres://` URL. A URL may carry a password, so the URL itself is never
//! displayed or debug-printed: everything shows a copy with the password
//! replaced by `***`.

use std::fmt;
use std::path::{Path, PathBuf};

/// A claim store's location.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A SQLite file on this machine.
    Sqlite(PathBuf),
    /// A PostgreSQL database shared by any number of hosts.
    Postgres(PostgresUrl),
}

impl StoreLocation {
    /// Reads a `--store` value or config field: a `postgres://` or
    /// `postgresql://` URL names a PostgreSQL store, anything else a SQLite
    /// file path, taken relative to `base` when relative.
    pub fn parse(text: &str, base: &Path) -> StoreLocation {
        if is_postgres_url(text) {
            StoreLocation::Postgres(PostgresUrl::new(text.to_string()))
        } else {
            StoreLocation::Sqlite(base.join(text))
        }
    }

    /// The SQLite file, for a SQLite store.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            StoreLocation::Sqlite(p) => Some(p),
            StoreLocation::Postgres(_) => None,
        }
    }
}

/// The scheme of a value that looks like a URL (`name://...`), if it does.
pub fn url_scheme(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.' | ':')))
    .then_some(scheme)
}

/// True for a value that names a PostgreSQL store.
pub fn is_postgres_url(text: &str) -> bool {
    let lower = text.get(..13).unwrap_or(text).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Sqlite(p) => p.display().fmt(f),
            StoreLocation::Postgres(u) => u.fmt(f),
        }
    }
}

impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Sqlite(p) => f.debug_tuple("Sqlite").field(p).finish(),
            StoreLocation::Postgres(u) => f.debug_tuple("Postgres").field(&u.shown).finish(),
        }
    }
}

/// A PostgreSQL connection URL. `Display` and `Debug` show it with its
/// password (in the user part or a `password=` parameter) as `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct PostgresUrl {
    url: String,
    shown: String,
}

impl PostgresUrl {
    /// Wraps a URL; it is shown with its password as `***`.
    pub fn new(url: String) -> PostgresUrl {
        let shown = redact(&url);
        PostgresUrl { url, shown }
    }

    /// Wraps a URL that was filled in from `template`: it is shown as the
    /// template (with `${VAR}` in place), its literal password as `***`.
    pub fn shown_as(url: String, template: &str) -> PostgresUrl {
        PostgresUrl {
            url,
            shown: redact(template),
        }
    }

    /// The URL with its password, for connecting and nothing else.
    pub fn secret(&self) -> &str {
        &self.url
    }

    /// The URL as it may be shown.
    pub fn shown(&self) -> &str {
        &self.shown
    }
}

impl fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PostgresUrl").field(&self.shown).finish()
    }
}

/// A URL of any scheme as it may be shown: its password as `***`.
pub fn redacted(url: &str) -> String {
    redact(url)
}

/// `postgres://user:secret@host/db?password=x` ->
/// `postgres://user:***@host/db?password=***`. The user part is taken to
/// end at the last `@`: the client library ends it at the first, but a
/// password written with a bare `@` would then show its tail, and hiding
/// too much is the safe side. A password holding `/`, `?` or `:` is hidden
/// whole.
fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let (scheme, rest) = url.split_at(scheme_end);
    let rest = match rest.rsplit_once('@') {
        Some((userinfo, after)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{after}"),
            None => rest.to_string(),
        },
        None => rest.to_string(),
    };
    let rest = match rest.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => pair.to_string(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => rest,
    };
    format!("{scheme}{rest}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_never_shown() {
        for (url, shown) in [
            (
                "postgres://jobs:s3cr%40t@db.internal:5432/jobs",
                "postgres://jobs:***@db.internal:5432/jobs",
            ),
            (
                "postgresql://jobs@db/jobs?password=s3cret&sslmode=require",
                "postgresql://jobs@db/jobs?password=***&sslmode=require",
            ),
            ("postgres://db/jobs", "postgres://db/jobs"),
            ("postgres://a:s3cr/et?x@host/db", "postgres://a:***@host/db"),
            ("postgres://a:s3cr:et@host", "postgres://a:***@host"),
            ("postgres://a:s3cr@et@host/db", "postgres://a:***@host/db"),
        ] {
            let loc = StoreLocation::parse(url, Path::new(""));
            assert_eq!(loc.to_string(), shown);
            assert!(!format!("{loc:?}").contains("s3cr"), "{loc:?}");
        }
    }

    #[test]
    fn anything_but_a_postgres_url_is_a_sqlite_path_relative_to_the_config() {
        assert_eq!(
            StoreLocation::parse("state/jobhost.db", Path::new("jobs")),
            StoreLocation::Sqlite(PathBuf::from("jobs/state/jobhost.db"))
        );
        assert!(matches!(
            StoreLocation::parse("PostgreSQL://db/jobs", Path::new("jobs")),
            StoreLocation::Postgres(_)
        ));
    }
}
