#!/usr/bin/env bash
# Old and new jobhost across a schema change, with real binaries: builds
# the release REV from git (the previous one) beside this tree, then
#
#   1. the previous release writes a store (DONE, SKIPPED, FAILED windows,
#      a rerun's second revision, a pause), and this tree reads it with
#      `history`, `status` and `plan` (nothing migrated), then runs a
#      window (the first writing command migrates it) and checks that every
#      earlier run is still there as it was;
#   2. this tree writes a store, and the previous release tries every kind
#      of command on it;
#
# and prints what each command did. SQLite always; PostgreSQL too when
# JOBHOST_TEST_POSTGRES names a server (a schema of its own per store,
# dropped at the end).
#
#   bash tests/upgrade/check.sh [REV]            (`just upgrade-check [REV]`)
#   bash tests/upgrade/check.sh --fixture [REV]  rewrites tests/fixtures/upgrade/
#
# The previous release's source and build are kept in
# $JOBHOST_UPGRADE_CHECK_DIR (default target/upgrade-check, about 3 GB), so
# a second check builds nothing; delete the folder to free the space.
set -euo pipefail

fixture=false
if [ "${1:-}" = "--fixture" ]; then
    fixture=true
    shift
fi
rev="${1:-50fe569}"
root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
cd "$root"
keep="${JOBHOST_UPGRADE_CHECK_DIR:-$root/target/upgrade-check}"
pg="${JOBHOST_TEST_POSTGRES:-}"
work="$(mktemp -d /tmp/jobhost-upgrade-check.XXXXXX)"
# The PostgreSQL schemas this check makes (see store_for), dropped at the end.
schemas=("jobhost_upgrade_a_$$" "jobhost_upgrade_b_$$" "jobhost_fixture_$$")
cleanup() {
    if [ -n "$pg" ]; then
        for s in "${schemas[@]}"; do
            psql -q "$pg" -c "DROP SCHEMA IF EXISTS $s CASCADE" >/dev/null 2>&1 || true
        done
    fi
    rm -rf "$work"
}
trap cleanup EXIT

say() { printf '%s\n' "$*" >&2; }

# --- build both ---------------------------------------------------------
sha="$(git rev-parse --verify "$rev^{commit}")"
src="$keep/src-${sha:0:12}"
if [ ! -d "$src" ]; then
    say "upgrade-check: extracting $rev into $src"
    mkdir -p "$src.tmp"
    git archive "$sha" | tar -x -C "$src.tmp"
    mv "$src.tmp" "$src"
fi
say "upgrade-check: building the previous release ($rev) into $keep/target (slow the first time)"
(cd "$src" && CARGO_TARGET_DIR="$keep/target" cargo build --quiet -p jobhost &&
    CARGO_TARGET_DIR="$keep/target" cargo build --quiet --release --target wasm32-wasip2 \
        -p guest-report -p sandbox-probe)
say "upgrade-check: building this tree"
cargo build --quiet -p jobhost
cargo build --quiet --release --target wasm32-wasip2 -p guest-report -p sandbox-probe
old="$keep/target/debug/jobhost"
new="$root/target/debug/jobhost"
old_guests="$keep/target/wasm32-wasip2/release"
new_guests="$root/target/wasm32-wasip2/release"
export JOBHOST_CACHE_DIR="$work/cache"
unset JOBHOST_STORE JOBHOST_RECEIPT JOBHOST_REQUIRE_DURABLE_STORE

# --- helpers ------------------------------------------------------------

# configs DIR: the jobs, once per binary, over a copy of the sample sales:
# `daily-report` (the reference report, to a file) and `fail` (a component
# that refuses its data, so its window FAILs for good).
configs() {
    local dir=$1 who guests
    mkdir -p "$dir"
    cp examples/sales.db "$dir/sales.db"
    for who in old new; do
        if [ "$who" = old ]; then guests=$old_guests; else guests=$new_guests; fi
        cat >"$dir/report-$who.toml" <<EOF
job = "daily-report"
component = "$guests/guest_report.wasm"
max_catch_up = 1

[source]
path = "sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "file"
path = "out.jsonl"
EOF
        cat >"$dir/fail-$who.toml" <<EOF
job = "fail"
component = "$guests/sandbox_probe.wasm"

[source]
path = "sales.db"
query = "SELECT ts FROM sales WHERE ts >= :start AND ts < :end"
EOF
    done
}

# What a command's output comes to, in one line: a receipt's event, key
# and reason or error; else the first line that says an error; else the
# first line.
summary() {
    python3 - "$work/out" "$work/err" <<'EOF'
import json, sys
out = open(sys.argv[1], errors="replace").read().splitlines()
err = open(sys.argv[2], errors="replace").read().splitlines()
said = []
for line in out:
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if isinstance(r, dict) and "event" in r:
        what = [r["event"], r.get("key", r.get("job", ""))]
        if r.get("reason"):
            what.append(r["reason"])
        if r.get("revision"):
            what.append("revision %d" % r["revision"])
        if r.get("error"):
            what.append("%s: %s" % (r["error"]["kind"], r["error"]["message"]))
        said.append(" ".join(str(w) for w in what if w))
if said:
    print("; ".join(said)[:240])
elif out and out[0].startswith("KEY "):
    # A history table: how many runs, by state.
    rows = [l.split() for l in out[1:] if l.strip()]
    rows = [r for r in rows if len(r) > 3 and ":" in r[0]]
    states = {}
    for r in rows:
        states[r[3]] = states.get(r[3], 0) + 1
    print("%d run(s): %s" % (len(rows), ", ".join("%s %d" % kv for kv in sorted(states.items()))))
elif out and "windows in" in out[0]:
    # A plan: its decisions.
    print("; ".join(" ".join(l.split()[:2]) for l in out[1:] if l.strip())[:240])
else:
    errors = [l for l in err if "error" in l]
    first = (errors or out or err or [""])[0]
    print(first[:240])
EOF
}

# step WHO LABEL COMMAND...: runs it and prints one line of what it did.
step() {
    local who=$1 label=$2 code
    shift 2
    set +e
    "$@" >"$work/out" 2>"$work/err"
    code=$?
    set -e
    printf '  %-9s %-30s exit %-3s %s\n' "$who" "$label" "$code" "$(summary)"
}

# version STORE: the store's schema version.
version() {
    case "$1" in
    postgres://*) psql -Atq "$1" -c "SELECT coalesce(max(version), 0) FROM jobhost_schema" ;;
    *) python3 -c 'import sqlite3, sys; print(sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True).execute("PRAGMA user_version").fetchone()[0])' "$1" ;;
    esac
}

# runs STORE: every run as this tree's `history --json` reads it, one
# `key state revision attempt fence` line each, sorted.
runs() {
    "$new" history --json --store "$1" --limit 1000 |
        python3 -c 'import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print(r["key"], r["state"], r.get("revision", 1), r.get("attempt"), r.get("fence"))' | sort
}

# A new store: a SQLite file, or a fresh schema on the PostgreSQL server.
store_for() {
    local kind=$1 name=$2
    if [ "$kind" = sqlite ]; then
        echo "$work/$name/jobhost.db"
    else
        local schema="jobhost_upgrade_${name}_$$"
        psql -q "$pg" -c "CREATE SCHEMA $schema" >/dev/null
        local sep='?'
        case "$pg" in *\?*) sep='&' ;; esac
        echo "$pg${sep}options=-csearch_path%3D$schema"
    fi
}

# old_writes DIR STORE: what the previous release leaves in a store.
old_writes() {
    local d=$1 s=$2
    step previous "run (DONE)" "$old" run --config "$d/report-old.toml" --store "$s" --now 2026-11-04T00:05:00Z
    step previous "daemon (SKIPPED, DONE)" "$old" daemon --config "$d/report-old.toml" --store "$s" \
        --now 2026-11-07T00:05:00Z --until 2026-11-07T00:05:00Z
    step previous "rerun (revision 2)" "$old" rerun daily-report:2026-11-06 --reason "a second revision" \
        --config "$d/report-old.toml" --store "$s" --now 2026-11-07T01:00:00Z
    step previous "run (FAILED)" "$old" run --config "$d/fail-old.toml" --store "$s" --now 2026-11-08T00:05:00Z
    step previous "pause" "$old" pause fail --note "paused before the upgrade" --store "$s"
}

# --- 1. the previous release writes, this tree reads and migrates ---------
old_to_new() {
    local kind=$1 d="$work/$1-a" s
    configs "$d"
    s="$(store_for "$kind" a)"
    echo "-- $kind: the previous release writes a store; this tree reads it, then migrates it"
    old_writes "$d" "$s"
    local before v0 v1
    v0="$(version "$s")"
    runs "$s" >"$work/before"
    step this "history" "$new" history --store "$s"
    step this "status" "$new" status --config "$d/report-new.toml" --store "$s" --now 2026-11-08T00:05:00Z
    step this "plan" "$new" plan --config "$d/report-new.toml" --store "$s" --now 2026-11-08T00:05:00Z
    echo "  schema version $v0 after the previous release; $(version "$s") after this tree's reads"
    step this "run (migrates)" "$new" run --config "$d/report-new.toml" --store "$s" --now 2026-11-08T00:05:00Z
    step this "resume" "$new" resume fail --store "$s"
    step this "retry (FAILED)" "$new" retry fail:2026-11-07 --config "$d/fail-new.toml" --store "$s" --now 2026-11-08T01:00:00Z
    v1="$(version "$s")"
    runs "$s" >"$work/after"
    local lost
    lost="$(comm -23 "$work/before" "$work/after" | grep -v '^fail:2026-11-07 ' || true)"
    echo "  schema version $v1 after this tree's run; $(wc -l <"$work/before") earlier runs," \
        "$([ -z "$lost" ] && echo "every one kept as it was" || echo "changed or lost: $lost")"
}

# --- 2. this tree writes, the previous release runs on it ------------------
new_to_old() {
    local kind=$1 d="$work/$1-b" s
    configs "$d"
    s="$(store_for "$kind" b)"
    echo "-- $kind: this tree writes a store; the previous release on it"
    step this "run" "$new" run --config "$d/report-new.toml" --store "$s" --now 2026-11-08T00:05:00Z
    local v n
    v="$(version "$s")"
    n="$(runs "$s" | wc -l)"
    step previous "run" "$old" run --config "$d/report-old.toml" --store "$s" --now 2026-11-09T00:05:00Z
    step previous "daemon" "$old" daemon --config "$d/report-old.toml" --store "$s" \
        --now 2026-11-09T00:05:00Z --until 2026-11-09T00:05:00Z
    step previous "backfill" "$old" backfill --config "$d/report-old.toml" --store "$s" \
        --from 2026-11-01 --to 2026-11-03 --now 2026-11-09T00:05:00Z
    step previous "pause" "$old" pause daily-report --note "x" --store "$s"
    step previous "history" "$old" history --store "$s"
    step previous "status" "$old" status --config "$d/report-old.toml" --store "$s" --now 2026-11-09T00:05:00Z
    step previous "plan" "$old" plan --config "$d/report-old.toml" --store "$s" --now 2026-11-09T00:05:00Z
    echo "  schema version $v and $n run(s) before the previous release; $(version "$s") and" \
        "$(runs "$s" | wc -l) run(s) after it"
}

# --- the fixtures ---------------------------------------------------------
if $fixture; then
    out="$root/tests/fixtures/upgrade"
    mkdir -p "$out"
    d="$work/fixture"
    configs "$d"
    echo "-- sqlite fixture"
    old_writes "$d" "$d/jobhost.db"
    python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA wal_checkpoint(TRUNCATE)"); c.close()' "$d/jobhost.db"
    cp "$d/jobhost.db" "$out/sqlite-${sha:0:7}.db"
    if [ -n "$pg" ]; then
        rm -f "$d/out.jsonl"
        echo "-- postgres fixture"
        schema="jobhost_fixture_$$"
        psql -q "$pg" -c "CREATE SCHEMA $schema" >/dev/null
        sep='?'
        case "$pg" in *\?*) sep='&' ;; esac
        old_writes "$d" "$pg${sep}options=-csearch_path%3D$schema"
        # Plain INSERTs, so a test can restore it without psql's COPY.
        pg_dump --schema="$schema" --inserts --no-owner --no-privileges "$pg" |
            sed "s/$schema/jobhost_fixture/g" >"$out/postgres-${sha:0:7}.sql"
    fi
    ls -l "$out"
    exit 0
fi

echo "== the previous release $rev ($("$old" --version)) and this tree ($("$new" --version))"
old_to_new sqlite
new_to_old sqlite
if [ -n "$pg" ]; then
    old_to_new postgres
    new_to_old postgres
else
    echo "-- postgres: skipped (JOBHOST_TEST_POSTGRES is not set)"
fi
