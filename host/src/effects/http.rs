//! HTTP delivery: one POST of a message's stored bytes with its
//! idempotency key, its window and fence, through the one HTTP client the
//! host has ([`http_agent`]), and what the answer means for the message
//! (delivered, certainly not sent, maybe sent, refused).

use std::io::Read;
use std::time::Duration;

use jiff::Timestamp;
use ureq::unversioned::resolver::DefaultResolver;
use ureq::unversioned::transport::{Connector as _, DefaultConnector};

use crate::core::redact::Redactor;
use crate::core::text::printable;
use crate::effects::destination::HttpTarget;
use crate::effects::last_look::{self, LookConnector};
use crate::effects::sent::{SendFailure, Sending, Sent, Uncertainty};
use crate::effects::tls::Trust;
use crate::store::StagedMessage;

/// The header that names the window a message belongs to (its key,
/// `daily-sales:2026-11-08`).
pub const WINDOW_HEADER: &str = "Jobhost-Window";

/// The header that carries the fence of the claim a message was sent under:
/// it grows with every takeover of the window, so an endpoint that keeps
/// the highest fence it has seen per window can refuse a message from a
/// process whose claim was taken over (the fencing-token pattern).
/// The header that carries a signed message's signature (`[signing]`):
/// its key's id, idempotency key, destination, body digest, the chain
/// entry that committed it, and the signature over them.
pub const SIGNATURE_HEADER: &str = "Jobhost-Signature";

pub const FENCE_HEADER: &str = "Jobhost-Fence";

/// The HTTP client every request of the host goes through: statuses are
/// answers, not errors; redirects are not followed (a destination, monitor
/// or model is given by its final URL); a fresh connection per request (a
/// pooled one the server has closed fails after the request was written,
/// which would make a send that never arrived look uncertain); and
/// `timeout` for the whole exchange, when given.
pub fn http_agent(timeout: Option<Duration>) -> ureq::Agent {
    ureq::Agent::new_with_config(config(timeout))
}

/// [`http_agent`] whose connections take a [`LastLook`](super::last_look)
/// before their first byte: the delivery's agent, trusting `trust` (else
/// the web roots built into the binary). (ureq's connector chain is
/// outside its semver promises, so this is the place a ureq upgrade may
/// need to touch.)
pub(super) fn looking_agent(looks: LookConnector, trust: Option<&Trust>) -> ureq::Agent {
    let mut config = config_builder(None);
    if let Some(t) = trust {
        config = config.tls_config(t.tls_config());
    }
    ureq::Agent::with_parts(
        config.build(),
        DefaultConnector::default().chain(looks),
        DefaultResolver::default(),
    )
}

/// The settings every agent shares.
fn config(timeout: Option<Duration>) -> ureq::config::Config {
    config_builder(timeout).build()
}

fn config_builder(
    timeout: Option<Duration>,
) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope> {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .max_redirects_will_error(false)
        .user_agent(concat!("jobhost/", env!("CARGO_PKG_VERSION")))
        .max_idle_connections(0)
        .max_idle_connections_per_host(0)
        .timeout_global(timeout)
}

/// Sends `m` to `t` once; `now` is the run's clock, which a
/// `Retry-After` given as an HTTP date is measured against.
pub(super) fn post(
    agent: &ureq::Agent,
    redactor: &Redactor,
    name: &str,
    t: &HttpTarget,
    m: &StagedMessage,
    run: &Sending<'_>,
) -> Sent {
    let mut req = agent
        .post(t.url())
        .header("Idempotency-Key", &m.idempotency_key)
        .header("Content-Type", &m.content_type)
        .header(WINDOW_HEADER, run.key.as_str());
    if let Some(fence) = run.fence {
        req = req.header(FENCE_HEADER, fence.0.to_string());
    }
    if let Some(sig) = run.signature {
        req = req.header(SIGNATURE_HEADER, sig.to_header());
    }
    if let Some(traceparent) = run.traceparent {
        req = req.header("traceparent", traceparent);
    }
    for (h, v) in t.headers() {
        req = req.header(h.as_str(), v.as_str());
    }
    // Shorter than the whole request's timeout, so that a host that
    // cannot be reached fails as a connect timeout (certainly not sent)
    // rather than as the overall timeout (outcome unknown).
    let connect = (t.timeout / 2).min(Duration::from_secs(10));
    let result = req
        .config()
        .timeout_global(Some(t.timeout))
        .timeout_connect(Some(connect))
        .build()
        .send(&m.body[..]);
    let shown = t.shown_url();
    match result {
        Ok(mut resp) => {
            let status = resp.status().as_u16();
            let Some(outcome) = answered(status) else {
                return Sent::Delivered {
                    detail: format!("http {status}"),
                    http_status: Some(status),
                };
            };
            let retry_after = resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, run.now));
            // A short excerpt helps a person see why; it is scrubbed of
            // credentials before it is cut or escaped (a server may echo
            // a token), and left out entirely for 401 and 403.
            let mut snippet = Vec::new();
            if !matches!(status, 401 | 403) {
                let _ = resp
                    .body_mut()
                    .as_reader()
                    .take(4096)
                    .read_to_end(&mut snippet);
            }
            let body = one_line(&redactor.scrub(&String::from_utf8_lossy(&snippet)), 200);
            let hint = match status {
                300..=399 => {
                    "; jobhost does not follow redirects: point the destination at the final URL"
                }
                401 | 403 => "; check the credentials in the destination's headers",
                _ => "",
            };
            let reason = resp.status().canonical_reason().unwrap_or("");
            Sent::Failed(SendFailure {
                message: format!(
                    "destination `{name}` ({shown}) answered {status} {reason}{}{hint}",
                    if body.is_empty() {
                        String::new()
                    } else {
                        format!(": {body}")
                    }
                ),
                outcome,
                http_status: Some(status),
                retry_after,
            })
        }
        Err(e) if last_look::withheld(&e) => Sent::Withheld,
        // Its head went out: the destination holds part of a request,
        // which it should drop, but nobody can be sure.
        Err(e) if last_look::cut_short(&e) => Sent::Failed(SendFailure {
            message: format!(
                "request to destination `{name}` ({}) was {}",
                t.shown_url(),
                last_look::CutShort
            ),
            outcome: Uncertainty::Unknown,
            http_status: None,
            retry_after: None,
        }),
        Err(e) => {
            let certificate = bad_certificate(&e);
            let outcome = match &e {
                // The server's certificate is checked in the handshake,
                // before any byte of the request.
                _ if certificate.is_some() => Uncertainty::NotSent,
                ureq::Error::HostNotFound
                | ureq::Error::ConnectionFailed
                | ureq::Error::BadUri(_)
                | ureq::Error::InvalidProxyUrl
                | ureq::Error::ConnectProxyFailed(_)
                | ureq::Error::Tls(_)
                | ureq::Error::Rustls(_)
                | ureq::Error::Timeout(ureq::Timeout::Resolve | ureq::Timeout::Connect) => {
                    Uncertainty::NotSent
                }
                // Only errors that cannot happen once a connection is up:
                // an unreachable host or network can also end an
                // established connection whose request went out.
                ureq::Error::Io(io)
                    if matches!(
                        io.kind(),
                        std::io::ErrorKind::ConnectionRefused
                            | std::io::ErrorKind::AddrNotAvailable
                    ) =>
                {
                    Uncertainty::NotSent
                }
                _ => Uncertainty::Unknown,
            };
            let hint = certificate.map_or_else(String::new, |c| certificate_hint(name, t, c));
            Sent::Failed(SendFailure {
                message: format!("cannot POST to destination `{name}` ({shown}): {e}{hint}"),
                outcome,
                http_status: None,
                retry_after: None,
            })
        }
    }
}

/// The server certificate's fault, when the TLS handshake failed on it.
fn bad_certificate(e: &ureq::Error) -> Option<&rustls::CertificateError> {
    let tls = match e {
        ureq::Error::Rustls(r) => Some(r),
        // A failed handshake reaches ureq as an I/O error carrying rustls's.
        ureq::Error::Io(io) => io
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>()),
        _ => None,
    };
    match tls? {
        rustls::Error::InvalidCertificate(c) => Some(c),
        _ => None,
    }
}

/// What to do about a certificate the destination's trust refused.
fn certificate_hint(name: &str, t: &HttpTarget, c: &rustls::CertificateError) -> String {
    use rustls::CertificateError as C;
    match (c, t.trust()) {
        (C::UnknownIssuer, None) => format!(
            "; its certificate is not signed by an authority the web roots built into jobhost \
             hold: if a private CA signed it, set `destinations.{name}.tls.ca_file` to that \
             CA's PEM file (or `tls.roots = \"system\"` to trust this machine's roots)"
        ),
        (C::UnknownIssuer, Some(trust)) => format!(
            "; its certificate is not signed by an authority `destinations.{name}.tls` trusts \
             ({}): check that `ca_file` holds the CA that signed it",
            trust.describe()
        ),
        (C::NotValidForName | C::NotValidForNameContext { .. }, _) => {
            "; its certificate does not name the URL's host: use a host name (or IP address) \
             the certificate holds"
                .to_string()
        }
        _ => String::new(),
    }
}

/// What a destination's answer `status` says about the message: `None`
/// when it has it (2xx), else whether it certainly did not arrive, may
/// have arrived, or was refused.
fn answered(status: u16) -> Option<Uncertainty> {
    Some(match status {
        200..=299 => return None,
        408 | 425 | 429 => Uncertainty::NotSent,
        // 409: a request with this idempotency key is still being
        // processed (an earlier send that timed out here).
        409 | 500..=599 => Uncertainty::Unknown,
        _ => Uncertainty::Refused,
    })
}

/// `Retry-After` as delta-seconds or an HTTP date, measured from `now`
/// (the run's clock: a virtual one in tests, the host's otherwise).
fn parse_retry_after(v: &str, now: Timestamp) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = jiff::fmt::rfc2822::parse(v).ok()?.timestamp();
    Some(now.duration_until(at).try_into().unwrap_or(Duration::ZERO))
}

/// `text` on one line, escaped (see `text::printable`), at most `max` chars.
fn one_line(text: &str, max: usize) -> String {
    let mut out = printable(text.trim()).into_owned();
    if out.chars().count() > max {
        out = out.chars().take(max).collect::<String>() + "...";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_status_says_whether_the_message_arrived_may_have_or_was_refused() {
        use Uncertainty::{NotSent, Refused, Unknown};
        for status in 100..=599u16 {
            let expected = match status {
                200..=299 => None,
                // Too many requests, a timeout before the request was read,
                // too early: the destination did not act on it.
                408 | 425 | 429 => Some(NotSent),
                // A request with the same idempotency key still in hand.
                409 => Some(Unknown),
                // The server failed somewhere while holding the request.
                500..=599 => Some(Unknown),
                // Redirects are not followed and every other 4xx fails the
                // same way if sent again.
                _ => Some(Refused),
            };
            assert_eq!(answered(status), expected, "http {status}");
        }
    }

    #[test]
    fn retry_after_is_read_as_seconds_or_a_date() {
        assert_eq!(
            parse_retry_after("120", Timestamp::now()),
            Some(Duration::from_secs(120))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", Timestamp::now()),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(parse_retry_after("soon", Timestamp::now()), None);
        // Measured on the run's clock, not the machine's.
        let virtual_now: Timestamp = "2015-10-21T07:27:30Z".parse().unwrap();
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", virtual_now),
            Some(Duration::from_secs(30))
        );
    }
}
