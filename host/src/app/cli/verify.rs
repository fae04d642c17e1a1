//! `jobhost keygen`, `jobhost verify` and `jobhost verify-message`: the
//! signing key, the check of a store's chains or an exported run, and a
//! recipient's check of one message.

use std::io::Read as _;
use std::path::PathBuf;

use super::Out;
use super::flags::StoreFlags;
use crate::core::error::Error;
use crate::core::text::printable;
use crate::run::replay::Recording;
use crate::run::verify::{final_state, verify_file, verify_store};
use crate::store::chain::{MessageSignature, PublicKey, Signer};
use crate::store::verify::{Problem, Verdict};

/// The exit code of a chain or message that does not verify.
pub const BROKEN: i32 = 7;

/// `jobhost keygen`.
#[derive(Debug, clap::Args)]
pub(super) struct KeygenArgs {
    /// Where to write the private key (0600); its public key goes beside
    /// it, as FILE.pub.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// `jobhost verify`.
#[derive(Debug, clap::Args)]
pub(super) struct VerifyArgs {
    /// Only this job's chain.
    #[arg(long, value_name = "NAME")]
    job: Option<String>,
    /// A public key the entries must be signed by (repeat it for the keys
    /// of before and after a rotation); without one, signatures are not
    /// checked.
    #[arg(long = "public-key", value_name = "FILE")]
    public_keys: Vec<PathBuf>,
    /// Check an exported run (`jobhost export`) instead of a store, with
    /// nothing but the file and the public keys.
    #[arg(long, value_name = "FILE", conflicts_with = "job")]
    file: Option<PathBuf>,
    /// One JSON line per job instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    store: StoreFlags,
}

/// `jobhost verify-message`.
#[derive(Debug, clap::Args)]
pub(super) struct VerifyMessageArgs {
    /// The public key of the job that sent it.
    #[arg(long = "public-key", value_name = "FILE")]
    public_key: PathBuf,
    /// The `Jobhost-Signature` header's value of an HTTP delivery.
    #[arg(long, value_name = "TEXT", requires = "body", conflicts_with = "lines")]
    signature: Option<String>,
    /// The body as received (`-` for standard input).
    #[arg(long, value_name = "FILE")]
    body: Option<PathBuf>,
    /// A file destination's file: every line of it is checked.
    #[arg(long, value_name = "FILE")]
    lines: Option<PathBuf>,
}

/// `jobhost keygen --out FILE`: 0 written, 2 refused.
pub(super) fn keygen(args: KeygenArgs) -> Result<i32, Error> {
    let pem = Signer::generate()?;
    let signer = Signer::from_pem(&pem, "the new key")?;
    let public = public_path(&args.out);
    let shown = args.out.display().to_string();
    for p in [&args.out, &public] {
        if p.exists() {
            return Err(Error::input(format!(
                "`{}` exists already; keygen never overwrites a key (the entries it signed would \
                 no longer verify against a new one): choose another --out",
                p.display()
            )));
        }
    }
    write_new(&args.out, pem.as_bytes(), 0o600)?;
    write_new(&public, signer.public_pem().as_bytes(), 0o644)?;
    Out::stdout().line(&format!(
        "key {}: private key {shown} (0600; name it in `[signing] key_file`), public key {} \
         (for `jobhost verify --public-key` and recipients)",
        signer.id(),
        public.display()
    ))?;
    Ok(0)
}

/// `FILE.pub`.
fn public_path(out: &std::path::Path) -> PathBuf {
    let mut p = out.as_os_str().to_owned();
    p.push(".pub");
    PathBuf::from(p)
}

/// Creates `path` with `mode`, never over a file that exists.
fn write_new(path: &std::path::Path, bytes: &[u8], mode: u32) -> Result<(), Error> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut f = options
        .open(path)
        .map_err(|e| Error::input(format!("cannot write `{}`: {e}", path.display())))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| Error::host(format!("cannot write `{}`", path.display())).because(e))
}

/// The public keys named.
fn keys(paths: &[PathBuf]) -> Result<Vec<PublicKey>, Error> {
    paths.iter().map(|p| PublicKey::load(p)).collect()
}

/// `jobhost verify`: 0 every chain holds and accounts for every row, 7
/// otherwise, 2 for bad input.
pub(super) fn verify(args: VerifyArgs) -> Result<i32, Error> {
    let keys = keys(&args.public_keys)?;
    let mut out = Out::stdout();
    if let Some(file) = &args.file {
        let bytes = Recording::read_file(file)?;
        let recording = Recording::from_file(&bytes)
            .map_err(|e| Error::input(format!("`{}`", file.display())).because(e))?;
        let v = verify_file(&recording, &keys);
        let key = recording.journal.context.key.clone();
        if args.json {
            let line = serde_json::json!({
                "file": file.display().to_string(),
                "key": key,
                "state": final_state(&recording),
                "verdict": v,
            });
            super::write_json(&mut out, &line)?;
        } else {
            let state = final_state(&recording).unwrap_or_else(|| "unknown".into());
            out.line(&format!(
                "run {}: {} entr{}, {}; {}",
                printable(&key),
                v.entries,
                if v.entries == 1 { "y" } else { "ies" },
                signatures(&v, &keys),
                if v.findings.is_empty() {
                    format!("its report, journal and messages are the ones committed ({state})")
                } else {
                    format!("{} problem(s)", v.findings.len())
                }
            ))?;
            findings(&mut out, &v)?;
        }
        return Ok(if v.findings.is_empty() { 0 } else { BROKEN });
    }
    let mut store = crate::store::open_read_only(&args.store.location()?)?;
    let verdicts = verify_store(store.as_mut(), args.job.as_deref(), &keys)?;
    let broken = verdicts.iter().filter(|v| !v.findings.is_empty()).count();
    for v in &verdicts {
        if args.json {
            super::write_json(&mut out, v)?;
            continue;
        }
        out.line(&format!(
            "job {}: {} entr{}, {}{}; {}",
            printable(&v.job),
            v.entries,
            if v.entries == 1 { "y" } else { "ies" },
            signatures(v, &keys),
            if v.adopted > 0 {
                format!(
                    ", {} row(s) from before the chain (covered from their next change)",
                    v.adopted
                )
            } else {
                String::new()
            },
            if v.findings.is_empty() {
                "verified".to_string()
            } else {
                format!("{} problem(s)", v.findings.len())
            }
        ))?;
        findings(&mut out, v)?;
    }
    if !args.json {
        out.line(&if verdicts.is_empty() {
            "nothing to verify: the store has no chain yet".to_string()
        } else if broken == 0 {
            format!(
                "verified: {} job(s), {} entries, every row accounted for",
                verdicts.len(),
                verdicts.iter().map(|v| v.entries).sum::<u64>()
            )
        } else {
            format!(
                "NOT verified: {broken} of {} job(s) have problems (the first listed of each is \
                 the first broken link); see docs/chain.md",
                verdicts.len()
            )
        })?;
    }
    Ok(if broken == 0 { 0 } else { BROKEN })
}

/// How the entries were signed, for a person.
fn signatures(v: &Verdict, keys: &[PublicKey]) -> String {
    if keys.is_empty() {
        if v.unchecked > 0 {
            format!("{} signed (not checked: give --public-key)", v.unchecked)
        } else {
            "unsigned".to_string()
        }
    } else {
        format!("{} with a good signature", v.signed)
    }
}

/// The findings, one indented line each.
fn findings(out: &mut Out, v: &Verdict) -> Result<(), Error> {
    for f in &v.findings {
        let word = match f.problem {
            Problem::Edited => "edited",
            Problem::Broken => "broken",
            Problem::Signature => "signature",
            Problem::Changed => "changed",
            Problem::Deleted => "deleted",
            Problem::Outside => "outside",
        };
        out.line(&format!("  {word}: {}", printable(&f.what)))?;
    }
    Ok(())
}

/// `jobhost verify-message`: 0 the signature holds, 7 it does not, 2 bad
/// input.
pub(super) fn verify_message(args: VerifyMessageArgs) -> Result<i32, Error> {
    let key = PublicKey::load(&args.public_key)?;
    let mut out = Out::stdout();
    if let Some(lines) = &args.lines {
        return verify_lines(&mut out, &key, lines);
    }
    let (Some(header), Some(body)) = (&args.signature, &args.body) else {
        return Err(Error::input(
            "give --signature HEADER and --body FILE (an HTTP delivery), or --lines FILE (a file \
             destination's file)",
        ));
    };
    let sig = MessageSignature::from_header(header)?;
    let body = read_body(body)?;
    Ok(match sig.check(&key, &body) {
        Ok(()) => {
            out.line(&format!(
                "verified: message {} for `{}`, committed by chain entry {}, signed by key {}",
                printable(&sig.idempotency_key),
                printable(&sig.destination),
                printable(&sig.entry),
                printable(&sig.key_id)
            ))?;
            0
        }
        Err(why) => {
            out.line(&format!(
                "NOT verified: message {}: {}",
                printable(&sig.idempotency_key),
                printable(&why)
            ))?;
            BROKEN
        }
    })
}

/// The most bytes of a body or lines file read.
const MOST_BODY: u64 = 256 << 20;

fn read_body(path: &std::path::Path) -> Result<Vec<u8>, Error> {
    let mut bytes = Vec::new();
    let read = if path.as_os_str() == "-" {
        std::io::stdin().take(MOST_BODY + 1).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MOST_BODY + 1).read_to_end(&mut bytes))
    };
    read.map_err(|e| Error::input(format!("cannot read `{}`: {e}", path.display())))?;
    if bytes.len() as u64 > MOST_BODY {
        return Err(Error::input(format!(
            "`{}` is larger than {} MiB, more than a message body",
            path.display(),
            MOST_BODY >> 20
        )));
    }
    Ok(bytes)
}

/// Checks every line of a file destination's file.
fn verify_lines(out: &mut Out, key: &PublicKey, path: &std::path::Path) -> Result<i32, Error> {
    let bytes = read_body(path)?;
    let (mut good, mut bad) = (0_u64, 0_u64);
    for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let at = n + 1;
        let verdict = serde_json::from_slice::<serde_json::Value>(line)
            .map_err(|e| format!("not a JSON line ({e})"))
            .and_then(|v| {
                let sig: MessageSignature = serde_json::from_value(v["signature"].clone())
                    .map_err(|_| "it carries no signature (its job signs nothing)".to_string())?;
                let candidates = crate::effects::file::line_bodies(&v);
                if candidates.is_empty() {
                    return Err("it carries no body".to_string());
                }
                let mut last = String::new();
                for body in candidates {
                    match sig.check(key, &body) {
                        Ok(()) => return Ok(sig),
                        Err(why) => last = why,
                    }
                }
                Err(last)
            });
        match verdict {
            Ok(sig) => {
                good += 1;
                out.line(&format!(
                    "line {at}: verified: message {} for `{}`, entry {}",
                    printable(&sig.idempotency_key),
                    printable(&sig.destination),
                    printable(&sig.entry)
                ))?;
            }
            Err(why) => {
                bad += 1;
                out.line(&format!("line {at}: NOT verified: {}", printable(&why)))?;
            }
        }
    }
    out.line(&format!("{good} verified, {bad} not"))?;
    Ok(if bad == 0 && good > 0 { 0 } else { BROKEN })
}
