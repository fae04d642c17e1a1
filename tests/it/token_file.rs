//! The dashboard's `--token-file`: one every user of the machine may read
//! is served with a one-line warning naming the file, its mode and the fix;
//! one only its owner (and group) may read is served without a word. A
//! warning, not a refusal: Kubernetes mounts a Secret's files 0644 unless
//! the volume says otherwise.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Stdio;

use crate::harness::*;

/// What `jobhost serve --token-file FILE` says on stderr before it serves
/// (it is stopped once it serves).
fn said_before_serving(cfg: &Path, store: &Path, token: &Path) -> Vec<String> {
    let mut child = command(
        &root(),
        &[
            "serve",
            "--config",
            s(cfg),
            "--store",
            s(store),
            "--listen",
            "127.0.0.1:0",
            "--token-file",
            s(token),
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("jobhost starts");
    let mut said = Vec::new();
    for line in BufReader::new(child.stderr.take().expect("stderr")).lines() {
        let line = line.expect("stderr line");
        if line.contains("serving the dashboard on") {
            let _ = child.kill();
            let _ = child.wait();
            return said;
        }
        said.push(line);
    }
    let _ = child.wait();
    panic!("jobhost stopped before serving: {said:?}");
}

#[test]
fn a_world_readable_token_file_is_warned_about_and_an_owner_or_group_one_is_not() {
    let dir = scratch();
    let cfg = report_config(dir.path(), 10);
    let store = dir.path().join("s.db");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cr3t-t0ken-of-some-length\n").unwrap();
    for (mode, warned) in [
        (0o644, true),
        (0o604, true),
        (0o640, false),
        (0o600, false),
        (0o400, false),
    ] {
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).unwrap();
        let said = said_before_serving(&cfg, &store, &token);
        let warnings: Vec<&String> = said.iter().filter(|l| l.contains("--token-file")).collect();
        if !warned {
            assert!(warnings.is_empty(), "{mode:o}: {said:?}");
            continue;
        }
        assert_eq!(warnings.len(), 1, "{mode:o}: {said:?}");
        let w = warnings[0];
        assert!(w.starts_with("jobhost: warning: "), "{w}");
        assert!(w.contains(s(&token)), "names the file: {w}");
        assert!(
            w.contains(&format!("mode 0{mode:o}")),
            "names the mode: {w}"
        );
        assert!(
            w.contains(&format!("chmod 600 {}", s(&token))),
            "names the fix: {w}"
        );
    }
}

#[test]
fn a_token_file_reached_through_a_symbolic_link_is_judged_by_the_file() {
    // A Kubernetes Secret's files are links into a folder of their own.
    let dir = scratch();
    let cfg = report_config(dir.path(), 10);
    let store = dir.path().join("s.db");
    let real = dir.path().join("..data-token");
    std::fs::write(&real, "s3cr3t-t0ken-of-some-length\n").unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o644)).unwrap();
    let link = dir.path().join("token");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let said = said_before_serving(&cfg, &store, &link);
    assert!(
        said.iter()
            .any(|l| l.contains("--token-file") && l.contains("mode 0644")),
        "{said:?}"
    );
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    let said = said_before_serving(&cfg, &store, &link);
    assert!(!said.iter().any(|l| l.contains("--token-file")), "{said:?}");
}
