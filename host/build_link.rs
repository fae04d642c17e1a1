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

/// Asks cargo to link `bin` (every binary of the package when `None`)
/// without PIE, where that is the choice (see above).
fn link_executable(bin: Option<&str>) {
    println!("cargo:rerun-if-env-changed=JOBHOST_LINK_PIE");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    let pie = std::env::var("JOBHOST_LINK_PIE").is_ok_and(|v| v == "1");
    // A static glibc build (`-C target-feature=+crt-static`) is linked as
    // a static PIE, which `-no-pie` would undo.
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let static_crt = features.split(',').any(|f| f == "crt-static");
    if os == "linux" && env == "gnu" && !pie && !static_crt {
        match bin {
            Some(name) => println!("cargo:rustc-link-arg-bin={name}=-no-pie"),
            None => println!("cargo:rustc-link-arg-bins=-no-pie"),
        }
    }
}
