//! Messages for the job's destinations: staged during the guest's run
//! (checked against the config's destinations and limits, numbered in
//! order), committed with the report, and delivered by the host afterwards,
//! each carrying its idempotency key `<window key>#<sequence number>`.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;

use base64::Engine as _;

use crate::error::{Error, Result};
use crate::store::StagedMessage;
use crate::window::WindowKey;

/// Where a destination's messages go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// Append one JSON line per message to a file.
    File {
        /// The file; its folder is created when missing.
        path: PathBuf,
    },
}

/// Why `send` refused a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StageError {
    /// Not a destination of this job.
    UnknownDestination(String),
    /// Body over the per-message limit, or the run's total over its limit
    /// (the limit that was hit, in bytes).
    TooLarge(u64),
    /// Too many messages (the maximum).
    TooManyMessages(u32),
    /// Content type malformed.
    InvalidContentType(String),
}

/// The messages one run stages.
#[derive(Debug)]
pub struct Staging {
    key: WindowKey,
    destinations: Vec<String>,
    max_messages: u32,
    max_bytes: u64,
    max_total: u64,
    total: u64,
    messages: Vec<StagedMessage>,
}

impl Staging {
    /// An empty outbox for the run of `key`: at most `max_messages`
    /// messages of at most `max_bytes` each and `max_total` together.
    pub fn new(
        key: WindowKey,
        destinations: Vec<String>,
        max_messages: u32,
        max_bytes: u64,
        max_total: u64,
    ) -> Self {
        Staging {
            key,
            destinations,
            max_messages,
            max_bytes,
            max_total,
            total: 0,
            messages: Vec::new(),
        }
    }

    /// Stages one message and returns its sequence number (from 1).
    ///
    /// # Errors
    ///
    /// A [`StageError`]; nothing is staged then.
    pub fn stage(
        &mut self,
        destination: String,
        body: Vec<u8>,
        content_type: String,
    ) -> std::result::Result<u32, StageError> {
        if !self.destinations.contains(&destination) {
            return Err(StageError::UnknownDestination(destination));
        }
        let size = body.len() as u64;
        if size > self.max_bytes {
            return Err(StageError::TooLarge(self.max_bytes));
        }
        if self.total + size > self.max_total {
            return Err(StageError::TooLarge(self.max_total));
        }
        if self.messages.len() as u32 >= self.max_messages {
            return Err(StageError::TooManyMessages(self.max_messages));
        }
        if !valid_content_type(&content_type) {
            return Err(StageError::InvalidContentType(content_type));
        }
        let seq = self.messages.len() as u32 + 1;
        self.total += size;
        self.messages.push(StagedMessage {
            seq,
            destination,
            idempotency_key: format!("{}#{seq}", self.key),
            content_type,
            body,
        });
        Ok(seq)
    }

    /// The staged messages, in order.
    pub fn into_messages(self) -> Vec<StagedMessage> {
        self.messages
    }
}

fn valid_content_type(t: &str) -> bool {
    let essence = t.split(';').next().unwrap_or("").trim();
    let mut parts = essence.split('/');
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    matches!((parts.next(), parts.next(), parts.next()), (Some(a), Some(b), None) if token(a) && token(b))
        && t.len() <= 256
        && !t.chars().any(char::is_control)
}

/// Delivers one message to its destination and returns a short status for
/// the store and the receipt.
///
/// # Errors
///
/// `Error::Delivery` naming the destination and the cause.
pub fn deliver(
    destinations: &BTreeMap<String, Destination>,
    key: &WindowKey,
    message: &StagedMessage,
) -> Result<String> {
    let dest = destinations.get(&message.destination).ok_or_else(|| {
        Error::Delivery(format!(
            "message {} is for destination `{}`, which the job config no longer declares; \
             declare it again to deliver the stored message",
            message.idempotency_key, message.destination
        ))
    })?;
    match dest {
        Destination::File { path } => {
            let line = file_line(key, message);
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).map_err(|e| {
                    Error::Delivery(format!(
                        "cannot create folder `{}` for destination `{}`: {e}",
                        parent.display(),
                        message.destination
                    ))
                })?;
            }
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| {
                    Error::Delivery(format!(
                        "cannot open `{}` for destination `{}`: {e}",
                        path.display(),
                        message.destination
                    ))
                })?;
            // The whole line, then fsync, so a crash after DONE cannot lose
            // it. If the write fails part way (a full disk), the file is cut
            // back to where it was, so a retry never appends after half a line.
            let before = file.metadata().map(|m| m.len());
            if let Err(e) = file
                .write_all(line.as_bytes())
                .and_then(|()| file.sync_data())
            {
                if let Ok(len) = before {
                    let _ = file.set_len(len);
                }
                return Err(Error::Delivery(format!(
                    "cannot append to `{}` for destination `{}`: {e}",
                    path.display(),
                    message.destination
                )));
            }
            Ok("appended".to_string())
        }
    }
}

/// The JSON line a file destination receives: the body inline as JSON when
/// it is JSON, as a string when it is UTF-8 text, else base64.
fn file_line(key: &WindowKey, m: &StagedMessage) -> String {
    let mut obj = serde_json::Map::new();
    obj.insert("idempotency_key".into(), m.idempotency_key.clone().into());
    obj.insert("key".into(), key.as_str().into());
    obj.insert("seq".into(), m.seq.into());
    obj.insert("destination".into(), m.destination.clone().into());
    obj.insert("content_type".into(), m.content_type.clone().into());
    let is_json = m.content_type.split(';').next().is_some_and(|e| {
        let e = e.trim();
        e == "application/json" || e.ends_with("+json")
    });
    let json_body = is_json
        .then(|| serde_json::from_slice::<serde_json::Value>(&m.body).ok())
        .flatten();
    match (json_body, std::str::from_utf8(&m.body)) {
        (Some(value), _) => {
            obj.insert("body".into(), value);
        }
        (None, Ok(text)) => {
            obj.insert("body".into(), text.into());
        }
        (None, Err(_)) => {
            obj.insert(
                "body_base64".into(),
                base64::engine::general_purpose::STANDARD
                    .encode(&m.body)
                    .into(),
            );
        }
    }
    let mut line = serde_json::Value::Object(obj).to_string();
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staging() -> Staging {
        Staging::new(
            WindowKey::from_stored("daily-report:2026-11-08".into()),
            vec!["digest".into()],
            3,
            10,
            15,
        )
    }

    #[test]
    fn messages_are_numbered_from_one_with_idempotency_keys() {
        let mut s = staging();
        assert_eq!(
            s.stage("digest".into(), b"{}".to_vec(), "application/json".into()),
            Ok(1)
        );
        assert_eq!(
            s.stage(
                "digest".into(),
                b"hi".to_vec(),
                "text/plain; charset=utf-8".into()
            ),
            Ok(2)
        );
        let m = s.into_messages();
        assert_eq!(m[1].idempotency_key, "daily-report:2026-11-08#2");
    }

    #[test]
    fn undeclared_destinations_large_bodies_and_bad_types_are_refused() {
        let mut s = staging();
        assert_eq!(
            s.stage("elsewhere".into(), vec![], "text/plain".into()),
            Err(StageError::UnknownDestination("elsewhere".into()))
        );
        assert_eq!(
            s.stage("digest".into(), vec![0; 11], "text/plain".into()),
            Err(StageError::TooLarge(10))
        );
        assert!(matches!(
            s.stage("digest".into(), vec![], "plain".into()),
            Err(StageError::InvalidContentType(_))
        ));
        s.stage("digest".into(), vec![0; 10], "text/plain".into())
            .unwrap();
        assert_eq!(
            s.stage("digest".into(), vec![0; 6], "text/plain".into()),
            Err(StageError::TooLarge(15)),
            "the run's total is capped too"
        );
        s.stage("digest".into(), vec![0; 5], "text/plain".into())
            .unwrap();
        s.stage("digest".into(), vec![], "text/plain".into())
            .unwrap();
        assert_eq!(
            s.stage("digest".into(), vec![], "text/plain".into()),
            Err(StageError::TooManyMessages(3))
        );
    }

    #[test]
    fn file_lines_embed_json_bodies_and_encode_binary_ones() {
        let key = WindowKey::from_stored("j:2026-11-08".into());
        let mut m = StagedMessage {
            seq: 1,
            destination: "d".into(),
            idempotency_key: "j:2026-11-08#1".into(),
            content_type: "application/json".into(),
            body: br#"{"a":1}"#.to_vec(),
        };
        let v: serde_json::Value = serde_json::from_str(&file_line(&key, &m)).unwrap();
        assert_eq!(v["body"]["a"], 1);
        assert_eq!(v["idempotency_key"], "j:2026-11-08#1");
        m.body = vec![0xff, 0x00];
        m.content_type = "application/octet-stream".into();
        let v: serde_json::Value = serde_json::from_str(&file_line(&key, &m)).unwrap();
        assert_eq!(v["body_base64"], "/wA=");
    }
}
