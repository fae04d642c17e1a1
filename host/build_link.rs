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
// read it; `JOBHOST_LINK_HOT_TEXT=0` when building links without it (for
// a linker that cannot).

/// Asks cargo to link `bin` (every binary of the package when `None`)
/// without PIE, and with `hot_text` (the path of `host/hot-text.ld`),
/// where that is the choice (see above).
fn link_executable(bin: Option<&str>, hot_text: &std::path::Path) {
    println!("cargo:rerun-if-env-changed=JOBHOST_LINK_PIE");
    println!("cargo:rerun-if-env-changed=JOBHOST_LINK_HOT_TEXT");
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
    let hot = std::env::var("JOBHOST_LINK_HOT_TEXT").as_deref() != Ok("0");
    if os == "linux" && env == "gnu" && hot {
        // `-Xlinker`, not `-Wl,`: a comma in the path stays in it.
        for arg in ["-Xlinker", "-T", "-Xlinker"] {
            link_arg(arg);
        }
        link_arg(&hot_text.display().to_string());
    }
}
