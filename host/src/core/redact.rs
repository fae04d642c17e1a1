//! Credentials the config filled in from the environment, remembered so
//! that they can be scrubbed from every message the host writes (a second
//! line of defence behind never formatting them in the first place).

use std::fmt;

/// The environment values a config put into URLs and headers; scrubbed from
/// every message the host writes about a delivery, as a second line of
/// defence behind never formatting them in the first place.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Redactor {
    secrets: Vec<String>,
}

/// Every byte outside RFC 3986's unreserved set.
const NOT_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `s` as a server might have percent-encoded it.
fn percent_encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, NOT_UNRESERVED).to_string()
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} values)", self.secrets.len())
    }
}

impl Redactor {
    /// Remembers `value`, also as a server might echo it back: escaped
    /// for JSON and percent-encoded. Values under 4 characters are not
    /// secrets and would garble messages, so they are not scrubbed.
    pub fn add(&mut self, value: String) {
        if value.chars().count() < 4 {
            return;
        }
        let json = serde_json::to_string(&value).unwrap_or_default();
        let json = json.trim_matches('"').to_string();
        let percent = percent_encode(&value);
        for v in [value, json, percent] {
            if !v.is_empty() && !self.secrets.contains(&v) {
                self.secrets.push(v);
            }
        }
        // Longest first, so a secret that contains another is scrubbed whole.
        self.secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }

    /// `text` with every remembered value replaced by `***`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "***");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_scrubbed_as_written_escaped_and_percent_encoded() {
        let mut r = Redactor::default();
        r.add("p@ss/w\"rd".to_string());
        r.add("abc".to_string());
        assert_eq!(r.scrub(r#"a p@ss/w"rd b"#), "a *** b");
        assert_eq!(r.scrub(r#"{"t":"p@ss/w\"rd"}"#), r#"{"t":"***"}"#);
        assert_eq!(r.scrub("?t=p%40ss%2Fw%22rd"), "?t=***");
        assert_eq!(r.scrub("abc"), "abc", "too short to be a secret");
    }
}
