//! The chain: a tamper-evident record of every decision the store makes
//! about a job. Each transaction that decides something (a claim, a
//! committed report, a delivery's outcome, DONE, FAILED, ABANDONED,
//! SKIPPED, WAITING, a rerun or retry, forget, pause, resume, prune)
//! appends an [`Entry`] to its job's chain, in the same transaction: the
//! entry's hash covers its job, its number, the previous entry's hash and
//! its content, so an entry edited, removed or moved breaks every link
//! after it, and [`super::verify`] compares what the entries say with the
//! rows. With a key (`[signing] key_file`, `jobhost keygen`), each entry's
//! hash is signed with Ed25519 and names the key's id, so a chain rewritten
//! by someone without the key does not verify either.
//!
//! The appends of one transaction are computed here ([`Chain`]) from each
//! job's last entry, read once the transaction held the job's chain (see
//! [`super::sql::Backend::begin_chained`]), and written with its commit.

use std::path::Path;
use std::sync::{Arc, RwLock};

use base64::Engine as _;
use jiff::Timestamp;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use sha2::{Digest as _, Sha256};

use crate::core::error::{Error, Result};

/// The `prev` of a chain's first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The largest entry the store writes. An entry binds digests, never
/// bodies: the largest is the report of a run that staged the most
/// messages `[limits] max_messages` allows (100,000, about 20 MB of facts);
/// a batch of windows is split into entries far below it.
pub const MOST_ENTRY_BYTES: usize = 64 << 20;

/// What one entry records: the kind of decision and what it bound. Fields a
/// kind does not use are left out of its text.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// `claim`, `claims`, `release`, `abandon`, `report`, `attempt`,
    /// `delivered`, `done`, `failed`, `skipped`, `waiting`, `forget`,
    /// `pause`, `resume`, `pruned`, `prune`.
    pub kind: String,
    /// The injected clock's instant when it was decided.
    pub at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<i64>,
    /// The window's state after this decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The state it had before, when the decision ended one (a takeover,
    /// a retry, a rerun).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// `sha256:<hex>` of the component that runs the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    /// `sha256:<hex>` of the committed report's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// `sha256:<hex>` of the run's journal as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<String>,
    /// The fingerprint of the source's rows the run read (as `runs.inputs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inputs: Option<String>,
    /// The messages a report staged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<MessageFact>,
    /// What became of messages: delivered (with the destination's answer),
    /// failed, abandoned, or pending again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outcomes: Vec<Outcome>,
    /// `sha256:<hex>` of the error a failure recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Why this revision was made (a rerun's reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The audit line written with this decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditFact>,
    /// The revision a rerun or a forget archived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<ArchivedFact>,
    /// The windows of a decision about several (`claims`, `release`,
    /// `skipped`, `pruned`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowFact>,
}

/// A staged message as an entry binds it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MessageFact {
    pub seq: u32,
    pub destination: String,
    pub idempotency_key: String,
    /// `sha256:<hex>` of the exact bytes to deliver.
    pub body: String,
}

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    pub seq: u32,
    /// `PENDING`, `DELIVERED`, `FAILED` or `ABANDONED`.
    pub state: String,
    /// The destination's answer (`http 201`, `appended`, the error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

/// An audit line as an entry binds it (its `at` is the store's clock).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AuditFact {
    pub id: i64,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_state: Option<String>,
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    pub by: String,
}

/// A revision archived by a rerun or a forget.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ArchivedFact {
    pub revision: u32,
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
}

/// One window of a decision about several.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WindowFact {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<i64>,
}

impl Entry {
    /// An entry of `kind` at `at`, about window `key` if any.
    pub fn new(kind: &str, at: Timestamp, key: Option<&str>) -> Entry {
        Entry {
            kind: kind.to_string(),
            at: at.to_string(),
            key: key.map(str::to_string),
            ..Entry::default()
        }
    }

    /// The entry's text, as hashed and stored.
    ///
    /// # Errors
    ///
    /// Only for an entry larger than [`MOST_ENTRY_BYTES`].
    pub fn text(&self) -> Result<String> {
        let text = serde_json::to_string(self)
            .map_err(|e| Error::host(format!("cannot write a chain entry: {e}")))?;
        if text.len() > MOST_ENTRY_BYTES {
            return Err(Error::host(format!(
                "a chain entry of {} bytes is larger than the {} MiB one may be",
                text.len(),
                MOST_ENTRY_BYTES >> 20
            )));
        }
        Ok(text)
    }
}

/// `sha256:<hex>` of `bytes`, as entries bind reports, journals, bodies and
/// errors.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// One stored entry: its place in its job's chain, its text and what seals
/// it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Link {
    pub job: String,
    pub seq: i64,
    /// The entry's kind and window, as in its text (columns of their own,
    /// for reading a window's entries).
    pub kind: String,
    pub key: Option<String>,
    /// The entry's text (an [`Entry`] as JSON).
    pub entry: String,
    /// The previous entry's hash ([`GENESIS`] for the first).
    pub prev: String,
    /// [`hash_of`] the above.
    pub hash: String,
    /// The id of the key that signed it, if one did.
    pub key_id: Option<String>,
    /// Base64 Ed25519 signature over [`signed_text`] of the hash.
    pub signature: Option<String>,
}

impl Link {
    /// The entry its text holds (`None` when the text does not parse).
    pub fn parsed(&self) -> Option<Entry> {
        serde_json::from_str(&self.entry).ok()
    }
}

/// The hash of entry `seq` of `job`'s chain, after `prev`, with `entry` as
/// its text: lowercase hex SHA-256 over the four, each ended by a NUL.
pub fn hash_of(job: &str, seq: i64, prev: &str, entry: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"jobhost-chain-1\0");
    for part in [job.as_bytes(), seq.to_string().as_bytes(), prev.as_bytes()] {
        h.update(part);
        h.update(b"\0");
    }
    h.update(entry.as_bytes());
    hex::encode(h.finalize())
}

/// What a key signs for an entry: its hash, behind a label no message
/// signature starts with.
pub fn signed_text(hash: &str) -> Vec<u8> {
    format!("jobhost-entry-1\n{hash}").into_bytes()
}

/// What a key signs for a message a destination receives: the key's id,
/// the message's idempotency key, its destination, its body's digest and
/// the hash of the entry that committed it, one per line.
pub fn message_text(
    key_id: &str,
    idempotency_key: &str,
    destination: &str,
    body: &str,
    entry: &str,
) -> Vec<u8> {
    format!("jobhost-message-1\n{key_id}\n{idempotency_key}\n{destination}\n{body}\n{entry}")
        .into_bytes()
}

/// What a delivered message carries to prove where it comes from: the
/// `Jobhost-Signature` header of an HTTP delivery, the `signature` object
/// of a file destination's line. Its text is `name=value` pairs joined by
/// `; `, each value percent-encoded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MessageSignature {
    pub key_id: String,
    pub idempotency_key: String,
    pub destination: String,
    /// `sha256:<hex>` of the body.
    pub body: String,
    /// The hash of the chain entry that committed the message.
    pub entry: String,
    /// Base64 Ed25519 signature over [`message_text`] of the above.
    pub signature: String,
}

/// The characters a header value keeps as they are.
const HEADER_SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b':')
    .remove(b'#')
    .remove(b'+')
    .remove(b'/')
    .remove(b'=');

impl MessageSignature {
    /// `signer`'s signature of a message with `idempotency_key` for
    /// `destination`, of `body`, committed by entry `entry`.
    pub fn sign(
        signer: &Signer,
        idempotency_key: &str,
        destination: &str,
        body: &[u8],
        entry: &str,
    ) -> MessageSignature {
        let body = digest(body);
        let signature = signer.sign(&message_text(
            signer.id(),
            idempotency_key,
            destination,
            &body,
            entry,
        ));
        MessageSignature {
            key_id: signer.id().to_string(),
            idempotency_key: idempotency_key.to_string(),
            destination: destination.to_string(),
            body,
            entry: entry.to_string(),
            signature,
        }
    }

    /// The header's text.
    pub fn to_header(&self) -> String {
        let enc = |v: &str| percent_encoding::utf8_percent_encode(v, HEADER_SET).to_string();
        format!(
            "v=1; key_id={}; idempotency_key={}; destination={}; body={}; entry={}; signature={}",
            enc(&self.key_id),
            enc(&self.idempotency_key),
            enc(&self.destination),
            enc(&self.body),
            enc(&self.entry),
            enc(&self.signature)
        )
    }

    /// Reads a header's text.
    ///
    /// # Errors
    ///
    /// `Error::Input` saying which field is missing or not understood.
    pub fn from_header(text: &str) -> Result<MessageSignature> {
        let mut fields = std::collections::BTreeMap::new();
        for part in text.split(';') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (name, value) = part.split_once('=').ok_or_else(|| {
                Error::input(format!(
                    "the signature has a part without `=`: `{}`; pass the whole                      Jobhost-Signature header's value",
                    crate::core::text::printable(&crate::core::text::echoed(part, 40))
                ))
            })?;
            let value = percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .map_err(|_| Error::input(format!("the signature's `{name}` is not UTF-8")))?;
            fields.insert(name.to_string(), value.into_owned());
        }
        if fields.get("v").map(String::as_str) != Some("1") {
            return Err(Error::input(
                "the signature is not of version 1 (`v=1; key_id=...`); pass the whole                  Jobhost-Signature header's value",
            ));
        }
        let mut take = |name: &str| {
            fields.remove(name).ok_or_else(|| {
                Error::input(format!(
                    "the signature has no `{name}`; pass the whole Jobhost-Signature header's                      value"
                ))
            })
        };
        Ok(MessageSignature {
            key_id: take("key_id")?,
            idempotency_key: take("idempotency_key")?,
            destination: take("destination")?,
            body: take("body")?,
            entry: take("entry")?,
            signature: take("signature")?,
        })
    }

    /// Whether this signature holds for `body` under `key`; why not, if not.
    pub fn check(&self, key: &PublicKey, body: &[u8]) -> std::result::Result<(), String> {
        if key.id() != self.key_id {
            return Err(format!(
                "it is signed by key {}, and the public key given is key {}",
                self.key_id,
                key.id()
            ));
        }
        let actual = digest(body);
        if actual != self.body {
            return Err(format!(
                "the body is not the one signed (its digest is {actual}, the signature's {})",
                self.body
            ));
        }
        let text = message_text(
            &self.key_id,
            &self.idempotency_key,
            &self.destination,
            &self.body,
            &self.entry,
        );
        if key.verifies(&text, &self.signature) {
            Ok(())
        } else {
            Err("the signature does not verify: a field of it was changed".to_string())
        }
    }
}

/// A job's chain as a transaction found it when it began (and locked it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub job: String,
    pub seq: i64,
    pub hash: String,
}

/// The entries one transaction appends, computed from the heads it locked.
pub struct Chain {
    heads: Vec<Head>,
    links: Vec<Link>,
    signer: Option<Arc<Signer>>,
    /// False only for a store opened without its chain (the store bench's
    /// side-by-side case).
    on: bool,
}

impl Chain {
    pub(crate) fn new(heads: Vec<Head>, signer: Option<Arc<Signer>>, on: bool) -> Chain {
        Chain {
            heads,
            links: Vec::new(),
            signer,
            on,
        }
    }

    /// Appends `entry` to `job`'s chain; returns its hash (none when the
    /// store keeps no chain).
    ///
    /// # Errors
    ///
    /// A job whose head this transaction did not lock (a mistake in a
    /// script), or an entry too large.
    pub fn append(&mut self, job: &str, entry: &Entry) -> Result<Option<String>> {
        if !self.on {
            return Ok(None);
        }
        let Some(head) = self.heads.iter_mut().find(|h| h.job == job) else {
            return Err(Error::host(format!(
                "a transaction appended to the chain of job `{job}` without locking it"
            )));
        };
        let text = entry.text()?;
        let seq = head.seq + 1;
        let hash = hash_of(job, seq, &head.hash, &text);
        let (key_id, signature) = match &self.signer {
            Some(s) => (Some(s.id().to_string()), Some(s.sign(&signed_text(&hash)))),
            None => (None, None),
        };
        self.links.push(Link {
            job: job.to_string(),
            seq,
            kind: entry.kind.clone(),
            key: entry.key.clone(),
            entry: text,
            prev: std::mem::replace(&mut head.hash, hash.clone()),
            hash: hash.clone(),
            key_id,
            signature,
        });
        head.seq = seq;
        Ok(Some(hash))
    }

    /// The entries appended, in order.
    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// The hash of the last entry appended, if any.
    pub fn last(&self) -> Option<String> {
        self.links.last().map(|l| l.hash.clone())
    }
}

/// The key this process signs entries and messages with, if any (set once
/// by the command from `[signing] key_file` or `$JOBHOST_SIGNING_KEY`).
static SIGNER: RwLock<Option<Arc<Signer>>> = RwLock::new(None);

/// Sets the key this process signs with (`None`: entries are kept unsigned).
pub fn sign_with(signer: Option<Arc<Signer>>) {
    let mut held = SIGNER
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *held = signer;
}

/// The key this process signs with, if any.
pub fn signer() -> Option<Arc<Signer>> {
    SIGNER
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// The environment variable naming a signing key file for commands whose
/// config names none (an operator's verbs given only `--store`).
pub const SIGNING_KEY_VAR: &str = "JOBHOST_SIGNING_KEY";

/// The key files this process signs with, by path, as loaded (a daemon
/// reads its job files again at every wake-up).
static LOADED: std::sync::Mutex<Vec<(std::path::PathBuf, Arc<Signer>)>> =
    std::sync::Mutex::new(Vec::new());

/// Makes the key in `path` the one this process signs with.
///
/// # Errors
///
/// `Error::Input` naming the file when it cannot be used, or when another
/// key file of this process (another job's) holds another key: one process
/// signs with one key.
pub fn sign_with_file(path: &Path) -> Result<()> {
    let mut loaded = LOADED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let signer = match loaded.iter().find(|(p, _)| p == path) {
        Some((_, s)) => s.clone(),
        None => {
            let s = Arc::new(Signer::load(path)?);
            if let Some((other, o)) = loaded.iter().find(|(_, o)| o.id() != s.id()) {
                return Err(Error::input(format!(
                    "signing key `{}` (key {}) is not the key `{}` (key {}) another job of this                      process signs with: one process signs with one key; name the same                      `[signing] key_file` in every job it runs",
                    path.display(),
                    s.id(),
                    other.display(),
                    o.id()
                )));
            }
            loaded.push((path.to_path_buf(), s.clone()));
            s
        }
    };
    sign_with(Some(signer));
    Ok(())
}

/// Signs with the key `$JOBHOST_SIGNING_KEY` names, if it names one.
///
/// # Errors
///
/// `Error::Input` naming the variable and the file when it cannot be used.
pub fn sign_with_env() -> Result<()> {
    match std::env::var_os(SIGNING_KEY_VAR) {
        Some(p) if !p.is_empty() => sign_with_file(Path::new(&p))
            .map_err(|e| Error::input(format!("${SIGNING_KEY_VAR}: {e}"))),
        _ => Ok(()),
    }
}

/// An Ed25519 key that signs entries and messages.
pub struct Signer {
    pair: Ed25519KeyPair,
    id: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("id", &self.id).finish()
    }
}

/// The id of a public key: the first 16 hex digits of its SHA-256.
fn key_id(public: &[u8]) -> String {
    hex::encode(&Sha256::digest(public)[..8])
}

/// The DER prefix of an Ed25519 `SubjectPublicKeyInfo`, before the key's 32
/// bytes.
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(chunk));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The DER inside the first PEM block labelled `label` of `text`.
fn unpem(text: &str, label: &str) -> Option<Vec<u8>> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    let body: String = text[start..stop]
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

impl Signer {
    /// A new key, as the PKCS#8 PEM text `jobhost keygen` writes.
    ///
    /// # Errors
    ///
    /// Only when the system's random source fails.
    pub fn generate() -> Result<String> {
        let rng = ring::rand::SystemRandom::new();
        let doc = Ed25519KeyPair::generate_pkcs8(&rng)
            .map_err(|_| Error::host("cannot make a key: the system's random source failed"))?;
        Ok(pem("PRIVATE KEY", doc.as_ref()))
    }

    /// The key in PKCS#8 PEM `text` (as `jobhost keygen` or `openssl
    /// genpkey -algorithm ed25519` write it); `from` names it in errors.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming `from` for anything but an Ed25519 private key.
    pub fn from_pem(text: &str, from: &str) -> Result<Signer> {
        let der = unpem(text, "PRIVATE KEY").ok_or_else(|| {
            Error::input(format!(
                "signing key `{from}` is not a PEM private key (-----BEGIN PRIVATE KEY-----); \
                 make one with `jobhost keygen --out FILE`"
            ))
        })?;
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&der).map_err(|e| {
            Error::input(format!(
                "signing key `{from}` is not an Ed25519 key ({e}); make one with `jobhost keygen \
                 --out FILE`"
            ))
        })?;
        let id = key_id(pair.public_key().as_ref());
        Ok(Signer { pair, id })
    }

    /// The key in file `path`, which only its owner (and group) may read.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file: missing, readable by everyone, or
    /// not an Ed25519 private key.
    pub fn load(path: &Path) -> Result<Signer> {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| {
            Error::input(format!(
                "cannot read signing key `{shown}`: {e}; make one with `jobhost keygen --out {shown}`"
            ))
        })?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            if meta.permissions().mode() & 0o004 != 0 {
                return Err(Error::input(format!(
                    "signing key `{shown}` is readable by every user of the machine; `chmod 600 \
                     {shown}` (and make a new key if others may have read it)"
                )));
            }
        }
        if meta.len() > 64 * 1024 {
            return Err(Error::input(format!(
                "signing key `{shown}` has {} bytes, far more than a key; name the key file",
                meta.len()
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::input(format!("cannot read signing key `{shown}`: {e}")))?;
        Signer::from_pem(&text, &shown.to_string())
    }

    /// The key's id, named by every entry and message it signs.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The public key, as a PEM `SubjectPublicKeyInfo` (what `jobhost
    /// verify --public-key` and a recipient read).
    pub fn public_pem(&self) -> String {
        let mut der = SPKI_PREFIX.to_vec();
        der.extend_from_slice(self.pair.public_key().as_ref());
        pem("PUBLIC KEY", &der)
    }

    /// A base64 signature over `message`.
    pub fn sign(&self, message: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.pair.sign(message).as_ref())
    }
}

/// A public key that checks signatures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicKey {
    raw: Vec<u8>,
    id: String,
}

impl PublicKey {
    /// The key in PEM `text` (`-----BEGIN PUBLIC KEY-----`); `from` names it
    /// in errors.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming `from` for anything but an Ed25519 public key.
    pub fn from_pem(text: &str, from: &str) -> Result<PublicKey> {
        let bad = || {
            Error::input(format!(
                "`{from}` is not an Ed25519 public key (-----BEGIN PUBLIC KEY-----); `jobhost \
                 keygen` writes one beside the key, as FILE.pub"
            ))
        };
        let der = unpem(text, "PUBLIC KEY").ok_or_else(bad)?;
        let raw = der.strip_prefix(&SPKI_PREFIX[..]).ok_or_else(bad)?;
        if raw.len() != 32 {
            return Err(bad());
        }
        Ok(PublicKey {
            id: key_id(raw),
            raw: raw.to_vec(),
        })
    }

    /// The public key in file `path`.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file when it cannot be read or is not an
    /// Ed25519 public key.
    pub fn load(path: &Path) -> Result<PublicKey> {
        let shown = path.display().to_string();
        let meta = std::fs::metadata(path)
            .map_err(|e| Error::input(format!("cannot read public key `{shown}`: {e}")))?;
        if meta.len() > 64 * 1024 {
            return Err(Error::input(format!(
                "public key `{shown}` has {} bytes, far more than a key",
                meta.len()
            )));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::input(format!("cannot read public key `{shown}`: {e}")))?;
        PublicKey::from_pem(&text, &shown)
    }

    /// The key's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether `signature` (base64) is this key's over `message`.
    pub fn verifies(&self, message: &[u8], signature: &str) -> bool {
        let Ok(sig) = base64::engine::general_purpose::STANDARD.decode(signature.trim()) else {
            return false;
        };
        UnparsedPublicKey::new(&ED25519, &self.raw)
            .verify(message, &sig)
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heads(job: &str) -> Vec<Head> {
        vec![Head {
            job: job.into(),
            seq: 0,
            hash: GENESIS.into(),
        }]
    }

    #[test]
    fn appends_link_each_entry_to_the_one_before() {
        let mut chain = Chain::new(heads("j"), None, true);
        let at = Timestamp::UNIX_EPOCH;
        let first = chain
            .append("j", &Entry::new("claim", at, Some("j:1")))
            .unwrap()
            .expect("a hash");
        let second = chain
            .append("j", &Entry::new("report", at, Some("j:1")))
            .unwrap()
            .expect("a hash");
        let links = chain.links();
        assert_eq!((links[0].seq, links[1].seq), (1, 2));
        assert_eq!(links[0].prev, GENESIS);
        assert_eq!(links[1].prev, first);
        assert_eq!(
            second,
            hash_of("j", 2, &first, &links[1].entry),
            "the hash covers the job, number, previous hash and text"
        );
        assert_ne!(
            hash_of("j", 2, &first, &links[1].entry),
            hash_of("k", 2, &first, &links[1].entry)
        );
        assert!(
            chain
                .append("other", &Entry::new("claim", at, None))
                .is_err()
        );
    }

    #[test]
    fn a_signature_verifies_with_the_public_key_only_for_what_was_signed() {
        let signer = Signer::from_pem(&Signer::generate().unwrap(), "k").unwrap();
        let public = PublicKey::from_pem(&signer.public_pem(), "k.pub").unwrap();
        assert_eq!(public.id(), signer.id());
        let sig = signer.sign(b"hello");
        assert!(public.verifies(b"hello", &sig));
        assert!(!public.verifies(b"hellp", &sig));
        assert!(!public.verifies(b"hello", "not base64!"));
        let other = Signer::from_pem(&Signer::generate().unwrap(), "o").unwrap();
        assert_ne!(other.id(), signer.id());
        assert!(
            !PublicKey::from_pem(&other.public_pem(), "o")
                .unwrap()
                .verifies(b"hello", &sig)
        );
        assert!(Signer::from_pem(&signer.public_pem(), "wrong").is_err());
        assert!(PublicKey::from_pem("nonsense", "x").is_err());
    }

    #[test]
    fn a_message_signature_reads_back_from_its_header_and_checks_its_body() {
        let signer = Signer::from_pem(&Signer::generate().unwrap(), "k").unwrap();
        let public = PublicKey::from_pem(&signer.public_pem(), "k.pub").unwrap();
        let sig = MessageSignature::sign(&signer, "j:2026-11-08#1", "team; chat", b"{}", "ab12");
        let back = MessageSignature::from_header(&sig.to_header()).unwrap();
        assert_eq!(back, sig);
        assert_eq!(back.check(&public, b"{}"), Ok(()));
        assert!(
            back.check(&public, b"{ }")
                .unwrap_err()
                .contains("not the one signed")
        );
        let mut moved = back.clone();
        moved.destination = "elsewhere".into();
        assert!(
            moved
                .check(&public, b"{}")
                .unwrap_err()
                .contains("does not verify")
        );
        assert!(MessageSignature::from_header("v=1; key_id=x").is_err());
    }

    #[test]
    fn the_report_of_a_run_with_the_most_messages_a_config_allows_is_one_entry() {
        let key = "a-job-with-a-long-name:2026-11-08T00:00:00+01:00";
        let e = Entry {
            messages: (1..=100_000)
                .map(|seq| MessageFact {
                    seq,
                    destination: "a-destination-with-a-long-name".into(),
                    idempotency_key: format!("{key}~r12#{seq}"),
                    body: digest(&seq.to_le_bytes()),
                })
                .collect(),
            ..Entry::new("report", Timestamp::UNIX_EPOCH, Some(key))
        };
        assert!(e.text().is_ok());
    }

    #[test]
    fn an_entry_leaves_out_what_its_kind_does_not_use() {
        let e = Entry::new("pause", Timestamp::UNIX_EPOCH, None);
        assert_eq!(
            e.text().unwrap(),
            r#"{"kind":"pause","at":"1970-01-01T00:00:00Z"}"#
        );
        let back: Entry = serde_json::from_str(&e.text().unwrap()).unwrap();
        assert_eq!(back, e);
    }
}
