//! The dashboard in a real browser: headless Chromium driven over
//! WebDriver (`chromedriver`) reads each job's health on the jobs page,
//! clicks a failed window's cell and finds the error and the replay
//! command on its run page, and runs no script a guest wrote; the
//! browser's console (read through ChromeDriver's log command) holds no
//! error, no refused script and no failed load. A screenshot of each
//! page is written under `target/dashboard-screenshots/`.
//! Without `chromium` and `chromedriver` the test says SKIPPED on stderr,
//! and under `CI` fails (`.ci/run` installs them).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use fantoccini::{Client, ClientBuilder, Locator};

use crate::dashboard::{Served, every_state, serve};
use crate::harness::*;

/// `chromedriver` on a port of its own, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|n| {
        std::env::split_paths(&path)
            .map(|d| d.join(n))
            .find(|p| p.is_file())
    })
}

/// The driver and the browser, or `None` with a visible SKIPPED line (a
/// failure under `CI`).
fn driver(test: &str) -> Option<(Driver, PathBuf)> {
    let (Some(driver), Some(browser)) = (
        find(&["chromedriver"]),
        find(&["chromium", "chromium-browser", "google-chrome"]),
    ) else {
        jobhost_tests::skip::missing(
            test,
            "chromium and chromedriver are not installed",
            "Debian: apt-get install chromium chromium-driver; .ci/run installs them",
        );
        return None;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    Some((Driver { child, url }, browser))
}

async fn browser(driver: &Driver, binary: &PathBuf) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".to_string(),
        serde_json::json!({
            "binary": binary,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,900"],
        }),
    );
    caps.insert(
        "goog:loggingPrefs".to_string(),
        serde_json::json!({"browser": "ALL"}),
    );
    ClientBuilder::native()
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a browser session")
}

/// ChromeDriver's command for the browser's console log (`POST
/// /session/{id}/se/log`), which W3C WebDriver does not define and
/// `fantoccini` has no call for. Each call returns the entries logged
/// since the last one.
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(r#"{"type":"browser"}"#.to_string()),
        )
    }
}

/// The console's entries since the last call, as `(level, message)`.
async fn console(c: &Client) -> Vec<(String, String)> {
    let log = c.issue_cmd(BrowserLog).await.expect("the browser log");
    log.as_array()
        .expect("the log is a list of entries")
        .iter()
        .map(|e| {
            (
                e["level"].as_str().unwrap_or_default().to_string(),
                e["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn screenshots() -> PathBuf {
    let dir = root().join("target").join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot folder");
    dir
}

async fn shoot(c: &Client, name: &str) {
    let png = c.screenshot().await.expect("a screenshot");
    std::fs::write(screenshots().join(name), png).expect("screenshot written");
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(f)
}

#[test]
fn in_a_browser_the_jobs_page_shows_health_and_a_failed_cell_leads_to_its_error() {
    let Some((driver, binary)) = driver("dashboard browser test") else {
        return;
    };
    let dir = scratch();
    let (cfg, db, _sink) = every_state(dir.path());
    let srv: Served = serve(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        "2026-12-02T00:00:00Z",
    ]);
    let base = format!("http://{}", srv.addr);
    block_on(async {
        let c = browser(&driver, &binary).await;
        c.goto(&format!("{base}/")).await.unwrap();
        let health = c
            .find(Locator::Css("tr[data-job='daily-report'] .health"))
            .await
            .unwrap();
        assert_eq!(health.text().await.unwrap(), "failed");
        shoot(&c, "jobs.png").await;
        c.goto(&format!("{base}/jobs/daily-report?at=2026-11-10"))
            .await
            .unwrap();
        shoot(&c, "job.png").await;
        let cell = c
            .find(Locator::Css("a.cell[data-key='daily-report:2026-11-05']"))
            .await
            .unwrap();
        assert_eq!(
            cell.attr("data-state").await.unwrap().as_deref(),
            Some("failed")
        );
        cell.click().await.unwrap();
        let error = arrived(&c, "#error").await.expect("the run's page");
        assert!(error.text().await.unwrap().contains("400"));
        let replay = c.find(Locator::Css("#replay")).await.unwrap();
        assert_eq!(
            replay.text().await.unwrap(),
            format!(
                "jobhost replay daily-report:2026-11-05 --config {} --store {}",
                s(&cfg),
                s(&db)
            )
        );
        shoot(&c, "run.png").await;
        // Three pages and a click, and nothing on the console: no failed
        // load, no refused script, no error from the refresh script.
        let logged = console(&c).await;
        assert!(logged.is_empty(), "the pages logged {logged:?}");
        c.close().await.unwrap();
    });
}

#[test]
fn in_a_browser_guest_markup_is_text_and_no_script_runs() {
    let Some((driver, binary)) = driver("dashboard hostile browser test") else {
        return;
    };
    let dir = scratch();
    sales_db(dir.path(), 100);
    let db = dir.path().join("s.db");
    let cfg = config(
        dir.path(),
        &format!(
            "job = \"html-report\"\ncomponent = \"{}\"\n\
             [source]\npath = \"sales.db\"\n\
             query = \"SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end\"\n\
             [destinations.sink]\ntype = \"file\"\npath = \"sink.jsonl\"\n",
            guests().hostile.display()
        ),
    );
    assert_eq!(run_job(&cfg, &db, "2026-11-09T00:05:00Z").event(), "ran");
    let srv = serve(&[
        "serve",
        "--config",
        s(&cfg),
        "--store",
        s(&db),
        "--now",
        "2026-11-09T00:05:00Z",
    ]);
    let base = format!("http://{}", srv.addr);
    block_on(async {
        let c = browser(&driver, &binary).await;
        c.goto(&format!("{base}/runs/html-report:2026-11-08"))
            .await
            .unwrap();
        let summary = c.find(Locator::Css("#summary")).await.unwrap();
        let text = summary.text().await.unwrap();
        assert!(
            text.starts_with("<script>window.__pwned=1</script>"),
            "{text}"
        );
        assert!(text.contains("<img src=x onerror="), "{text}");
        let pwned = c
            .execute(
                "return window.__pwned === undefined ? null : window.__pwned;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(pwned, serde_json::Value::Null, "a guest's script ran");
        let injected = c
            .execute(
                "return document.querySelectorAll('main script, main img, main b').length;",
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(injected, serde_json::json!(0));
        // The console: nothing a guest wrote ran or was refused by the
        // Content-Security-Policy (a refused inline script logs an error),
        // and the page itself logged no error. A line logged here first
        // shows the log is read at all.
        c.execute("console.error('jobhost-console-probe');", vec![])
            .await
            .unwrap();
        let logged = console(&c).await;
        assert!(
            logged
                .iter()
                .any(|(_, m)| m.contains("jobhost-console-probe")),
            "the console is read: {logged:?}"
        );
        let others: Vec<_> = logged
            .iter()
            .filter(|(_, m)| !m.contains("jobhost-console-probe"))
            .collect();
        assert!(others.is_empty(), "the page logged {others:?}");
        shoot(&c, "hostile-run.png").await;
        c.close().await.unwrap();
    });
}

/// A page of another origin (another port of this machine: the same site
/// to a browser, so only the origin check stands between it and the
/// dashboard) whose script sends a form to `action` at once.
fn forger(action: &str) -> (String, std::thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let addr = listener.local_addr().unwrap().to_string();
    let page = format!(
        "<!doctype html><html><body><form id=\"f\" method=\"post\" action=\"{action}\">\
         <input name=\"note\" value=\"forged\"></form>\
         <script>document.getElementById('f').submit();</script></body></html>"
    );
    let serving = std::thread::spawn(move || {
        // The page, and the favicon the browser may ask for.
        for _ in 0..2 {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                    page.len()
                )
                .as_bytes(),
            );
        }
    });
    (addr, serving)
}

/// The HTTP status of the page the browser shows now.
async fn status_now(c: &Client) -> u64 {
    c.execute(
        "return performance.getEntriesByType('navigation')[0].responseStatus;",
        vec![],
    )
    .await
    .unwrap()
    .as_u64()
    .expect("a status")
}

/// Sends a form to `action` from the page the browser shows (as a person
/// with the browser's developer tools could), with `fields`.
async fn submit(c: &Client, action: &str, fields: serde_json::Value) {
    c.execute(
        "const f = document.createElement('form'); f.method = 'post'; f.action = arguments[0];\
         for (const [k, v] of Object.entries(arguments[1])) {\
           const i = document.createElement('input'); i.name = k; i.value = v; f.appendChild(i); }\
         document.body.appendChild(f); f.submit();",
        vec![serde_json::json!(action), fields],
    )
    .await
    .unwrap();
    // Until the answer has replaced the page.
    for _ in 0..100 {
        let url = c.current_url().await.unwrap();
        if url.path() == action {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The element `css` of the page a click leads to, once it has loaded (at
/// most 20 s).
async fn arrived(
    c: &Client,
    css: &str,
) -> Result<fantoccini::elements::Element, fantoccini::error::CmdError> {
    c.wait()
        .at_most(std::time::Duration::from_secs(20))
        .for_element(Locator::Css(css))
        .await
}

async fn sign_in(c: &Client, base: &str, token: &str) {
    c.goto(&format!("{base}/login")).await.unwrap();
    c.find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(token)
        .await
        .unwrap();
    c.find(Locator::Css("#login"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // A click returns before the page it leads to has loaded: wait for it.
    let Ok(who) = arrived(c, "#who").await else {
        let body = c.source().await.unwrap();
        panic!(
            "not signed in at {}: {body}",
            c.current_url().await.unwrap()
        );
    };
    assert!(!who.text().await.unwrap().is_empty());
}

/// The revision of 2026-11-03 and whether the job is paused.
fn facts(db: &std::path::Path) -> (u64, bool) {
    let rows = history(db);
    let revision = rows
        .iter()
        .find(|r| r["key"] == "daily-report:2026-11-03")
        .and_then(|r| r["revision"].as_u64())
        .expect("11-03's row");
    use jobhost::store::Ledger as _;
    let mut store = jobhost::store::SqliteStore::open(db).expect("the store opens");
    let paused = store.paused("daily-report").expect("the pause is read");
    (revision, paused.is_some())
}

#[test]
fn in_a_browser_an_operator_reruns_and_pauses_a_reader_cannot_and_a_forged_form_is_refused() {
    let Some((driver, binary)) = driver("dashboard actions browser test") else {
        return;
    };
    let dir = scratch();
    let (cfg, db, _sink) = every_state(dir.path());
    let tokens = crate::actions::tokens_file(dir.path(), "alice");
    let srv: Served = crate::actions::serve_acting(&cfg, &db, &tokens);
    let base = format!("http://{}", srv.addr);
    let run_page = format!("{base}/runs/daily-report:2026-11-03");
    assert_eq!(facts(&db), (1, false));
    block_on(async {
        let c = browser(&driver, &binary).await;
        // Without signing in: sent to sign in.
        c.goto(&format!("{base}/")).await.unwrap();
        assert_eq!(c.current_url().await.unwrap().path(), "/login");
        assert!(c.find(Locator::Css("#login-form")).await.is_ok());

        // A reader sees no form, and one sent anyway is refused.
        sign_in(&c, &base, crate::actions::READ).await;
        c.goto(&run_page).await.unwrap();
        assert!(
            c.find(Locator::Css("#rerun-form")).await.is_err(),
            "a reader is offered a rerun"
        );
        submit(
            &c,
            "/runs/daily-report:2026-11-03/rerun",
            serde_json::json!({"reason": "x"}),
        )
        .await;
        assert_eq!(status_now(&c).await, 403);
        let body = c
            .find(Locator::Css("body"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(body.contains("may only read"), "{body}");
        c.goto(&format!("{base}/jobs/daily-report")).await.unwrap();
        assert!(c.find(Locator::Css("#pause-form")).await.is_err());
        submit(
            &c,
            "/jobs/daily-report/pause",
            serde_json::json!({"note": "x"}),
        )
        .await;
        assert_eq!(status_now(&c).await, 403);
        assert_eq!(facts(&db), (1, false), "a reader changed nothing");
        c.goto(&format!("{base}/")).await.unwrap();
        c.find(Locator::Css("form.logout button"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        arrived(&c, "#login-form").await.expect("signed out");
        // The refusals above are on the console as failed loads; what
        // follows must log none.
        console(&c).await;

        // An operator reruns the DONE window with a reason ...
        sign_in(&c, &base, crate::actions::OPERATE).await;
        c.goto(&run_page).await.unwrap();
        c.find(Locator::Css("#rerun-reason"))
            .await
            .unwrap()
            .send_keys("late rows arrived")
            .await
            .unwrap();
        c.find(Locator::Css("#rerun"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let outcome = arrived(&c, "#outcome").await.expect("the rerun's answer");
        assert_eq!(
            outcome.attr("data-status").await.unwrap().as_deref(),
            Some("200")
        );
        let receipt = c
            .find(Locator::Css("#receipt"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(receipt.contains("\"revision\": 2"), "{receipt}");
        shoot(&c, "acted.png").await;
        c.goto(&run_page).await.unwrap();
        let page = c
            .find(Locator::Css("main"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(page.contains("rerun because: late rows arrived"), "{page}");
        // ... and pauses the job.
        c.goto(&format!("{base}/jobs/daily-report")).await.unwrap();
        c.find(Locator::Css("#pause-note"))
            .await
            .unwrap()
            .send_keys("destination migrating")
            .await
            .unwrap();
        c.find(Locator::Css("#pause"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let outcome = arrived(&c, "#outcome").await.expect("the pause's answer");
        assert_eq!(
            outcome.attr("data-status").await.unwrap().as_deref(),
            Some("200")
        );
        assert_eq!(status_now(&c).await, 200);
        assert_eq!(facts(&db), (2, true));
        c.goto(&format!("{base}/jobs/daily-report")).await.unwrap();
        assert!(c.find(Locator::Css("#resume-form")).await.is_ok());
        shoot(&c, "job-actions.png").await;
        // No failed load, no refused script or style (debug notes aside).
        let logged: Vec<_> = console(&c)
            .await
            .into_iter()
            .filter(|(level, _)| level != "DEBUG" && level != "INFO")
            .collect();
        assert!(logged.is_empty(), "the pages logged {logged:?}");

        // A page of another origin sends a resume with the operator's
        // session cookie: refused, and the job stays paused.
        let (evil, serving) = forger(&format!("{base}/jobs/daily-report/resume"));
        c.goto(&format!("http://{evil}/")).await.unwrap();
        for _ in 0..100 {
            if c.current_url().await.unwrap().as_str().starts_with(&base) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert!(
            c.current_url().await.unwrap().as_str().starts_with(&base),
            "the form was sent"
        );
        assert_eq!(status_now(&c).await, 403);
        let body = c
            .find(Locator::Css("body"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(body.contains("refused"), "{body}");
        assert_eq!(facts(&db), (2, true), "the forged form changed nothing");
        c.close().await.unwrap();
        drop(serving);
    });
}
