//! HTTPS destinations behind a private CA: a sink on 127.0.0.1 whose
//! certificate a CA made in the test signed is delivered to when the
//! destination's `tls.ca_file` names that CA (or when `tls.roots =
//! "system"` and the system's roots hold it), and is refused without
//! either: certainly not sent, in words that name the setting to use. Bad
//! `tls` settings are refused in one line before anything is claimed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jobhost_tests::sink::Sink;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::effects::http_config;
use crate::harness::*;

const NOW: &str = "2026-11-09T00:05:00Z";

/// A certificate authority made for one test, and a server's TLS settings
/// with a certificate it signed for 127.0.0.1.
pub struct TestCa {
    /// The CA's certificate, PEM.
    pub pem: String,
    /// A server that presents the certificate the CA signed.
    pub server: Arc<rustls::ServerConfig>,
}

/// A fresh CA and a certificate it signed for 127.0.0.1.
pub fn test_ca() -> TestCa {
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "jobhost test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("CA key")).expect("CA");
    let key = KeyPair::generate().expect("server key");
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
    leaf.distinguished_name
        .push(DnType::CommonName, "jobhost test sink");
    leaf.is_ca = IsCa::ExplicitNoCa;
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = leaf.signed_by(&key, &ca).expect("server certificate");
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let server = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], key)
    .expect("server TLS settings");
    TestCa {
        pem: ca.pem(),
        server: Arc::new(server),
    }
}

/// One HTTP destination `digest` at `url`, sent once per run, with `extra`
/// lines (its `tls` table) after it.
fn digest_at(url: &str, extra: &str) -> String {
    format!(
        "[destinations.digest]\ntype = \"http\"\nurl = \"{url}\"\ntimeout_seconds = 5\n\
         tries = 1\ndelivery = \"at-most-once\"\n{extra}\n"
    )
}

/// `jobhost run` of `cfg` on a store of its own in `dir`, with extra
/// environment.
fn run(cfg: &Path, dir: &Path, env: &[(&str, &Path)]) -> (Run, PathBuf) {
    let store = dir.join("s.db");
    let mut cmd = job_command(cfg, &store, NOW);
    for (k, v) in env {
        cmd.env(k, v);
    }
    (to_run(cmd.output().expect("jobhost runs")), store)
}

/// The one error line on stderr.
fn error_line(run: &Run) -> &str {
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.starts_with("jobhost: error:"))
        .collect();
    assert_eq!(lines.len(), 1, "exactly one error line: {}", run.stderr);
    lines[0]
}

#[test]
fn an_endpoint_behind_a_private_ca_is_delivered_to_with_its_ca_file_and_refused_without() {
    let ca = test_ca();
    let sink = Sink::start_tls(ca.server.clone());
    let url = sink.url("/digest");

    // Without a tls table: the built-in web roots do not hold the test CA.
    let dir = scratch();
    let cfg = http_config(dir.path(), "", &digest_at(&url, ""));
    let (refused, store) = run(&cfg, dir.path(), &[]);
    let r = refused.receipt();
    assert_eq!(
        (refused.code, r["event"].as_str()),
        (1, Some("failed")),
        "{}",
        refused.stderr
    );
    let why = r["error"]["message"].as_str().unwrap_or_default();
    assert!(why.contains("certificate"), "{why}");
    assert!(
        why.contains("`destinations.digest.tls.ca_file`"),
        "names the setting: {why}"
    );
    // The handshake failed before any byte of the request: certainly not
    // sent, so even an at-most-once message waits for a retry instead of
    // abandoning the window.
    assert_eq!(r["error"]["retryable"], true, "{r}");
    assert_eq!(r["messages"][0]["status"], "pending", "{r}");
    assert!(sink.requests().is_empty(), "nothing reached the endpoint");
    assert_eq!(history(&store)[0]["state"], "PREPARED");

    // With the CA's file (relative to the config): delivered, once.
    let dir = scratch();
    std::fs::create_dir_all(dir.path().join("certs")).unwrap();
    std::fs::write(dir.path().join("certs/ca.pem"), &ca.pem).unwrap();
    let tls = "[destinations.digest.tls]\nca_file = \"certs/ca.pem\"\n";
    let cfg = http_config(dir.path(), "", &digest_at(&url, tls));
    let (ran, store) = run(&cfg, dir.path(), &[]);
    let r = ran.receipt();
    assert_eq!(
        (ran.code, r["event"].as_str()),
        (0, Some("ran")),
        "{}",
        ran.stderr
    );
    assert_eq!(r["messages"][0]["http_status"], 200, "{r}");
    let requests = sink.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].idempotency_key(),
        Some("daily-report:2026-11-08#1")
    );
    assert_eq!(history(&store)[0]["state"], "DONE");
}

#[test]
fn roots_system_trusts_what_the_machines_trust_store_holds() {
    let ca = test_ca();
    let sink = Sink::start_tls(ca.server.clone());
    let dir = scratch();
    // The system's roots as the environment names them: here, the test CA.
    let bundle = dir.path().join("system-bundle.pem");
    std::fs::write(&bundle, &ca.pem).unwrap();
    let tls = "[destinations.digest.tls]\nroots = \"system\"\n";
    let cfg = http_config(dir.path(), "", &digest_at(&sink.url("/digest"), tls));
    let (ran, store) = run(&cfg, dir.path(), &[("SSL_CERT_FILE", &bundle)]);
    let r = ran.receipt();
    assert_eq!(
        (ran.code, r["event"].as_str()),
        (0, Some("ran")),
        "{}",
        ran.stderr
    );
    assert_eq!(sink.requests().len(), 1);
    assert_eq!(history(&store)[0]["state"], "DONE");
}

#[test]
fn bad_tls_settings_are_refused_in_one_line_before_anything_is_claimed() {
    let dir = scratch();
    std::fs::write(dir.path().join("empty.pem"), "").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "ask ops for the CA\n").unwrap();
    std::fs::write(dir.path().join("nothing.pem"), "").unwrap();
    let https = "https://127.0.0.1:9/digest";
    let cases: Vec<(String, &str, &[&str])> = vec![
        (
            digest_at(
                https,
                "[destinations.digest.tls]\nca_file = \"missing.pem\"\n",
            ),
            "`destinations.digest.tls.ca_file`",
            &["missing.pem", "cannot be read"],
        ),
        (
            digest_at(
                https,
                "[destinations.digest.tls]\nca_file = \"empty.pem\"\n",
            ),
            "`destinations.digest.tls.ca_file`",
            &["empty.pem", "is empty", "BEGIN CERTIFICATE"],
        ),
        (
            digest_at(
                https,
                "[destinations.digest.tls]\nca_file = \"notes.txt\"\n",
            ),
            "`destinations.digest.tls.ca_file`",
            &["notes.txt", "holds no PEM certificate"],
        ),
        (
            digest_at(
                "http://127.0.0.1:9/digest",
                "[destinations.digest.tls]\nroots = \"web\"\n",
            ),
            "`destinations.digest.tls`",
            &["https://"],
        ),
        (
            digest_at(https, "[destinations.digest.tls]\nroots = \"os\"\n"),
            "`destinations.digest.tls.roots = \"os\"`",
            &["os", "web", "system"],
        ),
    ];
    for (destination, names, says) in cases {
        let cfg = http_config(dir.path(), "", &destination);
        let (refused, store) = run(&cfg, dir.path(), &[]);
        assert_eq!(refused.code, 2, "{}", refused.stderr);
        assert_eq!(refused.receipt()["event"], "failed");
        assert!(!refused.stderr.contains("panicked"), "{}", refused.stderr);
        let line = error_line(&refused);
        assert!(line.contains(names), "names the setting: {line}");
        for s in says {
            assert!(line.contains(s), "says {s}: {line}");
        }
        if store.is_file() {
            assert!(history(&store).is_empty(), "nothing was claimed");
        }
    }
    // The system's roots, where the machine has none.
    let cfg = http_config(
        dir.path(),
        "",
        &digest_at(https, "[destinations.digest.tls]\nroots = \"system\"\n"),
    );
    let (refused, _) = run(
        &cfg,
        dir.path(),
        &[
            ("SSL_CERT_FILE", &dir.path().join("nothing.pem")),
            ("SSL_CERT_DIR", &dir.path().join("no-such-dir")),
        ],
    );
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    let line = error_line(&refused);
    assert!(
        line.contains("`destinations.digest.tls.roots`") && line.contains("SSL_CERT_FILE"),
        "{line}"
    );
}
