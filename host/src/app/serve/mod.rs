//! The read-only dashboard and Prometheus metrics, served by jobhost
//! itself (`jobhost serve`, `jobhost daemon --listen`): a small synchronous
//! HTTP server (`tiny_http`) on threads of its own, each with its own store
//! connections, opened read-only; pages rendered from templates embedded in
//! the binary (`minijinja`, HTML auto-escaping on every template); a JSON
//! twin of every page with the same facts (`run::board`); `/metrics` in the
//! Prometheus text format (`prometheus-client`); `/healthz`, and `/livez`,
//! which fails when the daemon's loop is stuck.
//!
//! Safe by construction: no route writes anything; every text from a guest
//! or a destination is escaped (control characters shown as `\u{..}`,
//! then HTML-escaped); the Content-Security-Policy forbids inline script;
//! off loopback a bearer token is required (compared in constant time) unless
//! the operator says `--insecure-no-auth`; each page does a bounded number
//! of indexed reads.

mod metrics;
mod pages;

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use jiff::Timestamp;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::core::error::{Error, Result};
use crate::core::schedule::Schedule;
use crate::store::{self, StoreLocation};

pub use metrics::DaemonMetrics;

/// The default `--listen` address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8480";

/// How many threads answer requests.
const WORKERS: usize = 2;

/// The longest request target answered (longer: 414).
const MAX_TARGET: usize = 2048;

/// One job the server shows.
#[derive(Clone)]
pub struct ServedJob {
    /// Its schedule.
    pub schedule: Schedule,
    /// Its store.
    pub location: StoreLocation,
    /// Its digest cache folder, if it has one.
    pub digest_cache: Option<PathBuf>,
    /// How the commands its pages print name it (`--config FILE`).
    pub target: crate::core::command::Target,
}

impl crate::app::config::folder::Named for ServedJob {
    fn job_name(&self) -> String {
        self.schedule.job.as_str().to_string()
    }
}

/// The jobs a dashboard shows and the job files it refused, as whatever
/// keeps them current sets them (a folder of job files read again while
/// the server runs; a fixed list otherwise).
#[derive(Clone, Default)]
pub struct Listed {
    /// The jobs, in the order given (a folder's: by file name).
    pub jobs: Vec<ServedJob>,
    /// Job files refused, and why.
    pub refused: Vec<crate::app::config::folder::Refused>,
}

/// [`Listed`], shared between the server and what keeps it current.
pub type Catalog = Arc<std::sync::RwLock<Listed>>;

/// A catalog of a fixed list of jobs.
pub fn fixed(jobs: Vec<ServedJob>) -> Catalog {
    Arc::new(std::sync::RwLock::new(Listed {
        jobs,
        refused: Vec::new(),
    }))
}

/// What the server serves and how.
pub struct Settings {
    /// The jobs and refused job files.
    pub jobs: Catalog,
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The SHA-256 of the bearer token every request (but `/healthz` and
    /// `/livez`) must carry, when one is required.
    pub token: Option<[u8; 32]>,
    /// The instant pages judge lateness by: `now()` of this.
    pub clock: Arc<dyn Fn() -> Timestamp + Send + Sync>,
    /// The daemon's counters, when served inside it.
    pub daemon: Option<Arc<DaemonMetrics>>,
    /// The daemon loop's heartbeat, when served inside it (`/livez`).
    pub liveness: Option<Arc<crate::run::liveness::Heartbeat>>,
}

impl Settings {
    /// The jobs and refused files now.
    pub(super) fn listed(&self) -> Listed {
        self.jobs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// Checks `--listen`, `--token-file` and `--insecure-no-auth` together:
/// the address and the token's digest.
///
/// # Errors
///
/// `Error::Input` for an address that does not resolve, a token file that
/// cannot be read or holds no token, and a non-loopback address with
/// neither a token nor `--insecure-no-auth`.
pub fn check_listen(
    listen: &str,
    token_file: Option<&Path>,
    insecure_no_auth: bool,
) -> Result<(SocketAddr, Option<[u8; 32]>)> {
    let addrs: Vec<SocketAddr> = listen
        .to_socket_addrs()
        .map_err(|e| {
            Error::input(format!(
                "invalid --listen `{}`: {e}; give HOST:PORT such as {DEFAULT_LISTEN}",
                crate::core::text::printable(listen)
            ))
        })?
        .collect();
    let Some(addr) = addrs.first().copied() else {
        return Err(Error::input(format!(
            "invalid --listen `{}`: it names no address; give HOST:PORT such as {DEFAULT_LISTEN}",
            crate::core::text::printable(listen)
        )));
    };
    let token = match token_file {
        Some(f) => Some(read_token(f)?),
        None => None,
    };
    let loopback = addrs.iter().all(|a| a.ip().is_loopback());
    if !loopback && token.is_none() && !insecure_no_auth {
        return Err(Error::input(format!(
            "--listen `{}` is not a loopback address: give --token-file FILE (a bearer token \
             every request must carry) or --insecure-no-auth to serve it to anyone who can reach it",
            crate::core::text::printable(listen)
        )));
    }
    Ok((addr, token))
}

/// The digest of the token in `file`: its first line, at least 16
/// characters. A file every user may read is warned about on stderr
/// ([`token_mode_warning`]).
fn read_token(file: &Path) -> Result<[u8; 32]> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| {
            // The mode of the file read, not of a symbolic link to it (a
            // Kubernetes Secret's files are links into a folder of its own).
            let mode = f.metadata()?.permissions().mode();
            if let Some(warning) = token_mode_warning(file, mode) {
                crate::core::text::say("warning", &warning);
            }
            f.take(4096).read_to_string(&mut text)
        })
        .map_err(|e| {
            Error::input(format!(
                "cannot read --token-file `{}`: {e}; give a file holding the bearer token",
                file.display()
            ))
        })?;
    let token = text.lines().next().unwrap_or_default().trim();
    if token.chars().count() < 16 || token.chars().any(char::is_whitespace) {
        return Err(Error::input(format!(
            "--token-file `{}` must hold one token of at least 16 characters without spaces \
             on its first line (for example from `openssl rand -hex 32`)",
            file.display()
        )));
    }
    Ok(Sha256::digest(token.as_bytes()).into())
}

/// What to say of a token file of `mode` that every user of the machine
/// may read. Nothing for one only its group may read besides its owner
/// (0640, 0440: how a file is shared with a service's group, as a
/// Kubernetes `defaultMode: 0440` with an `fsGroup` does). A warning, not
/// a refusal: Kubernetes mounts a Secret's files 0644 unless the volume
/// says otherwise, and a refusal would stop every such pod's dashboard.
fn token_mode_warning(file: &Path, mode: u32) -> Option<String> {
    (mode & 0o004 != 0).then(|| {
        format!(
            "--token-file `{shown}` has mode {:04o}: every user of this machine can read the \
             dashboard's bearer token; `chmod 600 {shown}` (in Kubernetes, `defaultMode: 0400` \
             on the Secret's volume)",
            mode & 0o7777,
            shown = file.display()
        )
    })
}

/// Whether `header` (an `Authorization` value) carries the token whose
/// digest is `want`: the digests are compared in constant time, so the
/// comparison says nothing of how much matched.
fn authorized(header: Option<&str>, want: &[u8; 32]) -> bool {
    let Some(given) = header.and_then(|h| {
        h.strip_prefix("Bearer ")
            .or_else(|| h.strip_prefix("bearer "))
    }) else {
        return false;
    };
    let got: [u8; 32] = Sha256::digest(given.trim().as_bytes()).into();
    got.ct_eq(want).into()
}

/// A running server: dropped or [`Running::stop`]ped, it stops.
pub struct Running {
    server: Arc<tiny_http::Server>,
    workers: Vec<JoinHandle<()>>,
    /// The address it listens on (with the port chosen, for port 0).
    pub addr: SocketAddr,
}

impl Running {
    /// Stops answering and waits for the workers.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        for _ in &self.workers {
            self.server.unblock();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Starts the server on threads of its own.
///
/// # Errors
///
/// `Error::Input` when the address cannot be listened on (in use, not
/// this machine's).
pub fn start(settings: Settings) -> Result<Running> {
    let server = tiny_http::Server::http(settings.listen).map_err(|e| {
        Error::input(format!(
            "cannot listen on {}: {e}; choose another --listen address",
            settings.listen
        ))
    })?;
    let addr = server.server_addr().to_ip().unwrap_or(settings.listen);
    let server = Arc::new(server);
    let settings = Arc::new(settings);
    let pages = Arc::new(pages::Pages::new());
    let workers = (0..WORKERS)
        .map(|i| {
            let (server, settings, pages) = (server.clone(), settings.clone(), pages.clone());
            std::thread::Builder::new()
                .name(format!("jobhost-serve-{i}"))
                .spawn(move || {
                    let mut worker = Worker {
                        settings: &settings,
                        pages: &pages,
                        stores: HashMap::new(),
                    };
                    while let Ok(request) = server.recv() {
                        worker.answer(request);
                    }
                })
                .map_err(|e| Error::host("cannot start the server's threads").because(e))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Running {
        server,
        workers,
        addr,
    })
}

/// One answering thread, with its own store connections.
struct Worker<'a> {
    settings: &'a Settings,
    pages: &'a pages::Pages,
    /// Open stores by location; `None` inside: no store there yet.
    stores: HashMap<String, Box<dyn store::Store>>,
}

/// An answer, before it is sent.
pub(crate) struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Reply {
    pub(crate) fn text(status: u16, body: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
        }
    }
}

/// What the Content-Security-Policy allows: scripts and styles from the
/// server's own files, nothing inline, nothing framed.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

impl Worker<'_> {
    fn answer(&mut self, request: tiny_http::Request) {
        let reply = self.route(&request);
        let mut response = tiny_http::Response::from_data(reply.body)
            .with_status_code(tiny_http::StatusCode(reply.status));
        let mut headers = vec![
            ("Content-Type", reply.content_type),
            ("Content-Security-Policy", CSP),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
            ("Cache-Control", "no-store"),
            ("X-Frame-Options", "DENY"),
        ];
        if reply.status == 401 {
            headers.push(("WWW-Authenticate", "Bearer"));
        }
        for (name, value) in headers {
            if let Ok(h) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
                response.add_header(h);
            }
        }
        let _ = request.respond(response);
    }

    fn route(&mut self, request: &tiny_http::Request) -> Reply {
        let target = request.url();
        if target.len() > MAX_TARGET {
            return Reply::text(414, "request target too long\n");
        }
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if !matches!(
            request.method(),
            tiny_http::Method::Get | tiny_http::Method::Head
        ) {
            return Reply::text(
                405,
                "only GET and HEAD are answered: this server changes nothing\n",
            );
        }
        if path == "/healthz" {
            return Reply::text(200, "ok\n");
        }
        if path == "/livez" {
            return self.livez();
        }
        if let Some(want) = &self.settings.token {
            let header = request
                .headers()
                .iter()
                .find(|h| h.field.equiv("Authorization"))
                .map(|h| h.value.as_str());
            if !authorized(header, want) {
                return Reply::text(401, "unauthorized\n");
            }
        }
        let accept_json = request
            .headers()
            .iter()
            .find(|h| h.field.equiv("Accept"))
            .is_some_and(|h| h.value.as_str().contains("application/json"));
        let now = (self.settings.clock)();
        let route = pages::Route::parse(path, query, accept_json);
        match route {
            pages::Route::Static(name) => pages::static_file(name),
            pages::Route::Metrics => self.metrics(now),
            pages::Route::NotFound => Reply::text(404, "not found\n"),
            page => self.page(page, now),
        }
    }

    /// `/livez`: 503 once the daemon's loop is late by the time it gave
    /// itself, else 200; without a daemon (`serve`), as `/healthz`. It
    /// reads nothing from the store.
    fn livez(&self) -> Reply {
        let Some(heartbeat) = &self.settings.liveness else {
            return Reply::text(200, "ok\n");
        };
        let pulse = heartbeat.check((self.settings.clock)());
        let status = if pulse.is_alive() { 200 } else { 503 };
        Reply::text(status, &pulse.line())
    }

    /// The store of `location`, opened read-only on first use (`None`: no
    /// store there yet).
    fn store(&mut self, location: &StoreLocation) -> Result<Option<&mut Box<dyn store::Store>>> {
        let name = location.to_string();
        if !self.stores.contains_key(&name) {
            match store::open_if_exists(location)? {
                Some(s) => {
                    self.stores.insert(name.clone(), s);
                }
                None => return Ok(None),
            }
        }
        Ok(self.stores.get_mut(&name))
    }

    /// Forgets a store connection after an error, so the next request
    /// opens it again.
    fn drop_store(&mut self, location: &StoreLocation) {
        self.stores.remove(&location.to_string());
    }

    fn page(&mut self, route: pages::Route, now: Timestamp) -> Reply {
        match pages::render(self, route, now) {
            Ok(reply) => reply,
            Err(e) => {
                let line = crate::core::text::printable(&e.chain()).into_owned();
                crate::core::text::say("error", &format!("dashboard: {line}"));
                Reply::text(
                    match e {
                        Error::Input(_) => 400,
                        _ => 503,
                    },
                    &format!("{line}\n"),
                )
            }
        }
    }

    fn metrics(&mut self, now: Timestamp) -> Reply {
        match metrics::render(self, now) {
            Ok(text) => Reply {
                status: 200,
                content_type: "application/openmetrics-text; version=1.0.0; charset=utf-8",
                body: text.into_bytes(),
            },
            Err(e) => {
                let line = crate::core::text::printable(&e.chain()).into_owned();
                crate::core::text::say("error", &format!("metrics: {line}"));
                Reply::text(503, &format!("{line}\n"))
            }
        }
    }
}
