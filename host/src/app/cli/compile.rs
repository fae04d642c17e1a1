//! `jobhost compile`: fills the compile cache ahead of time (the work is
//! `app::compile`'s).

use std::path::PathBuf;

use crate::core::error::Error;

/// `jobhost compile`.
#[derive(Debug, clap::Args)]
pub(super) struct CompileArgs {
    /// The component files (.wasm).
    #[arg(value_name = "COMPONENT", required = true)]
    components: Vec<PathBuf>,
    /// The compile cache folder [default: $JOBHOST_CACHE_DIR, else $XDG_CACHE_HOME/jobhost, else ~/.cache/jobhost].
    #[arg(long, value_name = "DIR", env = "JOBHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
}

/// Compiles each component into the cache: 0, or the first error.
pub(super) fn main(args: CompileArgs) -> Result<i32, Error> {
    crate::app::compile::compile(crate::app::compile::CompileRequest {
        components: args.components,
        cache_dir: args.cache_dir,
    })?;
    Ok(0)
}
