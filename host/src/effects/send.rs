//! One send of one message, whatever the destination: [`Sender`] picks
//! the transport (a file, HTTP) and scrubs credentials from what a failed
//! send says.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::core::error::Result;
use crate::core::redact::Redactor;
use crate::effects::destination::{Destination, HttpTarget, Target};
use crate::effects::file;
use crate::effects::http::{self, looking_agent};
use crate::effects::last_look::{LastLook, LookConnector};
pub use crate::effects::sent::{SendFailure, Sending, Sent, Uncertainty};
use crate::store::StagedMessage;

/// Sends messages; one per run.
pub struct Sender {
    agent: ureq::Agent,
    /// The agents of destinations with a `tls` table of their own, by
    /// name, made at their first send.
    trusting: Mutex<HashMap<String, ureq::Agent>>,
    /// Hands each HTTP request's connection the look it takes.
    looks: LookConnector,
    redactor: Redactor,
}

impl Sender {
    /// A sender that scrubs `redactor`'s values from every message.
    pub fn new(redactor: Redactor) -> Sender {
        let looks = LookConnector::default();
        Sender {
            agent: looking_agent(looks.clone(), None),
            trusting: Mutex::new(HashMap::new()),
            looks,
            redactor,
        }
    }

    /// The agent for destination `name` at `target`: one that trusts what
    /// its `tls` table says, else the shared one.
    fn agent(&self, name: &str, target: &HttpTarget) -> ureq::Agent {
        let Some(trust) = target.trust() else {
            return self.agent.clone();
        };
        self.trusting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(name.to_string())
            .or_insert_with(|| looking_agent(self.looks.clone(), Some(trust)))
            .clone()
    }

    /// Sends `m`, a message of the run `run` tells of, once. `still_ours`
    /// confirms the claim once more where a destination can check it
    /// atomically with the send (a file, under its lock), and gives the
    /// look that confirmation allows; an HTTP request takes `run.look`
    /// once connected, before its first byte.
    ///
    /// # Errors
    ///
    /// What `still_ours` returns.
    pub fn send(
        &self,
        name: &str,
        dest: &Destination,
        m: &StagedMessage,
        run: &Sending<'_>,
        still_ours: &mut dyn FnMut() -> Result<Option<LastLook>>,
    ) -> Result<Sent> {
        let sent = match &dest.target {
            Target::File { path } => file::append(
                name,
                path,
                run.key,
                m,
                run.maybe_there,
                run.signature,
                still_ours,
            )?,
            Target::Http(target) => {
                self.looks.set(run.look.cloned());
                let agent = self.agent(name, target);
                let sent = http::post(&agent, &self.redactor, name, target, m, run);
                self.looks.set(None);
                sent
            }
        };
        Ok(match sent {
            Sent::Failed(mut f) => {
                f.message = self.redactor.scrub(&f.message);
                Sent::Failed(f)
            }
            ok => ok,
        })
    }
}
