//! `${VAR}` references in the job config, filled in from jobhost's
//! environment: `$${` writes a literal `${`, an unset, empty or non-UTF-8
//! variable is an error that names the field and the variable (never the
//! value), and every value filled in is remembered by a [`Redactor`], so
//! that it can be scrubbed from anything the host writes.

use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;

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
        } else if let Some(tail) = after.strip_prefix('{') {
            let end = tail.find('}').ok_or_else(|| {
                Error::input(format!(
                    "invalid {what}: `${{` without a closing `}}`; write `${{NAME}}`, or `$${{` for a literal `${{`"
                ))
            })?;
            let var = &tail[..end];
            let valid = var
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(Error::input(format!(
                    "invalid {what}: `${{{var}}}` is not an environment variable name; \
                     use letters, digits and `_`"
                )));
            }
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
}
