//! The run's context, its result and errors, and the glue `export!` calls,
//! from and to the WIT types.

use crate::bindings::jobhost::report::{outbox, source, types};
use crate::bindings::{self, RunError};
use crate::{__private, Context, Error, ErrorKind, Instant, Output, Report, SendError};

fn instant(seconds: i64, nanoseconds: u32) -> types::Instant {
    types::Instant {
        seconds,
        nanoseconds,
    }
}

fn wit_context(params: &[(&str, &str)]) -> types::RunContext {
    types::RunContext {
        window: types::Window {
            job: "daily-report".to_owned(),
            key: "daily-report:2026-11-08".to_owned(),
            label: "2026-11-08".to_owned(),
            start: instant(1_794_096_000, 0),
            end: instant(1_794_182_400, 0),
            timezone: "Europe/Berlin".to_owned(),
        },
        now: instant(1_794_182_700, 250_000_000),
        cursor: Some("1794096000".to_owned()),
        attempt: 2,
        destinations: vec!["archive".to_owned(), "digest".to_owned()],
        params: params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

#[test]
fn the_context_is_the_wit_context_as_plain_values() {
    let ctx = Context::from(wit_context(&[("destination", "digest"), ("top", "5")]));
    assert_eq!(ctx.window.job, "daily-report");
    assert_eq!(ctx.window.key, "daily-report:2026-11-08");
    assert_eq!(ctx.window.label, "2026-11-08");
    assert_eq!(ctx.window.timezone, "Europe/Berlin");
    assert_eq!(ctx.window.start, Instant::from_unix_seconds(1_794_096_000));
    assert_eq!(ctx.window.end.unix_seconds(), 1_794_182_400);
    assert_eq!(
        ctx.now,
        Instant {
            seconds: 1_794_182_700,
            nanoseconds: 250_000_000
        }
    );
    assert_eq!(ctx.cursor.as_deref(), Some("1794096000"));
    assert_eq!(ctx.attempt, 2);
    assert_eq!(ctx.destinations, ["archive", "digest"]);
    assert_eq!(ctx.params.len(), 2);
}

#[test]
fn params_are_looked_up_by_name() {
    let ctx = Context::from(wit_context(&[("top", "5"), ("empty", ""), ("top", "9")]));
    assert_eq!(ctx.param("top"), Some("5"), "the first of a repeated name");
    assert_eq!(ctx.param("empty"), Some(""));
    assert_eq!(ctx.param("Top"), None, "names are matched exactly");
    assert_eq!(ctx.param("missing"), None);
    let none = Context::from(wit_context(&[]));
    assert_eq!(none.param("top"), None);
    assert_eq!(Context::default().param("top"), None);
}

#[test]
fn instants_convert_to_unix_seconds_and_millis() {
    let t = Instant {
        seconds: 1_794_182_700,
        nanoseconds: 250_999_999,
    };
    assert_eq!(t.unix_seconds(), 1_794_182_700);
    assert_eq!(t.unix_millis(), 1_794_182_700_250);
    // Before 1970 the fraction still counts forward: -1.5 s is -1500 ms.
    let before = Instant {
        seconds: -2,
        nanoseconds: 500_000_000,
    };
    assert_eq!(before.unix_millis(), -1500);
    assert_eq!(Instant::from_unix_seconds(i64::MAX).unix_millis(), i64::MAX);
    assert_eq!(Instant::from_unix_seconds(i64::MIN).unix_millis(), i64::MIN);
    assert!(Instant::from_unix_seconds(1) < before.max(Instant::from_unix_seconds(2)));
}

#[test]
fn errors_map_to_the_wit_run_error() {
    let cases = [
        (
            Error::invalid_data("bad"),
            RunError::InvalidData("bad".to_owned()),
        ),
        (
            Error::source_failed("gone"),
            RunError::SourceFailed("gone".to_owned()),
        ),
        (Error::other("oops"), RunError::Other("oops".to_owned())),
    ];
    for (error, wit) in cases {
        assert_eq!(format!("{:?}", RunError::from(error)), format!("{wit:?}"));
    }
    assert_eq!(
        Error::new(ErrorKind::SourceFailed, "x"),
        Error::source_failed("x")
    );
}

#[test]
fn invalid_data_and_programming_errors_are_permanent() {
    assert!(!Error::invalid_data("x").retryable());
    assert!(Error::source_failed("x").retryable());
    assert!(Error::other("x").retryable());
    assert!(!Error::programming("x").retryable());
    let names: Vec<&str> = [
        ErrorKind::InvalidData,
        ErrorKind::SourceFailed,
        ErrorKind::Other,
        ErrorKind::Programming,
    ]
    .iter()
    .map(|k| k.name())
    .collect();
    assert_eq!(
        names,
        ["invalid-data", "source-failed", "other", "programming"]
    );
}

#[test]
fn an_error_says_its_message_and_keeps_its_kind_with_context() {
    let e = Error::invalid_data("amount NaN is not a finite number").context("column `amount`");
    assert_eq!(e.kind(), ErrorKind::InvalidData);
    assert_eq!(
        e.to_string(),
        "column `amount`: amount NaN is not a finite number"
    );
    assert_eq!(e.message(), e.to_string());
    assert_eq!(e.send_error(), None);
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert!(boxed.to_string().starts_with("column"));
}

#[test]
fn source_errors_are_source_failed_and_say_what_failed() {
    use source::SourceError as S;
    let cases = [
        (S::NotConfigured, "the job declares no data source"),
        (
            S::QueryFailed("no such table".into()),
            "query failed: no such table",
        ),
        (
            S::TypeMismatch("column `a` row 3".into()),
            "type mismatch: column `a` row 3",
        ),
        (
            S::InvalidState("one cursor".into()),
            "invalid state: one cursor",
        ),
        (S::Other("disk".into()), "disk"),
    ];
    for (wit, message) in cases {
        let e = Error::from_source(wit);
        assert_eq!(e.kind(), ErrorKind::SourceFailed);
        assert_eq!(e.message(), message);
    }
}

#[test]
fn send_errors_say_which_send_error_it_was() {
    use outbox::SendError as S;
    let cases = [
        (
            S::UnknownDestination("nope".into()),
            SendError::UnknownDestination("nope".into()),
            "unknown destination `nope`",
        ),
        (
            S::TooLarge(1024),
            SendError::TooLarge(1024),
            "body is larger than 1024 bytes",
        ),
        (
            S::TooManyMessages(8),
            SendError::TooManyMessages(8),
            "the run already staged the maximum of 8 messages",
        ),
        (
            S::InvalidContentType("json".into()),
            SendError::InvalidContentType("json".into()),
            "invalid content type `json`",
        ),
    ];
    for (wit, plain, message) in cases {
        let e = Error::from_send(wit);
        assert_eq!(e.kind(), ErrorKind::Other);
        assert_eq!(e.message(), message);
        assert_eq!(e.send_error(), Some(&plain));
        assert_eq!(plain.to_string(), message);
    }
}

#[test]
fn an_output_keeps_or_sets_the_cursor() {
    let kept = Output::new("summary");
    assert_eq!((kept.summary.as_str(), kept.cursor), ("summary", None));
    let set = Output::new(String::from("s")).with_cursor("42");
    assert_eq!(set.cursor.as_deref(), Some("42"));
    let wit = bindings::Report::from(set.clone());
    assert_eq!(
        (wit.summary.as_str(), wit.cursor.as_deref()),
        ("s", Some("42"))
    );
    assert_eq!(Output::from(wit), set);
}

/// A report whose run depends on its parameters, with no `describe`.
#[derive(Default)]
struct Plain;

impl Report for Plain {
    fn run(&mut self, ctx: &Context) -> Result<Output, Error> {
        match ctx.param("fail") {
            Some("data") => Err(Error::invalid_data("refused")),
            Some("column") => {
                let batch = crate::testing::BatchBuilder::new()
                    .integers("n", [Some(1)])
                    .build();
                batch.integers("amount").map(|_| Output::new("read"))
            }
            Some(_) => Err(Error::other("failed")),
            None => Ok(Output::new(ctx.window.key.clone()).with_cursor(ctx.attempt.to_string())),
        }
    }
}

/// A report that describes what it reported, from what its run kept.
#[derive(Default)]
struct Describing {
    kept: Option<String>,
}

impl Report for Describing {
    fn run(&mut self, ctx: &Context) -> Result<Output, Error> {
        self.kept = Some(format!("kept by the run of {}", ctx.window.label));
        Ok(Output::new("figures"))
    }

    fn describe(&mut self, ctx: &Context, output: &Output) -> Option<String> {
        Some(format!(
            "describe {} of {} ({})",
            output.summary,
            ctx.window.label,
            self.kept.as_deref().unwrap_or("nothing kept")
        ))
    }
}

#[test]
fn the_export_glue_runs_the_report_on_the_wit_types() {
    let ok = __private::run::<Plain>(wit_context(&[])).expect("ok");
    assert_eq!(ok.summary, "daily-report:2026-11-08");
    assert_eq!(ok.cursor.as_deref(), Some("2"));
    let refused = __private::run::<Plain>(wit_context(&[("fail", "data")]));
    assert!(matches!(refused, Err(RunError::InvalidData(m)) if m == "refused"));
    let failed = __private::run::<Plain>(wit_context(&[("fail", "yes")]));
    assert!(matches!(failed, Err(RunError::Other(m)) if m == "failed"));
}

#[test]
fn the_export_glue_stops_the_run_with_a_panic_on_a_programming_error() {
    // A panic is a trap inside the component, which the host never
    // retries; WIT `other` would be tried again, to the same end.
    let panicked = std::panic::catch_unwind(|| {
        let _ = __private::run::<Plain>(wit_context(&[("fail", "column")]));
    })
    .expect_err("a column the batch lacks panics");
    let message = panicked
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        message,
        "the batch has no column `amount` (its columns: `n`)"
    );
}

#[test]
fn describe_gives_nothing_unless_the_report_says_something() {
    let report = bindings::Report {
        summary: "figures".to_owned(),
        cursor: None,
    };
    assert_eq!(
        __private::describe::<Plain>(wit_context(&[]), report.clone()),
        None
    );
    // Without a run before it (as in a replay of describe alone): a new value.
    assert_eq!(
        __private::describe::<Describing>(wit_context(&[]), report.clone()).as_deref(),
        Some("describe figures of 2026-11-08 (nothing kept)")
    );
    // After a run on the same instance: what the run kept in its fields.
    assert!(__private::run::<Describing>(wit_context(&[])).is_ok());
    assert_eq!(
        __private::describe::<Describing>(wit_context(&[]), report.clone()).as_deref(),
        Some("describe figures of 2026-11-08 (kept by the run of 2026-11-08)")
    );
    // describe takes the value: nothing outlives the run.
    assert_eq!(
        __private::describe::<Describing>(wit_context(&[]), report).as_deref(),
        Some("describe figures of 2026-11-08 (nothing kept)")
    );
}
