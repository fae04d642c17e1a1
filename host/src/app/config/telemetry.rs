//! `[telemetry]`: where the traces of a job's runs go (see
//! [`crate::effects::telemetry`]). Its `${VAR}`s and `${file:...}`s are
//! filled in only for a command that runs the job.

use serde::Deserialize;

use crate::core::env::{Env, expand};
use crate::core::error::{Error, Result};
use crate::core::redact::Redactor;
use crate::effects::destination::HttpTarget;

/// `[telemetry]`, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryFile {
    /// The OTLP/HTTP receiver (`http://127.0.0.1:4318`); traces go to its
    /// `/v1/traces`. `${VAR}` and `${file:PATH}` are filled in.
    pub otlp_endpoint: String,
    /// Extra request headers (`${VAR}` and `${file:PATH}` filled in).
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
}

/// Makes `[telemetry]`'s receiver the one this process exports its
/// traces to, filling in its secrets from `env` (and giving them to
/// `redactor`).
///
/// # Errors
///
/// `Error::Input` naming the field: a URL that is not `http(s)://`, an
/// unset variable, another endpoint this process exports to already.
pub fn telemetry(file: &TelemetryFile, env: &Env<'_>, redactor: &mut Redactor) -> Result<()> {
    let what = "`telemetry.otlp_endpoint`";
    let full = expand(what, &file.otlp_endpoint, env, redactor)?;
    HttpTarget::new(full.clone(), file.otlp_endpoint.clone())
        .map_err(|why| Error::input(format!("invalid {what}: {why}")))?;
    let mut headers = Vec::with_capacity(file.headers.len());
    for (name, value) in &file.headers {
        let what = format!("`telemetry.headers.{name}`");
        headers.push((name.clone(), expand(&what, value, env, redactor)?));
    }
    crate::effects::telemetry::start(&full, &file.otlp_endpoint, &headers)
}
