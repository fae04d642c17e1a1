//! Secrets kept in files (`${file:PATH}`), as Kubernetes and systemd hand
//! them over: they reach the wire in every credential position and nothing
//! else, and a file kept loosely is refused before anything is claimed.
//! (The store's and a PostgreSQL source's URLs: `postgres` and
//! `pg_source`; the deploy recipes: `deploy`.)

use std::path::{Path, PathBuf};

use jobhost_tests::sink::{Reply, Sink};

use crate::harness::*;

const NOW: &str = "2026-11-09T00:05:00Z";
const TOKEN: &str = "tok-from-file-51c7a2";
const PING_ID: &str = "ping-from-file-9e04";
const MODEL_KEY: &str = "sk-from-file-d83b6f";
const MODEL_PATH: &str = "/v1/chat/completions";
const ANSWER: &str = r#"{"choices":[{"message":{"role":"assistant","content":"Quiet day."},"finish_reason":"stop"}]}"#;

/// Writes `text` to `dir/name` with `mode`.
fn secret(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// A job whose destination's URL and header, success ping and model key
/// are `${file:...}`s of the files in `secrets` (the ping's through the
/// variable `JOBHOST_TEST_SECRETS`, as systemd's `CREDENTIALS_DIRECTORY`).
fn job(dir: &Path, sink: &Sink, secrets: &Path) -> PathBuf {
    sales_db(dir, 300);
    let d = secrets.display();
    config(
        dir,
        &format!(
            r#"job = "daily-report"
component = "{component}"

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "http"
url = "{digest}?key=${{file:{d}/token}}"
headers = {{ Authorization = "Bearer ${{file:{d}/token}}" }}
tries = 1
timeout_seconds = 2

[ping]
success = "{ping}/${{file:${{JOBHOST_TEST_SECRETS}}/ping-id}}"

[digest]
base_url = "{base}"
model = "stub-model"
api_key = "${{file:{d}/model-key}}"
timeout_seconds = 2
cache_dir = "digests"
"#,
            component = guests().report.display(),
            digest = sink.url("/digest"),
            ping = sink.url("/ping"),
            base = sink.url("/v1"),
        ),
    )
}

fn run(cfg: &Path, store: &Path, secrets: &Path) -> Run {
    to_run(
        job_command(cfg, store, NOW)
            .env("JOBHOST_TEST_SECRETS", secrets)
            .output()
            .unwrap(),
    )
}

#[test]
fn secrets_in_files_reach_the_destination_the_ping_and_the_model_and_nothing_else() {
    let sink = Sink::start();
    sink.script(MODEL_PATH, &[Reply::Body(200, ANSWER)]);
    let dir = scratch();
    let secrets = dir.path().join("credentials");
    std::fs::create_dir(&secrets).unwrap();
    secret(
        &secrets,
        "token",
        &format!("{TOKEN}\nnot this line\n"),
        0o600,
    );
    // Mounted as Kubernetes mounts a Secret for a pod's fsGroup: used, and
    // said once.
    secret(&secrets, "ping-id", &format!("{PING_ID}\r\n"), 0o440);
    secret(&secrets, "model-key", MODEL_KEY, 0o400);
    let cfg = job(dir.path(), &sink, &secrets);
    let store = dir.path().join("s.db");
    let ran = run(&cfg, &store, &secrets);
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);

    let requests = sink.requests();
    let to = |prefix: &str| {
        requests
            .iter()
            .find(|q| q.path.starts_with(prefix))
            .unwrap_or_else(|| panic!("nothing reached {prefix}: {requests:?}"))
    };
    let delivered = to("/digest");
    assert_eq!(delivered.path, format!("/digest?key={TOKEN}"));
    assert_eq!(
        delivered.header("authorization"),
        Some(&*format!("Bearer {TOKEN}"))
    );
    assert_eq!(to("/ping").path, format!("/ping/{PING_ID}"));
    assert_eq!(
        to(MODEL_PATH).header("authorization"),
        Some(&*format!("Bearer {MODEL_KEY}"))
    );
    assert_eq!(
        ran.receipt()["digest"]["status"],
        "generated",
        "{}",
        ran.stdout
    );

    // One warning, for the file its group may read, naming it.
    let warnings: Vec<&str> = ran
        .stderr
        .lines()
        .filter(|l| l.starts_with("jobhost: warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", ran.stderr);
    assert!(warnings[0].contains("ping-id"), "{}", warnings[0]);
    assert!(warnings[0].contains("group"), "{}", warnings[0]);

    // The values went on the wire and nowhere else: not to the receipt, the
    // log, the history or the store's files.
    let shown = format!(
        "{}{}{}",
        ran.stdout,
        ran.stderr,
        jobhost(&["history", "--store", s(&store), "--json"]).stdout
    );
    for value in [TOKEN, PING_ID, MODEL_KEY] {
        assert!(!shown.contains(value), "{value} shown: {shown}");
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file()
                && path
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("s.db")
            {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
                    "{value} stored in {}",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn a_secret_file_kept_loosely_or_missing_is_refused_before_anything_is_claimed() {
    let sink = Sink::start();
    let dir = scratch();
    let secrets = dir.path().join("credentials");
    std::fs::create_dir(&secrets).unwrap();
    let token = secret(&secrets, "token", &format!("{TOKEN}\n"), 0o644);
    secret(&secrets, "ping-id", PING_ID, 0o600);
    secret(&secrets, "model-key", MODEL_KEY, 0o600);
    let cfg = job(dir.path(), &sink, &secrets);
    let store = dir.path().join("s.db");

    // Every user of the machine may read it.
    let refused = run(&cfg, &store, &secrets);
    assert_eq!(refused.code, 2, "{}{}", refused.stdout, refused.stderr);
    let said = format!("{}{}", refused.stdout, refused.stderr);
    assert!(said.contains("`destinations.digest.url`"), "{said}");
    assert!(said.contains(&*token.to_string_lossy()), "{said}");
    assert!(said.contains("mode 0644"), "{said}");
    assert!(said.contains("chmod o-rw"), "{said}");
    assert!(!said.contains(TOKEN), "{said}");

    // Missing: named, with what to do.
    std::fs::remove_file(&token).unwrap();
    let missing = run(&cfg, &store, &secrets);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    let said = format!("{}{}", missing.stdout, missing.stderr);
    assert!(said.contains("cannot be read"), "{said}");
    assert!(said.contains(&*token.to_string_lossy()), "{said}");

    // Nothing was claimed, sent or pinged.
    assert!(!store.exists(), "a store was made");
    assert!(sink.requests().is_empty(), "{:?}", sink.requests());

    // Mended (chmod 600), the same config runs.
    secret(&secrets, "token", &format!("{TOKEN}\n"), 0o600);
    sink.script(MODEL_PATH, &[Reply::Body(200, ANSWER)]);
    let ran = run(&cfg, &store, &secrets);
    assert_eq!(ran.event(), "ran", "{}", ran.stderr);
    assert!(!ran.stderr.contains("warning"), "{}", ran.stderr);
}
