//! The Python and JavaScript reference reports against the Rust reference,
//! side by side in one process, each figure interleaved sample by sample (A B A B ...) so
//! that the machine's noise hits both alike:
//!
//! 1. cold compile: `jobhost compile` of each component into an empty
//!    cache, with the optimising compiler (Cranelift, the default) and the
//!    baseline one (Winch, `JOBHOST_COMPILER=winch`): wall time and the
//!    process's peak RSS;
//! 2. the skip path: a `jobhost run` process whose window is done;
//! 3. a warm run (compiled code cached) over 10k rows: wall time and peak
//!    RSS;
//! 4. a run over 1M rows.
//!
//! `cargo bench -p jobhost-tests --bench languages` (`-- --quick` for fewer
//! samples, `-- --js` for the JavaScript section alone). Builds the guests first (the Python one with componentize-py,
//! installed into target/tools when missing). Medians with the 25th and
//! 75th percentiles, and the Python / Rust ratio of the medians.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use jobhost_tests::stats::{median, percentile};
use jobhost_tests::{guests, process};

const DAY_START: i64 = 1_794_096_000; // 2026-11-08T00:00:00Z
const DAY_END: i64 = DAY_START + 86_400;
const NOW: &str = "2026-11-09T00:05:00Z";
const EMPTY_NOW: &str = "2026-11-21T00:05:00Z";
const QUERY: &str = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id";

/// One process's wall time and peak resident memory.
#[derive(Clone, Copy)]
struct Sample {
    wall: Duration,
    peak_kib: u64,
}

fn main() {
    // SAFETY: set before any thread starts.
    unsafe { std::env::set_var("RUST_BACKTRACE", "0") };
    let quick = std::env::args().any(|a| a == "--quick");
    let (n_compile, n_proc, n_big) = if quick { (3, 9, 3) } else { (5, 31, 7) };

    let root = guests::workspace_root();
    let target = root.join("target").join("bench-guests");
    let built = guests::build(&target).unwrap_or_else(|e| panic!("building guests failed:\n{e}"));
    if std::env::args().any(|a| a == "--js") {
        // The JavaScript section alone.
        let work = std::env::temp_dir().join(format!("jobhost-bench-js-{}", std::process::id()));
        std::fs::create_dir_all(&work).expect("bench folder");
        javascript(
            &root,
            &target,
            &work,
            &built.report,
            (n_compile, n_proc, n_big),
        );
        let _ = std::fs::remove_dir_all(&work);
        return;
    }
    let python = guests::build_python(&guests::PYTHON_REPORT, &target.join("python"))
        .unwrap_or_else(|e| panic!("building the Python guest failed:\n{e}"));
    let rust = built.report;
    let work = std::env::temp_dir().join(format!("jobhost-bench-lang-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("bench folder");
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    println!(
        "components: Python {:.1} MB, Rust {:.2} MB",
        size(&python) as f64 / 1e6,
        size(&rust) as f64 / 1e6
    );

    // 1. Cold compile, each sample into an empty cache.
    let mut artifact = [0u64; 2];
    for compiler in ["cranelift", "winch"] {
        let mut i = 0;
        let (py, rs) = pair(n_compile, |which| {
            i += 1;
            let cache = work.join(format!("cold-{compiler}-{which}-{i}"));
            let component = if which == 0 { &python } else { &rust };
            let mut cmd = jobhost();
            cmd.arg("compile")
                .arg(component)
                .arg("--cache-dir")
                .arg(&cache)
                .env("JOBHOST_COMPILER", compiler);
            let (s, out) = measure(cmd);
            assert!(out.contains("\"cache\":\"miss\""), "{out}");
            artifact[which] = dir_bytes(&cache);
            let _ = std::fs::remove_dir_all(&cache);
            s
        });
        println!("cold compile, {compiler} ({n_compile} each):");
        show("Python", &py);
        show("Rust", &rs);
        ratio(&py, &rs);
        println!(
            "  compiled artifact: Python {:.1} MB, Rust {:.2} MB",
            artifact[0] as f64 / 1e6,
            artifact[1] as f64 / 1e6
        );
    }

    // 1b. A new version of a report: the second of two Python reports that
    //     differ only in their app code, compiled into the cache the first
    //     one was compiled into (cold for its own file: no artifact of it),
    //     beside the first one's cold compile into an empty cache.
    //     The first one is also compiled whole, reusing nothing
    //     (`JOBHOST_FUNCTION_CACHE=off`, as before the function cache), each
    //     sample beside it.
    let python2 = python_variant(&root, &target, &work);
    let (mut whole, mut first, mut second) = (Vec::new(), Vec::new(), Vec::new());
    let (mut reused_first, mut reused_second) = (String::new(), String::new());
    let compile_into = |component: &Path, cache: &Path, reuse: &str| {
        let mut cmd = jobhost();
        cmd.arg("compile")
            .arg(component)
            .arg("--cache-dir")
            .arg(cache)
            .env("JOBHOST_FUNCTION_CACHE", reuse);
        let (s, out) = measure(cmd);
        assert!(out.contains("\"cache\":\"miss\""), "{out}");
        (s, out)
    };
    for i in 0..n_compile {
        let cache = work.join(format!("new-version-{i}"));
        let alone = work.join(format!("whole-{i}"));
        if i % 2 == 0 {
            whole.push(compile_into(&python, &alone, "off").0);
        }
        let (s, out) = compile_into(&python, &cache, "on");
        first.push(s);
        reused_first = counts(&out);
        if i % 2 == 1 {
            whole.push(compile_into(&python, &alone, "off").0);
        }
        let (s, out) = compile_into(&python2, &cache, "on");
        second.push(s);
        reused_second = counts(&out);
        let _ = std::fs::remove_dir_all(&cache);
        let _ = std::fs::remove_dir_all(&alone);
    }
    println!("a new version of the Python report, cranelift ({n_compile} each):");
    show("whole", &whole);
    show("first", &first);
    show("second", &second);
    println!("  first: {reused_first}; second: {reused_second}");
    let m = |v: &[Sample]| median(&v.iter().map(|s| s.wall).collect::<Vec<_>>()).as_secs_f64();
    println!(
        "  first / whole = {:.2}x, second / whole = {:.2}x",
        m(&first) / m(&whole),
        m(&second) / m(&whole)
    );

    // The rest runs on a warm cache, with the default compiler.
    let cache = work.join("cache");
    let jobs = [
        setup(&work.join("py-small"), &python, 10_000),
        setup(&work.join("rs-small"), &rust, 10_000),
    ];
    let big = [
        setup(&work.join("py-big"), &python, 1_000_000),
        setup(&work.join("rs-big"), &rust, 1_000_000),
    ];
    for (i, job) in jobs.iter().chain(&big).enumerate() {
        let out = run(job, &work.join(format!("warm-{i}.db")), EMPTY_NOW, &cache).1;
        assert!(out.contains("\"event\":\"ran\""), "{out}");
    }

    // 2. The skip path.
    for (i, job) in jobs.iter().enumerate() {
        let out = run(job, &work.join(format!("done-{i}.db")), NOW, &cache).1;
        assert!(out.contains("\"event\":\"ran\""), "{out}");
    }
    let (py, rs) = pair(n_proc, |which| {
        let (s, out) = run(
            &jobs[which],
            &work.join(format!("done-{which}.db")),
            NOW,
            &cache,
        );
        assert!(out.contains("\"reason\":\"done\""), "{out}");
        s
    });
    println!("skip path: one `jobhost run` process, window done ({n_proc} each):");
    show("Python", &py);
    show("Rust", &rs);
    ratio(&py, &rs);

    // 3. A warm run over 10k rows, each sample a first run in its own store.
    let mut n = 0;
    let (py, rs) = pair(n_proc, |which| {
        n += 1;
        let job = &jobs[which];
        let _ = std::fs::remove_file(job.with_file_name("out.jsonl"));
        let (s, out) = run(job, &work.join(format!("warm-{which}-{n}.db")), NOW, &cache);
        assert!(
            out.contains("\"event\":\"ran\"") && out.contains("\"rows\":10000"),
            "{out}"
        );
        s
    });
    println!(
        "warm run: one `jobhost run` process, 10k rows, compiled code cached ({n_proc} each):"
    );
    show("Python", &py);
    show("Rust", &rs);
    ratio(&py, &rs);

    // 3b. A warm run over one day of the bundled example (241 rows).
    let example = [
        setup_on(
            &work.join("py-example"),
            &python,
            &root.join("examples/sales.db"),
        ),
        setup_on(
            &work.join("rs-example"),
            &rust,
            &root.join("examples/sales.db"),
        ),
    ];
    let mut n = 0;
    let (py, rs) = pair(n_proc, |which| {
        n += 1;
        let job = &example[which];
        let _ = std::fs::remove_file(job.with_file_name("out.jsonl"));
        let (s, out) = run(
            job,
            &work.join(format!("example-{which}-{n}.db")),
            NOW,
            &cache,
        );
        assert!(out.contains("\"event\":\"ran\""), "{out}");
        s
    });
    println!("warm run: one `jobhost run` process, one day of examples/sales.db ({n_proc} each):");
    show("Python", &py);
    show("Rust", &rs);
    ratio(&py, &rs);

    // 4. 1M rows.
    let mut n = 0;
    let (py, rs) = pair(n_big, |which| {
        n += 1;
        let job = &big[which];
        let _ = std::fs::remove_file(job.with_file_name("out.jsonl"));
        let (s, out) = run(job, &work.join(format!("big-{which}-{n}.db")), NOW, &cache);
        assert!(out.contains("\"rows\":1000000"), "{out}");
        s
    });
    println!("1M rows: one `jobhost run` process ({n_big} each):");
    show("Python", &py);
    show("Rust", &rs);
    ratio(&py, &rs);

    // 5. What the baseline compiler's code costs: 1M rows and the warm
    //    example day again, compiled by Winch (its own cache entries).
    let winch = work.join("cache-winch");
    for (i, job) in big.iter().chain(&example).enumerate() {
        let store = work.join(format!("warm-winch-{i}.db"));
        let out = run_with(job, &store, EMPTY_NOW, &winch, "winch").1;
        assert!(out.contains("\"event\":\"ran\""), "{out}");
    }
    for (what, jobs, n_samples, rows) in [
        ("1M rows", &big, n_big, "\"rows\":1000000"),
        (
            "one day of examples/sales.db",
            &example,
            n_proc,
            "\"event\":\"ran\"",
        ),
    ] {
        let mut n = 0;
        let (py, rs) = pair(n_samples, |which| {
            n += 1;
            let job = &jobs[which];
            let _ = std::fs::remove_file(job.with_file_name("out.jsonl"));
            let store = work.join(format!("winch-{which}-{n}-{}.db", rows.len()));
            let (s, out) = run_with(job, &store, NOW, &winch, "winch");
            assert!(out.contains(rows), "{out}");
            s
        });
        println!("{what}, compiled by Winch ({n_samples} each):");
        show("Python", &py);
        show("Rust", &rs);
        ratio(&py, &rs);
    }
    javascript(&root, &target, &work, &rust, (n_compile, n_proc, n_big));
    let _ = std::fs::remove_dir_all(&work);
}

/// The JavaScript reference beside the Rust one: a cold compile, a new
/// version of it compiled into the first one's cache, the skip path, warm
/// runs and 1M rows, each pair interleaved as above.
fn javascript(root: &Path, target: &Path, work: &Path, rust: &Path, n: (usize, usize, usize)) {
    let (n_compile, n_proc, n_big) = n;
    let js = guests::build_js(&guests::JS_REPORT, &target.join("js"))
        .unwrap_or_else(|e| panic!("building the JavaScript guest failed:\n{e}"));
    let dir = work.join("js-v2");
    let copy = Command::new("cp")
        .arg("-r")
        .arg(root.join("guest-js"))
        .arg(&dir)
        .status()
        .expect("cp");
    assert!(copy.success(), "cannot copy guest-js");
    let app = dir.join("app.js");
    let text = std::fs::read_to_string(&app).expect("app.js");
    let changed = text.replacen("`sales digest of", "`daily sales digest of", 1);
    assert_ne!(text, changed, "the variant must change the app's code");
    std::fs::write(&app, changed).expect("app.js");
    let app_dir = dir.to_string_lossy().into_owned();
    let variant = guests::JsGuest {
        name: "guest_js_v2",
        app_dir: &app_dir,
        ..guests::JS_REPORT
    };
    let js2 = guests::build_js(&variant, &target.join("js"))
        .unwrap_or_else(|e| panic!("building the JavaScript variant failed:\n{e}"));
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    println!("JavaScript: component {:.1} MB", size(&js) as f64 / 1e6);

    // Cold compile, and a new version compiled into the first one's cache.
    let (mut first, mut second, mut rs) = (Vec::new(), Vec::new(), Vec::new());
    let mut reused = String::new();
    for i in 0..n_compile {
        let cache = work.join(format!("js-cold-{i}"));
        let compile = |component: &Path, cache: &Path| {
            let mut cmd = jobhost();
            cmd.arg("compile")
                .arg(component)
                .arg("--cache-dir")
                .arg(cache);
            let (s, out) = measure(cmd);
            assert!(out.contains("\"cache\":\"miss\""), "{out}");
            (s, out)
        };
        first.push(compile(&js, &cache).0);
        let (s, out) = compile(&js2, &cache);
        second.push(s);
        reused = counts(&out);
        rs.push(compile(rust, &work.join(format!("js-rs-cold-{i}"))).0);
        let _ = std::fs::remove_dir_all(&cache);
        let _ = std::fs::remove_dir_all(work.join(format!("js-rs-cold-{i}")));
    }
    println!("cold compile, cranelift ({n_compile} each):");
    show("JS", &first);
    show("Rust", &rs);
    ratio_of("JS", &first, &rs);
    println!("a new version of the JavaScript report, cranelift ({n_compile} each):");
    show("first", &first);
    show("second", &second);
    println!("  second: {reused}");

    let cache = work.join("js-cache");
    let jobs = [
        setup(&work.join("js-small"), &js, 10_000),
        setup(&work.join("js-rs-small"), rust, 10_000),
    ];
    let example = [
        setup_on(
            &work.join("js-example"),
            &js,
            &root.join("examples/sales.db"),
        ),
        setup_on(
            &work.join("js-rs-example"),
            rust,
            &root.join("examples/sales.db"),
        ),
    ];
    let big = [
        setup(&work.join("js-big"), &js, 1_000_000),
        setup(&work.join("js-rs-big"), rust, 1_000_000),
    ];
    for (i, job) in jobs.iter().chain(&example).chain(&big).enumerate() {
        let out = run(
            job,
            &work.join(format!("js-warm-{i}.db")),
            EMPTY_NOW,
            &cache,
        )
        .1;
        assert!(out.contains("\"event\":\"ran\""), "{out}");
    }
    for (i, job) in jobs.iter().enumerate() {
        let out = run(job, &work.join(format!("js-done-{i}.db")), NOW, &cache).1;
        assert!(out.contains("\"event\":\"ran\""), "{out}");
    }
    let (a, b) = pair(n_proc, |which| {
        let (s, out) = run(
            &jobs[which],
            &work.join(format!("js-done-{which}.db")),
            NOW,
            &cache,
        );
        assert!(out.contains("\"reason\":\"done\""), "{out}");
        s
    });
    println!("skip path: one `jobhost run` process, window done ({n_proc} each):");
    show("JS", &a);
    show("Rust", &b);
    ratio_of("JS", &a, &b);
    for (what, set, samples, expect) in [
        ("warm run, 10k rows", &jobs, n_proc, "\"rows\":10000"),
        (
            "warm run, one day of examples/sales.db",
            &example,
            n_proc,
            "\"event\":\"ran\"",
        ),
        ("1M rows", &big, n_big, "\"rows\":1000000"),
    ] {
        let mut k = 0;
        let (a, b) = pair(samples, |which| {
            k += 1;
            let job = &set[which];
            let _ = std::fs::remove_file(job.with_file_name("out.jsonl"));
            let store = work.join(format!("js-{which}-{k}-{}.db", expect.len()));
            let (s, out) = run(job, &store, NOW, &cache);
            assert!(out.contains(expect), "{out}");
            s
        });
        println!("{what}: one `jobhost run` process ({samples} each):");
        show("JS", &a);
        show("Rust", &b);
        ratio_of("JS", &a, &b);
    }
}

/// The Python reference with one string of its app changed, built like it.
fn python_variant(root: &Path, target: &Path, work: &Path) -> PathBuf {
    let dir = work.join("python-v2");
    let copy = Command::new("cp")
        .arg("-r")
        .arg(root.join("guest-python"))
        .arg(&dir)
        .status()
        .expect("cp");
    assert!(copy.success(), "cannot copy guest-python");
    let app = dir.join("app.py");
    let text = std::fs::read_to_string(&app).expect("app.py");
    let changed = text.replacen("f\"sales digest of", "f\"daily sales digest of", 1);
    assert_ne!(text, changed, "the variant must change the app's code");
    std::fs::write(&app, changed).expect("app.py");
    let app_dir = dir.to_string_lossy().into_owned();
    let guest = guests::PythonGuest {
        name: "guest_python_v2",
        app_dir: &app_dir,
        ..guests::PYTHON_REPORT
    };
    guests::build_python(&guest, &target.join("python"))
        .unwrap_or_else(|e| panic!("building the Python variant failed:\n{e}"))
}

/// `jobhost compile`'s counts of reused and compiled functions, as text.
fn counts(out: &str) -> String {
    let field = |name: &str| {
        out.split(&format!("\"{name}\":"))
            .nth(1)
            .and_then(|rest| rest.split([',', '}']).next())
            .unwrap_or("-")
            .to_string()
    };
    format!(
        "{} functions reused, {} compiled",
        field("functions_reused"),
        field("functions_compiled")
    )
}

fn jobhost() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jobhost-under-test"));
    cmd.env("RUST_BACKTRACE", "0")
        .env_remove("JOBHOST_COMPILER");
    cmd
}

/// A job over `rows` sales of one day, delivering to a file.
fn setup(dir: &Path, component: &Path, rows: u64) -> PathBuf {
    std::fs::create_dir_all(dir).expect("bench folder");
    let db = dir.join("sales.db");
    jobhost_tests::sample::write_sales(&db, DAY_START, DAY_END, rows, 11).expect("sample data");
    job_config(dir, component)
}

/// A job over a copy of `db`.
fn setup_on(dir: &Path, component: &Path, db: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("bench folder");
    std::fs::copy(db, dir.join("sales.db")).expect("sample data");
    job_config(dir, component)
}

fn job_config(dir: &Path, component: &Path) -> PathBuf {
    let config = dir.join("job.toml");
    std::fs::write(
        &config,
        format!(
            "job = \"bench\"\ncomponent = \"{}\"\n[source]\npath = \"sales.db\"\nquery = \"{QUERY}\"\n\
             [destinations.digest]\ntype = \"file\"\npath = \"out.jsonl\"\n\
             [limits]\nmemory_mib = 1024\ntimeout_seconds = 120\n",
            component.display()
        ),
    )
    .expect("bench config");
    config
}

fn run(config: &Path, store: &Path, now: &str, cache: &Path) -> (Sample, String) {
    run_with(config, store, now, cache, "cranelift")
}

fn run_with(
    config: &Path,
    store: &Path,
    now: &str,
    cache: &Path,
    compiler: &str,
) -> (Sample, String) {
    let mut cmd = jobhost();
    cmd.env("JOBHOST_COMPILER", compiler);
    cmd.args(["run", "--config"])
        .arg(config)
        .arg("--store")
        .arg(store)
        .args(["--now", now])
        .env("JOBHOST_CACHE_DIR", cache);
    measure(cmd)
}

/// Runs `cmd` to its end: its wall time and peak RSS, and its stdout.
fn measure(cmd: Command) -> (Sample, String) {
    let m = process::measure(cmd);
    (
        Sample {
            wall: m.wall,
            peak_kib: m.peak_kib,
        },
        m.stdout,
    )
}

/// `n` samples of `f(0)` (Python) and `f(1)` (Rust), interleaved, which goes
/// first alternating.
fn pair(n: usize, mut f: impl FnMut(usize) -> Sample) -> (Vec<Sample>, Vec<Sample>) {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0..n {
        if i % 2 == 0 {
            a.push(f(0));
            b.push(f(1));
        } else {
            b.push(f(1));
            a.push(f(0));
        }
    }
    (a, b)
}

fn show(name: &str, v: &[Sample]) {
    let wall: Vec<Duration> = v.iter().map(|s| s.wall).collect();
    let mut peaks: Vec<u64> = v.iter().map(|s| s.peak_kib).collect();
    peaks.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "  {name:<8} {:>10.1} ms  ({:.1}-{:.1})   peak RSS {:>6.1} MiB (median)",
        ms(median(&wall)),
        ms(percentile(&wall, 25)),
        ms(percentile(&wall, 75)),
        peaks[peaks.len() / 2] as f64 / 1024.0
    );
}

fn ratio(py: &[Sample], rs: &[Sample]) {
    ratio_of("Python", py, rs);
}

fn ratio_of(name: &str, a: &[Sample], rs: &[Sample]) {
    let m = |v: &[Sample]| median(&v.iter().map(|s| s.wall).collect::<Vec<_>>()).as_secs_f64();
    println!("  {name} / Rust = {:.2}x", m(a) / m(rs));
}

/// Bytes of every compiled artifact (`.cwasm`) under `dir`.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() {
                        dir_bytes(&p)
                    } else if p.extension().is_some_and(|x| x == "cwasm") {
                        e.metadata().map_or(0, |m| m.len())
                    } else {
                        0
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}
