// How the `jobhost` executable is linked: shared by the build scripts of
// `host` (the `jobhost` binary) and `tests` (the `jobhost-under-test`
// binary the tests and benchmarks run), so both are linked alike.
//
// On Linux with glibc the executable is linked at a fixed address
// (`-no-pie`): a position-independent one has about 41,000 relocations
// that the dynamic loader applies at every start, copying some 160 pages
// of tables it writes into, which made up a third of the time a `jobhost
// run` takes to answer that its window is already done (BENCHMARKS.md,
// "The skip path beside its floor"). Shared libraries, the heap, the stack
// and every mapping of compiled WebAssembly stay randomised; only the
// executable's own addresses are the same in every process. Set
// `JOBHOST_LINK_PIE=1` when building to link a position-independent
// executable instead (deploy/README.md). Other targets (musl, whose static
// binary the container image ships, a static glibc build, and other
// systems) are linked as rustc links them. `-no-pie` needs GCC 6 or later
// (or clang) as the linker driver.
//
// On Linux with glibc the functions the skip path runs are also kept
// together, at the start of the executable's code, by the linker script
// `host/hot-text.ld` (made by `cargo bench -p jobhost-tests --bench run --
// --hot-text`): scattered over 24 MB of code they cost a starting process
// some 40 page faults more. rustc's default linker here (LLD) and GNU ld
// read it. GNU gold and mold cannot (gold refuses its `INSERT BEFORE`,
// mold reads no such script): when the build names one of them (in
// `RUSTFLAGS`, as the target's linker, or through `mold -run`), the
// executable is linked without the script and the build says so in a
// warning. `JOBHOST_LINK_HOT_TEXT=0` when building links without it
// always (for a linker this cannot tell).

/// Asks cargo to link `bin` (every binary of the package when `None`)
/// without PIE, and with `hot_text` (the path of `host/hot-text.ld`),
/// where that is the choice (see above).
fn link_executable(bin: Option<&str>, hot_text: &std::path::Path) {
    println!("cargo:rerun-if-env-changed=JOBHOST_LINK_PIE");
    println!("cargo:rerun-if-env-changed=JOBHOST_LINK_HOT_TEXT");
    // `mold -run` is seen only in the environment (cargo reruns this for a
    // change of flags or of the target's linker on its own).
    println!("cargo:rerun-if-env-changed=LD_PRELOAD");
    println!("cargo:rerun-if-changed={}", hot_text.display());
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let pie = std::env::var("JOBHOST_LINK_PIE").is_ok_and(|v| v == "1");
    // A static glibc build (`-C target-feature=+crt-static`) is linked as
    // a static PIE, which `-no-pie` would undo.
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let static_crt = features.split(',').any(|f| f == "crt-static");
    let link_arg = |arg: &str| match bin {
        Some(name) => println!("cargo:rustc-link-arg-bin={name}={arg}"),
        None => println!("cargo:rustc-link-arg-bins={arg}"),
    };
    if os == "linux" && env == "gnu" && !pie && !static_crt {
        link_arg("-no-pie");
    }
    let mut hot = std::env::var("JOBHOST_LINK_HOT_TEXT").as_deref() != Ok("0");
    if os == "linux" && env == "gnu" && hot {
        let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
        let linker = std::env::var("RUSTC_LINKER").ok();
        let preload = std::env::var("LD_PRELOAD").ok();
        if let Some(name) = script_refused_by(&flags, linker.as_deref(), preload.as_deref()) {
            println!(
                "cargo:warning=jobhost is linked without host/hot-text.ld: the build's linker \
                 is {name}, which cannot read it (a run that finds its window done then \
                 faults in some 40 pages more); set JOBHOST_LINK_HOT_TEXT=0 to say so \
                 and drop this warning"
            );
            hot = false;
        }
    }
    if os == "linux" && env == "gnu" && hot {
        // `-Xlinker`, not `-Wl,`: a comma in the path stays in it.
        for arg in ["-Xlinker", "-T", "-Xlinker"] {
            link_arg(arg);
        }
        link_arg(&hot_text.display().to_string());
    }
}

/// The linker the build names, if it is one known not to read
/// `host/hot-text.ld`: GNU gold (no `INSERT`) or mold (no `SECTIONS`).
/// `rustflags` are cargo's, separated by 0x1f (`CARGO_ENCODED_RUSTFLAGS`);
/// `linker` is the target's configured linker (`RUSTC_LINKER`); `preload`
/// is `LD_PRELOAD`, which `mold -run` sets to its wrapper.
fn script_refused_by(
    rustflags: &str,
    linker: Option<&str>,
    preload: Option<&str>,
) -> Option<&'static str> {
    // A file name, with or without a target prefix
    // (`x86_64-linux-gnu-ld.gold`).
    fn refuses(path: &str) -> Option<&'static str> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let is = |linker: &str| {
            name == linker
                || name.ends_with(&format!("-{linker}"))
                || name == format!("ld.{linker}")
                || name.ends_with(&format!("-ld.{linker}"))
        };
        if is("gold") {
            Some("GNU gold")
        } else if is("mold") || is("sold") {
            Some("mold")
        } else {
            None
        }
    }
    // `mold -run` makes every linker the driver runs mold, whatever the
    // flags name.
    if preload.is_some_and(|p| p.contains("mold-wrapper")) {
        return Some("mold");
    }
    let words = || rustflags.split('\x1f').flat_map(str::split_whitespace);
    // clang runs the linker `--ld-path=` names whatever `-fuse-ld=` says;
    // otherwise the driver runs the one its last `-fuse-ld=` names, looked
    // for first in the folders `-B` names (mold's way for GCC before 12.1:
    // `-B/usr/libexec/mold`). `link-args=` passes several words.
    let last = |key: &str| {
        words()
            .filter_map(|w| w.find(key).map(|at| &w[at + key.len()..]))
            .next_back()
    };
    if let Some(path) = last("--ld-path=") {
        return refuses(path);
    }
    // A `-B` folder's linker: mold's folder, or an `ld` in it that is a
    // link to one of them (Debian's `-B/usr/lib/gold-ld`).
    let folders = words().filter_map(|w| {
        let arg = w.rsplit(['=', ',']).next().unwrap_or(w);
        arg.strip_prefix("-B").filter(|d| !d.is_empty())
    });
    for folder in folders {
        let folder = folder.trim_end_matches('/');
        if let Some(name) = refuses(folder) {
            return Some(name);
        }
        let ld = std::fs::canonicalize(format!("{folder}/ld")).ok();
        if let Some(name) = ld.as_ref().and_then(|p| p.to_str()).and_then(refuses) {
            return Some(name);
        }
    }
    if let Some(name) = last("-fuse-ld=") {
        return refuses(name);
    }
    // Otherwise the linker itself may be named: `-C linker=`, or the
    // target's `linker` in cargo's configuration.
    let flagged = words()
        .filter_map(|w| w.strip_prefix("-C").unwrap_or(w).strip_prefix("linker="))
        .next_back();
    flagged.or(linker).and_then(refuses)
}
