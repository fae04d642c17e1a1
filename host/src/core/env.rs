//! `${VAR}` references in the job config, filled in from jobhost's
//! environment, and `${file:/PATH}` ones, filled in from the first line of
//! a file (a Kubernetes Secret volume, systemd's `LoadCredential=`; the
//! path may itself use a `${VAR}`, as in
//! `${file:${CREDENTIALS_DIRECTORY}/token}`): `$${` writes a literal `${`,
//! an unset, empty or non-UTF-8 variable, and a missing, empty or loosely
//! kept file, is an error that names the field and the variable or file
//! (never the value), and every value filled in is remembered by a
//! [`Redactor`], so that it can be scrubbed from anything the host writes.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;

/// The most a secret file may hold: a secret is one line; a larger file is
/// not one (and is not read whole).
pub const MOST_SECRET_FILE_BYTES: u64 = 64 * 1024;

/// Where `${VAR}` values come from: the process environment, or a test's map.
pub type Env<'a> = dyn Fn(&str) -> Option<std::ffi::OsString> + 'a;

/// Replaces every `${VAR}` in `template` with the variable's value from the
/// host's environment, and remembers the values as secrets. `$${` writes a
/// literal `${`.
///
/// # Errors
///
/// `Error::Input` naming `what` and the variable when it is unset, empty or
/// not valid UTF-8, or when a `${` is not closed by a valid name and `}`.
/// The value itself never appears in an error.
pub fn expand(
    what: &str,
    template: &str,
    env: &Env<'_>,
    redactor: &mut Redactor,
) -> Result<String> {
    expand_with(what, template, env, redactor, &|v| v.to_string())
}

/// [`expand`], passing each value through `encode` before it is put in
/// place (the value as it is, unencoded, goes to the redactor).
pub fn expand_with(
    what: &str,
    template: &str,
    env: &Env<'_>,
    redactor: &mut Redactor,
    encode: &dyn Fn(&str) -> String,
) -> Result<String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("{file:") {
            let (path, rest_after) = file_reference(what, tail, env)?;
            let v = secret_file(&path, what)?;
            out.push_str(&encode(&v));
            redactor.add(v);
            rest = rest_after;
        } else if let Some(tail) = after.strip_prefix('{') {
            let end = tail.find('}').ok_or_else(|| {
                Error::input(format!(
                    "invalid {what}: `${{` without a closing `}}`; write `${{NAME}}`, or `$${{` for a literal `${{`"
                ))
            })?;
            let var = &tail[..end];
            check_name(what, var)?;
            match env(var).map(std::ffi::OsString::into_string) {
                Some(Ok(v)) if !v.is_empty() => {
                    out.push_str(&encode(&v));
                    redactor.add(v);
                }
                Some(Ok(_)) => {
                    return Err(Error::input(format!(
                        "{what} uses `${{{var}}}`, which is empty in jobhost's environment; \
                         set {var} before starting jobhost"
                    )));
                }
                None => {
                    return Err(Error::input(format!(
                        "{what} uses `${{{var}}}`, which is not set in jobhost's environment; \
                         set {var} before starting jobhost"
                    )));
                }
                Some(Err(_)) => {
                    return Err(Error::input(format!(
                        "{what} uses `${{{var}}}`, whose value is not valid UTF-8; fix {var}"
                    )));
                }
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Refuses `var` unless it is an environment variable's name.
fn check_name(what: &str, var: &str) -> Result<()> {
    let valid = var
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(())
    } else {
        Err(Error::input(format!(
            "invalid {what}: `${{{var}}}` is not an environment variable name; use letters, \
             digits and `_`, or `${{file:/PATH}}` for a secret kept in a file"
        )))
    }
}

/// The path of a `${file:...}` reference whose text after `${file:` is
/// `tail`, its own `${VAR}`s filled in from `env` (a path is not a
/// secret), and the text after the reference's closing `}`.
fn file_reference<'t>(what: &str, tail: &'t str, env: &Env<'_>) -> Result<(PathBuf, &'t str)> {
    let unclosed = || {
        Error::input(format!(
            "invalid {what}: `${{file:` without a closing `}}`; write `${{file:/PATH}}`"
        ))
    };
    let mut path = String::new();
    let mut rest = tail;
    loop {
        let i = rest.find(['}', '$']).ok_or_else(unclosed)?;
        path.push_str(&rest[..i]);
        if rest[i..].starts_with('}') {
            rest = &rest[i + 1..];
            break;
        }
        let after = &rest[i + 1..];
        let Some(inner) = after.strip_prefix('{') else {
            path.push('$');
            rest = after;
            continue;
        };
        let end = inner.find('}').ok_or_else(unclosed)?;
        let var = &inner[..end];
        check_name(what, var)?;
        match env(var).map(std::ffi::OsString::into_string) {
            Some(Ok(v)) if !v.is_empty() => path.push_str(&v),
            _ => {
                return Err(Error::input(format!(
                    "{what} reads a file whose path uses `${{{var}}}`, which is not set (or is \
                     empty or not UTF-8) in jobhost's environment; set {var} before starting \
                     jobhost, or write the path out"
                )));
            }
        }
        rest = &inner[end + 1..];
    }
    if path.is_empty() {
        return Err(Error::input(format!(
            "invalid {what}: `${{file:}}` names no file; write `${{file:/PATH}}`"
        )));
    }
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        return Err(Error::input(format!(
            "invalid {what}: `${{file:{}}}` is a relative path; name the file by its absolute \
             path (`/run/secrets/...`, `${{CREDENTIALS_DIRECTORY}}/...`)",
            path.display()
        )));
    }
    Ok((path, rest))
}

/// The secret kept in the file at `path` for `what`: its first line, the
/// line's end (`\n`, `\r\n`) left out.
///
/// # Errors
///
/// `Error::Input` naming `what` and the file (never its content) when the
/// file cannot be read, is larger than [`MOST_SECRET_FILE_BYTES`], has an
/// empty first line or one that is not UTF-8, or can be read or written by
/// every user of the machine. A file its group may read is used, with a
/// warning on standard error once per process (Kubernetes mounts Secrets
/// so when a pod sets `fsGroup`).
pub fn secret_file(path: &Path, what: &str) -> Result<String> {
    use std::io::Read as _;
    let shown = path.display();
    let cannot = |e: std::io::Error| {
        Error::input(format!(
            "{what} reads the secret in `{shown}`, which cannot be read: {e}; mount or write the \
             file, or fix the path"
        ))
    };
    let file = std::fs::File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(Error::input(format!(
            "{what} reads the secret in `{shown}`, which is not a file; name the file that holds \
             the secret"
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o006 != 0 {
            return Err(Error::input(format!(
                "{what} reads the secret in `{shown}`, which every user of this machine can {} \
                 (mode {mode:04o}): `chmod o-rw {}` (or 600)",
                if mode & 0o004 != 0 { "read" } else { "write" },
                crate::core::command::shell_quote(&path.to_string_lossy())
            )));
        }
        if mode & 0o040 != 0 {
            warn_once(
                path,
                &format!(
                    "the secret in `{shown}` ({what}) can be read by its group (mode \
                     {mode:04o}); `chmod g-r` it unless its group is meant to (as a Kubernetes \
                     Secret mounted with fsGroup)"
                ),
            );
        }
    }
    if meta.len() > MOST_SECRET_FILE_BYTES {
        return Err(Error::input(format!(
            "{what} reads the secret in `{shown}`, which holds {} bytes; a secret file holds one \
             line (at most {MOST_SECRET_FILE_BYTES} bytes): name the right file",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    file.take(MOST_SECRET_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    let line = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = std::str::from_utf8(line).map_err(|_| {
        Error::input(format!(
            "{what} reads the secret in `{shown}`, whose first line is not valid UTF-8; write \
             the secret as text"
        ))
    })?;
    if line.is_empty() {
        return Err(Error::input(format!(
            "{what} reads the secret in `{shown}`, whose first line is empty; write the secret \
             on the file's first line"
        )));
    }
    Ok(line.to_string())
}

/// Says `text` as a warning, once per process for `path` (a config is read
/// again by the daemon and the dashboard; a person needs it once).
fn warn_once(path: &Path, text: &str) {
    static SAID: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    let mut said = SAID
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !said.iter().any(|p| p == path) {
        said.push(path.to_path_buf());
        crate::core::text::say("warning", text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_are_filled_in_and_malformed_references_are_named() {
        let env = |name: &str| match name {
            "TOKEN" => Some("abc123".into()),
            "EMPTY" => Some("".into()),
            _ => None,
        };
        let mut r = Redactor::default();
        let x = |t: &str, r: &mut Redactor| expand("`url`", t, &env, r);
        assert_eq!(x("a/${TOKEN}/b$c", &mut r).unwrap(), "a/abc123/b$c");
        assert_eq!(x("$${TOKEN}", &mut r).unwrap(), "${TOKEN}");
        for (t, want) in [
            ("${MISSING}", "not set"),
            ("${EMPTY}", "empty"),
            ("${TOKEN", "closing"),
            ("${1X}", "not an environment variable name"),
        ] {
            let err = x(t, &mut r).unwrap_err().to_string();
            assert!(err.contains(want), "{t}: {err}");
            assert!(err.contains("`url`"), "{err}");
        }
    }

    /// A file with `text` and `mode` in `dir`.
    fn secret(dir: &Path, name: &str, text: &[u8], mode: u32) -> PathBuf {
        use std::os::unix::fs::PermissionsExt as _;
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_file_reference_is_the_files_first_line_and_a_secret() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap().to_string();
        secret(dir.path(), "token", b"s3cr/t@x\nsecond line\n", 0o600);
        secret(dir.path(), "crlf", b"abc\r\n", 0o400);
        // The group may read it: used (with a warning on stderr).
        secret(dir.path(), "group", b"grp-token\n", 0o640);
        let env = |name: &str| (name == "CREDENTIALS_DIRECTORY").then(|| d.clone().into());
        let mut r = Redactor::default();
        let x = |t: &str, r: &mut Redactor| expand("`url`", t, &env, r);
        assert_eq!(
            x(&format!("Bearer ${{file:{d}/token}}"), &mut r).unwrap(),
            "Bearer s3cr/t@x"
        );
        assert_eq!(
            x("a${file:${CREDENTIALS_DIRECTORY}/crlf}b", &mut r).unwrap(),
            "aabcb"
        );
        assert_eq!(
            x("${file:${CREDENTIALS_DIRECTORY}/group}", &mut r).unwrap(),
            "grp-token"
        );
        // The value is scrubbed from anything the host writes, and a URL
        // part gets it percent-encoded.
        assert_eq!(r.scrub("it was s3cr/t@x"), "it was ***");
        let encoded = expand_with(
            "`store`",
            "postgres://u:${file:${CREDENTIALS_DIRECTORY}/token}@h/d",
            &env,
            &mut r,
            &|v| v.replace('/', "%2F").replace('@', "%40"),
        )
        .unwrap();
        assert_eq!(encoded, "postgres://u:s3cr%2Ft%40x@h/d");
    }

    #[test]
    fn a_file_reference_that_cannot_be_used_is_named_never_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap().to_string();
        secret(dir.path(), "loose", b"hunter2\n", 0o644);
        secret(dir.path(), "writable", b"hunter2\n", 0o602);
        secret(dir.path(), "empty", b"\nhunter2\n", 0o600);
        secret(dir.path(), "binary", b"\xff\xfe\n", 0o600);
        secret(
            dir.path(),
            "big",
            &vec![b'x'; MOST_SECRET_FILE_BYTES as usize + 1],
            0o600,
        );
        let env = |name: &str| (name == "DIR").then(|| d.clone().into());
        for (t, want) in [
            (
                format!("${{file:{d}/loose}}"),
                "every user of this machine can read",
            ),
            (
                format!("${{file:{d}/writable}}"),
                "every user of this machine can write",
            ),
            (format!("${{file:{d}/empty}}"), "first line is empty"),
            (format!("${{file:{d}/binary}}"), "not valid UTF-8"),
            (format!("${{file:{d}/big}}"), "a secret file holds one line"),
            (format!("${{file:{d}/missing}}"), "cannot be read"),
            (format!("${{file:{d}}}"), "not a file"),
            ("${file:relative/token}".to_string(), "relative path"),
            ("${file:}".to_string(), "names no file"),
            (format!("${{file:{d}/loose"), "without a closing"),
            (
                "${file:${UNSET}/x}".to_string(),
                "`${UNSET}`, which is not set",
            ),
            (
                "${file:${DIR/x}".to_string(),
                "not an environment variable name",
            ),
        ] {
            let err = expand(
                "`destinations.ledger.headers`",
                &t,
                &env,
                &mut Redactor::default(),
            )
            .unwrap_err();
            assert_eq!(err.exit_code(), 2, "{t}");
            let err = err.to_string();
            assert!(err.contains(want), "{t}: {err}");
            assert!(err.contains("`destinations.ledger.headers`"), "{t}: {err}");
            assert!(!err.contains("hunter2"), "{t}: {err}");
        }
        // `$${file:` is the text itself.
        assert_eq!(
            expand("`url`", "$${file:/x}", &env, &mut Redactor::default()).unwrap(),
            "${file:/x}"
        );
    }
}
