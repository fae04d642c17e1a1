//! What several commands take from the command line the same way: the
//! process environment for `${VAR}`s, which store a command reads, and
//! the switches every command that runs a job takes from the environment
//! too.

use std::path::{Path, PathBuf};

use crate::app::config::{JobConfig, RunFlags};
use crate::core::error::Error;
use crate::run::receipt::ReceiptLevel;
use crate::store::StoreLocation;

/// Where `${VAR}` values come from: the process environment.
pub fn env(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name)
}

/// `--store` (or `$JOBHOST_STORE`), else the store of the job config
/// `config` names, else the per-user default; `${VAR}` in a URL is filled
/// in from the environment, as in a job config.
///
/// # Errors
///
/// `Error::Input` for a config that cannot be read or a bad store.
pub fn store_location(
    flag: Option<PathBuf>,
    config: Option<&Path>,
) -> Result<StoreLocation, Error> {
    // A verb's changes are signed with the job's key, as its runs' are.
    if let Some(c) = config {
        JobConfig::load(&RunFlags {
            config: Some(c.to_path_buf()),
            ..RunFlags::default()
        })?
        .use_signing_key()?;
    }
    // With `--store`, the config's store is not read at all.
    let config = if flag.is_some() { None } else { config };
    JobConfig::load(&RunFlags {
        store: flag,
        config: config.map(Path::to_path_buf),
        ..RunFlags::default()
    })?
    .store(&env)
}

/// The environment variable that requires a durable store, as
/// `--require-durable-store` does, for every command that runs a job.
pub const REQUIRE_DURABLE_STORE: &str = "JOBHOST_REQUIRE_DURABLE_STORE";

/// `--require-durable-store`, or `$JOBHOST_REQUIRE_DURABLE_STORE` set to
/// `1`, `true` or `yes` (`0`, `false`, `no` or empty: not required by the
/// environment; the flag and the config's `require_durable_store` still
/// decide).
///
/// # Errors
///
/// `Error::Input` naming the variable for any other value.
pub fn require_durable_store(flag: bool) -> Result<bool, Error> {
    let from_env = match std::env::var_os(REQUIRE_DURABLE_STORE) {
        None => false,
        Some(value) => parse_switch(REQUIRE_DURABLE_STORE, &value)?,
    };
    Ok(flag || from_env)
}

/// The environment variable that sets the receipt level, as `--receipt`
/// does, for every command that prints receipts.
pub const RECEIPT: &str = "JOBHOST_RECEIPT";

/// `--receipt`, else `$JOBHOST_RECEIPT`, else full: how much of each run
/// its receipt tells.
///
/// # Errors
///
/// `Error::Input` naming the flag or the variable for a value other than
/// `full` or `brief`.
pub fn receipt_level(flag: Option<&str>) -> Result<ReceiptLevel, Error> {
    let (given, text) = match (flag, std::env::var_os(RECEIPT)) {
        (Some(f), _) => ("--receipt".to_string(), f.to_string()),
        (None, Some(v)) => (format!("${RECEIPT}"), v.to_string_lossy().into_owned()),
        (None, None) => return Ok(ReceiptLevel::Full),
    };
    ReceiptLevel::parse(text.trim()).ok_or_else(|| {
        Error::input(format!(
            "{given} is `{}`: it takes full (the default: the report's summary, what each send \
             came to, the digest) or brief (without them)",
            crate::core::text::printable(&text)
        ))
    })
}

/// A yes/no environment variable: `1`/`true`/`yes` or `0`/`false`/`no`
/// (any case; surrounding blanks ignored), or empty for no.
fn parse_switch(name: &str, value: &std::ffi::OsStr) -> Result<bool, Error> {
    let text = value.to_string_lossy();
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Ok(true),
        "" | "0" | "false" | "no" => Ok(false),
        _ => Err(Error::input(format!(
            "${name} is `{}`: it takes 1, true or yes (require a durable store) or 0, false or \
             no; set one of them or unset it",
            crate::core::text::printable(&text)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_switch;
    use std::ffi::OsStr;

    #[test]
    fn switch_values() {
        for yes in ["1", "true", "YES", " yes "] {
            assert!(parse_switch("X", OsStr::new(yes)).unwrap(), "{yes}");
        }
        for no in ["", "0", "false", "No"] {
            assert!(!parse_switch("X", OsStr::new(no)).unwrap(), "{no}");
        }
        let err = parse_switch("X", OsStr::new("maybe")).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("$X is `maybe`"), "{err}");
    }
}
