//! Write jobhost report components in Rust.
//!
//! A jobhost report is a WebAssembly component of the WIT world
//! `describing-reporter` (`jobhost:report@0.1.1`, `wit/report.wit`): the host
//! hands it one time window's rows and its run context, and it returns a
//! report and stages messages for the job's destinations. This crate owns
//! the WIT bindings and hands a report plain Rust values instead:
//!
//! - the entry point: implement [`Report`] and name the type in
//!   [`export!`];
//! - the run: [`Context`] ([`Window`], [`Instant`], the job's parameters),
//!   and local clock time in the window's zone ([`Window::local`], a
//!   [`LocalDateTime`]: the host gives the zone's offsets, so daylight
//!   saving is right without a time zone database in the component);
//! - the rows: [`open`] a [`Source`] and read its [`Batch`]es, each checked
//!   once when it arrives, then read through typed views by column name
//!   ([`Batch::integers`], [`Batch::reals`], [`Batch::texts`],
//!   [`Batch::blobs`]) or row by row ([`Batch::rows`]);
//! - the effects: [`send`] a message, write to the host's [`log`];
//! - the result: an [`Output`], or an [`Error`] that says whether retrying
//!   can help (a [`Programming`](ErrorKind::Programming) error, such as a
//!   column the batch lacks, ends the run for good);
//! - [`testing`]: batches from plain values, and the window's time zone, to
//!   test a report's logic natively.
//!
//! A report crate depends on `jobhost-sdk` only (not on wit-bindgen), is
//! built as a `cdylib` for `wasm32-wasip2`, and looks like this:
//!
//! ```
//! use jobhost_sdk::{Context, Error, Output, Report};
//!
//! /// Revenue per window, staged as JSON for every destination.
//! #[derive(Default)]
//! struct Revenue;
//!
//! impl Report for Revenue {
//!     fn run(&mut self, ctx: &Context) -> Result<Output, Error> {
//!         let mut source = jobhost_sdk::open()?;
//!         let (mut orders, mut revenue) = (0u64, 0.0);
//!         for batch in source.batches() {
//!             let batch = batch?;
//!             for amount in batch.reals("amount")?.iter().flatten() {
//!                 orders += 1;
//!                 revenue += amount;
//!             }
//!         }
//!         if !revenue.is_finite() {
//!             return Err(Error::invalid_data("the amounts do not add up to a number"));
//!         }
//!         let json = format!(r#"{{"window":"{}","orders":{orders},"revenue":{revenue:.2}}}"#, ctx.window.key);
//!         for destination in &ctx.destinations {
//!             jobhost_sdk::send(destination, &json, "application/json")?;
//!         }
//!         jobhost_sdk::log::info(format!("{orders} orders in {}", ctx.window.key));
//!         Ok(Output::new(format!("{orders} orders, revenue {revenue:.2}")))
//!     }
//! }
//!
//! jobhost_sdk::export!(Revenue);
//! ```
//!
//! [`Report::describe`] is optional: by default a report has nothing for a
//! language model to describe, which the host treats as it treats a
//! component of the plain `reporter` world.

#![deny(unsafe_code)]
#![warn(missing_docs)]

// The generated export code names `jobhost_sdk::bindings` (the
// `default_bindings_module`); this makes that path work inside the crate too.
extern crate self as jobhost_sdk;

#[doc(hidden)]
pub mod bindings;

mod batch;
mod context;
mod effects;
mod error;
mod source;
pub mod testing;
mod zone;

#[cfg(test)]
mod tests;

pub use batch::{
    Batch, Blobs, Column, ColumnInfo, ColumnKind, Dictionary, Integers, Reals, Row, Rows, Texts,
};
pub use context::{Context, Instant, Window};
pub use effects::{log, send};
pub use error::{Error, ErrorKind, SendError};
pub use source::{BATCH_ROWS, Batches, Source, open};
pub use zone::{Date, LocalDateTime, OffsetSpan};

/// What a successful run produces (WIT `report`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Output {
    /// The report itself, in whatever text form the report chooses. Stored
    /// with the run and printed in its receipt.
    pub summary: String,
    /// The job's new cursor, or `None` to keep the current one. It becomes
    /// the job's cursor once the run is DONE (every staged message
    /// delivered), and the next run sees it as [`Context::cursor`].
    pub cursor: Option<String>,
}

impl Output {
    /// An output of `summary`, keeping the job's cursor.
    pub fn new(summary: impl Into<String>) -> Self {
        Output {
            summary: summary.into(),
            cursor: None,
        }
    }

    /// The same output, setting the job's cursor to `cursor`.
    pub fn with_cursor(mut self, cursor: impl Into<String>) -> Self {
        self.cursor = Some(cursor.into());
        self
    }
}

impl From<bindings::Report> for Output {
    fn from(r: bindings::Report) -> Self {
        Output {
            summary: r.summary,
            cursor: r.cursor,
        }
    }
}

impl From<Output> for bindings::Report {
    fn from(o: Output) -> Self {
        bindings::Report {
            summary: o.summary,
            cursor: o.cursor,
        }
    }
}

/// A report: the logic of a component, exported with [`export!`].
///
/// The host creates a fresh component instance for every run; in it the
/// report is a value made with [`Default`], whose [`run`](Report::run) is
/// called once, and after a successful run its
/// [`describe`](Report::describe), on the same value: what `run` keeps in
/// the report's fields (the text to describe, say) is there for
/// `describe`, and nothing outlives the run. Both must be pure functions of
/// what the host handed them: a recorded run is replayed and compared.
pub trait Report: Default + 'static {
    /// Computes the report for `ctx.window`.
    fn run(&mut self, ctx: &Context) -> Result<Output, Error>;

    /// The text the job's language model is asked to describe (for example
    /// the run's figures with an instruction on what a person wants to
    /// know), or `None` when there is nothing worth describing; the
    /// default. Called after `run` returned `output`. It causes no effect:
    /// the outbox refuses messages from here.
    fn describe(&mut self, ctx: &Context, output: &Output) -> Option<String> {
        let _ = (ctx, output);
        None
    }
}

/// Exports a type implementing [`Report`] as the component's `run` and
/// `describe`: `jobhost_sdk::export!(MyReport);`, once, in the report
/// crate's `cdylib`.
///
/// It defines a hidden type implementing the generated bindings' `Guest`
/// trait by calling `MyReport`, and invokes the export macro wit-bindgen
/// generated in this crate on it, with the bindings found in
/// `jobhost_sdk::bindings`: the report crate needs no wit-bindgen of its
/// own.
#[macro_export]
macro_rules! export {
    ($report:ty) => {
        const _: () = {
            #[doc(hidden)]
            pub struct __JobhostSdkComponent;

            impl $crate::bindings::Guest for __JobhostSdkComponent {
                fn run(
                    ctx: $crate::bindings::RunContext,
                ) -> ::core::result::Result<$crate::bindings::Report, $crate::bindings::RunError>
                {
                    $crate::__private::run::<$report>(ctx)
                }

                fn describe(
                    ctx: $crate::bindings::RunContext,
                    report: $crate::bindings::Report,
                ) -> ::core::option::Option<::std::string::String> {
                    $crate::__private::describe::<$report>(ctx, report)
                }
            }

    $crate::bindings::export!(__JobhostSdkComponent with_types_in $crate::bindings);
        };
    };
}

/// What [`export!`] expands to calls; not part of the API.
#[doc(hidden)]
pub mod __private {
    use std::any::Any;
    use std::cell::RefCell;

    use crate::{Context, Output, Report, bindings};

    thread_local! {
        /// The report value of this instance's run, kept from `run` for
        /// `describe` (a component instance runs one report, on one
        /// thread). The SDK keeps it so that a report keeps its state in
        /// its own fields.
        static REPORT: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
    }

    /// This instance's report value: the one `run` used, or a new one.
    fn take<R: Report>() -> R {
        REPORT
            .with(|r| r.borrow_mut().take())
            .and_then(|b| b.downcast::<R>().ok())
            .map_or_else(R::default, |b| *b)
    }

    fn keep<R: Report>(report: R) {
        REPORT.with(|r| *r.borrow_mut() = Some(Box::new(report)));
    }

    /// `run`, from the WIT types to the SDK's and back. A
    /// [`Programming`](crate::ErrorKind::Programming) error becomes a panic
    /// with its message: a trap, which the host does not retry, where a
    /// WIT `other` would be tried again to the same end.
    pub fn run<R: Report>(
        ctx: bindings::RunContext,
    ) -> Result<bindings::Report, bindings::RunError> {
        crate::zone::begin_run(&ctx.window.timezone);
        let mut report = R::default();
        let result = report.run(&Context::from(ctx));
        keep(report);
        match result {
            Ok(output) => Ok(output.into()),
            Err(e) if e.kind() == crate::ErrorKind::Programming => {
                panic!("{}", e.message())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `describe`, from the WIT types to the SDK's.
    pub fn describe<R: Report>(
        ctx: bindings::RunContext,
        report: bindings::Report,
    ) -> Option<String> {
        let mut value = take::<R>();
        value.describe(&Context::from(ctx), &Output::from(report))
    }
}
