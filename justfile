# Recipes for people; CI runs .ci/run and needs no `just`.

now := "2026-11-09T00:05:00Z"

# List the recipes.
default:
    @just --list

# Build the reference report component (guest_report.wasm).
guest:
    cargo build --release -p guest-report --target wasm32-wasip2

# Build the Python reference report (target/guest-python/guest_python.wasm)
# with componentize-py 0.25.1, pip-installed into target/tools on first use.
guest-python:
    test -x target/tools/componentize-py-0.25.1/bin/componentize-py || python3 -m pip install --quiet --target target/tools/componentize-py-0.25.1 componentize-py==0.25.1
    mkdir -p target/guest-python
    PYTHONPATH=target/tools/componentize-py-0.25.1 PYTHONDONTWRITEBYTECODE=1 target/tools/componentize-py-0.25.1/bin/componentize-py -d wit -w describing-reporter componentize app -p guest-python -p sdk/python -o target/guest-python/guest_python.wasm

# Run the bundled daily sales example as of {{now}}; run it twice to see `skipped`.
demo: guest
    cargo run -p jobhost -- run --config examples/daily-sales.toml --now {{now}}

# The field report's duplicate on one machine, and jobhost's fix.
field-report:
    cargo build -p jobhost
    cargo build --release -p guest-report --target wasm32-wasip2
    bash examples/field-report.sh

# The container image (static musl binary, reference component), built
# without network access inside the build; `just image --debug` for a quick one.
image *args:
    bash deploy/build-image.sh {{args}}

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

# The Python reference beside the Rust one: cold compile (Cranelift and
# Winch), skip path, warm 10k-row run, 1M rows, with peak RSS.
bench-languages *args:
    RUST_BACKTRACE=0 cargo bench -p jobhost-tests --bench languages -- {{args}}

# A PostgreSQL data source: 1M rows, jobhost against native Rust reading
# the same rows, and the SQLite case's memory beside it (needs
# JOBHOST_TEST_POSTGRES). `just bench-pg-source --quick` for fewer rounds.
bench-pg-source *args:
    RUST_BACKTRACE=0 cargo bench -p jobhost-tests --bench pg_source -- {{args}}

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

# One daemon wake-up with 50 jobs due, spawn to exit. To compare with the
# code before a change, name its release `jobhost` in JOBHOST_BENCH_BASELINE
# (both are then measured, interleaved). `just bench-daemon --quick` for
# fewer samples.
bench-daemon *args:
    RUST_BACKTRACE=0 cargo bench -p jobhost-tests --bench daemon -- {{args}}

# One daemon over a folder of 1,000 hourly jobs all due at start, one run
# at a time and then the cores at once: each job's due-to-run wait (p50,
# p99), runs/s, peak RSS, and a SIGHUP taking in 10 new files; then a
# backfill of 480 windows with --parallel 1 and 4. `just bench-folder
# --quick` for 200 jobs.
bench-folder *args:
    RUST_BACKTRACE=0 cargo bench -p jobhost-tests --bench folder -- {{args}}

# 8 daemons on one PostgreSQL (JOBHOST_TEST_POSTGRES) draining 1,000 jobs
# x 24 hourly windows: time to drain, runs/s, claims/s, runs per host, and
# no window run or message delivered twice or lost. `just bench-fleet
# --quick` for 100 jobs on 4 hosts.
bench-fleet *args:
    RUST_BACKTRACE=0 cargo bench -p jobhost-tests --bench fleet -- {{args}}

# What a daemon's wake-up costs against the jobs due at it and the size of
# the folder (100 or 1,000 jobs, 1 to 100 of them due each minute).
# `just bench-wakeups --quick` for one round.
bench-wakeups *args:
    RUST_BACKTRACE=0 cargo bench -p jobhost-tests --bench wakeups -- {{args}}

# Owners frozen (SIGSTOP) at random instants of their delivery past a 2 s
# lease, on SQLite and PostgreSQL (JOBHOST_TEST_POSTGRES), at-least-once and
# at-most-once: none may send after the takeover. CI runs 3 trials per case;
# `just pause-trials 200` runs 200 and prints the counts and times.
pause-trials trials="200":
    RUST_BACKTRACE=0 JOBHOST_PAUSE_TRIALS={{trials}} cargo test -p jobhost-tests --test e2e -- pause_trials --test-threads 4 --nocapture

# Old and new across a schema change: builds release REV (default: the
# last before this tree's newest migration) from git beside this tree, runs
# it on a store this tree migrated and this tree on one it wrote, and prints
# what each command did (PostgreSQL too with JOBHOST_TEST_POSTGRES).
upgrade-check rev="50fe569":
    bash tests/upgrade/check.sh {{rev}}

# Regenerate examples/sales.db (deterministic).
sample-data:
    cargo run -p jobhost-tests --bin make-sample-data -- examples/sales.db

# What CI runs.
ci:
    bash .ci/run
