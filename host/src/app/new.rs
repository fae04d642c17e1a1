//! `jobhost new NAME --lang rust|python|js|ts`: writes a report project that
//! builds and runs as it stands: the report's sources on the SDK (a copy
//! of it, so the project needs nothing of this repository), the WIT it is
//! built against, a job config on sample data of its own, a build recipe
//! and a test of the report's logic that runs natively.

use std::fs;
use std::path::{Path, PathBuf};

use crate::core::error::{Error, Result};
use crate::core::text::{printable, say};

/// The language of a new report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A Rust crate built for wasm32-wasip2.
    Rust,
    /// A Python module built with componentize-py.
    Python,
    /// A JavaScript module, bundled by esbuild and built with
    /// componentize-js.
    Js,
    /// A TypeScript module, bundled (its types stripped) by esbuild and
    /// built with componentize-js.
    Ts,
}

/// What `jobhost new` is asked to make.
#[derive(Debug)]
pub struct NewRequest {
    /// The report's name: the folder, the job and (for Rust) the crate.
    pub name: String,
    /// Its language.
    pub lang: Lang,
    /// Where to make its folder, else the current folder.
    pub dir: Option<PathBuf>,
}

/// The WIT contract, as this host speaks it.
const WIT: &str = include_str!("../../../wit/report.wit");

/// The componentize-py release the Python SDK is tested with.
pub const COMPONENTIZE_PY: &str = "0.25.1";

/// The componentize-js release the JavaScript SDK is tested with.
pub const COMPONENTIZE_JS: &str = "0.23.0";

/// The esbuild release that bundles a JavaScript or TypeScript report.
pub const ESBUILD: &str = "0.28.2";

/// The TypeScript release that checks a TypeScript report's types before
/// esbuild strips them.
pub const TYPESCRIPT: &str = "5.9.3";

// RUST_SDK_CRATE, RUST_SDK and PYTHON_SDK: each SDK file, found by the
// build script.
include!(concat!(env!("OUT_DIR"), "/sdk.rs"));

/// The files of the SDK each language ships (in Rust, of its `src/`), for
/// the test that holds them to the SDK's folder.
pub fn sdk_files(lang: Lang) -> Vec<&'static str> {
    match lang {
        Lang::Rust => RUST_SDK.iter().map(|(p, _)| *p).collect(),
        Lang::Python => PYTHON_SDK.iter().map(|(p, _)| *p).collect(),
        Lang::Js | Lang::Ts => JS_SDK.iter().map(|(p, _)| *p).collect(),
    }
}

/// Writes the project; returns the lines that say how to build, run and
/// test it (the command prints them).
///
/// # Errors
///
/// `Error::Input` for a name that cannot be a project, or a folder that
/// exists already; `Error::Host` when a file cannot be written.
pub fn new(request: &NewRequest) -> Result<Vec<String>> {
    check_name(&request.name)?;
    let parent = request.dir.clone().unwrap_or_else(|| PathBuf::from("."));
    let root = parent.join(&request.name);
    if root.exists() {
        return Err(Error::input(format!(
            "`{}` exists already; pick another name or --dir, or remove it",
            printable(&root.display().to_string())
        )));
    }
    let today = jiff::Timestamp::now().as_second().div_euclid(86_400) * 86_400;
    let files = match request.lang {
        Lang::Rust => rust_project(&request.name, today),
        Lang::Python => python_project(&request.name, today),
        Lang::Js | Lang::Ts => js_project(&request.name, request.lang, today),
    };
    let written =
        write_project(&root, &files).and_then(|()| sample_data(&root.join("data"), today));
    if let Err(e) = written {
        // Leave nothing half made behind.
        let _ = fs::remove_dir_all(&root);
        return Err(Error::Host(
            format!("cannot write the project `{}`: {e}", root.display()).into(),
        ));
    }
    let shown = printable(&root.display().to_string()).into_owned();
    let quoted = shell_quoted(&shown);
    let (build, test) = match request.lang {
        Lang::Rust => (
            format!(
                "cargo build --release --target wasm32-wasip2 --manifest-path {}",
                shell_quoted(&format!("{shown}/Cargo.toml"))
            ),
            format!(
                "cargo test --manifest-path {}",
                shell_quoted(&format!("{shown}/Cargo.toml"))
            ),
        ),
        Lang::Python => (
            format!(
                "cd {quoted} && componentize-py -d wit -w describing-reporter componentize app -p . -o {}.wasm",
                request.name
            ),
            format!("cd {quoted} && python3 -m unittest"),
        ),
        Lang::Js | Lang::Ts => (
            format!("cd {quoted} && npm install && npm run build"),
            format!("cd {quoted} && npm test"),
        ),
    };
    let mut lines = Vec::new();
    lines.push(format!(
        "made {shown}: a {} report on sample sales data",
        match request.lang {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
            Lang::Ts => "TypeScript",
        }
    ));
    if request.lang == Lang::Rust {
        lines.push("needs the wasm32-wasip2 target: rustup target add wasm32-wasip2".to_string());
    }
    if request.lang == Lang::Python {
        lines.push(format!(
            "needs componentize-py {COMPONENTIZE_PY}: python3 -m pip install \
             componentize-py=={COMPONENTIZE_PY}"
        ));
    }
    if matches!(request.lang, Lang::Js | Lang::Ts) {
        lines.push(format!(
            "needs Node.js 20 or later and npm (npm install fetches componentize-js \
             {COMPONENTIZE_JS} and esbuild {ESBUILD})"
        ));
    }
    lines.push(format!("build: {build}"));
    lines.push(format!(
        "run:   jobhost run --config {}",
        shell_quoted(&format!("{shown}/job.toml"))
    ));
    lines.push(format!("test:  {test}"));
    say(
        "note",
        &format!("wrote {} files under `{shown}`", files.len() + 1),
    );
    Ok(lines)
}

/// `text` as one word for a POSIX shell: unchanged when it holds only
/// characters no shell treats specially, else in single quotes.
fn shell_quoted(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        return text.to_string();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// A project's name becomes a folder, a job name and a crate name: lower
/// case letters, digits, `-` and `_`, starting with a letter.
fn check_name(name: &str) -> Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok && name.replace('-', "_") == "jobhost_sdk" {
        return Err(Error::input(
            "`jobhost-sdk` is the name of the SDK the project ships with; pick another name",
        ));
    }
    if ok {
        return Ok(());
    }
    Err(Error::input(format!(
        "`{}` cannot name a report: use 1 to 64 lower-case letters, digits, `-` and `_`, \
         starting with a letter (for example `daily-sales`)",
        printable(name)
    )))
}

fn write_project(root: &Path, files: &[(String, String)]) -> std::io::Result<()> {
    for (path, text) in files {
        let path = root.join(path);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        fs::write(&path, text)?;
    }
    Ok(())
}

/// The job config both languages share; `component` is the built file,
/// `today` the first second (UTC) of the last day of the sample data.
fn job_config(name: &str, component: &str, today: i64) -> String {
    // Two days back: its day before is well inside the sample data.
    let earlier = jiff::Timestamp::from_second(today - 2 * 86_400)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_default();
    format!(
        r#"# The job: once per UTC day, the report `{name}` reads that day's rows of
# data/sales.db and appends its message to out/{name}.jsonl. Paths are
# relative to this file. `jobhost run --config job.toml` runs the last day
# that has closed; `--now {earlier}T00:05:00Z` runs the day before that
# instant, another day of the sample data.
job = "{name}"
component = "{component}"
window = "day"
timezone = "UTC"

[source]
path = "data/sales.db"
# :start and :end are the window's bounds in Unix seconds, [start, end).
query = """
SELECT ts, region, product, quantity, amount
FROM sales
WHERE ts >= :start AND ts < :end
ORDER BY ts, id
"""

[destinations.out]
type = "file"
path = "out/{name}.jsonl"

[limits]
memory_mib = 128
timeout_seconds = 30
"#
    )
}

const GITIGNORE: &str = "/target\n/state\n/out\n__pycache__/\n*.wasm\n";

fn rust_project(name: &str, today: i64) -> Vec<(String, String)> {
    let krate = name.replace('-', "_");
    let mut files = vec![
        (
            "Cargo.toml".to_string(),
            format!(
                r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib", "rlib"]

[dependencies]
jobhost-sdk = {{ path = "jobhost-sdk" }}

# A project of its own, even inside another workspace.
[workspace]
members = ["jobhost-sdk"]

[profile.release]
opt-level = "s"
lto = true
"#
            ),
        ),
        ("src/lib.rs".to_string(), RUST_REPORT.to_string()),
        (
            "job.toml".to_string(),
            job_config(
                name,
                &format!("target/wasm32-wasip2/release/{krate}.wasm"),
                today,
            ),
        ),
        (
            "justfile".to_string(),
            format!(
                "# Build the component: target/wasm32-wasip2/release/{krate}.wasm\n\
                 build:\n    cargo build --release --target wasm32-wasip2\n\n\
                 # Run the job for the last day that closed.\n\
                 run: build\n    jobhost run --config job.toml\n\n\
                 # The report's logic, natively.\n\
                 test:\n    cargo test\n"
            ),
        ),
        ("README.md".to_string(), readme(name, Lang::Rust)),
        (".gitignore".to_string(), GITIGNORE.to_string()),
        // The SDK's crate as it is (its manifest inherits nothing), with
        // the WIT its bindings are made from.
        ("jobhost-sdk/wit/report.wit".to_string(), WIT.to_string()),
    ];
    for (path, text) in RUST_SDK_CRATE {
        files.push((format!("jobhost-sdk/{path}"), (*text).to_string()));
    }
    for (path, text) in RUST_SDK {
        files.push((format!("jobhost-sdk/src/{path}"), vendored_rust(path, text)));
    }
    files
}

/// An SDK source as the project's copy needs it: no unit tests (they read
/// the repository's fixtures).
fn vendored_rust(path: &str, text: &str) -> String {
    match path {
        "lib.rs" => text.replace("#[cfg(test)]\nmod tests;\n", ""),
        _ => text.to_string(),
    }
}

fn python_project(name: &str, today: i64) -> Vec<(String, String)> {
    let mut files = vec![
        ("app.py".to_string(), PYTHON_REPORT.to_string()),
        ("test_app.py".to_string(), PYTHON_TEST.to_string()),
        ("wit/report.wit".to_string(), WIT.to_string()),
        (
            "job.toml".to_string(),
            job_config(name, &format!("{name}.wasm"), today),
        ),
        (
            "justfile".to_string(),
            format!(
                "# Build the component: {name}.wasm (needs componentize-py {COMPONENTIZE_PY}).\n\
                 # Keep `-p .` (where app.py is) when adding folders such as `-p vendor`.\n\
                 build:\n    componentize-py -d wit -w describing-reporter componentize app -p . -o {name}.wasm\n\n\
                 # Run the job for the last day that closed.\n\
                 run: build\n    jobhost run --config job.toml\n\n\
                 # The report's logic, natively.\n\
                 test:\n    python3 -m unittest\n"
            ),
        ),
        ("README.md".to_string(), readme(name, Lang::Python)),
        (".gitignore".to_string(), GITIGNORE.to_string()),
    ];
    for (path, text) in PYTHON_SDK {
        files.push((format!("jobhost/{path}"), (*text).to_string()));
    }
    files
}

/// The source file's extension of a JavaScript or TypeScript project.
fn js_ext(lang: Lang) -> &'static str {
    if lang == Lang::Ts { "ts" } else { "js" }
}

fn js_project(name: &str, lang: Lang, today: i64) -> Vec<(String, String)> {
    let ext = js_ext(lang);
    let bundle = format!(
        "esbuild app.{ext} --bundle --format=esm --platform=neutral --log-level=warning \
         --external:jobhost:* --alias:jobhost=./jobhost/src/index.js --outfile=build/app.js"
    );
    let componentize = format!(
        "componentize-js build/app.js -w wit -n describing-reporter -d http fetch-event -o {name}.wasm"
    );
    let register = "--import ./jobhost/src/testing/register.js";
    let test = if lang == Lang::Ts {
        format!(
            "esbuild test/*.test.ts --bundle --format=esm --platform=node --log-level=warning \
             --external:jobhost --external:jobhost/testing --external:jobhost:* \
             --outdir=build/test --out-extension:.js=.mjs && node {register} --test build/test/"
        )
    } else {
        format!("node {register} --test test/")
    };
    let check = if lang == Lang::Ts { "tsc -p . && " } else { "" };
    let mut package = serde_json::json!({
        "name": name,
        "private": true,
        "type": "module",
        "scripts": {
            "build": format!("{check}{bundle} && {componentize}"),
            "test": test,
        },
        "devDependencies": {
            "@bytecodealliance/componentize-js": COMPONENTIZE_JS,
            "esbuild": ESBUILD,
        },
    });
    if lang == Lang::Ts {
        package["devDependencies"]["typescript"] = serde_json::json!(TYPESCRIPT);
    }
    let (report, report_test) = if lang == Lang::Ts {
        (TS_REPORT, TS_TEST)
    } else {
        (JS_REPORT, JS_TEST)
    };
    let mut files = vec![
        (format!("app.{ext}"), report.to_string()),
        (format!("test/app.test.{ext}"), report_test.to_string()),
        ("wit/report.wit".to_string(), WIT.to_string()),
        (
            "package.json".to_string(),
            format!(
                "{}\n",
                serde_json::to_string_pretty(&package).unwrap_or_default()
            ),
        ),
        (
            "job.toml".to_string(),
            job_config(name, &format!("{name}.wasm"), today)
                .replace("memory_mib = 128", "memory_mib = 256"),
        ),
        ("README.md".to_string(), readme(name, lang)),
        (
            ".gitignore".to_string(),
            format!("{GITIGNORE}/node_modules\n/build\n"),
        ),
    ];
    if lang == Lang::Ts {
        files.push(("tsconfig.json".to_string(), TSCONFIG.to_string()));
    }
    for (path, text) in JS_SDK_PACKAGE {
        files.push((format!("jobhost/{path}"), (*text).to_string()));
    }
    for (path, text) in JS_SDK {
        files.push((format!("jobhost/src/{path}"), (*text).to_string()));
    }
    for (path, text) in JS_SDK_TESTING {
        files.push((format!("jobhost/src/testing/{path}"), (*text).to_string()));
    }
    files
}

fn readme(name: &str, lang: Lang) -> String {
    let (build, test, lang, sdk, wit, more) = match lang {
        Lang::Rust => (
            "cargo build --release --target wasm32-wasip2".to_string(),
            "cargo test",
            "Rust",
            "jobhost-sdk/",
            "jobhost-sdk/wit/report.wit",
            String::new(),
        ),
        Lang::Python => (
            format!(
                "python3 -m pip install componentize-py=={COMPONENTIZE_PY}\n\
                 componentize-py -d wit -w describing-reporter componentize app -p . -o {name}.wasm"
            ),
            "python3 -m unittest",
            "Python",
            "jobhost/",
            "wit/report.wit",
            format!(
                "\nPure-Python packages go into a folder of their own, passed with one more\n\
                 `-p`; keep `-p .` first, or componentize-py no longer finds `app`\n\
                 (`No module named 'app'`):\n\n\
                 ```sh\npython3 -m pip install --target vendor some-package\n\
                 componentize-py -d wit -w describing-reporter componentize app -p . -p vendor -o {name}.wasm\n```\n"
            ),
        ),
        Lang::Js | Lang::Ts => (
            "npm install\nnpm run build".to_string(),
            "npm test",
            if lang == Lang::Ts {
                "TypeScript"
            } else {
                "JavaScript"
            },
            "jobhost/",
            "wit/report.wit",
            format!(
                "\n`npm run build` bundles `app.{ext}` with the SDK (and any package it\n\
                 imports) into one module with esbuild, and makes it a component with\n\
                 componentize-js ({COMPONENTIZE_JS}, pinned in package.json with esbuild\n\
                 {ESBUILD}){checked}. `npm test` runs `test/` under node against a fake host\n\
                 (`jobhost/testing`). The component has no network, no files and no\n\
                 environment; `Date.now()` reads the run's clock.\n",
                ext = js_ext(lang),
                checked = if lang == Lang::Ts {
                    format!(", after `tsc` ({TYPESCRIPT}) checks the report's types")
                } else {
                    String::new()
                }
            ),
        ),
    };
    format!(
        "# {name}\n\n\
         A jobhost report in {lang}: once per day it totals the day's sales per\n\
         region from `data/sales.db` and sends one JSON message to `out/{name}.jsonl`.\n\n\
         ```sh\n{build}\njobhost run --config job.toml\n{test}\n```\n{more}\n\
         `{sdk}` is a copy of the jobhost SDK and `{wit}` the contract\n\
         the component is built against; both came with `jobhost new` and change\n\
         only with jobhost's version.\n"
    )
}

/// Writes `sales.db`: the same table as the repository's examples, two
/// weeks of sales up to `today` (the first second of the day, UTC), so the
/// last closed day has rows.
fn sample_data(dir: &Path, today: i64) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let start = today - 13 * 86_400;
    let end = today + 86_400;
    let db = dir.join("sales.db");
    let write = || -> rusqlite::Result<()> {
        let mut conn = rusqlite::Connection::open(&db)?;
        conn.execute_batch(
            "CREATE TABLE sales (
                id       INTEGER PRIMARY KEY,
                ts       INTEGER NOT NULL,
                region   TEXT    NOT NULL,
                product  TEXT    NOT NULL,
                quantity INTEGER NOT NULL,
                amount   REAL    NOT NULL
            );
            CREATE INDEX sales_by_ts ON sales (ts);",
        )?;
        let tx = conn.transaction()?;
        {
            let mut insert = tx.prepare(
                "INSERT INTO sales (ts, region, product, quantity, amount) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            const REGIONS: [&str; 4] = ["north", "south", "east", "west"];
            const PRODUCTS: [(&str, f64); 5] = [
                ("tea", 4.5),
                ("coffee", 6.0),
                ("cocoa", 5.25),
                ("juice", 3.75),
                ("water", 1.5),
            ];
            // A fixed sequence (no randomness): every project's data is alike.
            let mut i: i64 = 0;
            let mut ts = start;
            while ts < end {
                let region = REGIONS[usize::try_from(i % 4).unwrap_or(0)];
                let (product, price) = PRODUCTS[usize::try_from((i * 7) % 5).unwrap_or(0)];
                let quantity = 1 + (i * 13) % 4;
                #[allow(clippy::cast_precision_loss)] // small integers
                let amount = (price * quantity as f64 * 100.0).round() / 100.0;
                insert.execute(rusqlite::params![ts, region, product, quantity, amount])?;
                i += 1;
                ts += 1_800 + (i * 977) % 1_800;
            }
        }
        tx.commit()
    };
    write().map_err(std::io::Error::other)
}

const RUST_REPORT: &str = r#"//! A daily report: the day's sales per region, sent as one JSON message.

use std::collections::BTreeMap;

use jobhost_sdk::{Batch, Context, Error, Output, Report};

#[derive(Default)]
struct Sales;

impl Report for Sales {
    fn run(&mut self, ctx: &Context) -> Result<Output, Error> {
        let mut totals = BTreeMap::new();
        for batch in jobhost_sdk::open()?.batches() {
            add(&batch?, &mut totals)?;
        }
        if totals.values().any(|t| !t.is_finite()) {
            return Err(Error::invalid_data("the amounts do not add up to a number"));
        }
        let regions: Vec<String> = totals.iter().map(|(r, t)| format!("{}:{t:.2}", quoted(r))).collect();
        let json = format!("{{\"day\":{},\"regions\":{{{}}}}}", quoted(&ctx.window.label), regions.join(","));
        for destination in &ctx.destinations {
            jobhost_sdk::send(destination, &json, "application/json")?;
        }
        Ok(Output::new(format!("{} regions on {}", totals.len(), ctx.window.label)))
    }
}

/// Adds one batch's amounts to the totals per region.
fn add(batch: &Batch, totals: &mut BTreeMap<String, f64>) -> Result<(), Error> {
    let (regions, amounts) = (batch.texts("region")?, batch.reals("amount")?);
    for (region, amount) in regions.iter().zip(amounts.iter()) {
        if let (Some(region), Some(amount)) = (region, amount) {
            *totals.entry(region.to_string()).or_insert(0.0) += amount;
        }
    }
    Ok(())
}

/// `text` as a JSON string.
fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' | '\\' => out.extend(['\\', c]),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out + "\""
}

jobhost_sdk::export!(Sales);

#[cfg(test)]
mod tests {
    use super::*;
    use jobhost_sdk::testing::BatchBuilder;

    #[test]
    fn amounts_add_up_per_region_and_nulls_are_left_out() {
        let batch = BatchBuilder::new()
            .texts("region", [Some("north"), Some("south"), Some("north"), None])
            .reals("amount", [Some(1.5), Some(2.0), Some(3.0), Some(9.0)])
            .build();
        let mut totals = BTreeMap::new();
        add(&batch, &mut totals).unwrap();
        assert_eq!(totals.get("north"), Some(&4.5));
        assert_eq!(totals.get("south"), Some(&2.0));
        assert_eq!(totals.len(), 2);
    }
}
"#;

const PYTHON_REPORT: &str = r#""""A daily report: the day's sales per region, sent as one JSON message."""

import json

import jobhost


def add(batch, totals):
    """Adds one batch's amounts to the totals per region."""
    for region, amount in zip(batch.texts("region"), batch.reals("amount")):
        if region is not None and amount is not None:
            totals[region] = totals.get(region, 0.0) + amount


class Sales(jobhost.Report):
    def run(self, ctx):
        totals = {}
        for batch in jobhost.open().batches():
            add(batch, totals)
        regions = {region: round(total, 2) for region, total in sorted(totals.items())}
        message = json.dumps({"day": ctx.window.label, "regions": regions})
        for destination in ctx.destinations:
            jobhost.send(destination, message, "application/json")
        return jobhost.Output(f"{len(totals)} regions on {ctx.window.label}")


WitWorld = jobhost.export(Sales)
"#;

/// What `tsc -p .` checks in a TypeScript project: the report, strictly,
/// against the SDK's declarations (its tests are bundled by esbuild,
/// unchecked, as they need node's own types).
const TSCONFIG: &str = r#"{
  "compilerOptions": {
    "target": "ES2022",
    "module": "ES2022",
    "moduleResolution": "bundler",
    "strict": true,
    "noEmit": true,
    "skipLibCheck": true,
    "paths": {
      "jobhost": ["./jobhost/src/index"],
      "jobhost/testing": ["./jobhost/src/testing"]
    }
  },
  "include": ["app.ts"]
}
"#;

const JS_REPORT: &str = r#"// A daily report: the day's sales per region, sent as one JSON message.
import * as jobhost from 'jobhost';

/** Adds one batch's amounts to the totals per region. */
export function add(batch, totals) {
  const regions = batch.texts('region');
  const amounts = batch.reals('amount');
  regions.forEach((region, i) => {
    if (region !== null && amounts[i] !== null) {
      totals.set(region, (totals.get(region) ?? 0) + amounts[i]);
    }
  });
}

export class Sales extends jobhost.Report {
  run(ctx) {
    const totals = new Map();
    for (const batch of jobhost.open().batches()) {
      add(batch, totals);
    }
    const regions = Object.fromEntries(
      [...totals].sort(([a], [b]) => (a < b ? -1 : 1)).map(([r, t]) => [r, Math.round(t * 100) / 100]),
    );
    const message = JSON.stringify({ day: ctx.window.label, regions });
    for (const destination of ctx.destinations) {
      jobhost.send(destination, message, 'application/json');
    }
    return new jobhost.Output(`${totals.size} regions on ${ctx.window.label}`);
  }
}

export const { run, describe } = jobhost.exportReport(Sales);
"#;

const JS_TEST: &str = r#"// The report's logic, natively: npm test
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { batch, runReport } from 'jobhost/testing';

import { Sales, add } from '../app.js';

const COLUMNS = [
  ['region', 'text'],
  ['amount', 'real'],
];

test('amounts add up per region and NULLs are left out', () => {
  const totals = new Map();
  add(batch(COLUMNS, [
    { region: 'north', amount: 1.5 },
    { region: 'south', amount: 2.0 },
    { region: 'north', amount: 3.0 },
    { region: null, amount: 9.0 },
  ]), totals);
  assert.deepEqual(Object.fromEntries(totals), { north: 4.5, south: 2.0 });
});

test('the run sends one message per destination', async () => {
  const got = await runReport(Sales, {
    columns: COLUMNS,
    rows: [{ region: 'north', amount: 1.25 }],
    destinations: ['out'],
  });
  assert.equal(got.error, null);
  assert.equal(got.output.summary, '1 regions on 2026-11-08');
  assert.equal(new TextDecoder().decode(got.messages[0].body), '{"day":"2026-11-08","regions":{"north":1.25}}');
});
"#;

const TS_REPORT: &str = r#"// A daily report: the day's sales per region, sent as one JSON message.
import * as jobhost from 'jobhost';

/** Adds one batch's amounts to the totals per region. */
export function add(batch: jobhost.Batch, totals: Map<string, number>): void {
  const regions: (string | null)[] = batch.texts('region');
  const amounts: (number | null)[] = batch.reals('amount');
  regions.forEach((region, i) => {
    const amount = amounts[i];
    if (region !== null && amount !== null) {
      totals.set(region, (totals.get(region) ?? 0) + amount);
    }
  });
}

export class Sales extends jobhost.Report {
  run(ctx: jobhost.Context): jobhost.Output {
    const totals = new Map<string, number>();
    for (const batch of jobhost.open().batches()) {
      add(batch, totals);
    }
    const regions = Object.fromEntries(
      [...totals].sort(([a], [b]) => (a < b ? -1 : 1)).map(([r, t]) => [r, Math.round(t * 100) / 100]),
    );
    const message = JSON.stringify({ day: ctx.window.label, regions });
    for (const destination of ctx.destinations) {
      jobhost.send(destination, message, 'application/json');
    }
    return new jobhost.Output(`${totals.size} regions on ${ctx.window.label}`);
  }
}

export const { run, describe } = jobhost.exportReport(Sales);
"#;

const TS_TEST: &str = r#"// The report's logic, natively: npm test
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { batch, runReport } from 'jobhost/testing';

import { Sales, add } from '../app.ts';

const COLUMNS: [string, string][] = [
  ['region', 'text'],
  ['amount', 'real'],
];

test('amounts add up per region and NULLs are left out', () => {
  const totals = new Map<string, number>();
  add(batch(COLUMNS, [
    { region: 'north', amount: 1.5 },
    { region: 'south', amount: 2.0 },
    { region: 'north', amount: 3.0 },
    { region: null, amount: 9.0 },
  ]), totals);
  assert.deepEqual(Object.fromEntries(totals), { north: 4.5, south: 2.0 });
});

test('the run sends one message per destination', async () => {
  const got = await runReport(Sales, {
    columns: COLUMNS,
    rows: [{ region: 'north', amount: 1.25 }],
    destinations: ['out'],
  });
  assert.equal(got.error, null);
  assert.equal(got.output.summary, '1 regions on 2026-11-08');
  assert.equal(new TextDecoder().decode(got.messages[0].body), '{"day":"2026-11-08","regions":{"north":1.25}}');
});
"#;

const PYTHON_TEST: &str = r#""""The report's logic, natively: python3 -m unittest"""

import unittest

from jobhost import testing

import app


class AddTest(unittest.TestCase):
    def test_amounts_add_up_per_region_and_nulls_are_left_out(self):
        batch = testing.batch(region=["north", "south", "north", None], amount=[1.5, 2.0, 3.0, 9.0])
        totals = {}
        app.add(batch, totals)
        self.assertEqual(totals, {"north": 4.5, "south": 2.0})


if __name__ == "__main__":
    unittest.main()
"#;
