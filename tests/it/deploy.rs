//! The deployments under `deploy/` are correct by default: the systemd
//! units pass `systemd-analyze verify`, every YAML file parses and the
//! Kubernetes manifests pass a schema check, the job configs they carry are
//! configs jobhost accepts, the container image builds from its
//! Containerfile, and the field report's example shows the duplicate, the
//! warning, the refusal and the fix. A test whose tool is missing skips,
//! saying so on stderr, except under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use jobhost::app::config::{JobConfig, RunFlags};
use serde_norway::Value as Yaml;

use crate::harness::*;

/// A skip for want of `missing` (provided as `how` says); under `CI`
/// (where `.ci/run` installs every tool) a failure instead.
#[track_caller]
fn missing(test: &str, missing: &str, how: &str) {
    jobhost_tests::skip::missing(&format!("deploy::{test}"), missing, how);
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
    assert_store_from_secret(pod);
    assert_eq!(strings(&pod["containers"][0]["args"])[0], "run");
    assert_locked_down(pod, "the CronJob");

    // The Deployment: two daemons on that store, probes and scraping on 8480.
    let deployment = object("deployment.yaml", "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let template = &deployment["spec"]["template"];
    let annotations = &template["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/scrape"], "true");
    assert_eq!(annotations["prometheus.io/port"], "8480");
    assert_eq!(annotations["prometheus.io/path"], "/metrics");
    let container = &template["spec"]["containers"][0];
    assert_store_from_secret(&template["spec"]);
    let args = strings(&container["args"]);
    assert_eq!(args[0], "daemon");
    let after = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(after("--listen"), "0.0.0.0:8480");
    assert!(after("--token-file").starts_with("/run/secrets/"));
    assert_eq!(container["ports"][0]["containerPort"], 8480);
    // Liveness fails when the scheduler is stuck; readiness only says the
    // server answers.
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/livez");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/healthz");
    for probe in ["livenessProbe", "readinessProbe"] {
        assert_eq!(container[probe]["httpGet"]["port"], "dashboard", "{probe}");
    }
    assert_locked_down(&template["spec"], "the Deployment");
    let secret = object("secret.yaml", "Secret");
    for key in ["pgpassword", "dashboard-token"] {
        assert!(secret["stringData"][key].is_string(), "{key}");
    }

    // A voluntary disruption (a drain) takes at most one of the two
    // daemons, and the budget selects exactly the Deployment's pods.
    let pdb = object("deployment.yaml", "PodDisruptionBudget");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );

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

/// The pod `spec` holds no service-account token, and its container runs
/// as no root, with a read-only root filesystem, no capabilities, no
/// privilege escalation and the runtime's seccomp profile; everything it
/// writes (its working folder, /tmp) is a volume.
fn assert_locked_down(spec: &Yaml, what: &str) {
    assert_eq!(spec["automountServiceAccountToken"], false, "{what}");
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{what}");
    let container = &spec["containers"][0];
    let sc = &container["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true, "{what}");
    assert_eq!(sc["readOnlyRootFilesystem"], true, "{what}");
    assert_eq!(sc["allowPrivilegeEscalation"], false, "{what}");
    assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"], "{what}");
    assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault", "{what}");
    let mounts = container["volumeMounts"].as_sequence().unwrap();
    for path in ["/var/lib/jobhost", "/tmp"] {
        let mount = mounts
            .iter()
            .find(|m| m["mountPath"] == path)
            .unwrap_or_else(|| panic!("{what}: nothing is mounted at {path}"));
        let volume = spec["volumes"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|v| v["name"] == mount["name"])
            .unwrap();
        assert!(
            volume["emptyDir"].is_mapping(),
            "{what}: {path}: {volume:?}"
        );
    }
    // The database's CA, for sslmode=verify-full.
    let ca = mounts
        .iter()
        .find(|m| m["mountPath"] == "/run/secrets/jobhost-db-ca")
        .unwrap_or_else(|| panic!("{what}: no CA mounted"));
    assert_eq!(ca["readOnly"], true, "{what}");
}

/// The pod's store is PostgreSQL, its password a file of the Secret
/// mounted as a volume (never in the environment) that jobhost reads with
/// `${file:...}`, its TLS checked against the CA mounted from a Secret and
/// the server's name.
fn assert_store_from_secret(pod: &Yaml) {
    let container = &pod["containers"][0];
    let env = container["env"].as_sequence().unwrap();
    let var = |name: &str| {
        env.iter()
            .find(|e| e["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert!(
        env.iter().all(|e| e["valueFrom"]["secretKeyRef"].is_null()),
        "a secret in the environment: {env:?}"
    );
    let store = var("JOBHOST_STORE")["value"].as_str().unwrap();
    assert!(
        store.starts_with("postgres://jobhost:${file:/run/secrets/jobhost/pgpassword}@"),
        "{store}"
    );
    // That file is the Secret's key pgpassword, mounted there, readable by
    // the pod's group alone.
    let mount = container["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/run/secrets/jobhost")
        .expect("the Secret mounted at /run/secrets/jobhost");
    let volume = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    assert_eq!(volume["secret"]["secretName"], "jobhost");
    // Kubernetes reads `0440` as octal (YAML 1.1); this parser, as text.
    let mode = &volume["secret"]["defaultMode"];
    let mode = mode
        .as_u64()
        .or_else(|| mode.as_str().and_then(|t| u64::from_str_radix(t, 8).ok()));
    assert_eq!(mode, Some(0o440), "{volume:?}");
    assert!(
        volume["secret"]["items"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|i| i["key"] == "pgpassword" && i["path"] == "pgpassword"),
        "{volume:?}"
    );
    assert_eq!(pod["securityContext"]["fsGroup"], 65532);
    assert!(
        store.ends_with("?sslmode=verify-full&sslrootcert=/run/secrets/jobhost-db-ca/ca.crt"),
        "{store}"
    );
}

#[test]
fn the_sample_secret_holds_a_dashboard_token_jobhost_accepts_unchanged() {
    let secret = object("secret.yaml", "Secret");
    let token = secret["stringData"]["dashboard-token"].as_str().unwrap();
    // Mounted as a file, as the Deployment mounts it.
    let dir = scratch();
    let file = dir.path().join("dashboard-token");
    std::fs::write(&file, token).unwrap();
    let deployment = object("deployment.yaml", "Deployment");
    let args = strings(&deployment["spec"]["template"]["spec"]["containers"][0]["args"]);
    let listen = args[args.iter().position(|a| *a == "--listen").unwrap() + 1];
    // The port the Deployment names may be taken here; the check is the
    // token's, on the same kind of address (not loopback).
    let listen = listen.replace(":8480", ":0");
    let checked = jobhost::app::serve::check_listen(
        &listen,
        jobhost::app::serve::Access {
            token_file: Some(&file),
            ..Default::default()
        },
    );
    assert!(checked.is_ok(), "{token:?}: {}", checked.unwrap_err());
    assert!(token.contains("replace"), "{token} is marked to replace");
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

/// The systemd units, by the name they are installed under.
const UNITS: [&str; 4] = [
    "jobhost-daemon.service",
    "jobhost@.service",
    "jobhost@.timer",
    "jobhost-fleet.service",
];

#[test]
fn every_systemd_unit_passes_systemd_analyze_verify() {
    let test = "every_systemd_unit_passes_systemd_analyze_verify";
    let Some(analyze) = tool("systemd-analyze") else {
        return missing(
            test,
            "systemd-analyze is not installed",
            "Debian: apt-get install systemd; .ci/run installs it",
        );
    };
    let units = deploy().join("systemd");
    let text = |name: &str| read(&units.join(name));
    for name in [
        "jobhost-daemon.service",
        "jobhost@.service",
        "jobhost-fleet.service",
    ] {
        let text = text(name);
        for line in [
            "StateDirectory=jobhost",
            // One fixed user: units sharing the state folder must not each
            // get a dynamic one.
            "User=jobhost",
            "ProtectSystem=strict",
            "PrivateTmp=yes",
            "NoNewPrivileges=yes",
            "Environment=JOBHOST_REQUIRE_DURABLE_STORE=1",
        ] {
            assert!(text.lines().any(|l| l == line), "{name} lacks {line}");
        }
        assert!(
            !text.lines().any(|l| l.starts_with("DynamicUser=")),
            "{name}"
        );
    }
    for name in ["jobhost-daemon.service", "jobhost@.service"] {
        let line = "Environment=JOBHOST_STORE=/var/lib/jobhost/jobhost.db";
        assert!(text(name).lines().any(|l| l == line), "{name} lacks {line}");
    }
    // The fleet's unit: its store and token from credentials, its
    // dashboard off loopback behind the token.
    let fleet = text("jobhost-fleet.service");
    for line in [
        "LoadCredential=store-url:/etc/jobhost/credentials/store-url",
        "LoadCredential=dashboard-token:/etc/jobhost/credentials/dashboard-token",
        "LoadCredential=reports-token:/etc/jobhost/credentials/reports-token",
        "Environment=JOBHOST_STORE_FILE=%d/store-url",
    ] {
        assert!(
            fleet.lines().any(|l| l == line),
            "the fleet's unit lacks {line}"
        );
    }
    let exec = Unit::parse(&fleet).exec_start;
    assert!(
        exec.contains("--listen 0.0.0.0:8480 --token-file %d/dashboard-token"),
        "{exec}"
    );
    assert!(
        text("jobhost-daemon.service")
            .lines()
            .any(|l| l == "Restart=on-failure")
    );
    let timer = text("jobhost@.timer");
    assert!(timer.lines().any(|l| l == "Persistent=true"));
    assert!(timer.lines().any(|l| l.starts_with("RandomizedDelaySec=")));
    let sysusers = read(&units.join("jobhost.sysusers"));
    assert!(
        sysusers.lines().any(|l| l.starts_with("u jobhost ")),
        "{sysusers}"
    );

    // verify wants ExecStart's binary to exist: the units name the
    // installed /usr/local/bin/jobhost, the copies the binary just built.
    // A template is verified as an instance of it.
    let dir = scratch();
    let binary = env!("CARGO_BIN_EXE_jobhost-under-test");
    let mut files = Vec::new();
    for name in UNITS {
        let path = dir.path().join(name.replace("@.", "@daily-sales."));
        std::fs::write(&path, text(name).replace("/usr/local/bin/jobhost", binary)).unwrap();
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

/// What a test takes of a service unit: how it starts the process and the
/// environment and folders systemd gives it.
#[derive(Debug, Default)]
struct Unit {
    exec_start: String,
    /// `Environment=` assignments, in order.
    environment: Vec<(String, String)>,
    /// `EnvironmentFile=` paths, and whether a missing one is fine (`-`).
    environment_files: Vec<(String, bool)>,
    /// `LoadCredential=NAME:PATH`.
    credentials: Vec<(String, String)>,
    state_directory: Option<String>,
    cache_directory: Option<String>,
}

impl Unit {
    /// The `[Service]` keys of a unit file this repository writes (one
    /// assignment per `Environment=` line, no quoting, no continuation
    /// lines: asserted, so a unit that needs more is noticed here).
    fn parse(text: &str) -> Unit {
        let mut unit = Unit::default();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('[') {
                continue;
            }
            assert!(!line.ends_with('\\'), "a continued line: {line}");
            let (key, value) = line.split_once('=').unwrap_or_else(|| panic!("{line}"));
            let value = value.to_string();
            match key {
                "ExecStart" => unit.exec_start = value,
                "Environment" => {
                    assert!(
                        !value.contains([' ', '"', '\'']),
                        "one plain assignment: {line}"
                    );
                    let (k, v) = value.split_once('=').unwrap();
                    unit.environment.push((k.to_string(), v.to_string()));
                }
                "EnvironmentFile" => match value.strip_prefix('-') {
                    Some(path) => unit.environment_files.push((path.to_string(), true)),
                    None => unit.environment_files.push((value, false)),
                },
                "LoadCredential" => {
                    let (name, path) = value.split_once(':').unwrap();
                    unit.credentials.push((name.to_string(), path.to_string()));
                }
                "StateDirectory" => unit.state_directory = Some(value),
                "CacheDirectory" => unit.cache_directory = Some(value),
                _ => {}
            }
        }
        assert!(!unit.exec_start.is_empty(), "no ExecStart");
        unit
    }
}

/// A machine's file system laid out under a scratch folder: `install.sh
/// --root` writes into it, and a unit's paths are read as paths in it.
struct Installed {
    root: tempfile::TempDir,
    /// The service's credentials folder (`%d`).
    credentials: PathBuf,
}

/// Where the units keep what a run reads and writes, and where an
/// installed config may point: reads from the first two, writes to the
/// last two (StateDirectory=, CacheDirectory=); nothing else is writable
/// under ProtectSystem=strict.
const READ_ONLY: [&str; 2] = ["/etc/jobhost/", "/usr/local/lib/jobhost/"];
const WRITABLE: [&str; 2] = ["/var/lib/jobhost/", "/var/cache/jobhost/"];

impl Installed {
    /// `deploy/systemd/install.sh --root` (with `--fleet`), with the test
    /// guests' report component and the tests' sales data.
    fn new(fleet: bool) -> Installed {
        // Not under /tmp, which may be a tmpfs, where the units' durable
        // store requirement would (rightly) refuse the store.
        let target = root().join("target");
        let root_dir = tempfile::Builder::new()
            .prefix("jobhost-systemd-")
            .tempdir_in(&target)
            .unwrap();
        let data = sales_db(root_dir.path(), 200);
        let mut cmd = Command::new("bash");
        cmd.arg(deploy().join("systemd/install.sh"))
            .arg("--root")
            .arg(root_dir.path())
            .arg("--component")
            .arg(&guests().report)
            .arg("--data")
            .arg(&data);
        if fleet {
            cmd.arg("--fleet");
        }
        let run = to_run(cmd.output().unwrap());
        assert_eq!(run.code, 0, "install.sh: {}", run.stderr);
        let credentials = root_dir.path().join("run/credentials/jobhost");
        std::fs::create_dir_all(&credentials).unwrap();
        Installed {
            root: root_dir,
            credentials,
        }
    }

    /// `path` on the installed machine, as a path here.
    fn path(&self, path: &str) -> PathBuf {
        self.root.path().join(path.trim_start_matches('/'))
    }

    /// A unit's text with its machine paths made paths here, `%i` the
    /// instance and `%d` the credentials folder, as systemd would give
    /// them; the binary is the one just built.
    fn resolve(&self, text: &str, instance: &str) -> String {
        let mut text = text
            .replace(
                "/usr/local/bin/jobhost",
                env!("CARGO_BIN_EXE_jobhost-under-test"),
            )
            .replace("%i", instance)
            .replace("%d", s(&self.credentials));
        for prefix in READ_ONLY.iter().chain(&WRITABLE) {
            let prefix = prefix.trim_end_matches('/');
            text = text.replace(prefix, s(&self.path(prefix)));
        }
        text
    }

    /// The installed job config, with its paths made paths here; each of
    /// them must be one the units let jobhost read or write.
    fn job_config(&self) -> String {
        let text = read(&self.path("/etc/jobhost/daily-sales.toml"));
        let config: toml::Value = toml::from_str(&text).unwrap();
        let reads = [
            config["component"].as_str().unwrap(),
            config["source"]["path"].as_str().unwrap(),
        ];
        for path in reads {
            assert!(
                READ_ONLY.iter().any(|p| path.starts_with(p)),
                "{path} is not where the units let jobhost read"
            );
            assert!(self.path(path).is_file(), "{path} is not installed");
        }
        assert!(config.get("store").is_none(), "the units name the store");
        for (name, d) in config["destinations"].as_table().unwrap() {
            if let Some(path) = d.get("path") {
                let path = path.as_str().unwrap();
                assert!(
                    WRITABLE.iter().any(|p| path.starts_with(p)),
                    "destination {name}: {path} is not writable under ProtectSystem=strict"
                );
            }
        }
        self.resolve(&text, "")
    }

    /// What the unit's ExecStart would run, with `extra` arguments, in the
    /// environment the unit gives it and the folders and credentials
    /// systemd makes for it (a credential is copied from the machine's
    /// file, readable by the service's user alone).
    fn command(&self, unit_name: &str, instance: &str, extra: &[&str]) -> Command {
        let text = read(&self.path(&format!("/etc/systemd/system/{unit_name}")));
        let unit = Unit::parse(&self.resolve(&text, instance));
        let mut env: Vec<(String, String)> = unit.environment.clone();
        // EnvironmentFile= overrides Environment=, whatever their order.
        for (file, optional) in &unit.environment_files {
            match std::fs::read_to_string(file) {
                Ok(text) => env.extend(
                    text.lines()
                        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
                        .map(|l| {
                            let (k, v) = l.split_once('=').unwrap();
                            (k.to_string(), v.to_string())
                        }),
                ),
                Err(e) => assert!(optional, "{file}: {e}"),
            }
        }
        for dir in [&unit.state_directory, &unit.cache_directory] {
            assert_eq!(dir.as_deref().unwrap_or("jobhost"), "jobhost");
        }
        for dir in WRITABLE {
            std::fs::create_dir_all(self.path(dir)).unwrap();
        }
        use std::os::unix::fs::PermissionsExt;
        for (name, path) in &unit.credentials {
            let to = self.credentials.join(name);
            std::fs::copy(path, &to).unwrap_or_else(|e| panic!("credential {name}: {path}: {e}"));
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o400)).unwrap();
        }
        // The dashboard on any free port: 8480 may be taken here.
        let exec_start = unit.exec_start.replace(":8480", ":0");
        // Nothing the process is told of is outside the machine's folder.
        let here = s(self.root.path());
        for word in exec_start
            .split_whitespace()
            .skip(1)
            .chain(env.iter().map(|(_, v)| v.as_str()))
        {
            assert!(
                !word.starts_with('/') || word.starts_with(here),
                "{unit_name}: {word} is not under the installed root"
            );
        }
        let mut words = exec_start.split_whitespace();
        let mut cmd = Command::new(words.next().unwrap());
        cmd.args(words)
            .args(extra)
            .env_clear()
            .envs(env)
            .env("STATE_DIRECTORY", self.path("/var/lib/jobhost"))
            .env("CACHE_DIRECTORY", self.path("/var/cache/jobhost"))
            .env("HOME", self.path("/var/lib/jobhost"))
            .env("RUST_BACKTRACE", "0")
            // The clock is the tests' own: it starts at --now.
            .env("JOBHOST_TEST_VIRTUAL_TIME", "1")
            .current_dir("/");
        if !unit.credentials.is_empty() {
            cmd.env("CREDENTIALS_DIRECTORY", &self.credentials);
        }
        cmd
    }

    /// Writes `text` to the machine's `path`, readable by root alone.
    fn write_secret(&self, path: &str, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        let file = self.path(path);
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

/// The machine's config, its paths made paths here, written back.
fn localize_config(machine: &Installed, edit: impl Fn(String) -> String) {
    let text = edit(machine.job_config());
    std::fs::write(machine.path("/etc/jobhost/daily-sales.toml"), text).unwrap();
}

#[test]
fn the_timer_units_run_as_installed_reaches_ran_and_writes_only_where_systemd_lets_it() {
    let machine = Installed::new(false);
    localize_config(&machine, |t| t);
    let run = to_run(
        machine
            .command(
                "jobhost@.service",
                "daily-sales",
                &["--now", "2026-11-09T00:05:00Z"],
            )
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let receipt = run.receipt();
    assert_eq!(receipt["event"], "ran", "{receipt}");
    assert_eq!(receipt["key"], "daily-sales:2026-11-08");
    // The store and the report in the state folder, the compiled
    // component in the cache folder.
    assert_eq!(
        receipt["store"].as_str().unwrap(),
        s(&machine.path("/var/lib/jobhost/jobhost.db"))
    );
    let lines = read(&machine.path("/var/lib/jobhost/out/daily-sales.jsonl"));
    assert_eq!(lines.lines().count(), 1, "{lines}");
    assert!(
        std::fs::read_dir(machine.path("/var/cache/jobhost"))
            .unwrap()
            .next()
            .is_some(),
        "nothing was cached"
    );
}

#[test]
fn the_daemon_unit_run_as_installed_gives_a_receipt() {
    let machine = Installed::new(false);
    localize_config(&machine, |t| t);
    let run = to_run(
        machine
            .command(
                "jobhost-daemon.service",
                "",
                &[
                    "--now",
                    "2026-11-09T00:05:00Z",
                    "--until",
                    "2026-11-09T06:00:00Z",
                ],
            )
            .output()
            .unwrap(),
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let receipt: serde_json::Value = serde_json::from_str(run.stdout.lines().next().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    assert_eq!(receipt["event"], "ran", "{receipt}");
    assert!(machine.path("/var/lib/jobhost/jobhost.db").is_file());
}

#[test]
fn the_fleet_unit_run_as_installed_reads_its_store_and_token_from_credentials_and_posts() {
    let Some(pg) = jobhost_tests::pg::Scratch::new(
        "deploy::the_fleet_unit_run_as_installed_reads_its_store_and_token_from_credentials_and_posts",
    ) else {
        return;
    };
    let sink = jobhost_tests::sink::Sink::start();
    let machine = Installed::new(true);
    localize_config(&machine, |t| {
        t.replace(
            "https://reports.example.com/v1/daily-sales",
            &sink.url("/v1/daily-sales"),
        )
    });
    // What the administrator writes, as the unit's header says.
    machine.write_secret(
        "/etc/jobhost/credentials/store-url",
        &format!("{}\n", pg.url()),
    );
    machine.write_secret(
        "/etc/jobhost/credentials/dashboard-token",
        "0123456789abcdef0123456789abcdef\n",
    );
    // The receiver's token, which the job config reads itself with
    // `${file:${CREDENTIALS_DIRECTORY}/reports-token}`.
    machine.write_secret(
        "/etc/jobhost/credentials/reports-token",
        "rcv-token-4f1c9e\n",
    );
    let cmd = machine.command(
        "jobhost-fleet.service",
        "",
        &[
            "--now",
            "2026-11-09T00:05:00Z",
            "--until",
            "2026-11-09T06:00:00Z",
        ],
    );
    let run = to_run({ cmd }.output().unwrap());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let receipt: serde_json::Value = serde_json::from_str(run.stdout.lines().next().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    assert_eq!(receipt["event"], "ran", "{receipt}");
    // The store from the credential (its password, if any, hidden).
    assert!(
        receipt["store"]
            .as_str()
            .unwrap()
            .starts_with("postgres://"),
        "{receipt}"
    );
    assert!(receipt.get("warnings").is_none(), "{receipt}");
    assert!(
        run.stderr
            .contains("serving the dashboard on http://0.0.0.0:"),
        "{}",
        run.stderr
    );
    let posted = sink.requests();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].path, "/v1/daily-sales");
    let authorization = posted[0]
        .headers
        .iter()
        .find(|(name, _)| name == "authorization")
        .map(|(_, v)| v.as_str());
    assert_eq!(authorization, Some("Bearer rcv-token-4f1c9e"));
    // The token went on the wire and nowhere else.
    assert!(!run.stdout.contains("rcv-token-4f1c9e"), "{}", run.stdout);
    assert!(!run.stderr.contains("rcv-token-4f1c9e"), "{}", run.stderr);
    // The window is claimed in the shared store.
    let rows = history(pg.url());
    assert_eq!(rows.len(), 1, "{rows:?}");
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
        Err(why) => {
            return missing(
                test,
                &why,
                "Debian: apt-get install python3; the test installs kubernetes-validate with pip",
            );
        }
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
            passed, 6,
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
        return missing(
            test,
            "podman is not installed",
            "Debian: apt-get install podman; .ci/run installs it",
        );
    };
    let Some(context) = std::env::var_os(IMAGE_CONTEXT).filter(|c| !c.is_empty()) else {
        return missing(
            test,
            &format!("{IMAGE_CONTEXT} is not set"),
            "set it to a folder staged by `deploy/build-image.sh --debug --stage-only DIR`; \
             .ci/run stages one and sets it",
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
    // The user owns what jobhost writes (the store's folder, the compile
    // cache) and nothing above it or beside it.
    use std::os::unix::fs::MetadataExt;
    let owner = |path: &str| {
        let meta = std::fs::metadata(mount.join(path)).unwrap();
        (meta.uid(), meta.gid())
    };
    for path in ["var/lib/jobhost", "var/cache/jobhost"] {
        assert_eq!(owner(path), (65532, 65532), "/{path}");
    }
    for path in [
        "var",
        "var/lib",
        "var/cache",
        "etc/jobhost",
        "opt/jobhost",
        "usr/local/bin/jobhost",
    ] {
        assert_eq!(owner(path), (0, 0), "/{path} is the runtime user's");
    }
    drop(mounted);
    if context.join(".host-binary").exists() {
        // Staged with `build-image.sh --binary` (CI): the host's own build,
        // which is not the static one the script ships. A skip under CI
        // too: CI stages its own build on purpose, as the static musl
        // build costs it about ten minutes (see `.ci/run`).
        jobhost_tests::skip::skipped(
            &format!("deploy::{test} (its static-binary check only)"),
            "the context was staged with --binary, the host's own build; \
             `deploy/build-image.sh` checks the static one",
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
        return missing(
            test,
            "bash is not installed",
            "Debian: apt-get install bash",
        );
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

/// The stderr lines of the fleet warning in `text`.
fn fleet_warnings(text: &str) -> usize {
    text.lines()
        .filter(|l| {
            l.starts_with(
                "jobhost: warning: job `daily-report` keeps its claims in the PostgreSQL store",
            )
        })
        .count()
}

/// Receipt lines (JSON with an `event` of a run) of `stdout`, with how many
/// carry the `local-destination` warning.
fn receipts_warned(stdout: &str) -> (usize, usize) {
    let receipts: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["event"] == "ran" || r["event"] == "skipped" && r.get("key").is_some())
        .filter(|r| r.get("store").is_some())
        .collect();
    let warned = receipts
        .iter()
        .filter(|r| {
            r["warnings"]
                .as_array()
                .is_some_and(|w| w.iter().any(|w| w["kind"] == "local-destination"))
        })
        .count();
    (receipts.len(), warned)
}

#[test]
fn a_file_destination_on_a_store_hosts_share_is_warned_about_once_by_run_daemon_and_backfill() {
    let Some(pg) = jobhost_tests::pg::Scratch::new(
        "deploy::a_file_destination_on_a_store_hosts_share_is_warned_about_once_by_run_daemon_and_backfill",
    ) else {
        return;
    };
    let dir = scratch();
    let cfg = report_config(dir.path(), 200);
    let url = pg.url();

    let run = run_job(&cfg, &url, "2026-11-09T00:05:00Z");
    assert_eq!(run.code, 0, "{}", run.stderr);
    let receipt = run.receipt();
    let warning = &receipt["warnings"][0];
    assert_eq!(warning["kind"], "local-destination", "{receipt}");
    let message = warning["message"].as_str().unwrap();
    for part in [
        "`digest`",
        "out.jsonl",
        "whichever host",
        "type = \"http\"",
        "every host mounts",
    ] {
        assert!(message.contains(part), "`{part}` is not in: {message}");
    }
    assert_eq!(fleet_warnings(&run.stderr), 1, "{}", run.stderr);

    // Three windows: said once on stderr, in every receipt.
    let daemon = to_run(
        daemon_command(
            &[&cfg],
            &url,
            "2026-11-09T00:05:00Z",
            "2026-11-12T00:05:00Z",
        )
        .output()
        .unwrap(),
    );
    assert_eq!(daemon.code, 0, "{}", daemon.stderr);
    let (receipts, warned) = receipts_warned(&daemon.stdout);
    assert_eq!(receipts, 3, "{}", daemon.stdout);
    assert_eq!(warned, receipts, "{}", daemon.stdout);
    assert_eq!(fleet_warnings(&daemon.stderr), 1, "{}", daemon.stderr);

    let backfill = jobhost(&[
        "backfill",
        "--config",
        s(&cfg),
        "--store",
        &url,
        "--from",
        "2026-11-01",
        "--to",
        "2026-11-04",
        "--now",
        "2026-11-12T00:05:00Z",
    ]);
    assert_eq!(backfill.code, 0, "{}", backfill.stderr);
    assert_eq!(fleet_warnings(&backfill.stderr), 1, "{}", backfill.stderr);

    // A SQLite store is one host's: nothing to warn about.
    let other = scratch();
    let cfg = report_config(other.path(), 200);
    let alone = run_job(&cfg, other.path().join("s.db"), "2026-11-09T00:05:00Z");
    assert_eq!(alone.event(), "ran", "{}", alone.stderr);
    assert!(
        alone.receipt().get("warnings").is_none(),
        "{}",
        alone.stdout
    );
    assert_eq!(fleet_warnings(&alone.stderr), 0, "{}", alone.stderr);
}

#[test]
fn the_files_the_compose_recipe_writes_are_ignored_by_git() {
    let test = "the_files_the_compose_recipe_writes_are_ignored_by_git";
    let Some(git) = tool("git") else {
        return missing(test, "git is not installed", "Debian: apt-get install git");
    };
    // What compose.yaml's header tells a person to write.
    let compose = read(&deploy().join("container/compose.yaml"));
    for file in ["deploy/container/.env", "deploy/container/dashboard-token"] {
        assert!(
            compose.contains(file),
            "compose.yaml no longer writes {file}"
        );
        let out = Command::new(&git)
            .current_dir(root())
            .args(["check-ignore", "--no-index", "-q", file])
            .output()
            .unwrap();
        assert!(out.status.success(), "git does not ignore {file}");
    }
}
