//! A test-only guest: a report component that pokes at the walls of the
//! jobhost sandbox instead of reporting on anything. Its behaviour is chosen
//! by the job's `mode` parameter, else its name (`ctx.window.job`); each mode tries one kind of escape or
//! misbehaviour (file system, environment, network, endless loops, unbounded
//! memory, panics, floods of output, clocks and randomness, outbox misuse) and
//! describes what happened in the report's summary, so host tests can check
//! that the sandbox held; `echo` writes back every column and value its
//! source handed it. It is never shipped or run outside those tests.

use std::fmt::Write as _;
use std::hint::black_box;

wit_bindgen::generate!({ world: "describing-reporter", path: "../../../wit" });

use jobhost::report::log::{self, Level};
use jobhost::report::outbox::{self, SendError};
use jobhost::report::source::{self, SourceError};

struct Probe;

/// The mode: the `mode` parameter (so that several jobs can share one),
/// else the job's name.
fn mode(ctx: &RunContext) -> &str {
    ctx.params
        .iter()
        .find(|(k, _)| k == "mode")
        .map_or(ctx.window.job.as_str(), |(_, v)| v.as_str())
}

impl Guest for Probe {
    fn run(ctx: RunContext) -> Result<Report, RunError> {
        let summary = match mode(&ctx) {
            "probe-fs" => probe_fs(),
            "probe-env" => probe_env(),
            "probe-net" => probe_net(),
            "spin" => spin(),
            "oom" => oom(),
            "panic" => panic!("probe panicked on purpose"),
            "fail" => {
                return Err(RunError::InvalidData(
                    "probe refused the data on purpose".to_string(),
                ));
            }
            "stdout-flood" => stdout_flood(),
            "log-flood" => log_flood(),
            "clock" => clock(&ctx),
            "sleep" => sleep(),
            "unknown-destination" => unknown_destination(),
            "send-twice" => send_twice(&ctx)?,
            "read-all" => read_all()?,
            "echo" => echo()?,
            "echo-send" => {
                let rows = echo()?;
                for destination in &ctx.destinations {
                    outbox::send(destination, rows.as_bytes(), "application/json").map_err(
                        |err| {
                            RunError::Other(format!(
                                "sending to `{destination}` failed: {}",
                                describe_send_error(&err)
                            ))
                        },
                    )?;
                }
                rows
            }
            "describe-panic" | "describe-huge" | "describe-send" | "describe-spin" => {
                "ran; see what describe does".to_string()
            }
            other => {
                return Err(RunError::Other(format!("unknown probe mode `{other}`")));
            }
        };
        Ok(Report {
            summary,
            cursor: None,
        })
    }

    /// Misbehaves after `run` in the `describe-*` modes; describes nothing
    /// in the others.
    fn describe(ctx: RunContext, _report: Report) -> Option<String> {
        match mode(&ctx) {
            "describe-panic" => panic!("describe panicked on purpose"),
            // Over the default report limit of 1 MiB.
            "describe-huge" => Some(black_box("x".repeat(2 << 20))),
            // Describing may cause no effect: the outbox is closed.
            "describe-send" => Some(match ctx.destinations.first() {
                Some(d) => match outbox::send(d, b"from describe", "text/plain") {
                    Ok(n) => format!("staged message {n} from describe"),
                    Err(e) => describe_send_error(&e),
                },
                None => "no destination to try".to_string(),
            }),
            "describe-spin" => spin(),
            _ => None,
        }
    }
}

export!(Probe);

/// Sleeps for a day and reports how much time the guest's clocks saw pass.
fn sleep() -> String {
    let wall = std::time::SystemTime::now();
    let start = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_secs(86_400));
    let slept = start.elapsed();
    format!(
        "{{\"slept_seconds\":{},\"wall_unchanged\":{}}}",
        slept.as_secs(),
        std::time::SystemTime::now() == wall
    )
}

/// Quotes `text` as a JSON string literal.
fn json_str(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Builds a JSON object from names and already-encoded JSON values.
fn json_object(entries: &[(&str, String)]) -> String {
    let fields: Vec<String> = entries
        .iter()
        .map(|(name, value)| format!("{}:{}", json_str(name), value))
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// Builds a JSON object whose values are all strings.
fn json_string_object(entries: &[(&str, String)]) -> String {
    let encoded: Vec<(&str, String)> = entries
        .iter()
        .map(|(name, value)| (*name, json_str(value)))
        .collect();
    json_object(&encoded)
}

/// Describes the outcome of one attempt: `ok: ...` or `denied: <error>`.
fn attempt<T, E: std::fmt::Display>(
    result: Result<T, E>,
    describe: impl FnOnce(T) -> String,
) -> String {
    match result {
        Ok(value) => format!("ok: {}", describe(value)),
        Err(err) => format!("denied: {err}"),
    }
}

fn list_dir(path: &str) -> String {
    let listing = std::fs::read_dir(path).and_then(|entries| {
        entries
            .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<Vec<String>>>()
    });
    attempt(listing, |names| {
        format!("{} entries [{}]", names.len(), names.join(", "))
    })
}

fn probe_fs() -> String {
    let read = attempt(std::fs::read("/etc/passwd"), |bytes| {
        format!("read {} bytes", bytes.len())
    });
    let create = attempt(std::fs::write("/tmp/jobhost-probe", b"probe"), |()| {
        "created".to_string()
    });
    json_string_object(&[
        ("read /etc/passwd", read),
        ("list /", list_dir("/")),
        ("list .", list_dir(".")),
        ("create /tmp/jobhost-probe", create),
    ])
}

fn probe_env() -> String {
    let vars: Vec<String> = std::env::vars_os()
        .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
        .collect();
    let vars = if vars.is_empty() {
        "empty".to_string()
    } else {
        format!("ok: {} vars [{}]", vars.len(), vars.join(", "))
    };
    let home = match std::env::var("HOME") {
        Ok(value) => format!("ok: {value}"),
        Err(std::env::VarError::NotPresent) => "empty".to_string(),
        Err(err) => format!("denied: {err}"),
    };
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let args = if args.is_empty() {
        "empty".to_string()
    } else {
        format!("ok: {} args [{}]", args.len(), args.join(", "))
    };
    json_string_object(&[("env vars", vars), ("HOME", home), ("args", args)])
}

fn probe_net() -> String {
    use std::net::{TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
    let connect = attempt(TcpStream::connect("127.0.0.1:5432"), |stream| {
        format!("connected from {:?}", stream.local_addr().ok())
    });
    let listen = attempt(TcpListener::bind("127.0.0.1:0"), |listener| {
        format!("listening on {:?}", listener.local_addr().ok())
    });
    let udp = attempt(UdpSocket::bind("127.0.0.1:0"), |socket| {
        format!("bound {:?}", socket.local_addr().ok())
    });
    let resolve = attempt(("example.com", 80).to_socket_addrs(), |addrs| {
        let addrs: Vec<String> = addrs.map(|a| a.to_string()).collect();
        format!("resolved [{}]", addrs.join(", "))
    });
    json_string_object(&[
        ("connect 127.0.0.1:5432", connect),
        ("tcp bind 127.0.0.1:0", listen),
        ("udp bind 127.0.0.1:0", udp),
        ("resolve example.com:80", resolve),
    ])
}

fn spin() -> ! {
    let mut counter: u64 = 0;
    loop {
        counter = black_box(counter.wrapping_add(1));
    }
}

fn oom() -> ! {
    let mut kept: Vec<Vec<u8>> = Vec::new();
    loop {
        let chunk = black_box(vec![0xA5u8; 1 << 20]);
        kept.push(chunk);
        black_box(&mut kept);
    }
}

fn stdout_flood() -> String {
    const TOTAL: usize = 10 << 20;
    // 64 KiB of 1 KiB lines.
    let line = format!("{}\n", "x".repeat(1023));
    let chunk = line.repeat(64);
    for _ in 0..TOTAL / chunk.len() {
        print!("{chunk}");
    }
    for _ in 0..TOTAL / chunk.len() {
        eprint!("{chunk}");
    }
    "flooded".to_string()
}

fn log_flood() -> String {
    for i in 0..100_000u32 {
        let mut message = format!("log-flood message {i:>8} ");
        while message.len() < 100 {
            message.push('.');
        }
        log::emit(Level::Info, &message);
    }
    "logged".to_string()
}

fn clock(ctx: &RunContext) -> String {
    use std::hash::BuildHasher;
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    let (wall_seconds, wall_nanos) = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(since) => (since.as_secs() as i64, since.subsec_nanos() as i64),
        Err(before) => {
            let d = before.duration();
            (-(d.as_secs() as i64), -(d.subsec_nanos() as i64))
        }
    };
    let first = Instant::now();
    let second = black_box(Instant::now());
    let instant_diff = second.duration_since(first).as_nanos();

    let mut random = String::new();
    for _ in 0..2 {
        let hash = std::collections::hash_map::RandomState::new().hash_one(42u64);
        for byte in hash.to_be_bytes() {
            let _ = write!(random, "{byte:02x}");
        }
    }

    json_object(&[
        ("wall_seconds", wall_seconds.to_string()),
        ("wall_nanos", wall_nanos.to_string()),
        ("instant_diff_nanos", instant_diff.to_string()),
        ("random_hex", json_str(&random)),
        ("ctx_now_seconds", ctx.now.seconds.to_string()),
        ("ctx_now_nanos", ctx.now.nanoseconds.to_string()),
    ])
}

fn describe_send_error(err: &SendError) -> String {
    match err {
        SendError::UnknownDestination(name) => format!("unknown-destination: {name}"),
        SendError::TooLarge(limit) => format!("too-large: {limit}"),
        SendError::TooManyMessages(max) => format!("too-many-messages: {max}"),
        SendError::InvalidContentType(ct) => format!("invalid-content-type: {ct}"),
    }
}

fn describe_source_error(err: &SourceError) -> String {
    match err {
        SourceError::NotConfigured => "not-configured".to_string(),
        SourceError::QueryFailed(m) => format!("query-failed: {m}"),
        SourceError::TypeMismatch(m) => format!("type-mismatch: {m}"),
        SourceError::InvalidState(m) => format!("invalid-state: {m}"),
        SourceError::Other(m) => format!("other: {m}"),
    }
}

fn unknown_destination() -> String {
    match outbox::send("no-such-destination", b"x", "text/plain") {
        Ok(sequence) => format!("staged as message {sequence}"),
        Err(err) => describe_send_error(&err),
    }
}

fn send_twice(ctx: &RunContext) -> Result<String, RunError> {
    for destination in &ctx.destinations {
        for body in [br#"{"n":1}"#, br#"{"n":2}"#] {
            outbox::send(destination, body, "application/json").map_err(|err| {
                RunError::Other(format!(
                    "sending to `{destination}` failed: {}",
                    describe_send_error(&err)
                ))
            })?;
        }
    }
    Ok("sent".to_string())
}

fn read_all() -> Result<String, RunError> {
    let failed = |err: SourceError| RunError::SourceFailed(describe_source_error(&err));
    let cursor = source::open().map_err(failed)?;
    let columns: Vec<String> = cursor
        .columns()
        .iter()
        .map(|column| json_str(&column.name))
        .collect();
    let mut rows: u64 = 0;
    let mut batches: u64 = 0;
    while let Some(batch) = cursor.next_batch(8192).map_err(failed)? {
        rows += u64::from(batch.rows);
        batches += 1;
    }
    drop(cursor);
    Ok(json_object(&[
        ("rows", rows.to_string()),
        ("columns", format!("[{}]", columns.join(","))),
        ("batches", batches.to_string()),
    ]))
}

/// Every column (name and kind) and every row the source handed over, as
/// JSON: integers and reals as numbers (a real that JSON cannot hold, such
/// as NaN, as its text), text as a string, a blob as hex, NULL as null.
fn echo() -> Result<String, RunError> {
    use source::{ColumnData, ColumnKind};
    let failed = |err: SourceError| RunError::SourceFailed(describe_source_error(&err));
    let cursor = source::open().map_err(failed)?;
    let columns: Vec<String> = cursor
        .columns()
        .iter()
        .map(|c| {
            let kind = match c.kind {
                ColumnKind::Integer => "integer",
                ColumnKind::Real => "real",
                ColumnKind::Text => "text",
                ColumnKind::Blob => "blob",
            };
            json_object(&[("name", json_str(&c.name)), ("kind", json_str(kind))])
        })
        .collect();
    let slice = |data: &[u8], offsets: &[u32], i: usize| -> Vec<u8> {
        data[offsets[i] as usize..offsets[i + 1] as usize].to_vec()
    };
    let mut rows: Vec<String> = Vec::new();
    while let Some(batch) = cursor.next_batch(8192).map_err(failed)? {
        for r in 0..batch.rows as usize {
            let values: Vec<String> = batch
                .columns
                .iter()
                .map(|c| {
                    let null = c
                        .nulls
                        .as_ref()
                        .is_some_and(|n| n[r / 8] & (1 << (r % 8)) != 0);
                    if null {
                        return "null".to_string();
                    }
                    match &c.data {
                        ColumnData::Integer(v) => v[r].to_string(),
                        ColumnData::Real(v) if v[r].is_finite() => format!("{:?}", v[r]),
                        ColumnData::Real(v) => json_str(&v[r].to_string()),
                        ColumnData::Text(t) => {
                            json_str(&String::from_utf8_lossy(&slice(&t.data, &t.offsets, r)))
                        }
                        ColumnData::TextDict(d) => json_str(&String::from_utf8_lossy(&slice(
                            &d.values.data,
                            &d.values.offsets,
                            d.indices[r] as usize,
                        ))),
                        ColumnData::Blob(b) => {
                            let mut hex = String::new();
                            for byte in slice(&b.data, &b.offsets, r) {
                                let _ = write!(hex, "{byte:02x}");
                            }
                            json_str(&hex)
                        }
                    }
                })
                .collect();
            rows.push(format!("[{}]", values.join(",")));
        }
    }
    drop(cursor);
    Ok(json_object(&[
        ("columns", format!("[{}]", columns.join(","))),
        ("rows", format!("[{}]", rows.join(","))),
    ]))
}
