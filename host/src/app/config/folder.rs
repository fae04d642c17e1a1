//! A folder of job files (`--jobs DIR`): every `*.toml` file directly in
//! it (not a hidden one) is a job. The daemon reads the folder again when
//! a file is added, changed or removed, and every file at once on SIGHUP
//! (so a file refused for what lay outside it is tried again): while it
//! sleeps it compares each file's size and modification time about once a
//! second (polling, so that it works the same on every filesystem,
//! network ones included), and it looks again before every wake-up. A file
//! that does not load, or whose job another file names too, is refused
//! alone, in one line on stderr naming the file; every other job goes on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::app::config::{JobConfig, RunFlags};
use crate::core::error::{Error, Result};
use crate::core::text::{printable, say};
use crate::run::Job;
use crate::run::daemon::JobSet;

/// How often a sleeping daemon compares the folder's files.
const LOOK_EVERY: Duration = Duration::from_secs(1);

/// The `*.toml` files of `dir`, sorted.
///
/// # Errors
///
/// `Error::Input` when `dir` is not a folder that can be read.
pub fn job_files(dir: &Path) -> Result<Vec<PathBuf>> {
    Ok(listing(dir)?.into_keys().collect())
}

/// What tells that a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

fn listing(dir: &Path) -> Result<BTreeMap<PathBuf, Stamp>> {
    let unreadable = |e: std::io::Error| {
        Error::input(format!(
            "cannot read the job folder `{}`: give --jobs a folder of job files (*.toml)",
            dir.display()
        ))
        .because(e)
    };
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        // A file removed between the listing and this look is gone.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        files.insert(
            path,
            Stamp {
                modified: meta.modified().ok(),
                len: meta.len(),
            },
        );
    }
    Ok(files)
}

/// How a folder's file becomes a job: the flags the daemon was given for
/// every job.
#[derive(Debug, Clone, Default)]
pub struct Loading {
    /// `--store`.
    pub store: Option<PathBuf>,
    /// `--component`.
    pub component: Option<PathBuf>,
    /// `--require-durable-store`.
    pub require_durable_store: bool,
}

impl Loading {
    /// The job of `file`, with every credential filled in (not yet checked
    /// against the component or the store).
    ///
    /// # Errors
    ///
    /// What is wrong with the file, naming the key.
    pub fn load(&self, file: &Path) -> Result<Job> {
        JobConfig::load(&RunFlags {
            config: Some(file.to_path_buf()),
            store: self.store.clone(),
            component: self.component.clone(),
            require_durable_store: self.require_durable_store,
            ..RunFlags::default()
        })?
        .job(&crate::app::args::env)
    }
}

/// A file the daemon does not run, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Refused {
    /// The file.
    pub file: String,
    /// Why, naming the key or the other file.
    pub why: String,
}

/// One file as last read.
struct Entry<T> {
    stamp: Stamp,
    loaded: std::result::Result<T, String>,
}

/// How a file becomes what the folder holds (a job the daemon runs, a job
/// a dashboard shows), with every check it must pass: a refusal is the
/// file's alone.
pub type Load<T> = Box<dyn FnMut(&Path) -> Result<T> + Send>;

/// Told of the jobs and the refused files whenever they change (a
/// dashboard's list).
pub type OnChange<T> = Box<dyn FnMut(Vec<(PathBuf, T)>, Vec<Refused>) + Send>;

/// What a folder's jobs are named by.
pub trait Named: Clone {
    /// The job's name.
    fn job_name(&self) -> String;
}

impl Named for Job {
    fn job_name(&self) -> String {
        self.name().as_str().to_string()
    }
}

/// A shared job: the daemon's folder keeps one per file, the same until
/// the file changes.
impl<T: Named> Named for Arc<T> {
    fn job_name(&self) -> String {
        (**self).job_name()
    }
}

/// The jobs of a folder, as the daemon runs them (or a dashboard shows
/// them).
pub struct JobFolder<T: Named = Job> {
    dir: PathBuf,
    load: Load<T>,
    on_change: Option<OnChange<T>>,
    files: BTreeMap<PathBuf, Entry<T>>,
    /// The file each running job came from.
    running: BTreeMap<String, PathBuf>,
    refused: Vec<Refused>,
    hangup: Option<Arc<AtomicBool>>,
    looked: Option<Instant>,
    /// The folder's error was said, and is not said again until the
    /// folder can be read again.
    unreadable_said: bool,
    /// Whether a job taken in is run (the daemon) or only shown (a
    /// dashboard), for what the notes say.
    shows_only: bool,
}

impl<T: Named> JobFolder<T> {
    /// The jobs of `dir`, read now, each file through `load`; `hangup`,
    /// when set, makes the next look read the folder again.
    ///
    /// # Errors
    ///
    /// `Error::Input` when `dir` is not a folder that can be read.
    pub fn open(
        dir: &Path,
        load: Load<T>,
        hangup: Option<Arc<AtomicBool>>,
    ) -> Result<JobFolder<T>> {
        let mut folder = JobFolder {
            dir: dir.to_path_buf(),
            load,
            on_change: None,
            files: BTreeMap::new(),
            running: BTreeMap::new(),
            refused: Vec::new(),
            hangup,
            looked: None,
            unreadable_said: false,
            shows_only: false,
        };
        let listing = listing(dir)?;
        folder.take_in(listing);
        Ok(folder)
    }

    /// Says in its notes that a job taken in is shown, not run (a
    /// dashboard's folder).
    #[must_use]
    pub fn shows_only(mut self) -> Self {
        self.shows_only = true;
        self
    }

    /// Tells `on_change` of the jobs and refused files now, and of every
    /// change from now on.
    pub fn on_change(&mut self, mut on_change: OnChange<T>) {
        on_change(self.with_files(), self.refused.clone());
        self.on_change = Some(on_change);
    }

    /// The jobs it runs now.
    pub fn jobs(&self) -> Vec<T> {
        self.with_files().into_iter().map(|(_, j)| j).collect()
    }

    /// The jobs it runs now, each with its file.
    pub fn with_files(&self) -> Vec<(PathBuf, T)> {
        self.running
            .values()
            .filter_map(|file| {
                let job = self.files.get(file)?.loaded.as_ref().ok()?;
                Some((file.clone(), job.clone()))
            })
            .collect()
    }

    /// The files it does not run, and why.
    pub fn refused(&self) -> &[Refused] {
        &self.refused
    }

    /// Reads the folder again if a file was added, changed or removed;
    /// returns whether one was.
    pub fn refresh(&mut self) -> bool {
        self.refresh_files(false)
    }

    /// [`JobFolder::refresh`]; with `every_file`, each file is read again
    /// whether it changed or not.
    fn refresh_files(&mut self, every_file: bool) -> bool {
        self.looked = Some(Instant::now());
        match listing(&self.dir) {
            Ok(now) => {
                self.unreadable_said = false;
                if !every_file && !self.differs(&now) {
                    return false;
                }
                if every_file {
                    self.files.clear();
                }
                self.take_in(now);
                true
            }
            Err(e) => {
                // The folder went away or became unreadable: the jobs read
                // from it go on as they were.
                if !std::mem::replace(&mut self.unreadable_said, true) {
                    say(
                        "error",
                        &printable(&format!(
                            "{e:#}; the jobs read from it before go on as they were"
                        )),
                    );
                }
                false
            }
        }
    }

    /// Whether `now` (a listing) has a file added, changed or removed.
    fn differs(&self, now: &BTreeMap<PathBuf, Stamp>) -> bool {
        now.len() != self.files.len()
            || now
                .iter()
                .any(|(f, s)| self.files.get(f).is_none_or(|e| e.stamp != *s))
    }

    fn take_in(&mut self, now: BTreeMap<PathBuf, Stamp>) {
        let mut before = std::mem::take(&mut self.files);
        for (file, stamp) in now {
            let entry = match before.remove(&file) {
                Some(e) if e.stamp == stamp => e,
                _ => Entry {
                    stamp,
                    loaded: (self.load)(&file).map_err(|e| e.chain()),
                },
            };
            self.files.insert(file, entry);
        }
        // Which file runs which job: a job named by two files runs from
        // the one it ran from before, and is refused in the other; a job
        // two new files name runs from neither.
        let mut by_name: BTreeMap<String, Vec<&PathBuf>> = BTreeMap::new();
        let mut refused = Vec::new();
        for (file, e) in &self.files {
            match &e.loaded {
                Ok(job) => by_name.entry(job.job_name()).or_default().push(file),
                Err(why) => refused.push(Refused {
                    file: file.display().to_string(),
                    why: why.clone(),
                }),
            }
        }
        let mut running = BTreeMap::new();
        for (name, files) in by_name {
            if files.len() == 1 {
                running.insert(name, files[0].clone());
                continue;
            }
            let kept = self.running.get(&name).filter(|f| files.contains(f));
            let list = files
                .iter()
                .map(|f| format!("`{}`", f.display()))
                .collect::<Vec<_>>()
                .join(" and ");
            for f in &files {
                if Some(*f) == kept {
                    continue;
                }
                refused.push(Refused {
                    file: f.display().to_string(),
                    why: format!(
                        "job `{name}` is named by {list}: give each file a job name of its own{}",
                        kept.map(|k| format!(" (it runs from `{}`)", k.display()))
                            .unwrap_or_default()
                    ),
                });
            }
            if let Some(k) = kept {
                running.insert(name, k.clone());
            }
        }
        for (name, file) in &self.running {
            if !running.contains_key(name) {
                say(
                    "note",
                    &format!(
                        "job `{name}` (from `{}`) {}: its file was removed, refused or names \
                         another job",
                        printable(&file.display().to_string()),
                        if self.shows_only {
                            "is no longer shown"
                        } else {
                            "claims nothing more"
                        }
                    ),
                );
            }
        }
        for (name, file) in &running {
            if self.running.get(name) != Some(file) && self.looked.is_some() {
                say(
                    "note",
                    &format!(
                        "job `{name}` from `{}` joins the {}",
                        printable(&file.display().to_string()),
                        if self.shows_only {
                            "dashboard"
                        } else {
                            "daemon"
                        }
                    ),
                );
            }
        }
        // Each refusal is said when it is new (a file fixed and broken
        // again is said again).
        for r in refused.iter().filter(|r| !self.refused.contains(r)) {
            say(
                "error",
                &printable(&format!(
                    "job file `{}` is refused: {}; the other jobs go on",
                    r.file, r.why
                )),
            );
        }
        let changed = running != self.running || refused != self.refused;
        self.running = running;
        self.refused = refused;
        if changed || self.looked.is_none() {
            let (jobs, refused) = (self.with_files(), self.refused.clone());
            if let Some(tell) = &mut self.on_change {
                tell(jobs, refused);
            }
        }
    }

    /// Whether a change waits to be taken in: SIGHUP, or (looked at no
    /// more than about once a second) a file added, changed or removed.
    pub fn waiting(&mut self) -> bool {
        if self
            .hangup
            .as_ref()
            .is_some_and(|h| h.load(Ordering::SeqCst))
        {
            return true;
        }
        if self.looked.is_some_and(|t| t.elapsed() < LOOK_EVERY) {
            return false;
        }
        self.looked = Some(Instant::now());
        listing(&self.dir).is_ok_and(|now| self.differs(&now))
    }

    /// Takes in a change if one waits: what a server's thread does about
    /// every second. Returns whether the jobs or refusals were read again.
    pub fn take_waiting(&mut self) -> bool {
        if !self.waiting() {
            return false;
        }
        let every_file = self.take_hangup();
        self.refresh_files(every_file)
    }

    /// Whether a SIGHUP came (taking it): then every file is read again,
    /// changed or not, so a file refused for what lay outside it (a
    /// component not there yet, a store not reachable) is tried again.
    fn take_hangup(&mut self) -> bool {
        self.hangup
            .as_ref()
            .is_some_and(|h| h.swap(false, Ordering::SeqCst))
    }
}

impl JobSet for JobFolder<Arc<Job>> {
    fn current(&mut self) -> Vec<Arc<Job>> {
        let every_file = self.take_hangup();
        self.refresh_files(every_file);
        self.jobs()
    }

    fn changed(&mut self) -> bool {
        self.waiting()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, file: &str, job: &str, lease: u64) {
        std::fs::write(
            dir.join(file),
            format!(
                "job = \"{job}\"\nwindow = \"day\"\ntimezone = \"UTC\"\ncomponent = \"r.wasm\"\n\
                 delay_seconds = {lease}\n\n[destinations.out]\ntype = \"file\"\npath = \"out.jsonl\"\n"
            ),
        )
        .unwrap();
    }

    fn folder(dir: &Path) -> JobFolder {
        let loading = Loading {
            store: Some(dir.join("s.db")),
            ..Loading::default()
        };
        JobFolder::open(dir, Box::new(move |f| loading.load(f)), None).unwrap()
    }

    fn names(f: &JobFolder) -> Vec<(String, u64)> {
        f.jobs()
            .iter()
            .map(|j| (j.name().as_str().to_string(), j.schedule.delay.as_secs()))
            .collect()
    }

    #[test]
    fn added_changed_and_removed_files_change_the_jobs_and_bad_ones_are_refused_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write(dir, "a.toml", "a", 60);
        std::fs::write(dir.join(".hidden.toml"), "not read").unwrap();
        std::fs::write(dir.join("b.txt"), "not a job file").unwrap();
        let mut f = folder(dir);
        assert_eq!(names(&f), [("a".to_string(), 60)]);
        assert!(f.refused().is_empty());
        assert!(!f.refresh(), "nothing changed");

        write(dir, "b.toml", "b", 60);
        std::fs::write(dir.join("bad.toml"), "job = \"bad\"\nwindow = [").unwrap();
        assert!(f.refresh());
        assert_eq!(names(&f), [("a".to_string(), 60), ("b".to_string(), 60)]);
        assert_eq!(f.refused().len(), 1);
        assert!(
            f.refused()[0].file.ends_with("bad.toml"),
            "{:?}",
            f.refused()
        );

        // A changed file is read again (its size differs).
        write(dir, "a.toml", "a", 120);
        assert!(f.refresh());
        assert_eq!(names(&f)[0], ("a".to_string(), 120));

        // A second file naming a running job is refused; the job runs on.
        write(dir, "a2.toml", "a", 60);
        assert!(f.refresh());
        assert_eq!(names(&f).len(), 2);
        let twice = f
            .refused()
            .iter()
            .find(|r| r.file.ends_with("a2.toml"))
            .expect("the second file is refused");
        assert!(
            twice.why.contains("a.toml`") && twice.why.contains("a2.toml`"),
            "{twice:?}"
        );

        std::fs::remove_file(dir.join("b.toml")).unwrap();
        std::fs::remove_file(dir.join("bad.toml")).unwrap();
        assert!(f.refresh());
        assert_eq!(names(&f), [("a".to_string(), 120)]);
        assert_eq!(f.refused().len(), 1, "only the duplicate is left refused");
    }

    #[test]
    fn two_new_files_naming_one_job_run_neither_and_a_failed_check_refuses_its_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        write(dir, "x.toml", "same", 60);
        write(dir, "y.toml", "same", 60);
        write(dir, "z.toml", "checked", 60);
        let loading = Loading {
            store: Some(dir.join("s.db")),
            ..Loading::default()
        };
        let f = JobFolder::open(
            dir,
            Box::new(move |file| {
                let j = loading.load(file)?;
                match j.name().as_str() {
                    "checked" => Err(Error::input("component `r.wasm` is missing")),
                    _ => Ok(j),
                }
            }),
            None,
        )
        .unwrap();
        assert!(f.jobs().is_empty());
        let why: Vec<&str> = f.refused().iter().map(|r| r.why.as_str()).collect();
        assert_eq!(why.len(), 3, "{why:?}");
        assert!(why.iter().any(|w| w.contains("r.wasm")), "{why:?}");
    }

    #[test]
    fn a_hangup_is_a_change() {
        let tmp = tempfile::tempdir().unwrap();
        let hup = Arc::new(AtomicBool::new(false));
        let loading = Loading::default();
        let mut f: JobFolder<Arc<Job>> = JobFolder::open(
            tmp.path(),
            Box::new(move |f| loading.load(f).map(Arc::new)),
            Some(hup.clone()),
        )
        .unwrap();
        assert!(f.current().is_empty());
        assert!(!f.changed());
        hup.store(true, Ordering::SeqCst);
        assert!(f.changed());
        f.current();
        assert!(!hup.load(Ordering::SeqCst), "taken in");
    }

    #[test]
    fn a_hangup_reads_every_file_again_so_a_cause_fixed_outside_it_counts() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        write(&dir, "a.toml", "a", 60);
        let hup = Arc::new(AtomicBool::new(false));
        let loading = Loading::default();
        let ready = dir.join("component-ready");
        let mut f: JobFolder<Arc<Job>> = JobFolder::open(
            &dir,
            Box::new(move |file| {
                let job = loading.load(file)?;
                if ready.exists() {
                    Ok(Arc::new(job))
                } else {
                    Err(Error::input("component `r.wasm` is missing"))
                }
            }),
            Some(hup.clone()),
        )
        .unwrap();
        assert!(f.current().is_empty());
        std::fs::write(dir.join("component-ready"), "").unwrap();
        assert!(f.current().is_empty(), "the file itself did not change");
        hup.store(true, Ordering::SeqCst);
        let taken = f.current();
        assert_eq!(taken.len(), 1, "SIGHUP tried it again");
        // Unchanged, the job is the same one, so the daemon's wake-ups can
        // tell it has not changed; changed, it is another.
        assert!(Arc::ptr_eq(&taken[0], &f.current()[0]));
        std::thread::sleep(std::time::Duration::from_millis(20));
        write(&dir, "a.toml", "a", 120);
        assert!(!Arc::ptr_eq(&taken[0], &f.current()[0]), "changed");
    }
}
