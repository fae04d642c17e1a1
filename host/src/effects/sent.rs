//! What one send of a message came to ([`Sent`]), and, when it failed,
//! what that says about the message ([`Uncertainty`]): the words every
//! transport answers in.

use std::time::Duration;

use jiff::Timestamp;

use crate::core::window::WindowKey;
use crate::effects::last_look::LastLook;
use crate::store::Fence;

/// What one send came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// The destination has the message.
    Delivered {
        /// A few words: `http 201`, `appended`.
        detail: String,
        /// The HTTP status, for HTTP destinations.
        http_status: Option<u16>,
    },
    /// It does not, or may not.
    Failed(SendFailure),
    /// Not sent: at the last look before writing, the lease may have run
    /// out since the store last confirmed it. Nothing went out; the claim
    /// must be confirmed (or found lost) before anything is sent.
    Withheld,
}

/// A failed send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendFailure {
    /// One line for a person (no credentials).
    pub message: String,
    /// Whether the message may have arrived, and whether to try again.
    pub outcome: Uncertainty,
    /// The HTTP status, when the destination answered.
    pub http_status: Option<u16>,
    /// The destination's `Retry-After`, when it gave one.
    pub retry_after: Option<Duration>,
}

/// What a failed send says about the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncertainty {
    /// It certainly did not arrive (no connection; 429, 408 or 425): safe
    /// to send again in every mode.
    NotSent,
    /// It may have arrived (a timeout or reset after the request went out;
    /// a 5xx): sent again only at-least-once.
    Unknown,
    /// The destination refused it (a 4xx other than 408, 425 and 429, or a
    /// redirect): sending again would fail the same way.
    Refused,
}

/// What a send knows of the run its message belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Sending<'a> {
    /// The look taken just before the request is written (HTTP); `None`
    /// for a message whose run is DONE (nothing is fenced then).
    pub look: Option<&'a LastLook>,
    /// The window.
    pub key: &'a WindowKey,
    /// The fence of the claim it is sent under (an HTTP message carries
    /// it, so that an endpoint can refuse a stale sender); none for a
    /// message sent after its run is DONE.
    pub fence: Option<Fence>,
    /// An earlier process, or an earlier send of this one, may have
    /// delivered it already: a file destination then looks for its key and
    /// counts a line it finds as delivered; without it, a file that holds
    /// the key already refuses the message.
    pub maybe_there: bool,
    /// The run's clock reading when it sends (an HTTP-date `Retry-After`
    /// is measured against it).
    pub now: Timestamp,
    /// The message's signature, when this process signs (`[signing]`) and
    /// the message was committed by a chain entry.
    pub signature: Option<&'a crate::store::chain::MessageSignature>,
    /// The W3C `traceparent` an HTTP request carries, when the run is
    /// traced (`[telemetry]`).
    pub traceparent: Option<&'a str>,
}
