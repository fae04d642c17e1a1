//! The deployments under `deploy/` are correct by default: the systemd
//! units pass `systemd-analyze verify`, every YAML file parses and the
//! Kubernetes manifests pass a schema check, the job configs they carry are
//! configs jobhost accepts, the container image builds from its
//! Containerfile, and the field report's example shows the duplicate, the
//! warning, the refusal and the fix. A test whose tool is missing skips,
//! saying so on stderr, except under `CI`, where it fails.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use jobhost::app::config::{JobConfig, RunFlags};
use serde_norway::Value as Yaml;

use crate::harness::*;

/// A skip, past the harness's capture, as every skip is said; under `CI`
/// (where `.ci/run` installs every tool) a failure instead.
fn skipped(test: &str, why: &str) {
    assert!(std::env::var_os("CI").is_none(), "deploy::{test}: {why}");
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED deploy::{test}: {why}");
}

/// `tool` on the PATH (or in /usr/sbin, /sbin), or `None`.
fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

fn deploy() -> PathBuf {
    root().join("deploy")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every YAML file under `deploy/`, sorted.
fn yaml_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&deploy(), &mut files);
    files.sort();
    files
}

/// Every document of a YAML file.
fn documents(path: &Path) -> Vec<Yaml> {
    let text = read(path);
    serde_norway::Deserializer::from_str(&text)
        .map(|d| {
            serde::Deserialize::deserialize(d)
                .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()))
        })
        .collect()
}

/// The Kubernetes object of `kind` in `file` under deploy/kubernetes.
fn object(file: &str, kind: &str) -> Yaml {
    documents(&deploy().join("kubernetes").join(file))
        .into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("{file} holds no {kind}"))
}

fn strings(v: &Yaml) -> Vec<&str> {
    v.as_sequence()
        .unwrap_or_else(|| panic!("not a list: {v:?}"))
        .iter()
        .map(|s| s.as_str().expect("a string"))
        .collect()
}

#[test]
fn every_yaml_file_parses_and_says_what_the_deployment_needs() {
    let files = yaml_files();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(deploy()).unwrap().display().to_string())
        .collect();
    for expected in [
        "container/compose.yaml",
        "kubernetes/cronjob.yaml",
        "kubernetes/deployment.yaml",
        "kubernetes/secret.yaml",
        "kubernetes/configmap.yaml",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected}: {names:?}");
    }
    for f in &files {
        assert!(!documents(f).is_empty(), "{}", f.display());
    }

    // The CronJob: one pod at a time, a deadline, no pod retries, the store
    // in PostgreSQL with its password from the Secret.
    let cron = object("cronjob.yaml", "CronJob");
    let spec = &cron["spec"];
    assert_eq!(spec["concurrencyPolicy"], "Forbid");
    assert!(spec["startingDeadlineSeconds"].as_u64().unwrap() < 900);
    assert_eq!(spec["jobTemplate"]["spec"]["backoffLimit"], 0);
    let pod = &spec["jobTemplate"]["spec"]["template"]["spec"];
    assert_store_from_secret(&pod["containers"][0]);
    assert_eq!(strings(&pod["containers"][0]["args"])[0], "run");

    // The Deployment: two daemons on that store, probes and scraping on 8480.
    let deployment = object("deployment.yaml", "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let template = &deployment["spec"]["template"];
    let annotations = &template["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], "8480");
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
    let container = &template["spec"]["containers"][0];
    assert_store_from_secret(container);
    let args = strings(&container["args"]);
    assert_eq!(args[0], "daemon");
    let after = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(after("--listen"), "0.0.0.0:8480");
    assert!(after("--token-file").starts_with("/run/secrets/"));
    assert_eq!(container["ports"][0]["containerPort"], 8480);
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(container[probe]["httpGet"]["path"], "/healthz", "{probe}");
        assert_eq!(container[probe]["httpGet"]["port"], "dashboard", "{probe}");
    }
    let secret = object("secret.yaml", "Secret");
    for key in ["pgpassword", "dashboard-token"] {
        assert!(secret["stringData"][key].is_string(), "{key}");
    }

    // Compose: PostgreSQL as the store, the daemon, the dashboard's port and
    // its token from a secret.
    let compose = &documents(&deploy().join("container/compose.yaml"))[0];
    let jobhost = &compose["services"]["jobhost"];
    assert!(
        compose["services"]["db"]["image"]
            .as_str()
            .unwrap()
            .contains("postgres")
    );
    let store = jobhost["environment"]["JOBHOST_STORE"].as_str().unwrap();
    // `$${` is compose's escape for the `${` that jobhost fills in.
    assert!(
        store.starts_with("postgres://jobhost:$${PGPASSWORD}@db:"),
        "{store}"
    );
    assert_eq!(strings(&jobhost["ports"]), ["8480:8480"]);
    let command = strings(&jobhost["command"]);
    assert_eq!(command[0], "daemon");
    assert!(command.contains(&"--token-file") && command.contains(&"0.0.0.0:8480"));
    assert_eq!(strings(&jobhost["secrets"]), ["dashboard_token"]);
}

/// The container's store is PostgreSQL, its password from the Secret and
/// filled in by jobhost from the environment.
fn assert_store_from_secret(container: &Yaml) {
    let env = container["env"].as_sequence().unwrap();
    let var = |name: &str| {
        env.iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert_eq!(
        var("PGPASSWORD")["valueFrom"]["secretKeyRef"]["name"],
        "jobhost"
    );
    let store = var("JOBHOST_STORE")["value"].as_str().unwrap();
    assert!(
        store.starts_with("postgres://jobhost:${PGPASSWORD}@"),
        "{store}"
    );
}

#[test]
fn the_job_configs_the_deployments_carry_are_configs_jobhost_accepts() {
    let dir = scratch();
    let configmap = object("configmap.yaml", "ConfigMap");
    let configs = [
        (
            "the ConfigMap",
            configmap["data"]["daily-sales.toml"]
                .as_str()
                .unwrap()
                .to_string(),
        ),
        (
            "the image's sample",
            read(&deploy().join("container/daily-sales.toml")),
        ),
    ];
    for (what, text) in configs {
        let path = dir.path().join("job.toml");
        std::fs::write(&path, &text).unwrap();
        let job = JobConfig::load(&RunFlags {
            config: Some(path),
            store: Some("postgres://jobhost:${PGPASSWORD}@postgres:5432/jobhost".into()),
            ..RunFlags::default()
        })
        .and_then(|c| c.job(&|_: &str| Some("secret".into())))
        .unwrap_or_else(|e| panic!("{what} is refused: {e}"));
        assert_eq!(job.name().as_str(), "daily-sales", "{what}");
        assert!(
            text.contains("component = \"/opt/jobhost/report.wasm\""),
            "{what}"
        );
    }
}

#[test]
fn every_systemd_unit_passes_systemd_analyze_verify() {
    let test = "every_systemd_unit_passes_systemd_analyze_verify";
    let Some(analyze) = tool("systemd-analyze") else {
        return skipped(
            test,
            "systemd-analyze is not installed (Debian: apt-get install systemd)",
        );
    };
    let units = deploy().join("systemd");
    let daemon = read(&units.join("jobhost-daemon.service"));
    let oneshot = read(&units.join("jobhost@.service"));
    let timer = read(&units.join("jobhost@.timer"));
    for (name, text) in [
        ("jobhost-daemon.service", &daemon),
        ("jobhost@.service", &oneshot),
    ] {
        for line in [
            "StateDirectory=jobhost",
            "DynamicUser=yes",
            "ProtectSystem=strict",
            "PrivateTmp=yes",
            "NoNewPrivileges=yes",
            "Environment=JOBHOST_STORE=/var/lib/jobhost/jobhost.db",
            "Environment=JOBHOST_REQUIRE_DURABLE_STORE=1",
        ] {
            assert!(text.lines().any(|l| l == line), "{name} lacks {line}");
        }
    }
    assert!(daemon.lines().any(|l| l == "Restart=on-failure"));
    assert!(timer.lines().any(|l| l == "Persistent=true"));
    assert!(timer.lines().any(|l| l.starts_with("RandomizedDelaySec=")));

    // verify wants ExecStart's binary to exist: the units name the
    // installed /usr/local/bin/jobhost, the copies the binary just built.
    // A template is verified as an instance of it.
    let dir = scratch();
    let binary = env!("CARGO_BIN_EXE_jobhost-under-test");
    let mut files = Vec::new();
    for (name, text) in [
        ("jobhost-daemon.service", &daemon),
        ("jobhost@daily-sales.service", &oneshot),
        ("jobhost@daily-sales.timer", &timer),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, text.replace("/usr/local/bin/jobhost", binary)).unwrap();
        files.push(path);
    }
    let out = Command::new(analyze)
        .arg("verify")
        .args(&files)
        .env("SYSTEMD_LOG_LEVEL", "notice")
        .output()
        .unwrap();
    let run = to_run(out);
    assert_eq!(run.code, 0, "systemd-analyze verify: {}", run.stderr);
    // Unknown keys and other mistakes are only warnings to verify: none.
    assert_eq!(run.stderr.trim(), "", "systemd-analyze verify warns");
}

/// kubernetes-validate, pinned, pip-installed into target/tools on first
/// use (`.ci/run` installs it the same way), or why it cannot be.
fn kubernetes_validate() -> Result<(PathBuf, PathBuf), String> {
    let dir = root().join("target/tools/kubernetes-validate-1.37.0");
    let bin = dir.join("bin/kubernetes-validate");
    if !bin.is_file() {
        let Some(python) = tool("python3") else {
            return Err("python3 is not installed".into());
        };
        let partial = dir.with_extension("partial");
        let _ = std::fs::remove_dir_all(&partial);
        let out = Command::new(python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .arg("--target")
            .arg(&partial)
            .arg("kubernetes-validate==1.37.0")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "installing kubernetes-validate 1.37.0 with pip failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let _ = std::fs::rename(&partial, &dir);
    }
    Ok((bin, dir))
}

#[test]
fn the_kubernetes_manifests_pass_a_schema_check() {
    let test = "the_kubernetes_manifests_pass_a_schema_check";
    let (bin, lib) = match kubernetes_validate() {
        Ok(found) => found,
        Err(why) => return skipped(test, &why),
    };
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(deploy().join("kubernetes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    manifests.sort();
    assert!(manifests.len() >= 4, "{manifests:?}");
    // 1.27: the oldest release with CronJob's timeZone; 1.34: a current one.
    for version in ["1.27.0", "1.34.0"] {
        let out = Command::new("python3")
            .arg(&bin)
            .args(["--strict", "--no-warn", "-k", version])
            .args(&manifests)
            .env("PYTHONPATH", &lib)
            .output()
            .unwrap();
        let run = to_run(out);
        assert_eq!(
            run.code, 0,
            "against Kubernetes {version}:\n{}{}",
            run.stdout, run.stderr
        );
        let passed = format!("{}{}", run.stdout, run.stderr)
            .matches(" passed ")
            .count();
        assert_eq!(
            passed, 5,
            "every object is checked: {}{}",
            run.stdout, run.stderr
        );
    }
    // The check is strict: a misspelt field fails it.
    let dir = scratch();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        read(&deploy().join("kubernetes/cronjob.yaml"))
            .replace("concurrencyPolicy:", "concurencyPolicy:"),
    )
    .unwrap();
    let out = Command::new("python3")
        .arg(&bin)
        .args(["--strict", "--no-warn"])
        .arg(&bad)
        .env("PYTHONPATH", &lib)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a misspelt field passed");
}

/// The folder `deploy/build-image.sh --stage-only DIR` staged, named by this
/// variable (`.ci/run` stages one).
const IMAGE_CONTEXT: &str = "JOBHOST_TEST_IMAGE_CONTEXT";

#[test]
fn the_container_image_builds_from_its_containerfile() {
    let test = "the_container_image_builds_from_its_containerfile";
    let Some(podman) = tool("podman") else {
        return skipped(
            test,
            "podman is not installed (Debian: apt-get install podman)",
        );
    };
    let Some(context) = std::env::var_os(IMAGE_CONTEXT).filter(|c| !c.is_empty()) else {
        return skipped(
            test,
            &format!(
                "{IMAGE_CONTEXT} is not set; set it to a folder staged by \
                 `deploy/build-image.sh --debug --stage-only DIR`"
            ),
        );
    };
    let context = PathBuf::from(context);
    let tag = format!("localhost/jobhost-test:{}", std::process::id());
    let podman = |args: &[&str]| {
        let out = Command::new(&podman).args(args).output().unwrap();
        let run = to_run(out);
        assert_eq!(run.code, 0, "podman {}: {}", args.join(" "), run.stderr);
        run.stdout
    };
    // The repository's Containerfile, without network, in the staged context.
    let containerfile = deploy().join("container/Containerfile");
    podman(&[
        "build",
        "--pull=never",
        "--network=none",
        "-q",
        "-f",
        s(&containerfile),
        "-t",
        &tag,
        s(&context),
    ]);
    struct Image<'a>(&'a str);
    impl Drop for Image<'_> {
        fn drop(&mut self) {
            let _ = Command::new("podman").args(["rmi", "-f", self.0]).output();
        }
    }
    let _image = Image(&tag);

    let inspect: serde_json::Value =
        serde_json::from_str(&podman(&["image", "inspect", &tag])).unwrap();
    let config = &inspect[0]["Config"];
    assert_eq!(config["User"], "65532:65532", "{config}");
    assert!(
        config["Volumes"]["/var/lib/jobhost"].is_object(),
        "{config}"
    );
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/local/bin/jobhost"])
    );
    assert_eq!(
        config["Cmd"],
        serde_json::json!(["run", "--config", "/etc/jobhost/daily-sales.toml"])
    );
    let env: Vec<&str> = config["Env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert!(env.contains(&"JOBHOST_REQUIRE_DURABLE_STORE=1"), "{env:?}");
    assert!(
        env.contains(&"JOBHOST_CACHE_DIR=/var/cache/jobhost"),
        "{env:?}"
    );

    // The binary in the image, taken out of it without running a
    // container: static, and it runs here.
    let mount = podman(&["image", "mount", &tag]);
    let mount = PathBuf::from(mount.trim());
    struct Mounted<'a>(&'a str);
    impl Drop for Mounted<'_> {
        fn drop(&mut self) {
            let _ = Command::new("podman")
                .args(["image", "unmount", self.0])
                .output();
        }
    }
    let mounted = Mounted(&tag);
    let dir = scratch();
    let binary = dir.path().join("jobhost");
    std::fs::copy(mount.join("usr/local/bin/jobhost"), &binary).unwrap();
    for file in [
        "opt/jobhost/report.wasm",
        "opt/jobhost/sales.db",
        "etc/jobhost/daily-sales.toml",
    ] {
        assert!(mount.join(file).is_file(), "the image lacks /{file}");
    }
    assert!(
        std::fs::read_dir(mount.join("var/cache/jobhost"))
            .unwrap()
            .next()
            .is_some(),
        "the image's compile cache is empty"
    );
    let store_dir = std::fs::metadata(mount.join("var/lib/jobhost")).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((store_dir.uid(), store_dir.gid()), (65532, 65532));
    drop(mounted);
    if context.join(".host-binary").exists() {
        // Staged with `build-image.sh --binary` (CI): the host's own build,
        // which is not the static one the script ships.
        let _ = writeln!(
            std::io::stderr().lock(),
            "SKIPPED deploy::the_container_image_builds_from_its_containerfile (its static-binary \
             check only): the context was staged with \
             --binary, the host's own build; `deploy/build-image.sh` checks the static one"
        );
    } else {
        assert!(
            !has_interpreter(&std::fs::read(&binary).unwrap()),
            "not static"
        );
    }
    let version = to_run(Command::new(&binary).arg("--version").output().unwrap());
    assert_eq!(version.code, 0, "{}", version.stderr);
    let expected = format!("jobhost {} (WIT ", env!("CARGO_PKG_VERSION"));
    assert!(version.stdout.starts_with(&expected), "{}", version.stdout);
}

/// Whether an ELF64 file asks for a program interpreter (is dynamically
/// linked): a PT_INTERP program header.
fn has_interpreter(elf: &[u8]) -> bool {
    assert_eq!(&elf[..4], b"\x7fELF", "an ELF file");
    assert_eq!(elf[4], 2, "ELF64");
    let u16_at = |o: usize| usize::from(u16::from_le_bytes([elf[o], elf[o + 1]]));
    let phoff = usize::try_from(u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap())).unwrap();
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| {
        let at = phoff + i * size;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == 3
    })
}

#[test]
fn the_field_report_example_shows_the_duplicate_the_warning_the_refusal_and_the_fix() {
    let test = "the_field_report_example_shows_the_duplicate_the_warning_the_refusal_and_the_fix";
    if tool("bash").is_none() {
        return skipped(test, "bash is not installed");
    }
    let out = Command::new("bash")
        .arg(root().join("examples/field-report.sh"))
        .env("JOBHOST", env!("CARGO_BIN_EXE_jobhost-under-test"))
        .env("COMPONENT", &guests().report)
        .env_remove("JOBHOST_STORE")
        .env_remove("JOBHOST_REQUIRE_DURABLE_STORE")
        .output()
        .unwrap();
    let run = to_run(out);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let text = &run.stdout;
    let on_tmpfs = jobhost::store::durable::ephemeral_filesystem(Path::new("/dev/shm/x")).is_some();
    let mut expected = vec![
        "DUPLICATE: daily-sales:2026-11-08 ran twice",
        "second run: exit 0, \"event\":\"ran\"",
        "FIXED: daily-sales:2026-11-08 ran once",
        "second run: exit 0, \"event\":\"skipped\", \"reason\":\"done\"",
    ];
    if on_tmpfs {
        expected.extend([
            "jobhost: warning: store `$CONTAINER/state/jobhost.db` is on tmpfs",
            "warning ephemeral-store",
            "refused because a durable store is required",
            "refused: exit 2",
            "REFUSED: nothing was claimed",
        ]);
    }
    for part in expected {
        assert!(text.contains(part), "`{part}` is not in:\n{text}");
    }
    assert!(!text.contains("UNEXPECTED"), "{text}");
}
