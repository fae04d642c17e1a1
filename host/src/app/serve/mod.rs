//! The read-only dashboard and Prometheus metrics, served by jobhost
//! itself (`jobhost serve`, `jobhost daemon --listen`): an HTTP/1 server
//! (`http`: hyper on a runtime of its own thread) whose requests are
//! answered on threads of their own, each with its own store connections,
//! opened read-only; pages rendered from templates embedded in
//! the binary (`minijinja`, HTML auto-escaping on every template); a JSON
//! twin of every page with the same facts (`run::board`); `/metrics` in the
//! Prometheus text format (`prometheus-client`); `/healthz`, and `/livez`,
//! which fails when the daemon's loop is stuck.
//!
//! Safe by construction: by default no route writes anything; with
//! `--allow-actions` and an `operate` token, the routes of `actions` act
//! through the same functions as the command line's verbs (`auth` says how
//! cross-site requests are refused); every text from a guest or a
//! destination is escaped (control characters shown as `\u{..}`, then
//! HTML-escaped); the Content-Security-Policy forbids inline script; off
//! loopback a token is required (compared in constant time) unless the
//! operator says `--insecure-no-auth`; each page does a bounded number of
//! indexed reads.

pub mod actions;
pub mod auth;
mod http;
mod metrics;
mod pages;

use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jiff::Timestamp;
use sha2::{Digest, Sha256};

use crate::core::error::{Error, Result};
use crate::core::schedule::Schedule;
use crate::store::{self, StoreLocation};

pub use metrics::DaemonMetrics;

/// The default `--listen` address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8480";

/// How many threads answer requests for pages.
const WORKERS: usize = 2;

/// How many threads carry out actions (each a run, say, to its end).
const ACTORS: usize = 2;

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
    /// How its full `Job` is made for an action that runs it (`None`: it
    /// cannot be run from this server).
    pub load: Option<actions::LoadJob>,
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
    /// The tokens a request (but `/healthz`, `/livez` and the sign-in
    /// page) must carry one of, by name and role; none: no token needed.
    pub tokens: auth::Tokens,
    /// What a person with an `operate` token may do (`--allow-actions`);
    /// `None`: the server only reads.
    pub actions: Option<actions::Actions>,
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

/// Who may use a server, as its flags say.
#[derive(Debug, Clone, Copy, Default)]
pub struct Access<'a> {
    /// `--token-file`: one `read` token.
    pub token_file: Option<&'a Path>,
    /// `--tokens-file`: tokens by name and role.
    pub tokens_file: Option<&'a Path>,
    /// `--insecure-no-auth`.
    pub insecure_no_auth: bool,
    /// `--allow-actions`.
    pub allow_actions: bool,
}

/// Checks `--listen` and the flags of `access` together: the address and
/// the tokens.
///
/// # Errors
///
/// `Error::Input` for an address that does not resolve, a token file that
/// cannot be read or holds no token, a non-loopback address with neither
/// a token nor `--insecure-no-auth`, and `--allow-actions` without an
/// `operate` token.
pub fn check_listen(listen: &str, access: Access<'_>) -> Result<(SocketAddr, auth::Tokens)> {
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
    let mut tokens = match access.tokens_file {
        Some(f) => auth::Tokens::read_file(f)?,
        None => auth::Tokens::default(),
    };
    if let Some(f) = access.token_file {
        tokens.add_read(read_token(f)?)?;
    }
    if access.allow_actions && !tokens.can_operate() {
        return Err(Error::input(
            "--allow-actions needs someone allowed to act: give --tokens-file FILE with at least \
             one `NAME operate SHA256` line"
                .to_string(),
        ));
    }
    let loopback = addrs.iter().all(|a| a.ip().is_loopback());
    if !loopback && !tokens.required() && !access.insecure_no_auth {
        return Err(Error::input(format!(
            "--listen `{}` is not a loopback address: give --token-file FILE (a bearer token \
             every request must carry), --tokens-file FILE, or --insecure-no-auth to serve it \
             to anyone who can reach it",
            crate::core::text::printable(listen)
        )));
    }
    Ok((addr, tokens))
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

/// A running server: dropped or [`Running::stop`]ped, it stops.
pub struct Running {
    listening: http::Listening,
    settings: Arc<Settings>,
    /// The address it listens on (with the port chosen, for port 0).
    pub addr: SocketAddr,
}

impl Running {
    /// Stops answering, waits for the actions in progress, and stops the
    /// backfills started from the page after the windows they are running.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.listening.stop();
        if let Some(actions) = &self.settings.actions {
            actions.tasks.stop_all();
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
    let listen = settings.listen;
    let settings = Arc::new(settings);
    let pages = Arc::new(pages::Pages::new());
    let sessions = Arc::new(auth::Sessions::default());
    let worker = {
        let (settings, pages, sessions) = (settings.clone(), pages.clone(), sessions.clone());
        move || Worker {
            settings: settings.clone(),
            pages: pages.clone(),
            sessions: sessions.clone(),
            stores: HashMap::new(),
        }
    };
    let early: Arc<http::Early> = {
        let settings = settings.clone();
        Arc::new(move |request: &http::Incoming| early(&settings, request))
    };
    let listening = http::listen(listen, early, (WORKERS, worker.clone()), (ACTORS, worker))?;
    Ok(Running {
        addr: listening.addr,
        listening,
        settings,
    })
}

/// What is answered before any thread is asked: a target too long, a
/// method not served, `/healthz` and `/livez` (which read nothing).
fn early(settings: &Settings, request: &http::Incoming) -> Option<Reply> {
    if request.target.len() > MAX_TARGET {
        return Some(Reply::text(414, "request target too long\n"));
    }
    if request.method == http::Method::Other {
        return Some(
            Reply::text(405, "only GET, HEAD and POST are answered\n")
                .with("Allow", "GET, HEAD, POST".to_string()),
        );
    }
    let path = request
        .target
        .split_once('?')
        .map_or(request.target.as_str(), |(p, _)| p);
    match path {
        "/healthz" => Some(Reply::text(200, "ok\n")),
        "/livez" => Some(livez(settings)),
        _ => None,
    }
}

/// `/livez`: 503 once the daemon's loop is late by the time it gave
/// itself, else 200; without a daemon (`serve`), as `/healthz`. It reads
/// nothing from the store.
fn livez(settings: &Settings) -> Reply {
    let Some(heartbeat) = &settings.liveness else {
        return Reply::text(200, "ok\n");
    };
    let pulse = heartbeat.check((settings.clock)());
    let status = if pulse.is_alive() { 200 } else { 503 };
    Reply::text(status, &pulse.line())
}

/// One answering thread, with its own store connections.
struct Worker {
    settings: Arc<Settings>,
    pages: Arc<pages::Pages>,
    sessions: Arc<auth::Sessions>,
    /// Open stores by location; `None` inside: no store there yet.
    stores: HashMap<String, Box<dyn store::Store>>,
}

impl http::Answer for Worker {
    fn answer(&mut self, request: &http::Incoming) -> Reply {
        self.route(request)
    }
}

/// An answer, before it is sent.
pub(crate) struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
    /// Headers besides those every answer carries.
    pub headers: Vec<(&'static str, String)>,
}

impl Reply {
    pub(crate) fn text(status: u16, body: &str) -> Reply {
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.as_bytes().to_vec(),
            headers: Vec::new(),
        }
    }

    /// A `303 See Other` to `to`.
    pub(crate) fn see_other(to: &str) -> Reply {
        Reply {
            headers: vec![("Location", to.to_string())],
            ..Reply::text(303, &format!("see {to}\n"))
        }
    }

    /// This reply with the header `name: value` added.
    pub(crate) fn with(mut self, name: &'static str, value: String) -> Reply {
        self.headers.push((name, value));
        self
    }
}

impl Worker {
    fn route(&mut self, request: &http::Incoming) -> Reply {
        let target = request.target.as_str();
        let body = request.body.as_slice();
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let post = request.method == http::Method::Post;
        let header = |name: &str| request.header(name);
        let now = (self.settings.clock)();
        let api = path.starts_with("/api/");
        // The API takes only a bearer token; pages also a session cookie.
        let tokens = &self.settings.tokens;
        let who = match tokens.bearer(header("Authorization")) {
            Some(t) => Some(auth::Who {
                name: t.name.clone(),
                role: t.role,
            }),
            None if api => None,
            None => self.sessions.who(header("Cookie")),
        };
        let browser =
            || auth::same_origin(header("Origin"), header("Host"), header("Sec-Fetch-Site"));
        match (path, post) {
            ("/login", false) => return self.sign_in_page(who.as_ref(), None, 200, now),
            ("/login", true) => {
                if let Err(why) = browser() {
                    return Reply::text(403, &format!("{why}\n"));
                }
                let https = header("X-Forwarded-Proto") == Some("https");
                return self.sign_in(body, https, now);
            }
            ("/logout", true) => {
                if let Err(why) = browser() {
                    return Reply::text(403, &format!("{why}\n"));
                }
                self.sessions.end(header("Cookie"));
                return Reply::see_other("/login").with(
                    "Set-Cookie",
                    format!(
                        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
                        auth::COOKIE
                    ),
                );
            }
            _ => {}
        }
        let accept = header("Accept").unwrap_or_default();
        let route =
            (!post).then(|| pages::Route::parse(path, query, accept.contains("application/json")));
        // The stylesheet, the script and the icon are the same for
        // everyone, and the sign-in page needs them.
        if let Some(pages::Route::Static(name)) = route {
            return pages::static_file(name);
        }
        if tokens.required() && who.is_none() {
            // A browser asking for a page is sent to sign in; anything
            // else is told what to send.
            if !post && !api && accept.contains("text/html") && header("Authorization").is_none() {
                return Reply::see_other("/login");
            }
            return Reply::text(
                401,
                "unauthorized: send Authorization: Bearer TOKEN, or sign in at /login\n",
            );
        }
        if post {
            let Some(act) = actions::Act::parse(path.strip_prefix("/api").unwrap_or(path)) else {
                return Reply::text(404, "no such action\n");
            };
            if !api && let Err(why) = browser() {
                return Reply::text(403, &format!("{why}\n"));
            }
            return self.act(&act, who.as_ref(), body, api, header("Content-Type"), now);
        }
        if let Some(id) = path
            .strip_prefix("/api/tasks/")
            .or_else(|| path.strip_prefix("/tasks/"))
        {
            return self.task(id, api, now, who.as_ref());
        }
        let Some(route) = route else {
            return Reply::text(404, "not found\n");
        };
        let viewer = self.viewer(who.as_ref());
        match route {
            pages::Route::Static(name) => pages::static_file(name),
            pages::Route::Metrics => self.metrics(now),
            pages::Route::NotFound => Reply::text(404, "not found\n"),
            page => self.page(page, now, &viewer),
        }
    }

    /// What the pages show of who is looking and what they may do.
    fn viewer(&self, who: Option<&auth::Who>) -> pages::Viewer {
        pages::Viewer {
            name: who.map(|w| w.name.clone()),
            role: who.map(|w| w.role.as_str()),
            can_act: self.settings.actions.is_some()
                && (who.is_some_and(|w| w.role == auth::Role::Operate)),
            signs_in: self.settings.tokens.required(),
        }
    }

    /// `/login`: the sign-in form.
    fn sign_in_page(
        &self,
        who: Option<&auth::Who>,
        error: Option<&str>,
        status: u16,
        now: Timestamp,
    ) -> Reply {
        let viewer = self.viewer(who);
        let mut reply = self
            .pages
            .sign_in(&viewer, error, now)
            .unwrap_or_else(|e| Reply::text(503, &format!("{e:#}\n")));
        reply.status = status;
        reply
    }

    /// `POST /login`: a session for the token the form carries.
    /// Behind a proxy that terminates TLS (`X-Forwarded-Proto: https`),
    /// the cookie is `Secure`.
    fn sign_in(&self, body: &[u8], https: bool, now: Timestamp) -> Reply {
        let fields = actions::fields(body, false).unwrap_or_default();
        let given = fields.get("token").map(String::as_str).unwrap_or_default();
        let Some(token) = self.settings.tokens.find(given) else {
            return self.sign_in_page(
                None,
                Some("That token is not one this dashboard accepts."),
                401,
                now,
            );
        };
        let who = auth::Who {
            name: token.name.clone(),
            role: token.role,
        };
        match self.sessions.start(who) {
            Ok(value) => Reply::see_other("/").with(
                "Set-Cookie",
                format!(
                    "{}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
                    auth::COOKIE,
                    auth::SESSION_LIFE.as_secs(),
                    if https { "; Secure" } else { "" }
                ),
            ),
            Err(e) => Reply::text(503, &format!("{e:#}\n")),
        }
    }

    /// A POST that asks for an action.
    fn act(
        &mut self,
        act: &actions::Act,
        who: Option<&auth::Who>,
        body: &[u8],
        api: bool,
        content_type: Option<&str>,
        now: Timestamp,
    ) -> Reply {
        let Some(actions) = &self.settings.actions else {
            return Reply::text(
                403,
                "this dashboard only reads: start it with --allow-actions and a --tokens-file \
                 holding an `operate` token to act from it\n",
            );
        };
        let Some(who) = who.filter(|w| w.role == auth::Role::Operate) else {
            return Reply::text(
                403,
                &format!(
                    "refused: {} may only read; acting needs a token whose role is `operate`\n",
                    who.map_or("an anonymous reader".to_string(), |w| format!(
                        "token `{}`",
                        w.name
                    ))
                ),
            );
        };
        if api && !content_type.is_some_and(|c| c.starts_with("application/json")) {
            return Reply::text(
                415,
                "send the action's fields as JSON with Content-Type: application/json\n",
            );
        }
        let fields = match actions::fields(body, api) {
            Ok(f) => f,
            Err(why) => return Reply::text(400, &format!("{why}\n")),
        };
        let jobs = self.settings.listed().jobs;
        let acted = actions::act(actions, &jobs, act, &fields, &who.name, now);
        crate::core::text::say(
            "dashboard",
            &crate::core::text::printable(&format!(
                "{} asked {act:?}: {} (HTTP {})",
                who.name,
                acted.said.as_deref().unwrap_or("done"),
                acted.status
            )),
        );
        if api {
            let mut reply = Reply {
                status: acted.status,
                content_type: "application/json",
                body: format!("{}\n", acted.line).into_bytes(),
                headers: vec![("Jobhost-Exit-Code", acted.exit_code.to_string())],
            };
            if let Some(href) = acted.href {
                reply.headers.push(("Location", href));
            }
            return reply;
        }
        if acted.status == 202
            && let Some(href) = &acted.href
        {
            return Reply::see_other(href);
        }
        let viewer = self.viewer(Some(who));
        let mut reply = self
            .pages
            .acted(&viewer, &acted, now)
            .unwrap_or_else(|e| Reply::text(503, &format!("{e:#}\n")));
        reply.status = acted.status;
        reply
    }

    /// A backfill's progress: its page, or its JSON.
    fn task(&self, id: &str, api: bool, now: Timestamp, who: Option<&auth::Who>) -> Reply {
        let (id, suffix) = match id.strip_suffix(".json") {
            Some(i) => (i, true),
            None => (id, false),
        };
        let task = self
            .settings
            .actions
            .as_ref()
            .zip(id.parse::<u64>().ok())
            .and_then(|(a, id)| a.tasks.get(id));
        let Some(task) = task else {
            return Reply::text(404, "no such backfill on this server\n");
        };
        let view = task.view();
        if api || suffix {
            return Reply {
                status: 200,
                content_type: "application/json",
                body: serde_json::to_vec(&view).unwrap_or_default(),
                headers: Vec::new(),
            };
        }
        let viewer = self.viewer(who);
        self.pages
            .task(&viewer, &view, now)
            .unwrap_or_else(|e| Reply::text(503, &format!("{e:#}\n")))
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

    fn page(&mut self, route: pages::Route, now: Timestamp, viewer: &pages::Viewer) -> Reply {
        match pages::render(self, route, now, viewer) {
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
                headers: Vec::new(),
            },
            Err(e) => {
                let line = crate::core::text::printable(&e.chain()).into_owned();
                crate::core::text::say("error", &format!("metrics: {line}"));
                Reply::text(503, &format!("{line}\n"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            jobs: fixed(Vec::new()),
            listen: "127.0.0.1:0".parse().unwrap(),
            tokens: auth::Tokens::default(),
            actions: None,
            clock: Arc::new(Timestamp::now),
            daemon: None,
            liveness: None,
        }
    }

    #[test]
    fn health_a_long_target_and_a_method_not_served_are_answered_without_a_thread() {
        use http::{Incoming, Method};
        let s = settings();
        let status = |m, t: &str| early(&s, &Incoming::new(m, t, &[])).map(|r| r.status);
        assert_eq!(status(Method::Get, "/healthz"), Some(200));
        assert_eq!(status(Method::Head, "/livez?x=1"), Some(200));
        assert_eq!(status(Method::Other, "/"), Some(405));
        assert_eq!(
            status(Method::Get, &format!("/{}", "a".repeat(MAX_TARGET))),
            Some(414)
        );
        assert_eq!(
            status(Method::Get, "/jobs"),
            None,
            "a page goes to a thread"
        );
        assert_eq!(status(Method::Post, "/login"), None);
    }
}
