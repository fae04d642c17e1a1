//! Turning a PostgreSQL URL into a connection, for the claim store and for
//! a job's data source alike: libpq's TLS parameters (`sslmode`,
//! `sslrootcert`) read the way libpq reads them, the host's timeouts, a way
//! to cancel the connection's running statement, and errors that name the
//! store or the source (password hidden) and the fix.
//!
//! | `sslmode` | TLS | certificate checked |
//! |---|---|---|
//! | `disable` | never | - |
//! | `prefer` (default) | when the server offers it | no |
//! | `require` | always | no |
//! | `verify-ca` | always | chain to a trusted root |
//! | `verify-full` | always | chain, and the name matches the URL's host |
//!
//! Trusted roots are the PEM file `sslrootcert` names, or else the Mozilla
//! roots built into the binary. Client certificates are not supported.

use std::sync::Arc;
use std::time::Duration;

use postgres::config::SslMode;
use postgres::error::SqlState;
use postgres::{Client, NoTls};
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use super::support::describe;
use crate::core::error::{Error, Result};
use crate::store::PostgresUrl;

/// How long connecting may take before it is a failure.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long sent data may go unacknowledged before the connection counts as
/// dead (a database that vanished from the network fails a run in this
/// time rather than hanging it).
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

/// What the URL asks of TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tls {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

/// What a connection is for, as its messages name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The claim store (`store`, `--store`).
    Store,
    /// A job's data source (`[source] url`).
    Source,
}

impl Role {
    /// What the URL names, in messages.
    fn noun(self) -> &'static str {
        match self {
            Role::Store => "store",
            Role::Source => "data source",
        }
    }

    /// What a malformed URL is, in messages.
    fn subject(self) -> &'static str {
        match self {
            Role::Store => "store URL",
            Role::Source => "`source.url`",
        }
    }

    /// Where the user fixes the URL.
    fn key(self) -> &'static str {
        match self {
            Role::Store => "the store URL",
            Role::Source => "`source.url`",
        }
    }
}

/// Connects to the store at `url`.
///
/// # Errors
///
/// `Error::Input` for a malformed URL or TLS parameters; `Error::Store`
/// when the database cannot be reached or refuses the login.
pub fn connect(url: &PostgresUrl) -> Result<Client> {
    connect_as(url, Role::Store).map(|(client, _)| client)
}

/// Checks a URL's form and TLS parameters as [`connect_as`] reads them,
/// without connecting.
///
/// # Errors
///
/// `Error::Input` naming what is wrong.
pub fn check_url(url: &PostgresUrl, role: Role) -> Result<()> {
    config(url, role).map(drop)
}

/// Connects to the database at `url` for `role`; gives also what cancels
/// the connection's running statement from another thread.
///
/// # Errors
///
/// `Error::Input` for a malformed URL or TLS parameters; `Error::Store`
/// when the database cannot be reached or refuses the login.
pub fn connect_as(url: &PostgresUrl, role: Role) -> Result<(Client, Canceller)> {
    let (config, connector) = config(url, role)?;
    let connected = match &connector {
        Connector::Plain => config.connect(NoTls),
        Connector::Rustls(c) => config.connect(c.clone()),
    };
    let client = connected.map_err(|e| connect_error(url, &e, role))?;
    let canceller = Canceller {
        token: client.cancel_token(),
        connector,
    };
    Ok((client, canceller))
}

/// One line for a PostgreSQL error: the server's message with its code,
/// detail and hint, or the client's description of a connection problem.
pub fn error_line(e: &postgres::Error) -> String {
    describe(e)
}

/// How a connection speaks TLS.
#[derive(Clone)]
enum Connector {
    Plain,
    Rustls(tokio_postgres_rustls::MakeRustlsConnect),
}

/// Cancels the statement running on one connection, from any thread (the
/// PostgreSQL cancel request, sent over a connection of its own with the
/// same TLS settings).
#[derive(Clone)]
pub struct Canceller {
    token: postgres::CancelToken,
    connector: Connector,
}

impl Canceller {
    /// Asks the server to cancel the statement running now, if any.
    ///
    /// # Errors
    ///
    /// Why the request could not be sent.
    pub fn cancel(&self) -> std::result::Result<(), String> {
        let sent = match &self.connector {
            Connector::Plain => self.token.cancel_query(NoTls),
            Connector::Rustls(c) => self.token.cancel_query(c.clone()),
        };
        sent.map_err(|e| describe(&e))
    }
}

impl std::fmt::Debug for Canceller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Canceller")
    }
}

/// The client library's settings for `url`, and its TLS connector.
fn config(url: &PostgresUrl, role: Role) -> Result<(postgres::Config, Connector)> {
    let (rest, tls, root_cert) = split_tls_params(url, role)?;
    let mut config: postgres::Config = rest.parse().map_err(|e: postgres::Error| {
        Error::input(format!(
            "invalid {} `{url}`: {}; use postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
            role.subject(),
            describe(&e)
        ))
    })?;
    if config.get_application_name().is_none() {
        config.application_name("jobhost");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
    }
    config.keepalives(true);
    let connector = match tls {
        Tls::Disable => {
            config.ssl_mode(SslMode::Disable);
            Connector::Plain
        }
        _ => {
            config.ssl_mode(if tls == Tls::Prefer {
                SslMode::Prefer
            } else {
                SslMode::Require
            });
            Connector::Rustls(tokio_postgres_rustls::MakeRustlsConnect::new(
                client_config(url, tls, root_cert.as_deref(), role)?,
            ))
        }
    };
    Ok((config, connector))
}

/// Takes libpq's TLS parameters out of the URL (the client library knows
/// only some of them), returning the rest of the URL.
fn split_tls_params(url: &PostgresUrl, role: Role) -> Result<(String, Tls, Option<String>)> {
    let subject = role.subject();
    let full = url.secret();
    // The client library reads the user part up to the first `@` and the
    // query from the first `?` after it; read it the same way, so that a `?`
    // in a password can never hide or forge a parameter.
    let scheme_end = full.find("://").map_or(0, |i| i + 3);
    let after_user = full[scheme_end..]
        .find('@')
        .map_or(scheme_end, |i| scheme_end + i + 1);
    // The library matches the scheme case-sensitively.
    let scheme = full[..scheme_end].to_ascii_lowercase();
    let Some(q) = full[after_user..].find('?').map(|i| after_user + i) else {
        return Ok((
            format!("{scheme}{}", &full[scheme_end..]),
            Tls::Prefer,
            None,
        ));
    };
    let (base, query) = (&full[scheme_end..q], &full[q + 1..]);
    let mut tls = None;
    let mut root_cert = None;
    let mut kept = Vec::new();
    let decode = |text: &str, what: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8()
            .map(|v| v.into_owned())
            .map_err(|_| Error::input(format!("invalid {subject} `{url}`: a {what} is not UTF-8")))
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        // Matched as the library will read them: decoded.
        let (key, value) = (
            decode(key, "parameter name")?,
            decode(value, "parameter value")?,
        );
        match key.as_str() {
            "sslmode" => {
                let mode = match value.as_str() {
                    "disable" => Tls::Disable,
                    "prefer" => Tls::Prefer,
                    "require" => Tls::Require,
                    "verify-ca" => Tls::VerifyCa,
                    "verify-full" => Tls::VerifyFull,
                    other => {
                        return Err(Error::input(format!(
                            "invalid {subject} `{url}`: sslmode `{other}` is not supported; use \
                             disable, prefer, require, verify-ca or verify-full"
                        )));
                    }
                };
                if tls.is_some_and(|t| t != mode) {
                    return Err(Error::input(format!(
                        "invalid {subject} `{url}`: sslmode is given twice, differently; give it once"
                    )));
                }
                tls = Some(mode);
            }
            "sslrootcert" => root_cert = Some(value),
            "sslcert" | "sslkey" | "sslpassword" | "sslcrl" | "sslcrldir" => {
                return Err(Error::input(format!(
                    "invalid {subject} `{url}`: `{key}` is not supported (jobhost does not send \
                     client certificates); log in with a user and password"
                )));
            }
            _ => kept.push(pair),
        }
    }
    let mut tls = tls.unwrap_or(Tls::Prefer);
    // As libpq: `require` with a root certificate file checks the chain.
    if tls == Tls::Require && root_cert.is_some() {
        tls = Tls::VerifyCa;
    }
    // Any public certificate chains to a public root: checking the chain
    // alone is only worth something against a root of the user's own.
    if tls == Tls::VerifyCa && root_cert.as_deref().is_none_or(|r| r == "system") {
        return Err(Error::input(format!(
            "invalid {subject} `{url}`: sslmode=verify-ca needs sslrootcert=FILE naming the CA \
             that signed the server's certificate; with public roots use sslmode=verify-full"
        )));
    }
    let rest = if kept.is_empty() {
        format!("{scheme}{base}")
    } else {
        format!("{scheme}{base}?{}", kept.join("&"))
    };
    Ok((rest, tls, root_cert))
}

fn client_config(
    url: &PostgresUrl,
    tls: Tls,
    root_cert: Option<&str>,
    role: Role,
) -> Result<ClientConfig> {
    let noun = role.noun();
    // Named explicitly rather than taken from a process default, so no other
    // crate's choice of provider can change (or break) this one.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| {
            Error::Store(format!("cannot set up TLS for {noun} `{url}`").into()).because(e)
        })?;
    let verifier: Arc<dyn ServerCertVerifier> = match tls {
        Tls::Disable | Tls::Prefer | Tls::Require => Arc::new(Unverified(provider)),
        Tls::VerifyCa | Tls::VerifyFull => {
            let roots = roots(url, root_cert, role)?;
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| {
                    Error::input(format!("cannot use the roots of {noun} `{url}`")).because(e)
                })?;
            if tls == Tls::VerifyFull {
                webpki
            } else {
                Arc::new(ChainOnly(webpki))
            }
        }
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

fn roots(url: &PostgresUrl, root_cert: Option<&str>, role: Role) -> Result<RootCertStore> {
    let noun = role.noun();
    // `system`, as libpq 16 spells it: the public roots (here the Mozilla
    // roots built into the binary).
    let Some(path) = root_cert.filter(|r| *r != "system") else {
        return Ok(RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        });
    };
    let bad = |why: String| {
        Error::input(format!(
            "cannot read sslrootcert `{path}` of {noun} `{url}`: {why}; name a PEM file of CA \
             certificates"
        ))
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("it holds no certificate".into()));
    }
    let mut store = RootCertStore::empty();
    let (_, ignored) = store.add_parsable_certificates(certs);
    if store.is_empty() {
        return Err(bad(format!(
            "none of its {ignored} certificate(s) could be used"
        )));
    }
    Ok(store)
}

/// `sslmode=prefer` and `require`: encrypted, the certificate not checked
/// (as libpq does); signatures are still verified, so the session is with
/// whoever holds the certificate's key.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `sslmode=verify-ca`: the chain must lead to a trusted root; the name in
/// the certificate need not match the host.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn connect_error(url: &PostgresUrl, e: &postgres::Error, role: Role) -> Error {
    let why = describe(e);
    let (noun, key) = (role.noun(), role.key());
    let code = e.code();
    if code == Some(&SqlState::INVALID_PASSWORD)
        || code == Some(&SqlState::INVALID_AUTHORIZATION_SPECIFICATION)
    {
        Error::Store(
            format!("cannot log in to {noun} `{url}`: {why}; check the user and password in {key}")
                .into(),
        )
    } else if code == Some(&SqlState::INVALID_CATALOG_NAME) {
        Error::Store(
            format!(
                "cannot open {noun} `{url}`: {why}; create the database or fix its name in {key}"
            )
            .into(),
        )
    } else if e.as_db_error().is_some() {
        Error::Store(format!("cannot open {noun} `{url}`: {why}").into())
    } else if why.contains("password missing") {
        Error::Store(
            format!(
                "cannot log in to {noun} `{url}`: the server asks for a password and {key} has \
             none; add one (postgres://USER:${{PGPASSWORD}}@HOST/DATABASE)"
            )
            .into(),
        )
    } else if why.contains("certificate") || why.contains("TLS") || why.contains("tls") {
        Error::Store(
            format!(
                "cannot open {noun} `{url}` over TLS: {why}; check sslmode and sslrootcert in {key}"
            )
            .into(),
        )
    } else {
        Error::Store(format!(
            "cannot connect to {noun} `{url}`: {why}; check that PostgreSQL is running there and \
             that the URL's host and port are right"
        ).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(url: &str) -> Result<(String, Tls, Option<String>)> {
        split_tls_params(&PostgresUrl::new(url.to_string()), Role::Store)
    }

    #[test]
    fn tls_parameters_are_taken_out_of_the_url_and_the_rest_kept() {
        let (rest, tls, root) = split(
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=x",
        )
        .unwrap();
        assert_eq!(rest, "postgres://u@h/db?application_name=x");
        assert_eq!(tls, Tls::VerifyFull);
        assert_eq!(root.as_deref(), Some("/etc/ca.pem"));
        assert_eq!(split("postgres://u@h/db").unwrap().1, Tls::Prefer);
        assert_eq!(
            split("postgres://u@h/db?sslmode=disable").unwrap().0,
            "postgres://u@h/db"
        );
    }

    #[test]
    fn a_question_mark_in_the_password_neither_hides_nor_forges_a_parameter() {
        let (rest, tls, _) = split("postgres://u:pa?sslmode=disable@h/db?sslmode=require").unwrap();
        assert_eq!(tls, Tls::Require);
        assert_eq!(rest, "postgres://u:pa?sslmode=disable@h/db");
        let (_, tls, _) = split("postgres://u:pa?ss@h/db?ssl%6Dode=require").unwrap();
        assert_eq!(
            tls,
            Tls::Require,
            "an encoded key is the key the library reads"
        );
        assert_eq!(split("POSTGRES://u@h/db").unwrap().0, "postgres://u@h/db");
    }

    #[test]
    fn require_with_a_root_checks_the_chain_and_verify_ca_needs_a_root_of_its_own() {
        assert_eq!(
            split("postgres://u@h/db?sslmode=require&sslrootcert=ca.pem")
                .unwrap()
                .1,
            Tls::VerifyCa
        );
        for url in [
            "postgres://u@h/db?sslmode=verify-ca",
            "postgres://u@h/db?sslmode=verify-ca&sslrootcert=system",
        ] {
            let err = split(url).unwrap_err();
            assert!(err.to_string().contains("needs sslrootcert=FILE"), "{err}");
        }
        let err = split("postgres://u@h/db?sslmode=require&sslmode=disable").unwrap_err();
        assert!(err.to_string().contains("given twice"), "{err}");
    }

    #[test]
    fn unsupported_tls_parameters_are_refused_naming_them() {
        let err = split("postgres://u:pw@h/db?sslmode=allow").unwrap_err();
        assert!(matches!(err, Error::Input(_)));
        assert!(err.to_string().contains("sslmode `allow`"), "{err}");
        assert!(!err.to_string().contains("pw@"), "{err}");
        let err = split("postgres://u@h/db?sslcert=c.pem").unwrap_err();
        assert!(err.to_string().contains("client certificates"), "{err}");
    }

    #[test]
    fn a_root_certificate_file_that_is_not_pem_is_bad_input() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate").unwrap();
        let url = PostgresUrl::new("postgres://u@h/db".into());
        let err = roots(&url, path.to_str(), Role::Store).unwrap_err();
        assert!(matches!(err, Error::Input(_)), "{err}");
        assert!(err.to_string().contains("holds no certificate"), "{err}");
    }
}
