//! One benchmarked process, measured by the operating system: its wall
//! time, peak resident memory and CPU time, and what it wrote on stdout.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What one finished process cost.
#[derive(Debug, Clone)]
pub struct Measured {
    /// From spawn to reaping.
    pub wall: Duration,
    /// Its peak resident set, in KiB: as `jobhost-under-test` measured it
    /// on its way out (`JOBHOST_TEST_PEAK_FILE`), else the kernel's
    /// `ru_maxrss`, which is never below this process's own peak when it
    /// spawned the child.
    pub peak_kib: u64,
    /// User plus system CPU time.
    pub cpu: Duration,
    /// Everything it wrote on stdout.
    pub stdout: String,
}

/// Runs `cmd` to its end (stderr thrown away) and measures it.
///
/// # Panics
///
/// When the process cannot be started or reaped: a benchmark cannot go on.
pub fn measure(mut cmd: Command) -> Measured {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let peak_file = std::env::temp_dir().join(format!(
        "jobhost-bench-peak-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&peak_file);
    cmd.env("JOBHOST_TEST_PEAK_FILE", &peak_file);
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the benchmarked process starts");
    let mut stdout = String::new();
    if let Some(mut out) = child.stdout.take() {
        std::io::Read::read_to_string(&mut out, &mut stdout).expect("its stdout");
    }
    let pid = i32::try_from(child.id()).expect("pid");
    let mut status = 0;
    // SAFETY: `rusage` is plain data that wait4 fills in; std's Child has
    // no way to report a child's peak memory, so the child is reaped here
    // (and never waited on through `child`).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    assert_eq!(reaped, pid, "wait4 reaps the child");
    drop(child);
    let own_peak = std::fs::read_to_string(&peak_file)
        .ok()
        .and_then(|t| t.trim().parse().ok());
    let _ = std::fs::remove_file(&peak_file);
    Measured {
        wall,
        peak_kib: own_peak.unwrap_or_else(|| u64::try_from(usage.ru_maxrss).unwrap_or(0)),
        cpu: cpu_time(&usage),
        stdout,
    }
}

/// User plus system time of `usage`.
pub fn cpu_time(usage: &libc::rusage) -> Duration {
    let tv = |t: libc::timeval| {
        Duration::new(
            u64::try_from(t.tv_sec).unwrap_or(0),
            u32::try_from(t.tv_usec).unwrap_or(0) * 1000,
        )
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The CPU time this process has used so far.
pub fn own_cpu() -> Duration {
    // SAFETY: fills the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    cpu_time(&usage)
}
