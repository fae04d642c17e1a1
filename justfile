# Recipes for people; CI runs .ci/run and needs no `just`.

now := "2026-11-09T00:05:00Z"

# List the recipes.
default:
    @just --list

# Build the reference report component (guest_report.wasm).
guest:
    cargo build --release -p guest-report --target wasm32-wasip2

# Run the bundled daily sales example as of {{now}}; run it twice to see `skipped`.
demo: guest
    cargo run -p jobhost -- run --config examples/daily-sales.toml --now {{now}}

# Show what the demo's store (examples/state/jobhost.db, beside its config) holds.
history:
    cargo run -p jobhost -- history --config examples/daily-sales.toml

# Run every test (the same command CI runs).
test:
    cargo test

# Formatting and lints, as CI checks them.
lint:
    cargo fmt --all -- --check
    cargo clippy --all-targets -- -D warnings

# Speed benchmarks: skip path, a 10k-row run, 1M rows guest vs native.
bench:
    RUST_BACKTRACE=0 cargo bench -p jobhost-tests --bench run

# The claim store's cost, SQLite and PostgreSQL side by side: claims per
# second, and a whole run's store work. PostgreSQL is measured when
# JOBHOST_TEST_POSTGRES names a server (for example
# postgres://postgres@127.0.0.1:5432/test), and skipped, saying so, when not.
# `just bench-store --quick` for fewer rounds.
bench-store *args:
    RUST_BACKTRACE=0 cargo bench -p jobhost-tests --bench store -- {{args}}

# One scheduling wake-up's store work as a job's history grows (100, 1k,
# 10k rows), SQLite and PostgreSQL side by side (PostgreSQL when
# JOBHOST_TEST_POSTGRES is set). `just bench-schedule --quick` for fewer rounds.
bench-schedule *args:
    RUST_BACKTRACE=0 cargo bench -p jobhost-tests --bench schedule -- {{args}}

# Regenerate examples/sales.db (deterministic).
sample-data:
    cargo run -p jobhost-tests --bin make-sample-data -- examples/sales.db

# What CI runs.
ci:
    bash .ci/run
