//! Speed of `jobhost run`, measured side by side in one process:
//!
//! 1. the skip path: a `jobhost run` process whose window is already done;
//! 2. a run of the reference report over 10k rows, compiled code cached,
//!    delivering to a file, and the same delivering by HTTP POST to a sink
//!    on 127.0.0.1 (interleaved);
//! 3. 1M rows through the guest, end to end including the source read,
//!    against the same aggregation in native Rust over the same rows: once
//!    written the plain native way (a row loop with hash maps) and once as
//!    the guest's own `Digest` compiled natively over the host's batches.
//!
//! `cargo bench -p jobhost-tests --bench run` (add `-- --quick` for fewer
//! samples, `-- --skip` for the skip path beside its floors only: a
//! process that opens the store and reads the one row, `skip-floor`; both
//! run from fresh copies, as installed). Medians with the 25th and 75th
//! percentiles; run with
//! `RUST_BACKTRACE=0`, which this bench sets for itself and its children.
//!
//! To compare a change with the code before it, build the older tree's
//! `jobhost` (`cargo build --release -p jobhost` in a checkout of it) and
//! name it in `JOBHOST_BENCH_BASELINE`: the skip path and the 10k-row run
//! are then measured for both binaries, interleaved sample by sample, and
//! the ratio of the medians is printed.

use jobhost_tests::stats::{median, report};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use jobhost::app::config::{JobConfig, RunFlags};
use jobhost::guest::source::{self, SourceAccess, SourceSpec};
use jobhost_tests::guests;

const DAY_START: i64 = 1_794_096_000; // 2026-11-08T00:00:00Z
const DAY_END: i64 = DAY_START + 86_400;
const NOW: &str = "2026-11-09T00:05:00Z";
const EMPTY_NOW: &str = "2026-11-21T00:05:00Z";
const QUERY: &str = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id";

fn main() {
    // SAFETY: set before any thread starts.
    unsafe { std::env::set_var("RUST_BACKTRACE", "0") };
    let quick = std::env::args().any(|a| a == "--quick");
    let (n_proc, n_big) = if quick { (11, 3) } else { (41, 9) };

    let root = guests::workspace_root();
    let target = root.join("target").join("bench-guests");
    let built = guests::build(&target).unwrap_or_else(|e| panic!("building guests failed:\n{e}"));
    let cache = target.join("compile-cache");
    let work = std::env::temp_dir().join(format!("jobhost-bench-{}", std::process::id()));
    std::fs::create_dir_all(&work).expect("bench folder");

    let small = setup(&work.join("small"), &built.report, 10_000);
    let big = setup(&work.join("big"), &built.report, 1_000_000);

    // Warm the compile cache once, outside any measurement.
    let warm_store = work.join("warm.db");
    run_process(&small.config, &warm_store, NOW, &cache);

    // `-- --telemetry`: only what `[telemetry]` costs a `jobhost run`.
    if std::env::args().any(|a| a == "--telemetry") {
        telemetry_cost(&small.config, &work, &cache, n_proc);
        let _ = std::fs::remove_dir_all(&work);
        return;
    }

    // The processes the skip path is timed with run from copies, as an
    // install copies a binary: a file the linker has just written sits in
    // the page cache in small pages, which made every start of the 40 MB
    // `jobhost` about 0.5 ms slower, and the small floor 0.15 ms (both
    // measured side by side).
    let jobhost = installed(env!("CARGO_BIN_EXE_jobhost-under-test"), &work);
    let skip_floor_bin = installed(env!("CARGO_BIN_EXE_skip-floor"), &work);

    // 0. The process floor: start and exit with no work at all.
    let floor = sample(n_proc, |_| {
        let t = Instant::now();
        let out = Command::new(&jobhost)
            .arg("--version")
            .output()
            .expect("jobhost runs");
        assert!(out.status.success());
        t.elapsed()
    });

    // 1. Skip path.
    let done_store = work.join("done.db");
    reset_output(&small.config);
    let out = run_process(&small.config, &done_store, NOW, &cache);
    assert!(ran_10k(&out), "{out}");
    let key = out
        .lines()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|v| v["key"].as_str().map(str::to_string))
        .expect("the receipt names its window");
    // `-- --hot-text`: write the skip path's functions as the linker script
    // that keeps them together (`host/hot-text.ld`), from one skip.
    if std::env::args().any(|a| a == "--hot-text") {
        let args = run_args(&small.config, &done_store, NOW);
        hot_text(
            &jobhost,
            &args,
            &cache,
            &root.join("host").join("hot-text.ld"),
        );
        let _ = std::fs::remove_dir_all(&work);
        return;
    }
    // The skip path and its floor (a process that opens the same store and
    // reads the one row), interleaved sample by sample.
    let mut skip_floor = Vec::new();
    let skip = sample(n_proc, |_| {
        let t = Instant::now();
        let floor = Command::new(&skip_floor_bin)
            .arg(&done_store)
            .arg(&key)
            .output()
            .expect("skip-floor runs");
        skip_floor.push(t.elapsed());
        assert!(
            String::from_utf8_lossy(&floor.stdout).contains("\"DONE\""),
            "{floor:?}"
        );
        let t = Instant::now();
        let out = run_process_with(&jobhost, &small.config, &done_store, NOW, &cache);
        assert!(out.contains("\"reason\":\"done\""), "{out}");
        t.elapsed()
    });
    // `-- --skip`: only the skip path beside its floors.
    if std::env::args().any(|a| a == "--skip") {
        report("process floor: `jobhost --version`", &floor);
        report("skip path: one `jobhost run` process, window done", &skip);
        report(
            "skip floor: a process that opens the store and reads the row",
            &skip_floor,
        );
        println!(
            "  skip path / its floor: {:.2}x (medians, interleaved)",
            median(&skip).as_secs_f64() / median(&skip_floor).as_secs_f64()
        );
        let _ = std::fs::remove_dir_all(&work);
        return;
    }
    let before_after = std::env::var_os("JOBHOST_BENCH_BASELINE")
        .map(PathBuf::from)
        .map(|baseline| compare(&baseline, &small.config, &work, &cache, n_proc));

    // 2. 10k rows, cached component: each sample on a store that already
    //    exists (its schema made by a run over an empty window).
    let sink = jobhost_tests::sink::Sink::start();
    let http_config = small.config.with_file_name("job-http.toml");
    let text = std::fs::read_to_string(&small.config).expect("bench config");
    let file_dest = "[destinations.digest]\ntype = \"file\"\npath = \"out.jsonl\"\n";
    assert!(text.contains(file_dest));
    let http_dest = format!(
        "[destinations.digest]\ntype = \"http\"\nurl = \"{}\"\n",
        sink.url("/digest")
    );
    std::fs::write(&http_config, text.replace(file_dest, &http_dest)).expect("bench config");
    let stores: Vec<(PathBuf, PathBuf)> = (0..n_proc)
        .map(|i| {
            let p = work.join(format!("small-{i}.db"));
            run_process(&small.config, &p, EMPTY_NOW, &cache);
            let q = work.join(format!("small-http-{i}.db"));
            run_process(&http_config, &q, EMPTY_NOW, &cache);
            (p, q)
        })
        .collect();
    let mut run10k_http = Vec::new();
    let run10k = sample(n_proc, |i| {
        let t = Instant::now();
        let out = run_process(&http_config, &stores[i].1, NOW, &cache);
        assert!(out.contains("\"http_status\":200"), "{out}");
        run10k_http.push(t.elapsed());
        // Each sample is a first run of the window in a store of its own,
        // so the file it appends to starts empty (one that already held
        // the key would be refused as another store's run).
        reset_output(&small.config);
        let t = Instant::now();
        let out = run_process(&small.config, &stores[i].0, NOW, &cache);
        assert!(ran_10k(&out), "{out}");
        t.elapsed()
    });

    // 3. 1M rows, in process, interleaved so noise hits all three alike.
    let big_stores: Vec<PathBuf> = (0..n_big)
        .map(|i| {
            let p = work.join(format!("big-{i}.db"));
            run_process(&big.config, &p, EMPTY_NOW, &cache);
            p
        })
        .collect();
    let mut wasm = Vec::new();
    let mut native_rows = Vec::new();
    let mut native_batches = Vec::new();
    let mut fingerprints = Vec::new();
    let host_batches = read_host_batches(&big.db);
    let mut checks = (0u64, 0u64, 0u64);
    let mut journal_bytes = 0;
    for store in &big_stores {
        let config = JobConfig::load(&RunFlags {
            config: Some(big.config.clone()),
            store: Some(store.clone()),
            now: Some(NOW.to_string()),
            cache_dir: Some(cache.clone()),
            ..RunFlags::default()
        })
        .expect("bench config");
        let job = config.job(&|v| std::env::var_os(v)).expect("bench job");
        let runtime = jobhost::run::Runtime {
            now: config.now().expect("bench instant"),
            ..jobhost::run::Runtime::default()
        };
        // Each run is a first run of the window in a store of its own.
        reset_output(&big.config);
        let t = Instant::now();
        let outcome = jobhost::run::run(&job, &runtime);
        wasm.push(t.elapsed());
        assert_eq!(outcome.exit_code, 0, "{:?}", outcome.receipt.error);
        checks.0 = outcome.receipt.stats.map(|s| s.rows).unwrap_or(0);
        journal_bytes = outcome.receipt.stats.map_or(0, |s| s.journal_bytes);

        let t = Instant::now();
        checks.1 = aggregate_rows_natively(&big.db);
        native_rows.push(t.elapsed());

        let t = Instant::now();
        checks.2 = aggregate_batches_natively(&big.db);
        native_batches.push(t.elapsed());

        // What a run adds for `jobhost check`: the fingerprint of every
        // row its guest receives.
        let t = Instant::now();
        let mut f = source::Fingerprint::default();
        f.opened();
        for b in &host_batches {
            f.add(Some(b));
        }
        f.add(None);
        fingerprints.push(t.elapsed());
        assert_eq!(f.rows, checks.1);
    }
    assert_eq!(checks.0, checks.1, "all three paths saw the same rows");
    assert_eq!(checks.1, checks.2);

    println!(
        "jobhost run benchmarks (medians, p25-p75; {n_proc} process runs, {n_big} 1M-row runs)"
    );
    report("process floor: `jobhost --version`", &floor);
    report("skip path: one `jobhost run` process, window done", &skip);
    report(
        "skip floor: a process that opens the store and reads the row",
        &skip_floor,
    );
    println!(
        "  skip path / its floor: {:.2}x (medians, interleaved)",
        median(&skip).as_secs_f64() / median(&skip_floor).as_secs_f64()
    );
    report("ran: one `jobhost run` process, 10k rows, cached", &run10k);
    report(
        "the same, delivered by HTTP POST to 127.0.0.1",
        &run10k_http,
    );
    report("1M rows through the guest (run::run, in process)", &wasm);
    report("1M rows native, row loop + hash maps", &native_rows);
    report(
        "1M rows native, host batches + guest Digest",
        &native_batches,
    );
    report(
        "1M rows: the fingerprint a run records of them",
        &fingerprints,
    );
    let m = |v: &[Duration]| median(v).as_secs_f64();
    println!(
        "ratio guest / native row loop: {:.2}x; guest / native same-code: {:.2}x",
        m(&wasm) / m(&native_rows),
        m(&wasm) / m(&native_batches)
    );
    println!(
        "the fingerprint is {:.1}% of the 1M-row run",
        100.0 * m(&fingerprints) / m(&wasm)
    );
    println!(
        "journal of the 1M-row run: {:.1} MiB compressed",
        journal_bytes as f64 / 1_048_576.0
    );
    if let Some(c) = before_after {
        println!("this build against JOBHOST_BENCH_BASELINE, interleaved (medians, p25-p75):");
        for (what, this, base) in [
            ("skip path", &c.skip.0, &c.skip.1),
            ("10k rows, cached", &c.run10k.0, &c.run10k.1),
        ] {
            report(&format!("{what}: this build"), this);
            report(&format!("{what}: baseline"), base);
            println!("  {what}: this / baseline = {:.3}", m(this) / m(base));
        }
    }
    let _ = std::fs::remove_dir_all(&work);
}

/// Samples of this build and of a baseline binary, side by side.
struct Compared {
    skip: (Vec<Duration>, Vec<Duration>),
    run10k: (Vec<Duration>, Vec<Duration>),
}

/// The skip path and the 10k-row run, for this build and `baseline`,
/// interleaved (which goes first alternates) so that noise hits both alike.
fn compare(baseline: &Path, config: &Path, work: &Path, cache: &Path, n: usize) -> Compared {
    // Both from fresh copies, as the skip path above.
    let this = installed(env!("CARGO_BIN_EXE_jobhost-under-test"), work);
    let before = work.join("baseline");
    std::fs::create_dir_all(&before).expect("bench folder");
    let baseline = installed(baseline, &before);
    let bins = [this.as_path(), baseline.as_path()];
    let done: Vec<PathBuf> = bins
        .iter()
        .enumerate()
        .map(|(b, bin)| {
            let p = work.join(format!("compare-done-{b}.db"));
            reset_output(config);
            let out = run_process_with(bin, config, &p, NOW, cache);
            assert!(ran_10k(&out), "{out}");
            p
        })
        .collect();
    let fresh: Vec<[PathBuf; 2]> = (0..n)
        .map(|i| {
            [0, 1].map(|b| {
                let p = work.join(format!("compare-{b}-{i}.db"));
                run_process_with(bins[b], config, &p, EMPTY_NOW, cache);
                p
            })
        })
        .collect();
    let mut c = Compared {
        skip: (Vec::new(), Vec::new()),
        run10k: (Vec::new(), Vec::new()),
    };
    for (i, stores) in fresh.iter().enumerate() {
        let order = if i % 2 == 0 { [0, 1] } else { [1, 0] };
        for b in order {
            let t = Instant::now();
            let out = run_process_with(bins[b], config, &done[b], NOW, cache);
            assert!(out.contains("\"reason\":\"done\""), "{out}");
            let skip = t.elapsed();
            reset_output(config);
            let t = Instant::now();
            let out = run_process_with(bins[b], config, &stores[b], NOW, cache);
            assert!(ran_10k(&out), "{out}");
            let ran = t.elapsed();
            let (s, r) = if b == 0 {
                (&mut c.skip.0, &mut c.run10k.0)
            } else {
                (&mut c.skip.1, &mut c.run10k.1)
            };
            s.push(skip);
            r.push(ran);
        }
    }
    c
}

/// Empties the file destination of the job `config` describes.
fn reset_output(config: &Path) {
    let _ = std::fs::remove_file(config.with_file_name("out.jsonl"));
}

/// Whether a receipt says the 10k-row window ran and was delivered.
fn ran_10k(receipt: &str) -> bool {
    receipt.contains("\"event\":\"ran\"")
        && receipt.contains("\"rows\":10000")
        && !receipt.contains("\"error\"")
}

struct Setup {
    config: PathBuf,
    db: PathBuf,
}

fn setup(dir: &Path, component: &Path, rows: u64) -> Setup {
    std::fs::create_dir_all(dir).expect("bench folder");
    let db = dir.join("sales.db");
    jobhost_tests::sample::write_sales(&db, DAY_START, DAY_END, rows, 11).expect("sample data");
    let config = dir.join("job.toml");
    std::fs::write(
        &config,
        format!(
            "job = \"bench\"\ncomponent = \"{}\"\n[source]\npath = \"sales.db\"\nquery = \"{QUERY}\"\n\
             [destinations.digest]\ntype = \"file\"\npath = \"out.jsonl\"\n[limits]\nmemory_mib = 512\n",
            component.display()
        ),
    )
    .expect("bench config");
    Setup { config, db }
}

/// A copy of the binary `bin` in `work`, made as an install makes one.
fn installed(bin: impl AsRef<Path>, work: &Path) -> PathBuf {
    let bin = bin.as_ref();
    let copy = work.join(bin.file_name().expect("a binary's name"));
    std::fs::copy(bin, &copy).expect("copy the binary");
    copy
}

fn run_process(config: &Path, store: &Path, now: &str, cache: &Path) -> String {
    let this = Path::new(env!("CARGO_BIN_EXE_jobhost-under-test"));
    run_process_with(this, config, store, now, cache)
}

/// `jobhost run`'s arguments for the window at `now` of `config`'s job, in
/// `store`.
fn run_args(config: &Path, store: &Path, now: &str) -> Vec<std::ffi::OsString> {
    vec![
        "run".into(),
        "--config".into(),
        config.into(),
        "--store".into(),
        store.into(),
        "--now".into(),
        now.into(),
    ]
}

fn run_process_with(bin: &Path, config: &Path, store: &Path, now: &str, cache: &Path) -> String {
    let out = Command::new(bin)
        .args(run_args(config, store, now))
        .env("JOBHOST_CACHE_DIR", cache)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("jobhost runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The 10k-row run (a file destination) without `[telemetry]`, with it
/// and its receiver down (a port nothing listens on), and with it and a
/// receiver that takes every batch, interleaved sample by sample (the
/// order turned each sample); each sample a first run of the window in a
/// store of its own.
fn telemetry_cost(config: &Path, work: &Path, cache: &Path, n: usize) {
    let receiver = jobhost_tests::sink::Sink::start();
    let down = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        format!("http://{}", l.local_addr().expect("its address"))
    };
    let text = std::fs::read_to_string(config).expect("bench config");
    let names = ["no telemetry", "receiver down", "receiver up"];
    let configs: Vec<PathBuf> = [
        String::new(),
        format!("\n[telemetry]\notlp_endpoint = \"{down}\"\n"),
        format!("\n[telemetry]\notlp_endpoint = \"{}\"\n", receiver.url("")),
    ]
    .iter()
    .enumerate()
    .map(|(i, extra)| {
        let c = config.with_file_name(format!("job-telemetry-{i}.toml"));
        std::fs::write(&c, format!("{text}{extra}")).expect("bench config");
        c
    })
    .collect();
    let mut times: [Vec<Duration>; 3] = Default::default();
    for i in 0..n {
        for k in 0..3 {
            let m = (i + k) % 3;
            let store = work.join(format!("telemetry-{m}-{i}.db"));
            run_process(&configs[m], &store, EMPTY_NOW, cache);
            reset_output(config);
            let t = Instant::now();
            let out = run_process(&configs[m], &store, NOW, cache);
            times[m].push(t.elapsed());
            assert!(ran_10k(&out), "{out}");
        }
    }
    println!(
        "[telemetry]'s cost: one `jobhost run` process, 10k rows, cached, {n} samples each, interleaved"
    );
    let base = median(&times[0]);
    for (m, name) in names.iter().enumerate() {
        report(
            &format!(
                "{name} ({:.3}x no telemetry)",
                ratio(median(&times[m]), base)
            ),
            &times[m],
        );
    }
    let traces = receiver
        .requests()
        .iter()
        .filter(|q| q.path == "/v1/traces")
        .count();
    println!("the receiver took {traces} export requests");
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64()
}

fn sample(n: usize, mut f: impl FnMut(usize) -> Duration) -> Vec<Duration> {
    (0..n).map(&mut f).collect()
}

/// The digest's aggregation written the plain native way.
fn aggregate_rows_natively(db: &Path) -> u64 {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open");
    let mut stmt = conn.prepare(QUERY).expect("prepare");
    let mut rows = stmt
        .query(rusqlite::named_params! {":start": DAY_START, ":end": DAY_END})
        .expect("query");
    let mut sales = jobhost_tests::native::Sales::default();
    while let Some(row) = rows.next().expect("row") {
        let region = row.get_ref(1).expect("region").as_str().expect("text");
        let product = row.get_ref(2).expect("product").as_str().expect("text");
        sales.add(
            row.get(0).expect("ts"),
            region,
            product,
            row.get(3).expect("quantity"),
            row.get(4).expect("amount"),
        );
    }
    sales.finish()
}

/// The window's rows of `db` as the host hands them to a guest, in
/// batches of up to 8192: the access and its open cursor.
fn host_cursor(db: &Path) -> (SourceAccess, source::RowCursor) {
    let spec = SourceSpec {
        path: db.to_path_buf(),
        query: QUERY.to_string(),
        naive: jobhost::guest::source::NaiveTimes::Utc,
    };
    let start = jiff::Timestamp::from_second(DAY_START).expect("start");
    let end = jiff::Timestamp::from_second(DAY_END).expect("end");
    let mut access = SourceAccess::new(
        Some(spec),
        start,
        end,
        std::num::NonZeroU32::new(8192).unwrap(),
    );
    let cursor = access.open().expect("open");
    (access, cursor)
}

/// The window's rows as the host hands them over, in batches of 8192.
fn read_host_batches(db: &Path) -> Vec<source::Batch> {
    let (_access, mut cursor) = host_cursor(db);
    let mut out = Vec::new();
    while let Some(batch) = cursor.next_batch(8192).expect("batch") {
        out.push(batch);
    }
    out
}

/// The guest's own `Digest`, compiled natively, over the host's batches
/// (each checked by the SDK on the way in, as the guest checks it).
fn aggregate_batches_natively(db: &Path) -> u64 {
    use jobhost_sdk::testing::{BatchBuilder, RawColumn, RawData, RawText};
    use jobhost_sdk::{ColumnInfo, ColumnKind};
    let (_access, mut cursor) = host_cursor(db);
    let columns: Vec<ColumnInfo> = cursor
        .columns()
        .iter()
        .map(|c| {
            let kind = match c.kind {
                source::ColumnKind::Integer => ColumnKind::Integer,
                source::ColumnKind::Real => ColumnKind::Real,
                source::ColumnKind::Text => ColumnKind::Text,
                source::ColumnKind::Blob => ColumnKind::Blob,
            };
            ColumnInfo::new(c.name.clone(), kind)
        })
        .collect();
    let mut digest = guest_report::digest::Digest::new(&columns).expect("digest");
    let text = |t: source::TextData| RawText {
        data: t.data,
        offsets: t.offsets,
    };
    while let Some(batch) = cursor.next_batch(8192).expect("batch") {
        let builder = BatchBuilder::new().rows(batch.rows as usize);
        let batch = columns
            .iter()
            .zip(batch.columns)
            .fold(builder, |b, (info, c)| {
                let data = match c.data {
                    source::ColumnData::Integer(v) => RawData::Integer(v),
                    source::ColumnData::Real(v) => RawData::Real(v),
                    source::ColumnData::Text(t) => RawData::Text(text(t)),
                    source::ColumnData::TextDict { values, indices } => RawData::TextDict {
                        values: text(values),
                        indices,
                    },
                    source::ColumnData::Blob(t) => RawData::Blob(text(t)),
                };
                b.raw(
                    &info.name,
                    info.kind,
                    RawColumn {
                        nulls: c.nulls,
                        data,
                    },
                )
            })
            .build();
        digest.add_batch(&batch).expect("aggregate");
    }
    let rows = digest.rows();
    let summary = digest.finish(guest_report::summary::WindowInfo::default(), Some(5));
    std::hint::black_box(summary.to_json());
    rows
}

/// Runs `bin` with `args` (a skip) under callgrind and writes the linker
/// script that puts every function of `bin` it ran into one output section
/// to `out` (`jobhost_tests::hot_text`).
fn hot_text(bin: &Path, args: &[std::ffi::OsString], cache: &Path, out: &Path) {
    let profile = bin.with_extension("callgrind");
    let ran = Command::new("valgrind")
        .args(["--tool=callgrind", "--demangle=no"])
        .arg(format!("--callgrind-out-file={}", profile.display()))
        .arg(bin)
        .args(args)
        .env("JOBHOST_CACHE_DIR", cache)
        .output()
        .expect("valgrind runs (install it: apt install valgrind)");
    assert!(
        ran.status.success(),
        "the skip under callgrind failed: {ran:?}"
    );
    assert!(
        String::from_utf8_lossy(&ran.stdout).contains("\"reason\":\"done\""),
        "the run under callgrind was not a skip: {ran:?}"
    );
    let text = std::fs::read_to_string(&profile).expect("callgrind's profile");
    let binary = bin.file_name().and_then(|n| n.to_str()).expect("a name");
    let patterns = jobhost_tests::hot_text::patterns(&text, binary);
    std::fs::write(out, jobhost_tests::hot_text::script(&patterns))
        .expect("write the linker script");
    println!(
        "{}: {} functions of the skip path",
        out.display(),
        patterns.len()
    );
}
