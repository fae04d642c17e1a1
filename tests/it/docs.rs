//! Every TOML example in the README and in `docs/` is a config jobhost
//! accepts, so the documentation cannot drift from the config format.

use std::path::{Path, PathBuf};

use jobhost::app::config::{JobConfig, RunFlags};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests package sits in the repository")
        .to_path_buf()
}

/// Every ```toml block of `text`, with the line it starts on.
fn toml_blocks(text: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        match &mut current {
            None if line.trim_start() == "```toml" => current = Some((n + 1, String::new())),
            None => {}
            Some(_) if line.trim_start() == "```" => blocks.extend(current.take()),
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    assert!(current.is_none(), "a ```toml block is not closed");
    blocks
}

/// Every Markdown file the docs test reads: the README, `deploy/README.md`
/// and `docs/*.md`.
fn documents() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md"), root().join("deploy/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("a docs folder")
        .map(|e| e.expect("a docs entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Every `ca_file = "NAME"` a config shows stands for a CA's PEM file
/// there, beside the config in `dir`.
fn provide_ca_files(dir: &Path, body: &str) {
    // Every `${file:${CREDENTIALS_DIRECTORY}/NAME}` stands for a secret
    // file there (the test's `CREDENTIALS_DIRECTORY` is `dir`), kept as a
    // credential is: readable by its owner alone.
    const REFERENCE: &str = "${file:${CREDENTIALS_DIRECTORY}/";
    for (at, _) in body.match_indices(REFERENCE) {
        let rest = &body[at + REFERENCE.len()..];
        let name = &rest[..rest.find('}').expect("a closed ${file:...}")];
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        std::fs::write(&path, format!("secret-in-{name}\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
    }
    for line in body.lines() {
        // A signing key named as `[signing] key_file` shows it.
        if let Some(rest) = line.trim_start().strip_prefix("key_file = \"")
            && let Some((name, _)) = rest.split_once('"')
        {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let _ = std::fs::remove_file(&path);
            std::fs::write(&path, jobhost::store::chain::Signer::generate().unwrap()).unwrap();
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .unwrap();
            continue;
        }
        let Some(rest) = line.trim_start().strip_prefix("ca_file = \"") else {
            continue;
        };
        let Some((name, _)) = rest.split_once('"') else {
            continue;
        };
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, crate::tls::test_ca().pem).unwrap();
    }
}

#[test]
fn every_toml_example_in_the_docs_is_a_config_jobhost_accepts() {
    let dir = tempfile::tempdir().unwrap();
    // Every `${VAR}` a document uses stands for a value here, and the
    // folder of secret files for systemd's `CREDENTIALS_DIRECTORY`.
    let credentials = dir.path().to_path_buf();
    let env = |name: &str| match name {
        "CREDENTIALS_DIRECTORY" => Some(credentials.clone().into_os_string()),
        _ => Some(format!("value-of-{name}").into()),
    };
    let mut configs = 0;
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, body) in toml_blocks(&text) {
            let at = format!("{}:{line}", file.display());
            if body.starts_with("# Cargo.toml") {
                // A component's manifest, not a job config: TOML all the same.
                body.parse::<toml::Table>()
                    .unwrap_or_else(|e| panic!("{at}: not TOML: {e}"));
                continue;
            }
            let path = dir.path().join(format!("example-{configs}.toml"));
            std::fs::write(&path, &body).unwrap();
            provide_ca_files(dir.path(), &body);
            // A section shown alone (`[ping]`, `[digest]`) is a whole
            // config too, given a component and a cache folder.
            let flags = RunFlags {
                config: Some(path),
                component: Some(dir.path().join("report.wasm")),
                cache_dir: Some(dir.path().join("cache")),
                ..RunFlags::default()
            };
            let job = JobConfig::load(&flags)
                .and_then(|c| c.job(&env))
                .unwrap_or_else(|e| panic!("{at}: the config shown is refused: {e}"));
            assert!(!job.name().as_str().is_empty(), "{at}");
            configs += 1;
        }
    }
    // The job config reference, the ping URLs and the digest model at least.
    assert!(configs >= 3, "only {configs} job configs found in the docs");
}

#[test]
fn the_full_config_example_means_what_its_comments_say() {
    let text = std::fs::read_to_string(root().join("docs/config.md")).unwrap();
    let (_, body) = toml_blocks(&text)
        .into_iter()
        .find(|(_, b)| b.starts_with("job = "))
        .expect("docs/config.md shows a whole job config");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.toml");
    std::fs::write(&path, body).unwrap();
    let env = |name: &str| match name {
        "LEDGER_TOKEN" => Some("t0ken-from-env".into()),
        "HC_UUID" => Some("hc-uuid-from-env".into()),
        _ => None,
    };
    let job = JobConfig::load(&RunFlags {
        config: Some(path),
        ..RunFlags::default()
    })
    .unwrap()
    .job(&env)
    .unwrap();
    assert_eq!(job.schedule.zone.name(), "Europe/Berlin");
    assert_eq!(job.guest.limits.report_bytes, 1 << 20);
    assert_eq!(job.guest.params, vec![("top".to_string(), "5".to_string())]);
    assert!(!job.pings.is_empty());
    assert!(
        !format!("{job:?}").contains("t0ken-from-env"),
        "Debug hides credentials"
    );
    assert_eq!(job.redactor.scrub("sent t0ken-from-env"), "sent ***");
    assert_eq!(job.redactor.scrub("hc-uuid-from-env"), "***");
}

#[test]
fn the_docs_link_only_to_files_that_exist() {
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        let base = file.parent().unwrap();
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let Some(end) = rest.find(')') else { continue };
            let target = rest[..end].split('#').next().unwrap_or_default();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            assert!(
                base.join(target).exists(),
                "{} links to `{target}`, which does not exist",
                file.display()
            );
        }
    }
}
