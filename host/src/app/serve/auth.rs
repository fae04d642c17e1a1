//! Who may read the dashboard and who may act on it: bearer tokens by
//! name and role (`--tokens-file`, and `--token-file` as one `read` token),
//! browser sessions made by signing in with one, and the check that a form
//! was sent from the dashboard's own pages.
//!
//! Cross-site requests: the JSON API under `/api/` takes only a bearer
//! token in the `Authorization` header, which a browser never adds on its
//! own, so another site cannot make a signed-in browser call it. Forms
//! take the session cookie, which is `SameSite=Strict` (a browser sends it
//! only with requests started from this site) and `HttpOnly`, and every
//! form POST must carry an `Origin` naming this server (the `Host` it was
//! asked as) and, when the browser sends one, `Sec-Fetch-Site:
//! same-origin`: two ports of one machine are one site to a browser, so
//! the origin check is what refuses a page served from another port.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::core::error::{Error, Result};

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read every page, the JSON twins and `/metrics`.
    Read,
    /// Also act: run, rerun, retry, forget, backfill, pause and resume.
    Operate,
}

impl Role {
    /// `read` or `operate`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Operate => "operate",
        }
    }
}

/// One token the server accepts, known by the SHA-256 of its text.
#[derive(Debug, Clone)]
pub struct Token {
    /// Its name: who the audit lines say acted.
    pub name: String,
    /// What it may do.
    pub role: Role,
    digest: [u8; 32],
}

/// The tokens a server accepts; none: every request is answered without
/// one (a loopback address, or `--insecure-no-auth`).
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    tokens: Vec<Token>,
}

/// The most lines a tokens file may hold.
const MAX_TOKENS: usize = 1000;

/// The name `--token-file`'s token is known by.
pub const TOKEN_FILE_NAME: &str = "token-file";

impl Tokens {
    /// Whether any token is required.
    pub fn required(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// Whether some token may act.
    pub fn can_operate(&self) -> bool {
        self.tokens.iter().any(|t| t.role == Role::Operate)
    }

    /// Adds `--token-file`'s token (the digest of its text) as a `read`
    /// token named [`TOKEN_FILE_NAME`].
    ///
    /// # Errors
    ///
    /// `Error::Input` when `--tokens-file` holds the same token, or a token
    /// of that name: one token, one role, one name in the audit lines.
    pub fn add_read(&mut self, digest: [u8; 32]) -> Result<()> {
        if self
            .tokens
            .iter()
            .any(|t| t.digest == digest || t.name == TOKEN_FILE_NAME)
        {
            return Err(Error::input(format!(
                "--token-file's token, or the name `{TOKEN_FILE_NAME}` it is known by, is in \
                 --tokens-file too; give each token once (drop --token-file, or its line)"
            )));
        }
        self.tokens.push(Token {
            name: TOKEN_FILE_NAME.to_string(),
            role: Role::Read,
            digest,
        });
        Ok(())
    }

    /// The tokens of a `--tokens-file`: one per line as `NAME ROLE HASH`,
    /// the hash the SHA-256 of the token's text in hex (what `printf %s
    /// "$TOKEN" | sha256sum` prints), `#` comments and blank lines skipped.
    ///
    /// # Errors
    ///
    /// `Error::Input` naming the file and line of anything else.
    pub fn read_file(file: &Path) -> Result<Tokens> {
        use std::io::Read;
        let mut text = String::new();
        std::fs::File::open(file)
            .and_then(|f| f.take(1 << 20).read_to_string(&mut text))
            .map_err(|e| {
                Error::input(format!(
                    "cannot read --tokens-file `{}`: {e}; give a file of `NAME ROLE SHA256` lines",
                    file.display()
                ))
            })?;
        let mut tokens = Tokens::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |why: &str| {
                Error::input(format!(
                    "--tokens-file `{}` line {}: {why}; each line is `NAME ROLE SHA256`, as \
                     `ops-alice operate 9f86d0...` (the hash from `printf %s \"$TOKEN\" | \
                     sha256sum`)",
                    file.display(),
                    n + 1
                ))
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, role, hash] = fields[..] else {
                return Err(bad("it does not have three fields"));
            };
            if name.len() > 64
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._@-".contains(c))
            {
                return Err(bad(&format!(
                    "name `{}` is not 1 to 64 letters, digits or `._@-`",
                    crate::core::text::printable(name)
                )));
            }
            let role = match role {
                "read" => Role::Read,
                "operate" => Role::Operate,
                other => {
                    return Err(bad(&format!(
                        "role `{}` is neither `read` nor `operate`",
                        crate::core::text::printable(other)
                    )));
                }
            };
            let hash = hash.strip_prefix("sha256:").unwrap_or(hash);
            let mut digest = [0u8; 32];
            if hash.len() != 64 || hex::decode_to_slice(hash, &mut digest).is_err() {
                return Err(bad("the hash is not 64 hexadecimal digits"));
            }
            if tokens.tokens.iter().any(|t| t.name == name) {
                return Err(bad(&format!("name `{name}` is given twice")));
            }
            if tokens.tokens.iter().any(|t| t.digest == digest) {
                return Err(bad("the same token is given twice"));
            }
            if tokens.tokens.len() == MAX_TOKENS {
                return Err(bad(&format!("a file holds at most {MAX_TOKENS} tokens")));
            }
            tokens.tokens.push(Token {
                name: name.to_string(),
                role,
                digest,
            });
        }
        if tokens.tokens.is_empty() {
            return Err(Error::input(format!(
                "--tokens-file `{}` holds no token; add `NAME ROLE SHA256` lines",
                file.display()
            )));
        }
        Ok(tokens)
    }

    /// The token whose text is `given`: every digest is compared, in
    /// constant time, so the answer's timing says nothing of which matched
    /// or how much.
    pub fn find(&self, given: &str) -> Option<&Token> {
        let got: [u8; 32] = Sha256::digest(given.trim().as_bytes()).into();
        let mut found = None;
        for t in &self.tokens {
            if bool::from(got.ct_eq(&t.digest)) {
                found = Some(t);
            }
        }
        found
    }

    /// The token an `Authorization: Bearer ...` header carries.
    pub fn bearer(&self, header: Option<&str>) -> Option<&Token> {
        let given = header.and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })?;
        self.find(given)
    }
}

/// Who a request comes from, when the server takes tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Who {
    /// The token's name.
    pub name: String,
    /// What it may do.
    pub role: Role,
}

/// The name of the session cookie.
pub const COOKIE: &str = "jobhost_session";

/// How long a session lasts after signing in.
pub const SESSION_LIFE: Duration = Duration::from_secs(12 * 3600);

/// The most sessions kept at once; signing in past it ends the oldest.
const MAX_SESSIONS: usize = 4096;

/// The most sessions of one token; signing in past it ends its oldest, so
/// that one token cannot push out everyone else's.
const MAX_SESSIONS_PER_TOKEN: usize = 16;

/// Browser sessions, in memory: a restart signs everyone out.
#[derive(Default)]
pub struct Sessions {
    /// By the SHA-256 of the session's cookie value.
    map: Mutex<HashMap<[u8; 32], (Who, Instant)>>,
}

impl Sessions {
    /// A new session for `who`: the cookie's value (32 random bytes in hex).
    ///
    /// # Errors
    ///
    /// `Error::Host` when the system's random source fails.
    pub fn start(&self, who: Who) -> Result<String> {
        use ring::rand::SecureRandom;
        let mut id = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut id)
            .map_err(|_| Error::host("cannot read the system's random source for a session"))?;
        let value = hex::encode(id);
        let key: [u8; 32] = Sha256::digest(value.as_bytes()).into();
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        map.retain(|_, (_, until)| *until > now);
        let own = |map: &HashMap<[u8; 32], (Who, Instant)>| {
            map.iter()
                .filter(|(_, (w, _))| w.name == who.name)
                .min_by_key(|(_, (_, until))| *until)
                .map(|(k, _)| *k)
        };
        if map.values().filter(|(w, _)| w.name == who.name).count() >= MAX_SESSIONS_PER_TOKEN
            && let Some(oldest) = own(&map)
        {
            map.remove(&oldest);
        }
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, (_, until))| *until)
                .map(|(k, _)| *k)
        {
            map.remove(&oldest);
        }
        map.insert(key, (who, now + SESSION_LIFE));
        Ok(value)
    }

    /// Who the session of the cookie header `cookies` is, if it is one
    /// that has not ended.
    pub fn who(&self, cookies: Option<&str>) -> Option<Who> {
        let value = cookie(cookies?, COOKIE)?;
        let key: [u8; 32] = Sha256::digest(value.as_bytes()).into();
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&key)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(who, _)| who.clone())
    }

    /// Ends the session of the cookie header `cookies`.
    pub fn end(&self, cookies: Option<&str>) {
        if let Some(value) = cookies.and_then(|c| cookie(c, COOKIE)) {
            let key: [u8; 32] = Sha256::digest(value.as_bytes()).into();
            self.map
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&key);
        }
    }
}

/// The value of cookie `name` in a `Cookie` header.
fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// Whether a form POST comes from this server's own pages: its `Origin`
/// names the host and port the request was sent to (`host`, the `Host`
/// header), and a `Sec-Fetch-Site` header, when the browser sends one,
/// says `same-origin` (which alone suffices when the origin is withheld as
/// `null`). A POST with neither is refused: every browser that keeps
/// `SameSite` cookies sends one of them with a form.
///
/// # Errors
///
/// The sentence a 403 answer says.
pub fn same_origin(
    origin: Option<&str>,
    host: Option<&str>,
    fetch_site: Option<&str>,
) -> std::result::Result<(), String> {
    if let Some(site) = fetch_site
        && site != "same-origin"
    {
        return Err(format!(
            "refused: the form was sent from another site (Sec-Fetch-Site: {}); act from this \
             dashboard's own pages",
            crate::core::text::printable(site)
        ));
    }
    // A browser that keeps the origin to itself (`Origin: null`) still
    // says where the request came from in `Sec-Fetch-Site`, which no page
    // can set.
    if fetch_site == Some("same-origin") && origin.is_none_or(|o| o == "null") {
        return Ok(());
    }
    let (Some(origin), Some(host)) = (origin, host) else {
        return Err(
            "refused: the request carries no Origin (or no Host) header; act from this \
             dashboard's own pages in a browser, or use the JSON API under /api/ with a bearer \
             token"
                .to_string(),
        );
    };
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or("");
    if authority.eq_ignore_ascii_case(host) {
        Ok(())
    } else {
        Err(format!(
            "refused: the form was sent from `{}`, not from this dashboard (`{}`); act from \
             this dashboard's own pages",
            crate::core::text::printable(origin),
            crate::core::text::printable(host)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    fn hash(token: &str) -> String {
        hex::encode(Sha256::digest(token.as_bytes()))
    }

    #[test]
    fn a_tokens_file_names_each_token_and_its_role() {
        let f = file(&format!(
            "# who may act\nalice operate {}\n\nbob read sha256:{}\n",
            hash("alice-secret-0123456789"),
            hash("bob-secret-0123456789")
        ));
        let tokens = Tokens::read_file(f.path()).unwrap();
        assert!(tokens.required() && tokens.can_operate());
        let a = tokens.find("alice-secret-0123456789").unwrap();
        assert_eq!((a.name.as_str(), a.role), ("alice", Role::Operate));
        let b = tokens.bearer(Some("Bearer bob-secret-0123456789")).unwrap();
        assert_eq!((b.name.as_str(), b.role), ("bob", Role::Read));
        assert!(tokens.find("alice-secret-012345678").is_none());
        assert!(tokens.bearer(Some("alice-secret-0123456789")).is_none());
    }

    #[test]
    fn a_bad_line_is_refused_naming_its_number_and_the_fix() {
        for (text, says) in [
            ("alice operate\n", "three fields"),
            ("alice admin 00\n", "role `admin`"),
            ("alice operate abc\n", "64 hexadecimal"),
            ("al ice operate 00\n", "three fields"),
            ("a/b read 00\n", "name `a/b`"),
            ("", "holds no token"),
        ] {
            let e = Tokens::read_file(file(text).path())
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
        let twice = format!("a read {}\nb read {}\n", hash("x"), hash("x"));
        let e = Tokens::read_file(file(&twice).path())
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2") && e.contains("twice"), "{e}");
    }

    #[test]
    fn a_session_is_known_by_its_cookie_until_it_ends() {
        let s = Sessions::default();
        let who = Who {
            name: "alice".into(),
            role: Role::Operate,
        };
        let value = s.start(who.clone()).unwrap();
        let header = format!("theme=dark; {COOKIE}={value}");
        assert_eq!(s.who(Some(&header)), Some(who));
        assert_eq!(s.who(Some(&format!("{COOKIE}=00{value}"))), None);
        s.end(Some(&header));
        assert_eq!(s.who(Some(&header)), None);
    }

    #[test]
    fn one_token_keeps_at_most_its_own_share_of_sessions() {
        let s = Sessions::default();
        let who = |name: &str| Who {
            name: name.into(),
            role: Role::Read,
        };
        let first = s.start(who("alice")).unwrap();
        let alice = format!("{COOKIE}={first}");
        for _ in 0..MAX_SESSIONS_PER_TOKEN {
            s.start(who("mallory")).unwrap();
        }
        assert!(
            s.who(Some(&alice)).is_some(),
            "another token's sessions stay"
        );
        let mut newest = String::new();
        for _ in 0..MAX_SESSIONS_PER_TOKEN {
            newest = s.start(who("alice")).unwrap();
        }
        assert!(s.who(Some(&alice)).is_none(), "its own oldest went");
        assert!(s.who(Some(&format!("{COOKIE}={newest}"))).is_some());
    }

    #[test]
    fn only_a_form_from_this_server_passes_the_origin_check() {
        let host = Some("127.0.0.1:8480");
        assert!(same_origin(Some("http://127.0.0.1:8480"), host, Some("same-origin")).is_ok());
        assert!(same_origin(Some("https://127.0.0.1:8480"), host, None).is_ok());
        assert!(same_origin(Some("http://127.0.0.1:9999"), host, None).is_err());
        assert!(same_origin(Some("null"), host, None).is_err());
        assert!(same_origin(Some("null"), host, Some("same-origin")).is_ok());
        assert!(same_origin(Some("null"), host, Some("cross-site")).is_err());
        assert!(same_origin(None, host, None).is_err());
        assert!(same_origin(Some("http://127.0.0.1:8480"), host, Some("same-site")).is_err());
    }
}
