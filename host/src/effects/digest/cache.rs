//! The digest cache: one small JSON file per digest, on the host's own
//! disk, named by a hash of everything that made it (the model, its
//! settings and the prompt). It is a cache and nothing more: the claim
//! store never holds a digest, losing a file costs one model call, and an
//! entry older than the job's TTL is made again.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The largest cache file read back: digests are short.
const MAX_ENTRY_BYTES: u64 = 1 << 20;

/// A cached digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// When the model made it (the host's clock).
    pub created_at: Timestamp,
    /// The model that made it.
    pub model: String,
    /// The digest.
    pub text: String,
}

/// What a lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// An entry younger than the TTL.
    Fresh(Entry),
    /// An entry, but older than the TTL.
    Expired(Entry),
    /// No entry (never made, or deleted).
    Missing,
    /// A file that cannot be read as an entry: treated as missing, and
    /// replaced by the next digest made.
    Unreadable(String),
}

/// The cache folder.
#[derive(Debug, Clone)]
pub struct DigestCache {
    dir: PathBuf,
}

/// What a digest's cache key is made of: every setting that changes what
/// the model says, and the prompt. The API key is not among them (a new
/// key gives the same answers).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct KeyParts<'a> {
    /// The chat-completions URL, with its `${VAR}`s filled in (another
    /// server behind the same variable is another model).
    pub endpoint: &'a str,
    /// The model's name.
    pub model: &'a str,
    /// The system message.
    pub system: &'a str,
    /// The longest answer asked for, in tokens.
    pub max_tokens: Option<u32>,
    /// The sampling temperature.
    pub temperature: Option<f64>,
    /// The text the component asked to describe.
    pub prompt: &'a str,
}

impl KeyParts<'_> {
    /// The key: sha256 hex of the parts as JSON, with a version, so a
    /// change to what goes in never reuses an old entry.
    pub fn key(&self) -> String {
        let json = serde_json::json!({ "v": 1, "parts": self });
        hex::encode(Sha256::digest(json.to_string().as_bytes()))
    }
}

impl DigestCache {
    /// The cache in `dir` (created when first written).
    pub fn new(dir: PathBuf) -> DigestCache {
        DigestCache { dir }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> Option<PathBuf> {
        // A key read back from a store is checked before it names a file.
        crate::core::text::is_sha256_hex(key).then(|| self.dir.join(format!("{key}.json")))
    }

    /// The entry for `key`, judged fresh or expired against `ttl` at `now`.
    pub fn get(&self, key: &str, now: Timestamp, ttl: std::time::Duration) -> Lookup {
        let Some(path) = self.path(key) else {
            return Lookup::Unreadable(format!("`{key}` is not a digest cache key"));
        };
        let bytes = match std::fs::File::open(&path).and_then(|f| {
            let mut buf = Vec::new();
            std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_ENTRY_BYTES), &mut buf)
                .map(|_| buf)
        }) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Lookup::Missing,
            Err(e) => return Lookup::Unreadable(format!("cannot read `{}`: {e}", path.display())),
        };
        let entry: Entry = match serde_json::from_slice(&bytes) {
            Ok(e) => e,
            Err(e) => {
                return Lookup::Unreadable(format!(
                    "`{}` is not a digest cache entry: {e}",
                    path.display()
                ));
            }
        };
        let age = now.duration_since(entry.created_at);
        let ttl = jiff::SignedDuration::try_from(ttl).unwrap_or(jiff::SignedDuration::MAX);
        // An entry from the future (the clock was set back) is not trusted
        // to be young.
        if age >= jiff::SignedDuration::ZERO && age < ttl {
            Lookup::Fresh(entry)
        } else {
            Lookup::Expired(entry)
        }
    }

    /// Writes the entry for `key`, whole or not at all (a temporary file
    /// renamed into place), readable by its owner only.
    ///
    /// # Errors
    ///
    /// Why the folder or file could not be written.
    pub fn put(&self, key: &str, entry: &Entry) -> Result<(), String> {
        let path = self
            .path(key)
            .ok_or_else(|| format!("`{key}` is not a digest cache key"))?;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| format!("cannot create `{}`: {e}", self.dir.display()))?;
        let tmp = self.dir.join(format!(
            ".{key}.{}.{}.tmp",
            std::process::id(),
            Timestamp::now().as_nanosecond()
        ));
        let json = serde_json::to_vec(entry).map_err(|e| e.to_string())?;
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&json).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(format!("cannot write `{}`: {e}", path.display()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parts(prompt: &str) -> KeyParts<'_> {
        KeyParts {
            endpoint: "http://127.0.0.1:11434/v1/chat/completions",
            model: "llama3.1",
            system: "Be brief.",
            max_tokens: Some(200),
            temperature: Some(0.2),
            prompt,
        }
    }

    #[test]
    fn the_key_changes_with_every_part_and_nothing_else() {
        let base = parts("sales of the 8th");
        assert_eq!(base.key(), parts("sales of the 8th").key(), "stable");
        assert_eq!(base.key().len(), 64);
        let changed = [
            KeyParts {
                prompt: "sales of the 9th",
                ..base
            },
            KeyParts {
                model: "llama3.2",
                ..base
            },
            KeyParts {
                system: "Be verbose.",
                ..base
            },
            KeyParts {
                max_tokens: None,
                ..base
            },
            KeyParts {
                temperature: Some(0.3),
                ..base
            },
            KeyParts {
                endpoint: "https://api.example.com/v1/chat/completions",
                ..base
            },
        ];
        for other in changed {
            assert_ne!(other.key(), base.key(), "{other:?}");
        }
    }

    #[test]
    fn an_entry_is_fresh_until_its_ttl_then_expired_and_a_damaged_one_is_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DigestCache::new(dir.path().join("digests"));
        let key = parts("p").key();
        let t0: Timestamp = "2026-11-09T00:05:00Z".parse().unwrap();
        assert_eq!(
            cache.get(&key, t0, Duration::from_secs(60)),
            Lookup::Missing
        );
        let entry = Entry {
            created_at: t0,
            model: "m".into(),
            text: "Sales rose.".into(),
        };
        cache.put(&key, &entry).unwrap();
        let ttl = Duration::from_secs(3600);
        let later = |s| t0 + jiff::SignedDuration::from_secs(s);
        assert_eq!(
            cache.get(&key, later(3599), ttl),
            Lookup::Fresh(entry.clone())
        );
        assert_eq!(
            cache.get(&key, later(3600), ttl),
            Lookup::Expired(entry.clone())
        );
        assert_eq!(
            cache.get(&key, later(-60), ttl),
            Lookup::Expired(entry),
            "made in the future: the clock was set back"
        );
        let mode = std::fs::metadata(cache.dir().join(format!("{key}.json")))
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
            .unwrap();
        assert_eq!(mode, 0o600);
        std::fs::write(cache.dir().join(format!("{key}.json")), "{torn").unwrap();
        assert!(matches!(cache.get(&key, t0, ttl), Lookup::Unreadable(_)));
        assert!(matches!(
            cache.get("../../etc/passwd", t0, ttl),
            Lookup::Unreadable(_)
        ));
    }
}
