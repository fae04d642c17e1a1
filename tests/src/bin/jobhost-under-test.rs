//! The `jobhost` command line, built inside the test package so that its
//! integration tests can spawn it as a real process.

fn main() {
    std::process::exit(jobhost::cli::main());
}
