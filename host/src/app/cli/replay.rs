//! `jobhost replay`: a recorded run (or the newest N, or an exported file)
//! run again against its journal with its recorded clock, and compared: 0
//! identical, 1 different, 2 bad input, 3 no comparable result (the guest
//! failed or diverged, or the host could not run it).

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Out, written};
use crate::app::args::store_location;
use crate::app::config::{JobConfig, RunFlags};
use crate::core::command::Target;
use crate::core::error::Error;
use crate::core::text::printable;
use crate::store;

/// `jobhost replay`.
#[derive(Debug, clap::Args)]
pub(super) struct ReplayArgs {
    /// The run's window key, as `history` shows it.
    #[arg(value_name = "KEY", required_unless_present_any = ["file", "last", "since"])]
    key: Option<String>,
    /// The claim store: a SQLite file or a postgres:// URL [default: $JOBHOST_STORE, else the store of --config, else ~/.local/state/jobhost/jobhost.db].
    #[arg(long, value_name = "PATH|URL", env = "JOBHOST_STORE")]
    store: Option<PathBuf>,
    /// A job config whose store holds the run (its `store`, or
    /// state/jobhost.db beside it); with --last, its job is the one replayed.
    #[arg(long, value_name = "FILE", conflicts_with = "file")]
    config: Option<PathBuf>,
    /// Replay a file written by `jobhost export` instead; no store needed
    /// (`--store` is then ignored). Its embedded component runs unless
    /// --component names another.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["key", "last"])]
    file: Option<PathBuf>,
    /// Replay the job's newest N windows that have a committed report and
    /// journal, all with the component --component names (a swap preview).
    #[arg(long, value_name = "N", conflicts_with = "key", requires = "component")]
    last: Option<String>,
    /// Replay every window of the job from this instant on that has a
    /// committed report and journal, with the component --component names.
    #[arg(
        long,
        value_name = "TIME",
        conflicts_with_all = ["key", "last", "file"],
        requires = "component"
    )]
    since: Option<String>,
    /// With --last or --since: write the windows whose report or messages
    /// the component changes to this file, for `jobhost rerun --plan`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["key", "file"])]
    plan: Option<PathBuf>,
    /// With --last or --since: the job whose windows to replay [default:
    /// the config's job, else the store's only job].
    #[arg(long, value_name = "NAME")]
    job: Option<String>,
    /// Replay with this component instead of the recorded one.
    #[arg(long, value_name = "PATH")]
    component: Option<PathBuf>,
    /// Replay this revision of the window (`history KEY` lists them)
    /// [default: the newest].
    #[arg(long, value_name = "N", conflicts_with = "file", value_parser = clap::value_parser!(u32).range(1..))]
    revision: Option<u32>,
    /// Give the guest this value for a parameter instead of the recorded
    /// one (or add it); repeat for more.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    params: Vec<String>,
    /// One JSON object per window replayed (and, with --last, a summary
    /// object last) instead of text.
    #[arg(long)]
    json: bool,
    /// Compiled-code cache folder, where the recorded component is looked up.
    #[arg(long, value_name = "DIR", env = "JOBHOST_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
}

/// Replays a run (or with `--last`, a job's newest windows) and prints the
/// verdicts; 0 identical, 1 different, 3 no comparable result.
impl ReplayArgs {
    /// How the commands this prints name the store.
    pub(super) fn target(&self) -> Target {
        crate::app::config::command_target(self.store.as_deref(), self.config.as_deref())
    }
}

/// Replays and prints the verdicts; an error that is not bad input is "no
/// comparable result" (3), said on stderr.
pub(super) fn main(args: ReplayArgs) -> Result<i32, Error> {
    match replay(args) {
        Err(e) if e.exit_code() != 2 => {
            crate::core::text::say("error", &printable(&e.chain()));
            Ok(3)
        }
        other => other,
    }
}

fn replay(args: ReplayArgs) -> Result<i32, Error> {
    use crate::guest::sandbox::ComponentFile;
    use crate::run::replay::{self, Recording, Tally, Verdict};
    let params = replay::parse_params(&args.params)?;
    let last = args.last.as_deref().map(last_count).transpose()?;
    let sandbox = crate::guest::sandbox::Sandbox::new()?;
    let cache = crate::guest::cache::CompileCache::new(
        args.cache_dir
            .clone()
            .or_else(crate::guest::cache::CompileCache::default_dir),
    );
    let since = args
        .since
        .as_deref()
        .map(|t| crate::core::clock::parse_instant("--since", t))
        .transpose()?;
    if last.is_some() || since.is_some() {
        return replay_many(&args, (last, since), &params, &sandbox, &cache);
    }
    if args.job.is_some() || args.plan.is_some() {
        return Err(Error::input(
            "--job and --plan go with --last N or --since TIME: they name the windows replayed",
        ));
    }
    let (key, mut recording) = match (&args.file, &args.key) {
        (Some(file), _) => {
            let recording = Recording::from_file(&Recording::read_file(file)?)?;
            (recording.journal.context.key.clone(), recording)
        }
        (None, key) => {
            let mut store = store::open_read_only(&store_location(
                args.store.clone(),
                args.config.as_deref(),
            )?)?;
            let key = key.clone().unwrap_or_default();
            let window_key = crate::core::window::WindowKey::from_stored(key.clone());
            let recording = match args.revision {
                Some(n) => Recording::from_revision(store.as_mut(), &window_key, n)?,
                None => Recording::from_store(store.as_mut(), &window_key)?,
            };
            (key, recording)
        }
    };
    let embedded = recording.embedded.take();
    let (component, whence) = match (&args.component, embedded) {
        (Some(p), _) => (
            sandbox.load(&mut ComponentFile::open(p, &cache)?, &cache)?,
            "",
        ),
        // Checked against the recorded digest when the file was read.
        (None, Some(wasm)) => {
            let shown = format!(
                "the component in {}",
                args.file.as_deref().unwrap_or(Path::new("")).display()
            );
            (
                sandbox.load(&mut ComponentFile::in_memory(shown, wasm), &cache)?,
                " (the one the file carries)",
            )
        }
        (None, None) => {
            let hex = recording
                .component
                .strip_prefix("sha256:")
                .unwrap_or(&recording.component);
            (sandbox.load_cached(hex, &cache)?, "")
        }
    };
    let overridden = recording.override_params(&params);
    let mut out = Out::stdout();
    if !args.json {
        // A replay file is input: its key and texts are shown escaped.
        writeln!(
            out,
            "{}",
            printable(&format!(
                "replaying {key} (recorded with {}) with {}{whence}",
                recording.component, component.digest
            ))
        )
        .map_err(written)?;
        for o in &overridden {
            writeln!(out, "{}", printable(&o.to_string())).map_err(written)?;
        }
    }
    let verdict = replay::judge(
        &recording,
        replay::replay(&sandbox, &component, &recording)?,
    );
    let mut tally = Tally::default();
    tally.add(&verdict);
    if args.json {
        super::write_json(
            &mut out,
            &crate::run::outputs::Replayed::of(
                &key,
                &verdict,
                Some(&recording.component),
                &component.digest,
                &overridden,
            ),
        )?;
        return Ok(tally.exit_code());
    }
    match &verdict {
        Verdict::Identical { messages, bytes } => {
            writeln!(
                out,
                "identical: the report and {messages} message(s) ({bytes} bytes) are bit for bit what was recorded"
            ).map_err(written)?;
        }
        Verdict::Different(diffs) => {
            writeln!(out, "different: {} difference(s)", diffs.len()).map_err(written)?;
            for d in diffs {
                writeln!(out, "  {}", printable(d)).map_err(written)?;
            }
        }
        Verdict::Diverged(reason) | Verdict::Failed(reason) => {
            writeln!(out, "{}: {}", verdict.name(), printable(reason)).map_err(written)?;
        }
    }
    Ok(tally.exit_code())
}

/// `--last N`: a number of windows, at least 1.
fn last_count(text: &str) -> Result<usize, Error> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::input(format!(
            "invalid `--last {}`: give how many windows to replay, 1 or more (for example \
             --last 7)",
            crate::core::text::cap(text, 200)
        ))),
    }
}

/// `replay --last N` and `replay --since TIME`: the job's newest N
/// recorded windows, or those from an instant on, against one component,
/// compiled once; one line (or JSON object) per window and a summary; with
/// `--plan`, the windows whose output changes written to a file.
fn replay_many(
    args: &ReplayArgs,
    (last, since): (Option<usize>, Option<jiff::Timestamp>),
    params: &[(String, String)],
    sandbox: &crate::guest::sandbox::Sandbox,
    cache: &crate::guest::cache::CompileCache,
) -> Result<i32, Error> {
    use crate::run::replay::{self, Recording, Tally, Verdict};
    let mut store =
        store::open_read_only(&store_location(args.store.clone(), args.config.as_deref())?)?;
    let job = match (&args.job, &args.config) {
        (Some(j), _) => Some(j.clone()),
        (None, Some(file)) => Some(
            JobConfig::load(&RunFlags {
                config: Some(file.clone()),
                ..RunFlags::default()
            })?
            .name()?
            .as_str()
            .to_string(),
        ),
        (None, None) => None,
    };
    let job = replay::pick_job(store.as_mut(), job.as_deref())?;
    let keys: Vec<(crate::core::window::WindowKey, Option<u32>)> = match since {
        Some(t) => replay::recorded_since(store.as_mut(), &job, t)?
            .into_iter()
            .map(|(k, r)| (k, Some(r)))
            .collect(),
        None => replay::last_recorded(store.as_mut(), &job, last.unwrap_or(1))?
            .into_iter()
            .map(|k| (k, None))
            .collect(),
    };
    let asked = last.unwrap_or(keys.len());
    // Clap makes --last require --component.
    let path = args.component.clone().unwrap_or_default();
    let component = sandbox.load(
        &mut crate::guest::sandbox::ComponentFile::open(&path, cache)?,
        cache,
    )?;
    let mut out = Out::stdout();
    if !args.json {
        let fewer = if keys.len() < asked {
            format!(
                " (only {} of the {asked} asked for have a committed report and journal)",
                keys.len()
            )
        } else {
            String::new()
        };
        let which = match since {
            Some(t) => format!(
                "the {} window(s) of {job} since {}",
                keys.len(),
                crate::core::clock::rfc3339(t)
            ),
            None => format!("the last {} window(s) of {job}{fewer}", keys.len()),
        };
        writeln!(
            out,
            "{}",
            printable(&format!(
                "replaying {which} with {} ({})",
                component.digest,
                path.display()
            ))
        )
        .map_err(written)?;
    }
    let mut tally = Tally::default();
    let mut said: Option<Vec<replay::Overridden>> = None;
    let mut planned = Vec::new();
    let mut not_compared = Vec::new();
    for (key, revision) in &keys {
        let replayed = match revision {
            Some(n) => Recording::from_revision(store.as_mut(), key, *n),
            None => Recording::from_store(store.as_mut(), key),
        }
        .and_then(|mut recording| {
            let overridden = recording.override_params(params);
            let replayed = replay::replay(sandbox, &component, &recording)?;
            let destinations = match &replayed {
                replay::Replayed::Report { messages, .. } => {
                    replay::changed_destinations(&recording, messages)
                }
                replay::Replayed::Failed { .. } => Vec::new(),
            };
            let revision = recording.journal.context.revision;
            Ok((
                replay::judge(&recording, replayed),
                overridden,
                Some(recording.component),
                (revision, destinations),
            ))
        });
        // A window that cannot be replayed is said as such; the others go on.
        let (verdict, overridden, recorded, (revision, destinations)) =
            replayed.unwrap_or_else(|e| {
                (
                    Verdict::Failed(e.chain()),
                    Vec::new(),
                    None,
                    (0, Vec::new()),
                )
            });
        match &verdict {
            Verdict::Different(diffs) => planned.push(replay::PlannedRerun {
                key: key.to_string(),
                revision,
                differences: diffs.clone(),
                destinations,
            }),
            Verdict::Diverged(_) | Verdict::Failed(_) => not_compared.push(key.to_string()),
            Verdict::Identical { .. } => {}
        }
        tally.add(&verdict);
        if args.json {
            super::write_json(
                &mut out,
                &crate::run::outputs::Replayed::of(
                    key.as_str(),
                    &verdict,
                    recorded.as_deref(),
                    &component.digest,
                    &overridden,
                ),
            )?;
            continue;
        }
        // Overrides are said before the first window they apply to, and
        // again when the recorded values they replace change.
        if !overridden.is_empty() && said.as_ref() != Some(&overridden) {
            for o in &overridden {
                writeln!(out, "{}", printable(&o.to_string())).map_err(written)?;
            }
            said = Some(overridden);
        }
        let line = match &verdict {
            Verdict::Identical { .. } => format!("{key}: identical"),
            Verdict::Different(diffs) => {
                let more = match diffs.len() {
                    0 | 1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                };
                format!(
                    "{key}: different: {}{more}",
                    diffs.first().map_or("", String::as_str)
                )
            }
            Verdict::Diverged(reason) | Verdict::Failed(reason) => {
                format!("{key}: {}: {reason}", verdict.name())
            }
        };
        writeln!(out, "{}", printable(&line)).map_err(written)?;
    }
    if args.json {
        let summary = crate::run::outputs::ReplaySummary {
            tally,
            job: job.to_string(),
            component: component.digest.clone(),
        };
        super::write_json(&mut out, &summary)?;
    } else {
        writeln!(out, "{tally}").map_err(written)?;
    }
    if let Some(file) = &args.plan {
        let plan = replay::RerunPlan {
            plan: 1,
            job: job.to_string(),
            component: component.digest.clone(),
            made_at: crate::core::clock::rfc3339(jiff::Timestamp::now()),
            replayed: keys.len(),
            windows: planned,
            not_compared,
        };
        write_plan(file, &plan)?;
        crate::core::text::say(
            "note",
            &printable(&format!(
                "wrote the plan {}: {} window(s) to rerun{}; `jobhost rerun --plan {} \
                 --component {} --reason TEXT` reruns them once the job runs that component",
                file.display(),
                plan.windows.len(),
                if plan.not_compared.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({} window(s) could not be compared and are not in it)",
                        plan.not_compared.len()
                    )
                },
                file.display(),
                path.display()
            )),
        );
    }
    Ok(tally.exit_code())
}

/// Writes `plan` to `file` whole or not at all (a file beside it, renamed).
fn write_plan(file: &Path, plan: &crate::run::replay::RerunPlan) -> Result<(), Error> {
    let shown = printable(&file.display().to_string()).into_owned();
    let text = serde_json::to_string_pretty(plan)
        .map_err(|e| Error::host("cannot encode the plan").because(e))?;
    let dir = file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| Error::input(format!("cannot write the plan `{shown}`: {e}")))?;
    tmp.write_all(text.as_bytes())
        .and_then(|()| tmp.write_all(b"\n"))
        .map_err(|e| Error::input(format!("cannot write the plan `{shown}`: {e}")))?;
    tmp.persist(file)
        .map_err(|e| Error::input(format!("cannot write the plan `{shown}`: {}", e.error)))?;
    Ok(())
}
