//! What several commands take from the command line the same way: the
//! process environment for `${VAR}`s, and which store a command reads.

use std::path::{Path, PathBuf};

use crate::app::config::{JobConfig, RunFlags};
use crate::core::error::Error;
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
    // With `--store`, the config is not read at all.
    let config = if flag.is_some() { None } else { config };
    JobConfig::load(&RunFlags {
        store: flag,
        config: config.map(Path::to_path_buf),
        ..RunFlags::default()
    })?
    .store(&env)
}
