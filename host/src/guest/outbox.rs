//! The outbox a guest stages its messages in during its run: each checked
//! against the job's destination names and limits, numbered in order, and
//! given its idempotency key `<window key>#<sequence number>`. They are
//! committed with the report and delivered afterwards (see
//! `effects::delivery`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::core::failpoint::{Boundary, Failpoints};
use crate::core::text::echoed;
use crate::core::window::WindowKey;
use crate::store::StagedMessage;

/// Why `send` refused a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// How much one run may stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboxLimits {
    /// Messages a run may stage.
    pub max_messages: u32,
    /// Bytes of one message's body.
    pub max_message_bytes: u64,
    /// Bytes of all of a run's messages together.
    pub max_staged_bytes: u64,
}

/// The messages one run stages.
#[derive(Debug)]
pub struct Staging {
    key: WindowKey,
    /// The prefix of idempotency keys: the window key, or `<key>~r<N>` for
    /// revision N > 1.
    prefix: String,
    destinations: Vec<String>,
    max_messages: u32,
    max_bytes: u64,
    max_total: u64,
    total: u64,
    messages: Vec<StagedMessage>,
    failpoints: Option<Arc<dyn Failpoints>>,
    closed: bool,
}

impl Staging {
    /// An empty outbox for the run of `key`, to `destinations`, within
    /// `limits`.
    pub fn new(key: WindowKey, destinations: Vec<String>, limits: OutboxLimits) -> Self {
        Staging {
            prefix: key.to_string(),
            key,
            destinations,
            max_messages: limits.max_messages,
            max_bytes: limits.max_message_bytes,
            max_total: limits.max_staged_bytes,
            total: 0,
            messages: Vec::new(),
            failpoints: None,
            closed: false,
        }
    }

    /// Gives the messages of revision `revision` of the window their keys
    /// (`<key>~r<N>#<seq>` past the first revision).
    pub fn for_revision(mut self, revision: u32) -> Self {
        self.prefix = crate::store::message_prefix(&self.key, revision);
        self
    }

    /// Refuses every later message (as an unknown destination): once `run`
    /// has returned, describing the run may cause no effect.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Stops at [`Boundary::InGuest`] on every `send` (tests only).
    pub fn with_failpoints(mut self, failpoints: Option<Arc<dyn Failpoints>>) -> Self {
        self.failpoints = failpoints;
        self
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
        self.check(&destination, body.len() as u64, &content_type)?;
        Ok(self.stage_checked(destination, body, content_type))
    }

    /// Whether a message of `size` bytes for `destination` with
    /// `content_type` would be staged, decided before its body is read: a
    /// refused message costs the host no copy of it. A name or content type
    /// that is echoed back is cut to the longest one the host accepts.
    ///
    /// # Errors
    ///
    /// The [`StageError`] [`Staging::stage`] would answer.
    pub fn check(
        &self,
        destination: &str,
        size: u64,
        content_type: &str,
    ) -> std::result::Result<(), StageError> {
        if self.closed || !self.destinations.iter().any(|d| d == destination) {
            return Err(StageError::UnknownDestination(echoed(
                destination,
                MAX_DESTINATION_NAME,
            )));
        }
        if size > self.max_bytes {
            return Err(StageError::TooLarge(self.max_bytes));
        }
        if self.total + size > self.max_total {
            return Err(StageError::TooLarge(self.max_total));
        }
        if self.messages.len() as u32 >= self.max_messages {
            return Err(StageError::TooManyMessages(self.max_messages));
        }
        if !valid_content_type(content_type) {
            return Err(StageError::InvalidContentType(echoed(
                content_type,
                MAX_CONTENT_TYPE,
            )));
        }
        Ok(())
    }

    /// Stages a message [`Staging::check`] accepted; returns its sequence
    /// number.
    pub fn stage_checked(
        &mut self,
        destination: String,
        body: Vec<u8>,
        content_type: String,
    ) -> u32 {
        if let Some(f) = &self.failpoints {
            f.reached(Boundary::InGuest);
        }
        let seq = self.messages.len() as u32 + 1;
        self.total += body.len() as u64;
        self.messages.push(StagedMessage {
            seq,
            destination,
            idempotency_key: format!("{}#{seq}", self.prefix),
            content_type,
            body,
        });
        seq
    }

    /// The limits: messages, bytes per message, bytes in all.
    pub fn limits(&self) -> (u32, u64, u64) {
        (self.max_messages, self.max_bytes, self.max_total)
    }

    /// The staged messages, in order.
    pub fn into_messages(self) -> Vec<StagedMessage> {
        self.messages
    }
}

/// The longest destination name a config may declare, in bytes.
pub const MAX_DESTINATION_NAME: usize = 64;

/// The longest content type `send` accepts, in bytes.
pub const MAX_CONTENT_TYPE: usize = 256;

fn valid_content_type(t: &str) -> bool {
    let essence = t.split(';').next().unwrap_or("").trim();
    let mut parts = essence.split('/');
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    matches!((parts.next(), parts.next(), parts.next()), (Some(a), Some(b), None) if token(a) && token(b))
        && t.len() <= MAX_CONTENT_TYPE
        && !t.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staging() -> Staging {
        Staging::new(
            WindowKey::from_stored("daily-report:2026-11-08".into()),
            vec!["digest".into()],
            OutboxLimits {
                max_messages: 3,
                max_message_bytes: 10,
                max_staged_bytes: 15,
            },
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
}
