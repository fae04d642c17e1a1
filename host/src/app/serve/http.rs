//! The dashboard's HTTP/1 server: hyper on a tokio runtime in a thread of
//! its own takes the connections, reads each request (a body of at most
//! [`MAX_BODY`] bytes, within [`BODY_WAIT`]), and hands it, whole, to a
//! thread that answers it; the threads that read pages and the ones that
//! act are separate pools, so a run started from the page never holds up
//! a page, and `/healthz` and `/livez` are answered on the runtime itself.
//! A client that is slow to send its headers or body, or says its body is
//! larger than the cap, costs a task and a timer, never an answering
//! thread or memory of the size it claims.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};

use super::Reply;
use crate::core::error::{Error, Result};

/// The largest request body read (an action's form or JSON; larger: 413).
pub(super) const MAX_BODY: usize = 16 * 1024;

/// How long a client has to send a request's headers, and then its body.
pub(super) const BODY_WAIT: Duration = Duration::from_secs(10);

/// The most connections served at once; more are closed at once.
const MAX_CONNECTIONS: usize = 256;

/// A request's method, as the routes tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Method {
    Get,
    Head,
    Post,
    Other,
}

/// A request, read whole.
#[derive(Debug)]
pub(super) struct Incoming {
    pub method: Method,
    /// The path and query as sent.
    pub target: String,
    /// Headers whose value is text, names in lower case.
    headers: Vec<(String, String)>,
    /// The body (only a POST's is read).
    pub body: Vec<u8>,
}

impl Incoming {
    /// The first header called `name` (any case).
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A request made by hand (tests).
    #[cfg(test)]
    pub(super) fn new(method: Method, target: &str, headers: &[(&str, &str)]) -> Incoming {
        Incoming {
            method,
            target: target.to_string(),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.to_string()))
                .collect(),
            body: Vec::new(),
        }
    }
}

/// A request on its way to an answering thread, and where its answer goes.
type Job = (Incoming, tokio::sync::oneshot::Sender<Reply>);

/// Answers requests: the routes, on an answering thread.
pub(super) trait Answer {
    fn answer(&mut self, request: &Incoming) -> Reply;
}

/// What answers before any thread is asked (`/healthz`, `/livez`, a
/// method or target refused), if anything.
pub(super) type Early = dyn Fn(&Incoming) -> Option<Reply> + Send + Sync;

/// A pool of answering threads taking requests from one queue.
struct Pool {
    queue: Mutex<Option<Sender<Job>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Pool {
    /// `n` threads named `name-i`, each answering with what `make` gives it.
    fn start<A: Answer + 'static>(
        name: &str,
        n: usize,
        make: impl Fn() -> A + Send + Sync + 'static,
    ) -> Result<Pool> {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let make = Arc::new(make);
        let threads = (0..n)
            .map(|i| {
                let (rx, make) = (rx.clone(), make.clone());
                std::thread::Builder::new()
                    .name(format!("{name}-{i}"))
                    .spawn(move || {
                        let mut answering = make();
                        while let Some((request, reply)) = next(&rx) {
                            let _ = reply.send(answering.answer(&request));
                        }
                    })
                    .map_err(|e| Error::host("cannot start the server's threads").because(e))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Pool {
            queue: Mutex::new(Some(tx)),
            threads,
        })
    }

    /// Queues `job`; `false` once the pool is closed.
    fn send(&self, job: Job) -> bool {
        let queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        queue.as_ref().is_some_and(|q| q.send(job).is_ok())
    }

    /// Closes the queue and waits for the threads to answer what they hold.
    fn close(&mut self) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn next(rx: &Mutex<Receiver<Job>>) -> Option<Job> {
    rx.lock().unwrap_or_else(|p| p.into_inner()).recv().ok()
}

/// A listening server: [`Listening::stop`] (or dropping it) closes it.
pub(super) struct Listening {
    /// The address it listens on.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    pools: Arc<Mutex<Vec<Pool>>>,
}

impl Listening {
    /// Stops taking connections, drops the open ones, and waits for the
    /// answering threads to finish what they hold.
    pub(super) fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        for p in pools.iter_mut() {
            p.close();
        }
    }
}

/// Listens on `addr`: `early` answers what it can on the runtime, GETs and
/// HEADs go to `readers` threads made by `reader`, POSTs to `actors`
/// threads made by `actor`.
///
/// # Errors
///
/// `Error::Input` when the address cannot be listened on.
pub(super) fn listen<R: Answer + 'static, A: Answer + 'static>(
    addr: SocketAddr,
    early: Arc<Early>,
    (readers, reader): (usize, impl Fn() -> R + Send + Sync + 'static),
    (actors, actor): (usize, impl Fn() -> A + Send + Sync + 'static),
) -> Result<Listening> {
    let listener = std::net::TcpListener::bind(addr)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| {
            Error::input(format!(
                "cannot listen on {addr}: {e}; choose another --listen address"
            ))
        })?;
    let addr = listener.local_addr().unwrap_or(addr);
    let pools = Arc::new(Mutex::new(vec![
        Pool::start("jobhost-serve", readers, reader)?,
        Pool::start("jobhost-act", actors, actor)?,
    ]));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| Error::host("cannot start the server's runtime").because(e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let accept = {
        let (stop, pools) = (stop.clone(), pools.clone());
        std::thread::Builder::new()
            .name("jobhost-serve-accept".into())
            .spawn(move || runtime.block_on(accept(listener, early, pools, stop)))
            .map_err(|e| Error::host("cannot start the server's threads").because(e))?
    };
    Ok(Listening {
        addr,
        stop,
        accept: Some(accept),
        pools,
    })
}

/// Takes connections until `stop`, each served on a task of its own.
async fn accept(
    listener: std::net::TcpListener,
    early: Arc<Early>,
    pools: Arc<Mutex<Vec<Pool>>>,
    stop: Arc<AtomicBool>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let open = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        let Ok(taken) = tokio::time::timeout(Duration::from_millis(200), listener.accept()).await
        else {
            continue;
        };
        let Ok((stream, _)) = taken else {
            // Out of file descriptors, say: a moment before the next one.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::SeqCst);
            drop(stream);
            continue;
        }
        let (early, pools, open) = (early.clone(), pools.clone(), open.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let (early, pools) = (early.clone(), pools.clone());
                async move { Ok::<_, Infallible>(handle(req, early.as_ref(), &pools).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(BODY_WAIT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
            open.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// One request: read, answered, sent back.
async fn handle(
    req: hyper::Request<hyper::body::Incoming>,
    early: &Early,
    pools: &Mutex<Vec<Pool>>,
) -> hyper::Response<Full<Bytes>> {
    let method = match *req.method() {
        hyper::Method::GET => Method::Get,
        hyper::Method::HEAD => Method::Head,
        hyper::Method::POST => Method::Post,
        _ => Method::Other,
    };
    let target = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let headers = req
        .headers()
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let declared = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if method == Method::Post && declared.is_some_and(|n| n > MAX_BODY as u64) {
        return response(Reply::text(413, "the request body is larger than 16 KiB\n"));
    }
    let body = if method == Method::Post {
        let limited = Limited::new(req.into_body(), MAX_BODY);
        match tokio::time::timeout(BODY_WAIT, limited.collect()).await {
            Ok(Ok(collected)) => collected.to_bytes().to_vec(),
            Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                return response(Reply::text(413, "the request body is larger than 16 KiB\n"));
            }
            Ok(Err(_)) => return response(Reply::text(400, "cannot read the request body\n")),
            Err(_) => {
                return response(Reply::text(
                    408,
                    "the request body did not arrive within 10 s\n",
                ));
            }
        }
    } else {
        Vec::new()
    };
    let incoming = Incoming {
        method,
        target,
        headers,
        body,
    };
    if let Some(reply) = early(&incoming) {
        return response(reply);
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    let queued = {
        let pools = pools.lock().unwrap_or_else(|p| p.into_inner());
        let pool = usize::from(method == Method::Post);
        pools.get(pool).is_some_and(|p| p.send((incoming, tx)))
    };
    let reply = match (queued, rx.await) {
        (true, Ok(reply)) => reply,
        _ => Reply::text(503, "the server is stopping\n"),
    };
    response(reply)
}

/// What the Content-Security-Policy allows: scripts and styles from the
/// server's own files, nothing inline, nothing framed, forms sent only to
/// the server itself.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// `reply` as hyper sends it, with the headers every answer carries.
fn response(reply: Reply) -> hyper::Response<Full<Bytes>> {
    let mut headers = vec![
        ("Content-Type", reply.content_type.to_string()),
        ("Content-Security-Policy", CSP.to_string()),
        ("X-Content-Type-Options", "nosniff".to_string()),
        // Not `no-referrer`: with it a browser sends `Origin: null` with
        // the pages' own forms, and the origin check needs their origin.
        // Another site is told nothing.
        ("Referrer-Policy", "same-origin".to_string()),
        ("Cache-Control", "no-store".to_string()),
        ("X-Frame-Options", "DENY".to_string()),
    ];
    if reply.status == 401 {
        headers.push(("WWW-Authenticate", "Bearer".to_string()));
    }
    headers.extend(reply.headers);
    let mut builder = hyper::Response::builder().status(reply.status);
    for (name, value) in headers {
        // A value that is not a header's (a control character) is left
        // out rather than sent.
        if let Ok(v) = hyper::header::HeaderValue::from_str(&value) {
            builder = builder.header(name, v);
        }
    }
    builder
        .body(Full::new(Bytes::from(reply.body)))
        .unwrap_or_else(|_| {
            let mut r = hyper::Response::new(Full::new(Bytes::from_static(b"bad answer\n")));
            *r.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
            r
        })
}
