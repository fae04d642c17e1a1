//! One send of one message, whatever the destination: [`Sender`] picks
//! the transport (a file, HTTP) and scrubs credentials from what a failed
//! send says.

use crate::core::error::Result;
use crate::core::redact::Redactor;
use crate::effects::destination::{Destination, Target};
use crate::effects::file;
use crate::effects::http::{self, http_agent};
pub use crate::effects::sent::{SendFailure, Sending, Sent, Uncertainty};
use crate::store::StagedMessage;

/// Sends messages; one per run.
pub struct Sender {
    agent: ureq::Agent,
    redactor: Redactor,
}

impl Sender {
    /// A sender that scrubs `redactor`'s values from every message.
    pub fn new(redactor: Redactor) -> Sender {
        Sender {
            agent: http_agent(None),
            redactor,
        }
    }

    /// Sends `m`, a message of the run `run` tells of, once. `still_ours`
    /// confirms the claim once more where a destination can check it
    /// atomically with the send (a file, under its lock).
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
        still_ours: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Sent> {
        let sent = match &dest.target {
            Target::File { path } => {
                file::append(name, path, run.key, m, run.maybe_there, still_ours)?
            }
            Target::Http(target) => http::post(&self.agent, &self.redactor, name, target, m, run),
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
