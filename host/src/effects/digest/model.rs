//! The language model, spoken to as an OpenAI-compatible chat-completions
//! endpoint (hosted services, a local Ollama or llama.cpp server): one
//! request with a system and a user message, one answer. Every way the
//! exchange can fail (no answer in time, a 429 or a 5xx, an answer that is
//! not the expected JSON, a refusal, no text) comes back as one line saying
//! so; none of them is the run's failure.

use std::io::Read as _;
use std::time::Duration;

use serde_json::Value;

use crate::core::redact::Redactor;
use crate::effects::destination::HttpTarget;

/// The longest digest kept; a longer answer is cut there.
const MAX_DIGEST_BYTES: usize = 16 << 10;

/// The most of an answer read.
const MAX_ANSWER_BYTES: u64 = 4 << 20;

/// One question to the model.
#[derive(Debug, Clone, Copy)]
pub struct Ask<'a> {
    /// `<base_url>/chat/completions`.
    pub endpoint: &'a HttpTarget,
    /// Sent as `Authorization: Bearer <key>` when present.
    pub api_key: Option<&'a str>,
    /// The model's name.
    pub model: &'a str,
    /// The system message.
    pub system: &'a str,
    /// The text to describe (the user message).
    pub prompt: &'a str,
    /// The longest answer, in tokens, when set.
    pub max_tokens: Option<u32>,
    /// The sampling temperature, when set.
    pub temperature: Option<f64>,
    /// The longest the whole exchange may take.
    pub timeout: Duration,
}

/// Asks the model; the digest, or why there is none in one line with
/// `redactor`'s values scrubbed.
///
/// # Errors
///
/// One line naming what went wrong and, where there is one, the fix.
pub fn ask(a: &Ask<'_>, redactor: &Redactor) -> Result<String, String> {
    // Scrubbed again at the end: an error of the HTTP client may quote the
    // URL, which may hold a credential.
    ask_scrubbing(a, redactor)
        .map(|text| redactor.scrub(&text))
        .map_err(|e| redactor.scrub(&e))
}

fn ask_scrubbing(a: &Ask<'_>, redactor: &Redactor) -> Result<String, String> {
    let mut body = serde_json::json!({
        "model": a.model,
        "messages": [
            {"role": "system", "content": a.system},
            {"role": "user", "content": a.prompt},
        ],
        "stream": false,
    });
    if let Some(n) = a.max_tokens {
        body["max_tokens"] = n.into();
    }
    if let Some(t) = a.temperature {
        body["temperature"] = t.into();
    }
    let agent = crate::effects::http::http_agent(Some(a.timeout));
    let shown = a.endpoint.shown_url();
    let mut req = agent
        .post(a.endpoint.url())
        .header("Content-Type", "application/json");
    if let Some(key) = a.api_key {
        req = req.header("Authorization", &format!("Bearer {key}"));
    }
    let mut resp = match req.send(body.to_string().as_bytes()) {
        Ok(resp) => resp,
        Err(ureq::Error::Timeout(_)) => {
            return Err(format!(
                "the model at {shown} gave no answer within {} s (`digest.timeout_seconds`)",
                a.timeout.as_secs_f64()
            ));
        }
        Err(e) => return Err(format!("cannot reach the model at {shown}: {e}")),
    };
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut raw = Vec::new();
    let read = resp
        .body_mut()
        .as_reader()
        .take(MAX_ANSWER_BYTES)
        .read_to_end(&mut raw);
    if let Err(e) = read {
        return Err(match e.kind() {
            std::io::ErrorKind::TimedOut => format!(
                "the model at {shown} gave no answer within {} s (`digest.timeout_seconds`)",
                a.timeout.as_secs_f64()
            ),
            _ => format!("the answer of the model at {shown} broke off: {e}"),
        });
    }
    // Whole, before anything is cut from it: a server that echoes the key
    // must not leave half of it in an excerpt the scrubber cannot match.
    let text = redactor.scrub(&String::from_utf8_lossy(&raw));
    if !(200..300).contains(&status) {
        let detail = error_detail(&text);
        return Err(match status {
            429 => format!(
                "the model at {shown} is rate limited (429){}{detail}; `jobhost digest` asks again later",
                retry_after
                    .map(|r| match r.trim().parse::<u64>() {
                        Ok(secs) => format!(", retry after {secs} s"),
                        Err(_) => format!(", retry after {}", snippet(&r)),
                    })
                    .unwrap_or_default()
            ),
            401 | 403 => format!(
                "the model at {shown} refused the credentials ({status}); check `digest.api_key`"
            ),
            500..=599 => format!("the model's server at {shown} failed ({status}){detail}"),
            _ => format!("the model at {shown} answered {status}{detail}"),
        });
    }
    parse_answer(&text).map_err(|why| format!("the model at {shown} {why}"))
}

/// The digest in a chat-completions answer.
///
/// # Errors
///
/// What is wrong with the answer, to follow "the model at URL".
pub fn parse_answer(text: &str) -> Result<String, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "answered with something that is not JSON ({e}): {}",
            snippet(text)
        )
    })?;
    let choice = v
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| {
            format!(
                "answered without `choices[0]`, not as a chat-completions endpoint does: {}",
                snippet(text)
            )
        })?;
    let message = choice.get("message");
    if let Some(refusal) = message
        .and_then(|m| m.get("refusal"))
        .and_then(Value::as_str)
        .filter(|r| !r.trim().is_empty())
    {
        return Err(format!("refused: {}", snippet(refusal)));
    }
    if choice.get("finish_reason").and_then(Value::as_str) == Some("content_filter") {
        return Err("refused: its content filter stopped the answer".to_string());
    }
    // A string, or (some servers) a list of text parts.
    let content = match message.and_then(|m| m.get("content")) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    };
    let content = content.trim();
    if content.is_empty() {
        return Err("answered with no text".to_string());
    }
    let mut out = content.to_string();
    if out.len() > MAX_DIGEST_BYTES {
        let mut cut = MAX_DIGEST_BYTES;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
    }
    Ok(out)
}

/// `: <message>` from an error answer's JSON, or a short excerpt.
fn error_detail(text: &str) -> String {
    let message = serde_json::from_str::<Value>(text).ok().and_then(|v| {
        v.get("error")
            .and_then(|e| e.get("message").or(Some(e)))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    match message {
        Some(m) => format!(": {}", snippet(&m)),
        None if text.trim().is_empty() => String::new(),
        None => format!(": {}", snippet(text)),
    }
}

/// The first 200 characters of `text`, on one line, escaped (see
/// `text::printable`).
fn snippet(text: &str) -> String {
    let head: String = text.trim().chars().take(200).collect();
    crate::core::text::printable(&head).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_the_first_choice_and_refusals_and_empty_answers_are_not() {
        let ok = r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"  Sales rose.\n"},"finish_reason":"stop"}]}"#;
        assert_eq!(parse_answer(ok).unwrap(), "Sales rose.");
        let parts = r#"{"choices":[{"message":{"content":[{"type":"text","text":"Sales "},{"type":"text","text":"rose."}]}}]}"#;
        assert_eq!(parse_answer(parts).unwrap(), "Sales rose.");
        for (answer, why) in [
            ("{not json", "not JSON"),
            (r#"{"object":"list"}"#, "without `choices[0]`"),
            (r#"{"choices":[]}"#, "without `choices[0]`"),
            (
                r#"{"choices":[{"message":{"content":null,"refusal":"I can't help with that."}}]}"#,
                "refused: I can't help with that.",
            ),
            (
                r#"{"choices":[{"message":{"content":""},"finish_reason":"content_filter"}]}"#,
                "content filter",
            ),
            (r#"{"choices":[{"message":{"content":"   "}}]}"#, "no text"),
        ] {
            let err = parse_answer(answer).unwrap_err();
            assert!(err.contains(why), "{answer}: {err}");
            assert!(!err.contains('\n'));
        }
    }

    #[test]
    fn a_long_answer_is_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_DIGEST_BYTES);
        let answer = serde_json::json!({"choices": [{"message": {"content": long}}]});
        let out = parse_answer(&answer.to_string()).unwrap();
        assert!(out.len() <= MAX_DIGEST_BYTES && out.len() > MAX_DIGEST_BYTES - 4);
    }

    #[test]
    fn an_error_answer_is_summed_up_from_its_message() {
        assert_eq!(
            error_detail(r#"{"error":{"message":"model overloaded","type":"server_error"}}"#),
            ": model overloaded"
        );
        assert_eq!(error_detail(""), "");
        assert_eq!(
            error_detail("<html>Bad Gateway</html>"),
            ": <html>Bad Gateway</html>"
        );
    }
}
