//! Traces of runs (`[telemetry] otlp_endpoint`): one trace per run, with a
//! span for each step (claim, source, component, guest, commit, each
//! delivery attempt, digest, notices), exported over OTLP/HTTP (JSON
//! bodies) with the maintained OpenTelemetry crates.
//!
//! Export never holds a run up or fails it: a finished span goes into a
//! bounded queue (it is dropped, and counted, when the queue is full), and
//! one thread of the process sends the queue in batches; a batch the
//! receiver does not take is dropped and counted too. The SDK's own batch
//! processor keeps its count of dropped spans to itself, so the queue is
//! this module's, with the SDK's span type and the OTLP exporter behind
//! it. At the end of a command the queue is given a short, bounded time
//! to empty.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use opentelemetry::trace::{
    Link, Span as _, SpanContext, SpanKind, Status, TraceContextExt as _, Tracer as _,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter as _};

use crate::core::error::{Error, Result};

/// Spans waiting to be sent, at most: past it a span is dropped.
const QUEUE: usize = 4096;

/// Spans sent in one request, at most.
const BATCH: usize = 512;

/// How long the sender waits for more spans before it sends what it has.
const LINGER: Duration = Duration::from_millis(200);

/// The longest one export request may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the end of a command waits for its spans to be sent.
pub const FLUSH_AT_EXIT: Duration = Duration::from_secs(1);

/// Spans dropped in this process: the queue was full, or the receiver did
/// not take their batch (for `/metrics`).
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Spans the receiver took.
static EXPORTED: AtomicU64 = AtomicU64::new(0);

/// The process's exporter, once a job names an endpoint.
static CURRENT: RwLock<Option<Arc<Telemetry>>> = RwLock::new(None);

/// Spans dropped in this process so far.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Spans the receiver took so far.
pub fn exported() -> u64 {
    EXPORTED.load(Ordering::Relaxed)
}

/// One process's trace export.
pub struct Telemetry {
    /// The endpoint as written (no secret in it).
    shown: String,
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    /// Set when the sender has sent everything and stopped.
    done: Mutex<Option<Receiver<()>>>,
}

/// The HTTP client the OTLP exporter sends with: ureq, blocking, on the
/// sender's thread (the exporter's future is run there with
/// `futures_executor::block_on`).
#[derive(Debug)]
struct Client {
    agent: ureq::Agent,
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Client {
    async fn send_bytes(
        &self,
        request: ureq::http::Request<bytes::Bytes>,
    ) -> std::result::Result<ureq::http::Response<bytes::Bytes>, opentelemetry_http::HttpError>
    {
        let (parts, body) = request.into_parts();
        let response = self
            .agent
            .run(ureq::http::Request::from_parts(parts, body.to_vec()))?;
        let (parts, mut body) = response.into_parts();
        // The receiver's answer is read, capped: nothing in it is used.
        let bytes = body.with_config().limit(64 * 1024).read_to_vec()?;
        Ok(ureq::http::Response::from_parts(
            parts,
            bytes::Bytes::from(bytes),
        ))
    }
}

/// What the provider hands each finished span to: the bounded queue.
#[derive(Debug)]
struct Queue {
    tx: Mutex<Option<SyncSender<SpanData>>>,
}

impl opentelemetry_sdk::trace::SpanProcessor for Queue {
    fn on_start(&self, _span: &mut opentelemetry_sdk::trace::Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        let tx = self.tx.lock().unwrap_or_else(PoisonError::into_inner);
        // Full, or closed at the end of the command: dropped, counted.
        let queued = match tx.as_ref() {
            Some(tx) => tx.try_send(span).is_ok(),
            None => false,
        };
        if !queued {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        // Closing the queue lets the sender send what is in it and stop.
        self.tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        Ok(())
    }
}

/// Sends the queue in batches until it is closed and empty.
fn sender(
    rx: Receiver<SpanData>,
    exporter: opentelemetry_otlp::SpanExporter,
    done: SyncSender<()>,
) {
    let mut batch: Vec<SpanData> = Vec::with_capacity(BATCH);
    let mut open = true;
    while open || !batch.is_empty() {
        if open {
            let until = Instant::now() + LINGER;
            while batch.len() < BATCH {
                let left = until.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(span) => batch.push(span),
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
        }
        if batch.is_empty() {
            continue;
        }
        let n = batch.len() as u64;
        match futures_executor::block_on(exporter.export(std::mem::take(&mut batch))) {
            Ok(()) => EXPORTED.fetch_add(n, Ordering::Relaxed),
            Err(_) => DROPPED.fetch_add(n, Ordering::Relaxed),
        };
    }
    let _ = done.send(());
}

/// The OTLP/HTTP exporter to `url` with `headers`, telling the receiver
/// `resource`: its requests go through a ureq agent of its own, with a
/// bounded time each and no retry (a batch the receiver does not take is
/// dropped, not retried: the sender never falls behind a receiver that is
/// down). `None` when the exporter cannot be built.
fn exporter(
    url: String,
    headers: Vec<(String, String)>,
    resource: &Resource,
) -> Option<opentelemetry_otlp::SpanExporter> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(EXPORT_TIMEOUT))
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into();
    let mut exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpJson)
        .with_endpoint(url)
        .with_timeout(EXPORT_TIMEOUT)
        .with_headers(headers.into_iter().collect())
        .with_http_client(Client { agent })
        .with_retry_policy(opentelemetry_otlp::RetryPolicy::default().with_max_retries(0))
        .build()
        .ok()?;
    // The spans go to the exporter through this module's queue, not the
    // provider's processor, so it is told the resource here.
    exporter.set_resource(resource);
    Some(exporter)
}

/// Starts exporting this process's traces to the OTLP/HTTP receiver at
/// `endpoint` (`shown` as written), with `headers`; once per process: a
/// second call naming the same endpoint changes nothing.
///
/// # Errors
///
/// `Error::Input` when the process exports to another endpoint already
/// (one process, one receiver), or the exporter cannot be built.
pub fn start(endpoint: &str, shown: &str, headers: &[(String, String)]) -> Result<()> {
    let mut current = CURRENT.write().unwrap_or_else(PoisonError::into_inner);
    if let Some(t) = current.as_ref() {
        if t.shown == shown {
            return Ok(());
        }
        return Err(Error::input(format!(
            "`[telemetry] otlp_endpoint = \"{shown}\"`: this process exports its traces to \
             `{}` already; give every job it runs the same endpoint",
            t.shown
        )));
    }
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    // What the exporter's builder would refuse, refused here, so that the
    // exporter itself (its HTTP agent, its TLS setup) can be built on the
    // sender's thread while the run goes on: a one-shot run does not wait
    // for it.
    url.parse::<ureq::http::Uri>().map_err(|e| {
        Error::input(format!(
            "`[telemetry] otlp_endpoint = \"{shown}\"` cannot be used: {e}"
        ))
    })?;
    for (name, value) in headers {
        if ureq::http::HeaderName::from_bytes(name.as_bytes()).is_err()
            || ureq::http::HeaderValue::from_str(value).is_err()
        {
            return Err(Error::input(format!(
                "`[telemetry] headers.{}` is not a valid HTTP header name and value; use \
                 letters, digits and `-` in the name and printable text in the value",
                crate::core::text::printable(name)
            )));
        }
    }
    let resource = Resource::builder_empty()
        .with_service_name("jobhost")
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let (tx, rx) = sync_channel::<SpanData>(QUEUE);
    let (done_tx, done_rx) = sync_channel::<()>(1);
    let (headers, for_exporter) = (headers.to_vec(), resource.clone());
    std::thread::Builder::new()
        .name("jobhost-traces".into())
        .spawn(move || match exporter(url, headers, &for_exporter) {
            Some(exporter) => sender(rx, exporter, done_tx),
            None => {
                // Not expected after the checks above: every span of the
                // process is dropped, and counted.
                drop(rx);
                let _ = done_tx.send(());
            }
        })
        .map_err(|e| Error::host(format!("cannot start the trace sender: {e}")))?;
    let provider = SdkTracerProvider::builder()
        .with_span_processor(Queue {
            tx: Mutex::new(Some(tx)),
        })
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("jobhost");
    *current = Some(Arc::new(Telemetry {
        shown: shown.to_string(),
        provider,
        tracer,
        done: Mutex::new(Some(done_rx)),
    }));
    Ok(())
}

/// The process's exporter, if a job named one.
fn current() -> Option<Arc<Telemetry>> {
    CURRENT
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

/// At the end of a command: closes the queue and waits at most `wait`
/// for the sender to send what is in it (a receiver that is down costs
/// at most that; what is not sent by then is lost with the process).
pub fn flush(wait: Duration) {
    let Some(t) = CURRENT
        .write()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    else {
        return;
    };
    let _ = t.provider.shutdown();
    let done = t.done.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(done) = done {
        let _ = done.recv_timeout(wait);
    }
}

/// The trace of one run: its root span, in a context its steps start in.
pub struct RunTrace {
    cx: Context,
    tracer: SdkTracer,
}

/// A run's trace, when the process exports traces: its root span named
/// `name`, about `job`, linked to `links` (the daemon's wake-up that
/// started it).
pub fn run_trace(name: &'static str, job: &str, links: &[SpanContext]) -> Option<RunTrace> {
    let t = current()?;
    let span = t
        .tracer
        .span_builder(name)
        .with_kind(SpanKind::Internal)
        .with_attributes([KeyValue::new("jobhost.job", job.to_string())])
        .with_links(links.iter().cloned().map(Link::with_context).collect())
        .start(&t.tracer);
    Some(RunTrace {
        cx: Context::current_with_span(span),
        tracer: t.tracer.clone(),
    })
}

impl RunTrace {
    /// The trace's id, 32 hex digits (as the receipt and `traceparent`
    /// carry it).
    pub fn trace_id(&self) -> String {
        self.cx.span().span_context().trace_id().to_string()
    }

    /// The root span's context (what a later span links to).
    pub fn span_context(&self) -> SpanContext {
        self.cx.span().span_context().clone()
    }

    /// Sets an attribute of the root span.
    pub fn attr(&self, key: &'static str, value: impl Into<opentelemetry::Value>) {
        self.cx.span().set_attribute(KeyValue::new(key, value));
    }

    /// Starts the step `name`, a child of the root span; it ends when
    /// dropped.
    pub fn step(&self, name: &'static str) -> Step {
        Step {
            span: self.tracer.start_with_context(name, &self.cx),
        }
    }

    /// Ends the run's trace, marked as an error with `error` if it failed.
    pub fn end(self, error: Option<&str>) {
        let span = self.cx.span();
        if let Some(why) = error {
            span.set_status(Status::error(
                crate::core::text::head(why, 1000).to_string(),
            ));
        }
        span.end();
    }
}

/// One step of a run; ends when dropped.
pub struct Step {
    span: opentelemetry_sdk::trace::Span,
}

impl Step {
    /// Sets an attribute.
    pub fn attr(&mut self, key: &'static str, value: impl Into<opentelemetry::Value>) {
        self.span.set_attribute(KeyValue::new(key, value));
    }

    /// Marks the step failed, saying why (cut to 1000 bytes).
    pub fn fail(&mut self, why: &str) {
        self.span.set_status(Status::error(
            crate::core::text::head(why, 1000).to_string(),
        ));
    }

    /// The W3C `traceparent` of this step: what a request it makes
    /// carries, so the receiver's spans join the run's trace.
    pub fn traceparent(&self) -> String {
        let c = self.span.span_context();
        format!(
            "00-{}-{}-{:02x}",
            c.trace_id(),
            c.span_id(),
            c.trace_flags().to_u8()
        )
    }

    /// This step's context (what a later span links to).
    pub fn span_context(&self) -> SpanContext {
        self.span.span_context().clone()
    }
}

/// A span of its own (the daemon's wake-up), when the process exports
/// traces; ends when dropped.
pub fn span(name: &'static str) -> Option<Step> {
    let t = current()?;
    Some(Step {
        span: t.tracer.start(name),
    })
}

/// The daemon's wake-up under way, which the runs it starts link to (one
/// wake-up at a time: the daemon's rounds do not overlap).
static WAKE: RwLock<Option<SpanContext>> = RwLock::new(None);

/// Makes `wake` the wake-up the runs started from now on link to (`None`
/// after it).
pub fn set_wake(wake: Option<SpanContext>) {
    *WAKE.write().unwrap_or_else(PoisonError::into_inner) = wake;
}

/// What a run started now links to: the daemon's wake-up under way.
pub fn wake_links() -> Vec<SpanContext> {
    WAKE.read()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .cloned()
        .collect()
}
