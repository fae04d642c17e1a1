//! Regenerates `examples/sales.db`: two weeks of sales, 2026-11-01 to
//! 2026-11-14 UTC, 240 a day, always the same rows.
//!
//! `cargo run -p jobhost-tests --bin make-sample-data -- examples/sales.db`

fn main() {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "examples/sales.db".to_string());
    let path = std::path::Path::new(&path);
    if path.exists()
        && let Err(e) = std::fs::remove_file(path)
    {
        eprintln!("make-sample-data: cannot replace `{}`: {e}", path.display());
        std::process::exit(1);
    }
    let start = 1_793_491_200; // 2026-11-01T00:00:00Z
    let end = start + 14 * 86_400;
    match jobhost_tests::sample::write_sales(path, start, end, 14 * 240, 2026) {
        Ok(()) => println!("wrote {}", path.display()),
        Err(e) => {
            eprintln!("make-sample-data: cannot write `{}`: {e}", path.display());
            std::process::exit(1);
        }
    }
}
