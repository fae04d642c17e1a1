//! The `jobhost` binary: everything lives in the library; `main` only maps
//! the outcome to the process exit code.

fn main() {
    std::process::exit(jobhost::app::cli::main());
}
