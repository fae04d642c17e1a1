//! One send of one message, whatever the destination: [`Sender`] picks
//! the transport (a file, HTTP) and scrubs credentials from what a failed
//! send says.

use crate::core::error::Result;
use crate::core::redact::Redactor;
use crate::effects::destination::{Destination, Target};
use crate::effects::file;
use crate::effects::http::{self, looking_agent};
use crate::effects::last_look::{LastLook, LookConnector};
pub use crate::effects::sent::{SendFailure, Sending, Sent, Uncertainty};
use crate::store::StagedMessage;

/// Sends messages; one per run.
pub struct Sender {
    agent: ureq::Agent,
    /// Hands each HTTP request's connection the look it takes.
    looks: LookConnector,
    redactor: Redactor,
}

impl Sender {
    /// A sender that scrubs `redactor`'s values from every message.
    pub fn new(redactor: Redactor) -> Sender {
        let looks = LookConnector::default();
        Sender {
            agent: looking_agent(looks.clone()),
            looks,
            redactor,
        }
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
            Target::File { path } => {
                file::append(name, path, run.key, m, run.maybe_there, still_ours)?
            }
            Target::Http(target) => {
                self.looks.set(run.look.cloned());
                let sent = http::post(&self.agent, &self.redactor, name, target, m, run);
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
