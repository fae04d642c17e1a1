//! The store a config names: `--store` (or `$JOBHOST_STORE`), else the
//! first line of the file `$JOBHOST_STORE_FILE` names (a systemd
//! credential, a mounted secret), else the config's `store`, else the
//! default beside the config. A `${VAR}` in it is filled in from the
//! environment, and a password is scrubbed from every message.

use std::path::{Path, PathBuf};

use crate::core::env::{Env, expand, expand_with};
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::store::location::{is_postgres_url, url_scheme};
use crate::store::{PostgresUrl, StoreLocation};

/// The store `flag` (`--store`), else the one in the file
/// [`STORE_FILE`] names, else `written` (the config's `store`, in the
/// config `config`), else [`default_store`]; its secrets go to
/// `redactor`.
///
/// # Errors
///
/// `Error::Input` naming the flag or key when a `${VAR}` in it cannot be
/// filled in or it names no store jobhost can use.
pub fn resolve(
    flag: Option<&Path>,
    written: Option<&str>,
    config: Option<&Path>,
    env: &Env<'_>,
    redactor: &mut Redactor,
) -> Result<StoreLocation> {
    // The process's own setting, as `$JOBHOST_STORE` is, not a `${VAR}`.
    let file = std::env::var_os(STORE_FILE)
        .filter(|f| !f.is_empty())
        .map(PathBuf::from);
    resolve_with(flag, file.as_deref(), written, config, env, redactor)
}

/// [`resolve`], given the store file [`STORE_FILE`] names.
fn resolve_with(
    flag: Option<&Path>,
    store_file: Option<&Path>,
    written: Option<&str>,
    config: Option<&Path>,
    env: &Env<'_>,
    redactor: &mut Redactor,
) -> Result<StoreLocation> {
    match (flag, written) {
        (Some(p), _) => match p.to_str() {
            Some(text) => store_location("--store", text, Path::new(""), env, redactor),
            None => Ok(StoreLocation::Sqlite(p.to_path_buf())),
        },
        _ if let Some(file) = store_file => {
            let text = read_store_file(file)?;
            let what = format!("store in ${STORE_FILE} `{}`", file.display());
            store_location(&what, &text, Path::new(""), env, redactor)
        }
        (None, Some(text)) => {
            let base = config.map(config_dir).unwrap_or_default();
            store_location("`store` in the job config", text, &base, env, redactor)
        }
        (None, None) => default_store(config, env),
    }
}

/// The environment variable naming a file whose first line is the store,
/// as `--store` takes it: a URL with its password kept out of the
/// environment and the unit file (systemd's `LoadCredential=`).
pub const STORE_FILE: &str = "JOBHOST_STORE_FILE";

/// The first line of the store file `file`, trimmed (read as every
/// `${file:...}` secret is, [`crate::core::env::secret_file`]).
///
/// # Errors
///
/// `Error::Input` naming the file when it cannot be read, is empty, or can
/// be read or written by every user of the machine (it may hold a
/// password).
fn read_store_file(file: &Path) -> Result<String> {
    let line = crate::core::env::secret_file(file, &format!("${STORE_FILE}"))?;
    let line = line.trim();
    if line.is_empty() {
        return Err(Error::input(format!(
            "${STORE_FILE} `{}` is empty: its first line must be the store (a postgres:// URL \
             or a SQLite path)",
            file.display()
        )));
    }
    Ok(line.to_string())
}

/// Where a job keeps its store when neither `--store`, `$JOBHOST_STORE` nor
/// its config names one: this path beside the config file, so that a job
/// finds the same store from any working directory.
pub const DEFAULT_STORE: &str = "state/jobhost.db";

/// The store when neither `--store`, `$JOBHOST_STORE` nor a config names
/// one: [`DEFAULT_STORE`] beside the config file when there is one, never
/// beside the working directory (a job started from another folder would
/// find no claims there, and run its windows again); without a config, the
/// per-user state folder (`$XDG_STATE_HOME/jobhost/jobhost.db`, else
/// `~/.local/state/jobhost/jobhost.db`).
///
/// # Errors
///
/// `Error::Input` when there is no config and no home folder to keep a
/// store in.
pub fn default_store(config: Option<&Path>, env: &Env<'_>) -> Result<StoreLocation> {
    let path = match config {
        Some(file) => config_dir(file).join(DEFAULT_STORE),
        None => {
            let absolute = |name: &str| env(name).map(PathBuf::from).filter(|p| p.is_absolute());
            absolute("XDG_STATE_HOME")
                .or_else(|| absolute("HOME").map(|h| h.join(".local").join("state")))
                .ok_or_else(|| {
                    Error::input(
                        "no store given, and no home folder to keep one in (HOME is not set): \
                         pass --store PATH, set JOBHOST_STORE, or run with a job config",
                    )
                })?
                .join("jobhost")
                .join("jobhost.db")
        }
    };
    refuse_abandoning_the_old_default(&path)?;
    Ok(StoreLocation::Sqlite(path))
}

/// Before this version, the default store was `state/jobhost.db` in the
/// working directory. A store there, and none yet at the new default, is a
/// store this job most likely used: starting a new one beside it would run
/// every window it holds again, the very duplicate jobhost exists to
/// prevent. Refused, naming both and the fix.
fn refuse_abandoning_the_old_default(new: &Path) -> Result<()> {
    let old = Path::new(DEFAULT_STORE);
    if new.exists() || !old.is_file() {
        return Ok(());
    }
    let same = match (old.canonicalize(), new.parent().map(Path::canonicalize)) {
        (Ok(o), Some(Ok(dir))) => Some(o) == new.file_name().map(|f| dir.join(f)),
        _ => false,
    };
    if same || new == old {
        return Ok(());
    }
    // A job config in this folder keeps its store there by today's rule
    // too: the store is that job's, not one left by an older jobhost, and
    // the command only lacked --config.
    let configs = configs_keeping_the_default_store_here();
    if !configs.is_empty() {
        let shown: Vec<String> = configs.iter().map(|c| format!("`{c}`")).collect();
        return Err(Error::input(format!(
            "no job config or store given, so the store would be `{}`, which does not exist; \
             `{}` here is the store of the job config {} in this folder: pass --config {} (or \
             --store {})",
            new.display(),
            old.display(),
            shown.join(", "),
            crate::core::command::shell_quote(&configs[0]),
            old.display()
        )));
    }
    Err(Error::input(format!(
        "the default store is now `{}` (beside the job's config, or in the per-user state \
         folder without one), and there is none there yet, but a store is at `{}` in the \
         working directory, where jobhost kept it before: name it with --store {} (or `store` \
         in the job config), or move it there with its -wal and -shm files, so that the windows \
         it holds do not run again",
        new.display(),
        old.display(),
        old.display()
    )))
}

/// The job configs (`*.toml` naming a `job`) in the working directory
/// that name no store of their own, so keep it at [`DEFAULT_STORE`] here;
/// at most the first few, sorted.
fn configs_keeping_the_default_store_here() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(".") else {
        return Vec::new();
    };
    let mut found: Vec<String> = entries
        .filter_map(|e| e.ok())
        .take(1000)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| name.ends_with(".toml"))
        .filter(|name| {
            std::fs::metadata(name).is_ok_and(|m| m.is_file() && m.len() < 1 << 20)
                && super::load_file(Path::new(name))
                    .is_ok_and(|c| c.job.is_some() && c.store.is_none())
        })
        .collect();
    found.sort();
    found.truncate(3);
    found
}

/// A store named by a flag or the config. `${VAR}` is filled in from the
/// environment:
///
/// - in a `postgres://` URL, values in the user part and the query are
///   percent-encoded (a password with `@`, `/`, `?`, `&` or `%` arrives as
///   it is) and scrubbed from every message; values in the host and path
///   are put in as they are (`${PGHOST}` may list `db1,db2`). The URL is
///   shown as written, with `${VAR}` in place and a literal password as
///   `***`;
/// - a value that is one `${VAR}` alone may hold a whole URL or a path;
/// - anything else is a SQLite path, relative to `base`; another URL
///   scheme is refused rather than taken for a file name.
pub(crate) fn store_location(
    what: &str,
    text: &str,
    base: &Path,
    env: &Env<'_>,
    redactor: &mut Redactor,
) -> Result<StoreLocation> {
    if let Some(url) = postgres_url(what, text, env, redactor)? {
        return Ok(StoreLocation::Postgres(url));
    }
    // A path's values are not secrets.
    let expanded = expand(what, text, env, &mut Redactor::default())?;
    if let Some(scheme) = url_scheme(&expanded) {
        return Err(Error::input(format!(
            "invalid {what} `{}`: a `{scheme}://` URL is not a store jobhost can use; give a \
             SQLite file path or a postgres:// URL",
            crate::store::location::redacted(&expanded)
        )));
    }
    if expanded.is_empty() {
        return Err(Error::input(format!(
            "invalid {what}: it is empty; give a SQLite file path or a postgres:// URL"
        )));
    }
    Ok(StoreLocation::parse(&expanded, base))
}

/// The `postgres://` URL a config value (`what`, in messages) names, its
/// `${VAR}`s filled in as [`store_location`] says and its password given to
/// `redactor`; `None` when the value, filled in, is not a PostgreSQL URL.
/// The claim store and a PostgreSQL data source read their URLs alike.
///
/// # Errors
///
/// `Error::Input` naming `what` and the variable that cannot be filled in.
pub(crate) fn postgres_url(
    what: &str,
    text: &str,
    env: &Env<'_>,
    redactor: &mut Redactor,
) -> Result<Option<PostgresUrl>> {
    if is_postgres_url(text) {
        let url = expand_url(what, text, env, redactor)?;
        add_url_password(&url, redactor);
        return Ok(Some(PostgresUrl::shown_as(url, text)));
    }
    // Only a whole URL's password is a secret here, added below.
    let expanded = expand(what, text, env, &mut Redactor::default())?;
    if is_postgres_url(&expanded) {
        add_url_password(&expanded, redactor);
        return Ok(Some(PostgresUrl::new(expanded)));
    }
    Ok(None)
}

/// Fills in a `postgres://` URL's `${VAR}` references part by part (see
/// [`store_location`]).
fn expand_url(what: &str, text: &str, env: &Env<'_>, redactor: &mut Redactor) -> Result<String> {
    let encode = |v: &str| {
        percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    let plain = |v: &str| v.to_string();
    let scheme_end = text.find("://").map_or(0, |i| i + 3);
    let (scheme, rest) = text.split_at(scheme_end);
    let (user, rest) = match rest.find('@') {
        Some(at) => rest.split_at(at),
        None => ("", rest),
    };
    let (host, query) = match rest.find('?') {
        Some(q) => rest.split_at(q),
        None => (rest, ""),
    };
    Ok(format!(
        "{scheme}{}{}{}",
        expand_with(what, user, env, redactor, &encode)?,
        expand_with(what, host, env, &mut Redactor::default(), &plain)?,
        expand_with(what, query, env, redactor, &encode)?
    ))
}

/// A password written into the URL itself is scrubbed from messages too.
fn add_url_password(url: &str, redactor: &mut Redactor) {
    if let Some(password) = url
        .parse::<postgres::Config>()
        .ok()
        .and_then(|c| {
            c.get_password()
                .map(|p| String::from_utf8_lossy(p).into_owned())
        })
        .filter(|p| !p.is_empty())
    {
        redactor.add(password);
    }
}

/// The folder of a config file: paths in it are relative to it.
pub(crate) fn config_dir(path: &Path) -> PathBuf {
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_password_from_the_environment_arrives_whole_and_is_never_shown() {
        let password = "p@ss/w?rd&x=%41 :";
        let env = |name: &str| match name {
            "PGPW" => Some(password.into()),
            "DATABASE_URL" => Some("postgres://jobs:lit%40eral@db.internal/jobs".into()),
            "STATE" => Some("/var/lib/jobhost".into()),
            "HOSTS" => Some("db1,db2".into()),
            _ => None,
        };
        let mut r = Redactor::default();
        let store = |text: &str, r: &mut Redactor| {
            store_location("`store`", text, Path::new("cfg"), &env, r).unwrap()
        };
        let StoreLocation::Postgres(url) =
            store("postgres://jobs:${PGPW}@db.internal:5432/jobs", &mut r)
        else {
            panic!("a postgres URL")
        };
        let parsed: postgres::Config = url.secret().parse().unwrap();
        assert_eq!(parsed.get_password(), Some(password.as_bytes()));
        assert_eq!(parsed.get_user(), Some("jobs"));
        assert_eq!(url.to_string(), "postgres://jobs:***@db.internal:5432/jobs");
        assert_eq!(r.scrub(&format!("said {password}")), "said ***");

        let StoreLocation::Postgres(url) =
            store("postgres://jobs@db/jobs?password=${PGPW}", &mut r)
        else {
            panic!("a postgres URL")
        };
        let parsed: postgres::Config = url.secret().parse().unwrap();
        assert_eq!(parsed.get_password(), Some(password.as_bytes()));
        assert_eq!(url.to_string(), "postgres://jobs@db/jobs?password=***");

        // A whole URL in one variable is a PostgreSQL store, not a file
        // named `${DATABASE_URL}`.
        let StoreLocation::Postgres(url) = store("${DATABASE_URL}", &mut r) else {
            panic!("a whole URL from the environment is a PostgreSQL store")
        };
        assert_eq!(url.to_string(), "postgres://jobs:***@db.internal/jobs");
        assert_eq!(
            r.scrub("lit@eral"),
            "***",
            "its literal password is scrubbed"
        );

        assert_eq!(
            store("${STATE}/jobhost.db", &mut r),
            StoreLocation::Sqlite(PathBuf::from("/var/lib/jobhost/jobhost.db"))
        );
        assert_eq!(
            store("state/$${HOME}.db", &mut r),
            StoreLocation::Sqlite(PathBuf::from("cfg/state/${HOME}.db"))
        );
        assert_eq!(
            r.scrub("/var/lib/jobhost"),
            "/var/lib/jobhost",
            "a path is no secret"
        );

        // Hosts from the environment go in as they are.
        let StoreLocation::Postgres(url) = store("postgres://jobs:${PGPW}@${HOSTS}/jobs", &mut r)
        else {
            panic!("a postgres URL")
        };
        assert!(url.secret().ends_with("@db1,db2/jobs"), "{url}");

        // Another scheme is refused, its password hidden, not taken for a
        // file named after it.
        let err = store_location(
            "`store`",
            "postgresql+asyncpg://jobs:hunter2@db/jobs",
            Path::new(""),
            &env,
            &mut r,
        )
        .unwrap_err();
        assert!(matches!(err, Error::Input(_)), "{err}");
        assert!(
            err.to_string().contains("`postgresql+asyncpg://` URL"),
            "{err}"
        );
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn the_store_file_stands_for_store_and_is_refused_when_every_user_can_read_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("store-url");
        std::fs::write(&file, "postgres://jobs:hunter2@db.internal/jobs\nignored\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).unwrap();
        let env = |_: &str| None;
        let resolve = |flag: Option<&Path>, written: Option<&str>| {
            resolve_with(
                flag,
                Some(&file),
                written,
                None,
                &env,
                &mut Redactor::default(),
            )
        };

        // The file's first line, over the config's `store`.
        let StoreLocation::Postgres(url) = resolve(None, Some("state/jobs.db")).unwrap() else {
            panic!("the store in the file")
        };
        assert_eq!(url.secret(), "postgres://jobs:hunter2@db.internal/jobs");
        assert_eq!(url.to_string(), "postgres://jobs:***@db.internal/jobs");
        // `--store` (and so $JOBHOST_STORE) over the file.
        assert_eq!(
            resolve(Some(Path::new("/var/lib/jobhost/jobhost.db")), None).unwrap(),
            StoreLocation::Sqlite(PathBuf::from("/var/lib/jobhost/jobhost.db"))
        );

        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = resolve(None, None).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let text = err.to_string();
        assert!(text.contains("$JOBHOST_STORE_FILE"), "{text}");
        assert!(text.contains("mode 0644"), "{text}");
        assert!(text.contains("chmod o-rw"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");

        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::fs::write(&file, "\n").unwrap();
        let err = resolve(None, None).unwrap_err().to_string();
        assert!(err.contains("is empty"), "{err}");
        std::fs::remove_file(&file).unwrap();
        let err = resolve(None, None).unwrap_err().to_string();
        assert!(err.starts_with("$JOBHOST_STORE_FILE reads"), "{err}");
        assert!(err.contains("cannot be read"), "{err}");
    }
}
