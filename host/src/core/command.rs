//! The commands jobhost prints for a person to run next (`jobhost replay
//! KEY`, `jobhost retry KEY`, `jobhost resume JOB`): each names the job
//! config or the store it acts on, as the invocation that printed it was
//! given them, so that it works when pasted into the same shell. A
//! [`Target`] is those flags; the command that prints knows it (a job's is
//! in `run::Job`), and [`process_target`] holds the one a single-store
//! command line gave, for messages made where no job is at hand.

use std::path::Path;
use std::sync::OnceLock;

/// The flags that name what a printed command acts on: `--config FILE`,
/// `--store LOCATION` (only where the invocation was given one that the
/// environment does not name already), both, or neither.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// The flags, each word shell-quoted, each preceded by a space.
    flags: String,
}

impl Target {
    /// The flags for a job config at `config` (as the command line named
    /// it) and a store given as `store` (its text as shown, with any
    /// password hidden), each when there is one.
    pub fn new(config: Option<&Path>, store: Option<&str>) -> Target {
        let mut flags = String::new();
        if let Some(file) = config {
            flags.push_str(" --config ");
            flags.push_str(&shell_quote(&file.to_string_lossy()));
        }
        if let Some(store) = store {
            flags.push_str(" --store ");
            flags.push_str(&shell_quote(store));
        }
        Target { flags }
    }

    /// `jobhost WORDS` and then the flags: `words` is the verb and its
    /// arguments, already quoted where they need to be.
    pub fn command(&self, words: &str) -> String {
        format!("jobhost {words}{}", self.flags)
    }

    /// Whether the target names nothing (commands print as `jobhost WORDS`).
    pub fn is_empty(&self) -> bool {
        self.flags.is_empty()
    }
}

static PROCESS_TARGET: OnceLock<Target> = OnceLock::new();

/// Sets what this process's command line named, once, for
/// [`process_target`]; a second call changes nothing.
pub fn set_process_target(target: Target) {
    let _ = PROCESS_TARGET.set(target);
}

/// What this process's command line named (a single job's config or one
/// store), for messages made where no job is at hand; empty when it named
/// several, or none was set.
pub fn process_target() -> Target {
    PROCESS_TARGET.get().cloned().unwrap_or_default()
}

/// `text` as one POSIX shell word: as it is when it holds only characters
/// no shell treats specially, else in single quotes.
pub fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_:.+@/=,%".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_printed_command_names_the_config_and_quotes_what_a_shell_would_split() {
        let t = Target::new(Some(Path::new("my jobs/signups.toml")), None);
        assert_eq!(
            t.command("replay signups:2026-11-27"),
            "jobhost replay signups:2026-11-27 --config 'my jobs/signups.toml'"
        );
        let t = Target::new(None, Some("postgres://jobhost:***@db/jobs"));
        assert_eq!(
            t.command("history"),
            "jobhost history --store 'postgres://jobhost:***@db/jobs'"
        );
        assert_eq!(Target::default().command("history"), "jobhost history");
    }

    #[test]
    fn shell_quoting_keeps_plain_words_and_escapes_quotes() {
        assert_eq!(
            shell_quote("daily-sales:2026-11-08"),
            "daily-sales:2026-11-08"
        );
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a;rm -rf"), "'a;rm -rf'");
    }
}
