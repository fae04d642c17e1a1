//! Which certificate authorities an HTTPS destination trusts: the Mozilla
//! roots built into the binary (`roots = "web"`, the default) or the
//! operating system's (`roots = "system"`), and, on top of either, the
//! certificates of a PEM file the destination names (`ca_file`: a private
//! CA). Everything is read and checked when the job is set up, so a
//! missing or malformed file is bad input before anything is claimed,
//! never a failed delivery after the report was rendered.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::{self, PemObject, SectionKind};

/// Where a destination's trusted roots come from, before its `ca_file`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Roots {
    /// The Mozilla roots built into the binary: the same on every machine.
    #[default]
    Web,
    /// The operating system's trust store (on Linux the bundle
    /// `ca-certificates` keeps, or what `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR` name), read when the job is set up.
    System,
}

impl Roots {
    /// The roots `written` names in the config (`web`, `system`).
    pub fn named(written: &str) -> Option<Roots> {
        match written {
            "web" => Some(Roots::Web),
            "system" => Some(Roots::System),
            _ => None,
        }
    }
}

/// What an HTTPS destination trusts: its roots and its CA file's
/// certificates, loaded.
#[derive(Clone, PartialEq, Eq)]
pub struct Trust {
    roots: Roots,
    ca_file: Option<PathBuf>,
    /// Every trusted root: the roots', then the CA file's.
    certs: Arc<Vec<CertificateDer<'static>>>,
}

impl Trust {
    /// `roots`, plus the certificates in the PEM file `ca_file`.
    ///
    /// # Errors
    ///
    /// One line naming what is wrong and the fix, for the setting it
    /// concerns (see [`TrustError`]).
    pub fn load(roots: Roots, ca_file: Option<&Path>) -> Result<Trust, TrustError> {
        let mut certs = match roots {
            Roots::Web => webpki_root_certs::TLS_SERVER_ROOT_CERTS.to_vec(),
            Roots::System => system_roots()?,
        };
        if let Some(path) = ca_file {
            certs.extend(read_ca_file(path)?);
        }
        Ok(Trust {
            roots,
            ca_file: ca_file.map(Path::to_path_buf),
            certs: Arc::new(certs),
        })
    }

    /// The TLS settings of an agent that trusts exactly these roots.
    pub fn tls_config(&self) -> ureq::tls::TlsConfig {
        let certs = self
            .certs
            .iter()
            .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned());
        ureq::tls::TlsConfig::builder()
            .root_certs(ureq::tls::RootCerts::from(certs))
            .build()
    }

    /// What is trusted, in words: `the system's roots and `ca.pem``.
    pub fn describe(&self) -> String {
        let roots = match self.roots {
            Roots::Web => "the web roots built into jobhost",
            Roots::System => "this machine's system roots",
        };
        match &self.ca_file {
            Some(f) => format!("{roots} and `{}`", f.display()),
            None => roots.to_string(),
        }
    }
}

impl fmt::Debug for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Trust")
            .field("roots", &self.roots)
            .field("ca_file", &self.ca_file)
            .field("certificates", &self.certs.len())
            .finish()
    }
}

/// Why a destination's trust could not be loaded: which setting, and one
/// line on what is wrong with it and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustError {
    /// `tls.ca_file`.
    CaFile(String),
    /// `tls.roots`.
    Roots(String),
}

impl TrustError {
    /// The setting the error concerns, under the destination's `tls`.
    pub fn key(&self) -> &'static str {
        match self {
            TrustError::CaFile(_) => "ca_file",
            TrustError::Roots(_) => "roots",
        }
    }
}

impl fmt::Display for TrustError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrustError::CaFile(why) | TrustError::Roots(why) => f.write_str(why),
        }
    }
}

/// The operating system's roots.
fn system_roots() -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let found = rustls_native_certs::load_native_certs();
    if found.certs.is_empty() {
        let why = found
            .errors
            .first()
            .map_or_else(|| "none found".to_string(), |e| one_line(&e.to_string()));
        return Err(TrustError::Roots(format!(
            "`system` found no certificate authorities on this machine ({why}); install the \
             system's CA bundle (the `ca-certificates` package), point SSL_CERT_FILE at one, \
             or use `roots = \"web\"`"
        )));
    }
    Ok(found.certs)
}

/// The certificates of the PEM file at `path`, each checked to be usable as
/// a root.
fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let shown = path.display();
    let bad = |why: String| TrustError::CaFile(format!("`{shown}` {why}"));
    let bytes = std::fs::read(path).map_err(|e| {
        bad(format!(
            "cannot be read: {e}; point `ca_file` at the PEM file of the CA that signed the \
             endpoint's certificate"
        ))
    })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(bad(
            "is empty; it must hold the CA's certificate in PEM (a block from -----BEGIN \
             CERTIFICATE----- to -----END CERTIFICATE-----)"
                .to_string(),
        ));
    }
    let mut certs = Vec::new();
    let mut other = None;
    for section in <(SectionKind, Vec<u8>)>::pem_slice_iter(&bytes) {
        match section {
            Ok((SectionKind::Certificate, der)) => certs.push(CertificateDer::from(der)),
            Ok((kind, _)) => other = other.or(Some(kind)),
            Err(e) => {
                return Err(bad(format!(
                    "is not valid PEM ({}); it must hold the CA's certificate as -----BEGIN \
                     CERTIFICATE----- blocks",
                    pem_error(&e)
                )));
            }
        }
    }
    if certs.is_empty() {
        let what = match other {
            Some(SectionKind::Certificate) | None => {
                "holds no PEM certificate (a file in DER form can be converted with \
                 `openssl x509 -inform der -in FILE -out FILE.pem`)"
                    .to_string()
            }
            Some(kind) => format!("holds {} but no certificate", what_kind(kind)),
        };
        return Err(bad(format!(
            "{what}; point `ca_file` at the PEM file of the CA that signed the endpoint's \
             certificate"
        )));
    }
    for (n, cert) in certs.iter().enumerate() {
        let mut store = rustls::RootCertStore::empty();
        if let Err(e) = store.add(cert.clone()) {
            return Err(bad(format!(
                "holds a certificate that cannot be used as a root (block {} of {}: {}); \
                 export the CA's certificate again",
                n + 1,
                certs.len(),
                one_line(&e.to_string())
            )));
        }
    }
    Ok(certs)
}

/// What a PEM block that is not a certificate holds, in words.
fn what_kind(kind: SectionKind) -> &'static str {
    match kind {
        SectionKind::RsaPrivateKey | SectionKind::PrivateKey | SectionKind::EcPrivateKey => {
            "a private key"
        }
        SectionKind::PublicKey => "a public key",
        SectionKind::Crl => "a revocation list",
        SectionKind::Csr => "a certificate request",
        _ => "something else",
    }
}

/// A PEM parser's error in words.
fn pem_error(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a block has no -----END line".to_string(),
        pem::Error::IllegalSectionStart { .. } => "a -----BEGIN line is malformed".to_string(),
        pem::Error::Base64Decode(_) => "a block's contents are not base64".to_string(),
        other => one_line(&format!("{other:?}")),
    }
}

/// `text` on one line, escaped.
fn one_line(text: &str) -> String {
    crate::core::text::printable(&text.replace(['\n', '\r'], " ")).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "-----BEGIN CERTIFICATE-----";

    fn file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// A real root of the bundled set, as PEM.
    fn some_root_pem() -> String {
        use base64::Engine as _;
        let der = webpki_root_certs::TLS_SERVER_ROOT_CERTS[0].as_ref();
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = b64
            .as_bytes()
            .chunks(64)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        format!(
            "{HEADER}\n{}\n-----END CERTIFICATE-----\n",
            lines.join("\n")
        )
    }

    #[test]
    fn a_ca_file_adds_its_certificates_to_the_roots() {
        let dir = tempfile::tempdir().unwrap();
        let pem = some_root_pem();
        let ca = file(&dir, "ca.pem", format!("{pem}{pem}").as_bytes());
        let web = webpki_root_certs::TLS_SERVER_ROOT_CERTS.len();
        let t = Trust::load(Roots::Web, Some(&ca)).unwrap();
        assert_eq!(t.certs.len(), web + 2);
        assert!(t.describe().contains("ca.pem"), "{}", t.describe());
        assert_eq!(Trust::load(Roots::Web, None).unwrap().certs.len(), web);
    }

    #[test]
    fn a_bad_ca_file_is_one_line_naming_it_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nowhere.pem");
        let cases: Vec<(PathBuf, &str)> = vec![
            (missing, "cannot be read"),
            (file(&dir, "empty.pem", b""), "is empty"),
            (file(&dir, "blank.pem", b"\n \n"), "is empty"),
            (file(&dir, "text.pem", b"not a certificate\n"), "holds no PEM certificate"),
            (file(&dir, "der.pem", &[0x30, 0x82, 0x01, 0x0a, 0x02]), "holds no PEM certificate"),
            (
                file(
                    &dir,
                    "key.pem",
                    b"-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n",
                ),
                "holds a private key but no certificate",
            ),
            (
                file(&dir, "cut.pem", format!("{HEADER}\nMIIB\n").as_bytes()),
                "is not valid PEM",
            ),
            (
                file(
                    &dir,
                    "junk.pem",
                    format!("{HEADER}\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n").as_bytes(),
                ),
                "cannot be used as a root",
            ),
        ];
        for (path, want) in cases {
            let e = Trust::load(Roots::Web, Some(&path)).unwrap_err();
            let text = e.to_string();
            assert_eq!(e.key(), "ca_file", "{text}");
            assert!(text.contains(want), "{}: {text}", path.display());
            assert!(
                text.contains(&format!("`{}`", path.display())),
                "names the file: {text}"
            );
            assert!(!text.contains('\n'), "one line: {text}");
        }
    }
}
