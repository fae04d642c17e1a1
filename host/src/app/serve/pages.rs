//! The dashboard's routes and pages: each page is a `run::board` struct,
//! rendered as HTML from an embedded template (auto-escaped) or as its
//! JSON twin (the same struct, with the reads it took).

use jiff::Timestamp;
use minijinja::{AutoEscape, Environment, context};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use serde::Serialize;

use super::{Reply, Worker};
use crate::core::error::{Error, Result};
use crate::core::window::WindowKey;
use crate::effects::digest::cache::DigestCache;
use crate::run::board::{self, BoardJob, ReadCount};
use crate::run::reads::Reads;

/// What a request asks for.
pub(super) enum Route {
    /// Every job.
    Jobs { json: bool },
    /// One job's grid, the page holding `at`.
    Job {
        name: String,
        at: Option<String>,
        json: bool,
    },
    /// One run.
    Run { key: String, json: bool },
    /// `/metrics`.
    Metrics,
    /// A file under `/static/`.
    Static(&'static str),
    /// Anything else.
    NotFound,
}

impl Route {
    pub(super) fn parse(path: &str, query: &str, accept_json: bool) -> Route {
        let (path, suffix) = match path.strip_suffix(".json") {
            Some(p) => (p, true),
            None => (path, false),
        };
        let json = suffix || accept_json;
        let decode = |s: &str| {
            percent_decode_str(s)
                .decode_utf8()
                .ok()
                .map(|c| c.into_owned())
        };
        match path {
            "" | "/" | "/jobs" | "/index" => Route::Jobs { json },
            "/metrics" if !suffix => Route::Metrics,
            "/static/app.css" if !suffix => Route::Static("app.css"),
            "/static/app.js" if !suffix => Route::Static("app.js"),
            // Browsers ask for `/favicon.ico` unprompted; the same icon
            // answers, so the console shows no failed load.
            "/static/icon.svg" | "/favicon.ico" if !suffix => Route::Static("icon.svg"),
            _ => {
                if let Some(name) = path.strip_prefix("/jobs/").and_then(decode) {
                    let at = query
                        .split('&')
                        .find_map(|kv| kv.strip_prefix("at="))
                        .and_then(|v| decode(&v.replace('+', " ")));
                    Route::Job { name, at, json }
                } else if let Some(key) = path.strip_prefix("/runs/").and_then(decode) {
                    Route::Run { key, json }
                } else {
                    Route::NotFound
                }
            }
        }
    }
}

/// The templates, parsed once.
pub(super) struct Pages {
    env: Environment<'static>,
}

impl Pages {
    pub(super) fn new() -> Pages {
        let mut env = Environment::new();
        // Every template escapes for HTML, whatever its name.
        env.set_auto_escape_callback(|_| AutoEscape::Html);
        env.add_filter("shown", shown);
        env.add_filter("seg", seg);
        env.add_filter("dur", dur);
        for (name, text) in [
            ("base.html", include_str!("templates/base.html")),
            ("jobs.html", include_str!("templates/jobs.html")),
            ("job.html", include_str!("templates/job.html")),
            ("run.html", include_str!("templates/run.html")),
            ("strip.html", include_str!("templates/strip.html")),
            ("login.html", include_str!("templates/login.html")),
            ("acted.html", include_str!("templates/acted.html")),
            ("task.html", include_str!("templates/task.html")),
        ] {
            env.add_template(name, text)
                .unwrap_or_else(|e| panic!("embedded template {name} is invalid: {e}"));
        }
        Pages { env }
    }

    /// `/login`'s page, with `error` said above the form.
    pub(super) fn sign_in(
        &self,
        viewer: &Viewer,
        error: Option<&str>,
        now: Timestamp,
    ) -> Result<Reply> {
        self.html(
            "login.html",
            context! { viewer => viewer, error => error, now => crate::core::clock::rfc3339(now), json_href => "/jobs.json" },
        )
    }

    /// The page an action from a form answers with: what it said and the
    /// line the command line's verb prints.
    pub(super) fn acted(
        &self,
        viewer: &Viewer,
        acted: &super::actions::Acted,
        now: Timestamp,
    ) -> Result<Reply> {
        let line: Option<serde_json::Value> = serde_json::from_str(&acted.line).ok();
        let pretty = line
            .as_ref()
            .and_then(|v| serde_json::to_string_pretty(v).ok())
            .unwrap_or_else(|| acted.line.clone());
        let key = line
            .as_ref()
            .and_then(|v| v.get("key").and_then(|k| k.as_str()).map(str::to_string));
        let job = line
            .as_ref()
            .and_then(|v| v.get("job").and_then(|k| k.as_str()).map(str::to_string));
        self.html(
            "acted.html",
            context! {
                viewer => viewer,
                ok => acted.status < 300,
                status => acted.status,
                exit_code => acted.exit_code,
                said => acted.said,
                line => pretty,
                key => key,
                job => job,
                now => crate::core::clock::rfc3339(now),
                json_href => "/jobs.json",
            },
        )
    }

    /// A backfill's page.
    pub(super) fn task(
        &self,
        viewer: &Viewer,
        task: &super::actions::TaskView,
        now: Timestamp,
    ) -> Result<Reply> {
        let json_href = format!("/tasks/{}.json", task.id);
        self.html(
            "task.html",
            context! { viewer => viewer, task => task, now => crate::core::clock::rfc3339(now), json_href => json_href },
        )
    }

    fn html(&self, name: &str, ctx: minijinja::Value) -> Result<Reply> {
        let t = self
            .env
            .get_template(name)
            .map_err(|e| Error::host(format!("template {name}")).because(e))?;
        let body = t
            .render(ctx)
            .map_err(|e| Error::host(format!("template {name}")).because(e))?;
        Ok(Reply {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: body.into_bytes(),
            headers: Vec::new(),
        })
    }
}

/// Text from outside shown as it is, line by line: every character that
/// could change how it reads (escape sequences, bidirectional controls) as
/// `\u{..}`, line breaks kept. HTML escaping follows.
fn shown(text: String) -> String {
    text.split('\n')
        .map(|l| crate::core::text::printable(l).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Characters kept as they are in a path segment.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b':');

/// `text` as one URL path segment.
fn seg(text: String) -> String {
    utf8_percent_encode(&text, SEGMENT).to_string()
}

/// Seconds as `2d3h`, `45s`.
fn dur(secs: i64) -> String {
    crate::core::text::human_duration(jiff::SignedDuration::from_secs(secs.max(0)))
}

/// A page's JSON twin.
fn json(value: &impl Serialize) -> Result<Reply> {
    let body = serde_json::to_vec(value).map_err(|e| Error::host("json").because(e))?;
    Ok(Reply {
        status: 200,
        content_type: "application/json",
        body,
        headers: Vec::new(),
    })
}

/// Who is looking at a page and what it offers them.
#[derive(Debug, Clone, Default, Serialize)]
pub(super) struct Viewer {
    /// The token's name, when one was given or signed in with.
    pub name: Option<String>,
    /// Its role.
    pub role: Option<&'static str>,
    /// Whether the page shows the forms that act.
    pub can_act: bool,
    /// Whether the server takes tokens (a sign-in link is shown).
    pub signs_in: bool,
}

/// The overview, as the JSON twin carries it.
#[derive(Serialize)]
struct Overview {
    now: String,
    jobs: Vec<board::JobRow>,
    /// Job files of the folder that were refused, and why.
    refused: Vec<crate::app::config::folder::Refused>,
    reads: ReadCount,
}

/// A grid page's JSON twin.
#[derive(Serialize)]
struct JobPage {
    #[serde(flatten)]
    grid: board::Grid,
    reads: ReadCount,
}

/// A run page's JSON twin.
#[derive(Serialize)]
struct RunPage {
    #[serde(flatten)]
    run: board::RunDetail,
    reads: ReadCount,
}

pub(super) fn render(
    worker: &mut Worker,
    route: Route,
    now: Timestamp,
    viewer: &Viewer,
) -> Result<Reply> {
    let listed = worker.settings.listed();
    let pages = worker.pages.clone();
    let now_text = crate::core::clock::rfc3339(now);
    match route {
        Route::Jobs { json: as_json } => {
            let mut reads = ReadCount::default();
            let mut jobs = Vec::new();
            for j in &listed.jobs {
                let bj = BoardJob {
                    schedule: &j.schedule,
                    store: j.location.to_string(),
                    target: &j.target,
                };
                let row = with_reads(worker, &j.location, &mut reads, |r| {
                    board::job_row(&bj, now, r).map(|(row, _)| row)
                })?;
                jobs.push(row);
            }
            let page = Overview {
                now: now_text,
                jobs,
                refused: listed.refused.clone(),
                reads,
            };
            if as_json {
                return json(&page);
            }
            pages.html(
                "jobs.html",
                context! { page => page, now => page.now, json_href => "/jobs.json", viewer => viewer },
            )
        }
        Route::Job {
            name,
            at,
            json: as_json,
        } => {
            let Some(j) = listed.jobs.iter().find(|j| j.schedule.job.as_str() == name) else {
                return Ok(Reply::text(404, "no such job\n"));
            };
            let at = at.map(|t| j.schedule.bound("at", &t, now)).transpose()?;
            let bj = BoardJob {
                schedule: &j.schedule,
                store: j.location.to_string(),
                target: &j.target,
            };
            let mut reads = ReadCount::default();
            let grid = with_reads(worker, &j.location, &mut reads, |r| {
                board::grid(&bj, now, at, r)
            })?;
            let page = JobPage { grid, reads };
            if as_json {
                return json(&page);
            }
            let json_href = format!("/jobs/{}.json", seg(name.clone()));
            let tasks = worker
                .settings
                .actions
                .as_ref()
                .map(|a| a.tasks.of_job(&name))
                .unwrap_or_default();
            pages.html(
                "job.html",
                context! { page => page, now => now_text, json_href => json_href, viewer => viewer, tasks => tasks },
            )
        }
        Route::Run { key, json: as_json } => {
            let job = key.split_once(':').map(|(j, _)| j).unwrap_or_default();
            let Some(j) = listed.jobs.iter().find(|j| j.schedule.job.as_str() == job) else {
                return Ok(Reply::text(404, "no such run\n"));
            };
            let cache = j.digest_cache.clone().map(DigestCache::new);
            let key = WindowKey::from_stored(key);
            let mut reads = ReadCount::default();
            let run = with_reads(worker, &j.location, &mut reads, |r| match r {
                Some(r) => board::run_detail(&key, r, cache.as_ref(), &j.target),
                None => Ok(None),
            })?;
            let Some(run) = run else {
                return Ok(Reply::text(404, "no such run\n"));
            };
            let page = RunPage { run, reads };
            if as_json {
                return json(&page);
            }
            let json_href = format!("/runs/{}.json", seg(key.to_string()));
            pages.html(
                "run.html",
                context! { page => page, now => now_text, json_href => json_href, viewer => viewer },
            )
        }
        Route::Metrics | Route::Static(_) | Route::NotFound => Ok(Reply::text(404, "not found\n")),
    }
}

/// Runs `f` over the counted store of `location` (`None`: no store yet),
/// adding its reads to `count`; a store error drops the connection.
pub(super) fn with_reads<T>(
    worker: &mut Worker,
    location: &crate::store::StoreLocation,
    count: &mut ReadCount,
    f: impl FnOnce(Option<&mut Reads<'_>>) -> Result<T>,
) -> Result<T> {
    // A store that cannot be opened (down, or of a newer schema) is the
    // server's condition, not the request's: never an `Error::Input`.
    let opened = worker.store(location).map_err(|e| match e {
        Error::Input(m) => Error::Store(m),
        other => other,
    });
    let result = match opened {
        Ok(Some(s)) => {
            let mut reads = Reads::new(s.as_mut());
            let v = f(Some(&mut reads));
            count.add(&reads);
            v
        }
        Ok(None) => f(None),
        Err(e) => Err(e),
    };
    if matches!(result, Err(Error::Store(_))) {
        worker.drop_store(location);
    }
    result
}

/// The stylesheet, the refresh script and the icon.
pub(super) fn static_file(name: &str) -> Reply {
    match name {
        "app.css" => Reply {
            status: 200,
            content_type: "text/css; charset=utf-8",
            body: include_bytes!("static/app.css").to_vec(),
            headers: Vec::new(),
        },
        "app.js" => Reply {
            status: 200,
            content_type: "text/javascript; charset=utf-8",
            body: include_bytes!("static/app.js").to_vec(),
            headers: Vec::new(),
        },
        "icon.svg" => Reply {
            status: 200,
            content_type: "image/svg+xml",
            body: include_bytes!("static/icon.svg").to_vec(),
            headers: Vec::new(),
        },
        _ => Reply::text(404, "not found\n"),
    }
}
