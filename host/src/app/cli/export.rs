//! `jobhost export KEY`: a recorded run as a self-contained replay file.

use std::path::PathBuf;

use super::Out;
use crate::app::args::store_location;
use crate::app::config::{JobConfig, RunFlags};
use crate::core::command::Target;
use crate::core::error::Error;
use crate::core::text::printable;
use crate::store;

/// `jobhost export`.
#[derive(Debug, clap::Args)]
pub(super) struct ExportArgs {
    /// The run's window key, as `history` shows it.
    #[arg(value_name = "KEY")]
    key: String,
    /// The replay file to write.
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// The claim store: a SQLite file or a postgres:// URL [default: $JOBHOST_STORE, else the store of --config, else ~/.local/state/jobhost/jobhost.db].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// A job config whose store holds the run (its `store`, or
    /// state/jobhost.db beside it); its `component` is embedded when it is
    /// the one that ran.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The component (.wasm) that ran, to embed in the file; refused unless
    /// its digest is the recorded one.
    #[arg(long, value_name = "PATH", conflicts_with = "without_component")]
    component: Option<PathBuf>,
    /// Write the file without the component (`replay --file` then needs
    /// --component, or the compile cache).
    #[arg(long)]
    without_component: bool,
}

impl ExportArgs {
    /// How the commands this prints name the store.
    pub(super) fn target(&self) -> Target {
        crate::app::config::command_target(self.store.as_deref(), self.config.as_deref())
    }
}

/// Writes a run's replay file, with the component that ran unless
/// `--without-component`: 0, or the error.
pub(super) fn main(args: ExportArgs) -> Result<i32, Error> {
    let mut store =
        store::open_read_only(&store_location(args.store.clone(), args.config.as_deref())?)?;
    let key = crate::core::window::WindowKey::from_stored(args.key);
    let mut recording = crate::run::replay::Recording::from_store(store.as_mut(), &key)?;
    if recording.bodies_pruned {
        return Err(Error::input(format!(
            "run `{key}` was pruned (`jobhost prune --keep-journals` kept its journal, not its \
             delivered message bodies): a replay file of it could not compare its messages; \
             export runs before they are pruned"
        )));
    }
    if !args.without_component {
        // `--component`, else the config's `component`.
        let from_config = match (&args.component, &args.config) {
            (None, Some(file)) => JobConfig::load(&RunFlags {
                config: Some(file.clone()),
                ..RunFlags::default()
            })?
            .component()
            .ok(),
            _ => None,
        };
        let Some(path) = args.component.clone().or(from_config) else {
            return Err(Error::input(format!(
                "run `{key}` was recorded with component {}, which export embeds: pass \
                 --component with its .wasm file or --config with the job's config, or \
                 --without-component to write the file without it",
                recording.component
            )));
        };
        recording.embed_file(&path)?;
    }
    let bytes = recording.to_file()?;
    let out = &args.output;
    let tmp = out.with_extension("partial");
    std::fs::write(&tmp, &bytes)
        .and_then(|()| std::fs::rename(&tmp, out))
        .map_err(|e| Error::input(format!("cannot write `{}`", out.display())).because(e))?;
    let carried = match &recording.embedded {
        Some(wasm) => format!("embedded ({} bytes)", wasm.len()),
        None => "not embedded".to_string(),
    };
    Out::stdout().line(&printable(&format!(
        "wrote {} ({} bytes): {key}, component {} {carried}, {} message(s)",
        out.display(),
        bytes.len(),
        recording.component,
        recording.messages.len()
    )))?;
    Ok(0)
}
