//! Links `jobhost-under-test` as the `jobhost` binary is linked (see
//! `host/build_link.rs`), so that the tests and benchmarks run what ships.
//! `skip-floor` stays linked as rustc links any program.

include!("../host/build_link.rs");

fn main() {
    let manifest =
        std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    link_executable(
        Some("jobhost-under-test"),
        &manifest.join("..").join("host").join("hot-text.ld"),
    );
}
