//! Who a process is on its machine, in terms that outlive it: its host
//! name, pid and start time (`/proc/<pid>/stat`, field 22, so a reused pid
//! is told apart), the kernel's boot id and the pid namespace (so "the same
//! machine" means the pid names the same process table). A claim records
//! its owner's [`ProcessRecord`]; a later claim on the same machine asks
//! [`ProcessRecord::liveness`] whether that owner still runs. Anything it
//! cannot be sure of is [`Liveness::Unknown`], which never lets a live
//! process's window be taken.

use std::os::unix::fs::MetadataExt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// What a claim records of the process that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRecord {
    /// The owner string the claim was made under (`<host>:<pid>:<tag>`):
    /// a record whose owner is not the row's was left by an earlier claim
    /// (a host that does not write records took the row over since).
    pub owner: String,
    /// `/proc/sys/kernel/hostname`.
    pub host: String,
    /// The process id, in `pid_ns`.
    pub pid: u32,
    /// Its start time, in clock ticks after boot (`/proc/<pid>/stat`,
    /// field 22).
    pub start: u64,
    /// `/proc/sys/kernel/random/boot_id`: a new one at every boot.
    pub boot_id: String,
    /// The inode of `/proc/self/ns/pid`: two containers of one pod share a
    /// host name, not a pid namespace.
    pub pid_ns: u64,
}

/// Whether a recorded process still runs, as far as this process can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// It runs (possibly stopped): its pid has its start time.
    Alive,
    /// It has certainly ended: same machine and namespace, and its pid is
    /// gone, a zombie, or another process's.
    Gone,
    /// Another machine, boot or namespace, an unreadable `/proc`, or a
    /// record that does not belong to the claim.
    Unknown,
}

/// This process as the machine sees it: host, pid, start, boot id, pid
/// namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Me {
    host: String,
    pid: u32,
    start: u64,
    boot_id: String,
    pid_ns: u64,
}

/// This process, read once; `None` when `/proc` cannot say (not Linux, not
/// mounted, or mounted for another pid namespace).
fn me() -> Option<&'static Me> {
    static ME: OnceLock<Option<Me>> = OnceLock::new();
    ME.get_or_init(|| {
        let pid = std::process::id();
        let (stat_pid, start, _) = read_stat("/proc/self/stat")?;
        // A /proc of another pid namespace would name other processes.
        if stat_pid != pid {
            return None;
        }
        Some(Me {
            host: read_trimmed("/proc/sys/kernel/hostname")?,
            pid,
            start,
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id")?,
            pid_ns: std::fs::metadata("/proc/self/ns/pid").ok()?.ino(),
        })
    })
    .as_ref()
}

fn read_trimmed(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// Reads a `stat` file: (pid, start time, state).
fn read_stat(path: &str) -> Option<(u32, u64, char)> {
    parse_stat(&std::fs::read_to_string(path).ok()?)
}

/// Parses `/proc/<pid>/stat`: `pid (comm) state ... starttime ...`. The
/// command name may hold spaces and parentheses, so the fields are counted
/// after its last `)`: field 3 (the state) is the first there, field 22
/// (the start time) the twentieth.
fn parse_stat(text: &str) -> Option<(u32, u64, char)> {
    let (head, rest) = text.rsplit_once(')')?;
    let pid = head.split_once('(')?.0.trim().parse().ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((pid, start, state))
}

impl ProcessRecord {
    /// This process's record for a claim made as `owner`; `None` when
    /// `/proc` cannot say who this process is.
    pub fn current(owner: &str) -> Option<ProcessRecord> {
        let me = me()?;
        Some(ProcessRecord {
            owner: owner.to_string(),
            host: me.host.clone(),
            pid: me.pid,
            start: me.start,
            boot_id: me.boot_id.clone(),
            pid_ns: me.pid_ns,
        })
    }

    /// The record as stored with a claim (one line of JSON).
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A stored record; `None` for text that is not one.
    pub fn from_text(text: &str) -> Option<ProcessRecord> {
        serde_json::from_str(text).ok()
    }

    /// Whether the recorded process still runs, judged from this process.
    pub fn liveness(&self) -> Liveness {
        let Some(me) = me() else {
            return Liveness::Unknown;
        };
        if (me.host.as_str(), me.boot_id.as_str(), me.pid_ns)
            != (self.host.as_str(), self.boot_id.as_str(), self.pid_ns)
        {
            return Liveness::Unknown;
        }
        self.judge(std::fs::read_to_string(format!("/proc/{}/stat", self.pid)))
    }

    /// The verdict on the recorded pid's `stat` file as read on the same
    /// machine and namespace.
    fn judge(&self, stat: std::io::Result<String>) -> Liveness {
        match stat {
            // ESRCH: the process ended while its file was read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.raw_os_error() == Some(3) => {
                Liveness::Gone
            }
            Err(_) => Liveness::Unknown,
            Ok(text) => match parse_stat(&text) {
                None => Liveness::Unknown,
                // Another process under a reused pid.
                Some((_, start, _)) if start != self.start => Liveness::Gone,
                // Ended, its exit status not yet collected: it runs no
                // more code, and sends nothing.
                Some((_, _, 'Z' | 'X')) => Liveness::Gone,
                Some(_) => Liveness::Alive,
            },
        }
    }
}

/// Whether the owner of a claim, which recorded `record` (stored text)
/// with it while claiming as `owner`, has certainly ended: it ran on this
/// machine, in this pid namespace, and its pid is gone or another
/// process's. False for anything uncertain.
pub fn owner_gone(owner: &str, record: Option<&str>) -> bool {
    record
        .and_then(ProcessRecord::from_text)
        .is_some_and(|r| r.owner == owner && r.liveness() == Liveness::Gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this(owner: &str) -> ProcessRecord {
        ProcessRecord::current(owner).expect("tests run on Linux with /proc")
    }

    #[test]
    fn the_start_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    987654 1000 10 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((4242, 987654, 'S')));
        assert_eq!(parse_stat("4242 (x) S 1"), None);
    }

    #[test]
    fn this_process_is_alive_and_its_record_survives_the_store() {
        let rec = this("h:1:t");
        assert_eq!(ProcessRecord::from_text(&rec.to_text()), Some(rec.clone()));
        assert_eq!(rec.liveness(), Liveness::Alive);
        assert!(!owner_gone("h:1:t", Some(&rec.to_text())));
    }

    #[test]
    fn a_reused_pid_or_a_missing_one_is_gone() {
        let mut reused = this("o");
        reused.start += 1;
        assert_eq!(reused.liveness(), Liveness::Gone);
        assert!(owner_gone("o", Some(&reused.to_text())));
        let missing = ProcessRecord {
            pid: u32::MAX,
            ..this("o")
        };
        assert_eq!(missing.liveness(), Liveness::Gone);
        let zombie = this("o").judge(Ok(format!(
            "{} (jobhost) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {} 0 0",
            std::process::id(),
            this("o").start
        )));
        assert_eq!(zombie, Liveness::Gone);
    }

    #[test]
    fn another_boot_namespace_or_host_is_never_judged() {
        let gone = ProcessRecord {
            pid: u32::MAX,
            ..this("o")
        };
        for other in [
            ProcessRecord {
                boot_id: "another-boot".into(),
                ..gone.clone()
            },
            ProcessRecord {
                pid_ns: gone.pid_ns + 1,
                ..gone.clone()
            },
            ProcessRecord {
                host: "another-host".into(),
                ..gone.clone()
            },
        ] {
            assert_eq!(other.liveness(), Liveness::Unknown, "{other:?}");
            assert!(!owner_gone("o", Some(&other.to_text())));
        }
    }

    #[test]
    fn a_record_of_an_earlier_owner_or_none_at_all_is_not_a_verdict() {
        let gone = ProcessRecord {
            pid: u32::MAX,
            ..this("earlier")
        };
        assert!(owner_gone("earlier", Some(&gone.to_text())));
        assert!(!owner_gone("a-later-owner", Some(&gone.to_text())));
        assert!(!owner_gone("earlier", None));
        assert!(!owner_gone("earlier", Some("not a record")));
    }

    #[test]
    fn an_unreadable_stat_file_is_not_a_verdict() {
        let rec = this("o");
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(rec.judge(Err(denied)), Liveness::Unknown);
        assert_eq!(rec.judge(Ok("garbage".into())), Liveness::Unknown);
    }
}
