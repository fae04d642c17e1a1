#!/usr/bin/env bash
# The field report's bug on one machine, without containers: a daily job
# whose store lives on the container's own disk runs its window twice once
# the container is replaced. Then what jobhost says about such a store, how
# it refuses one, and the same job with its store on a durable disk, where
# the replaced container's run is skipped.
#
#   examples/field-report.sh
#
# Uses target/debug/jobhost and the reference component, building them when
# they are missing; JOBHOST=PATH and COMPONENT=PATH name others. The
# container's disk is a folder on tmpfs (/dev/shm), which jobhost detects as
# overlayfs would be detected in a real container. Exits 1 if any step does
# not turn out as shown.
set -euo pipefail
cd "$(dirname "$0")/.."

jobhost="${JOBHOST:-target/debug/jobhost}"
component="${COMPONENT:-target/wasm32-wasip2/release/guest_report.wasm}"
if [ -z "${JOBHOST:-}" ] && [ ! -x "$jobhost" ]; then
    cargo build -q -p jobhost
fi
if [ -z "${COMPONENT:-}" ] && [ ! -f "$component" ]; then
    rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
    cargo build -q --release -p guest-report --target wasm32-wasip2
fi
jobhost="$(realpath "$jobhost")"
component="$(realpath "$component")"

work="$(mktemp -d "${TMPDIR:-/tmp}/jobhost-field-report.XXXXXX")"
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
    container="/dev/shm/jobhost-field-report.$$"
    on_tmpfs=1
else
    container="$work/container"
    on_tmpfs=0
fi
trap 'rm -rf "$work" "$container"' EXIT
export JOBHOST_CACHE_DIR="$work/cache"
unset JOBHOST_STORE JOBHOST_REQUIRE_DURABLE_STORE

# The job, as the image would carry it; its output is written inside the
# container, as the field report's job posted from inside it.
cat >"$work/daily-sales.toml" <<TOML
job = "daily-sales"
component = "$component"
window = "day"
timezone = "UTC"

[source]
path = "$PWD/examples/sales.db"
query = "SELECT ts, region, product, quantity, amount FROM sales WHERE ts >= :start AND ts < :end ORDER BY ts, id"

[destinations.digest]
type = "file"
path = "$container/out/daily-sales.jsonl"
TOML

now=2026-11-09T00:05:00Z
failures=0
say() { printf '%s\n' "$*"; }
field() { sed -n "s/.*\"$1\":\"\\{0,1\\}\\([^\",}]*\\).*/\\1/p" <<<"$2" | head -n 1; }

# run LABEL STORE [ENV...]: one `jobhost run`, its stderr shown as it is,
# its receipt summed up; sets $event, $reason, $code.
run() {
    local label="$1" store="$2"
    shift 2
    local shown="${store/#$work/\$WORK}"
    shown="${shown/#$container/\$CONTAINER}"
    say "\$ ${*:+$* }jobhost run --config daily-sales.toml --store $shown --now $now"
    local out
    set +e
    out="$(env "$@" "$jobhost" run --config "$work/daily-sales.toml" --store "$store" --now "$now" 2>"$work/stderr")"
    code=$?
    set -e
    sed -e "s#$work#\$WORK#g" -e "s#$container#\$CONTAINER#g" -e "s#$component#report.wasm#g" "$work/stderr"
    event="$(field event "$out")"
    reason="$(field reason "$out")"
    local key created warning
    key="$(field key "$out")"
    created="$(field store_created "$out")"
    warning="$(field kind "$(grep -o '"warnings":.*' <<<"$out" || true)")"
    say "  $label: exit $code, \"event\":\"$event\"${reason:+, \"reason\":\"$reason\"}${key:+, key $key}${created:+, store_created $created}${warning:+, warning $warning}"
}
expect() {
    if [ "$1" != "$2" ]; then
        say "UNEXPECTED: $3: got \`$1\`, expected \`$2\`" >&2
        failures=$((failures + 1))
    fi
}

say "WORK=$work (a disk), CONTAINER=$container (the container's own disk$([ "$on_tmpfs" = 1 ] && echo ', tmpfs'))"
say
say "== 1. The store on the container's own disk, \$CONTAINER"
run "first run" "$container/state/jobhost.db"
expect "$event" ran "the first run"
say "\$ rm -rf \$CONTAINER          # the container was replaced"
rm -rf "$container"
run "second run" "$container/state/jobhost.db"
expect "$event" ran "the run after the replacement"
if [ "$event" = ran ]; then
    say "DUPLICATE: daily-sales:2026-11-08 ran twice; its digest was posted twice."
fi
say

say "== 2. The same store, refused: --require-durable-store, or JOBHOST_REQUIRE_DURABLE_STORE=1 as the image sets it"
rm -rf "$container"
if [ "$on_tmpfs" = 1 ]; then
    run "refused" "$container/state/jobhost.db" JOBHOST_REQUIRE_DURABLE_STORE=1
    expect "$code" 2 "the exit code of the refusal"
    expect "$([ -e "$container/state" ] && echo created || echo absent)" absent "the refused store"
    [ "$code" = 2 ] && say "REFUSED: nothing was claimed, created or posted."
else
    say "(skipped: /dev/shm is not a tmpfs on this machine, so there is no ephemeral folder to show)"
fi
say

say "== 3. The store on a durable disk (\$WORK/state), the container replaced the same way"
run "first run" "$work/state/jobhost.db" JOBHOST_REQUIRE_DURABLE_STORE=1
expect "$event" ran "the first run on a durable store"
say "\$ rm -rf \$CONTAINER          # the container was replaced"
rm -rf "$container"
run "second run" "$work/state/jobhost.db" JOBHOST_REQUIRE_DURABLE_STORE=1
expect "$event/$reason" skipped/done "the run after the replacement"
if [ "$event/$reason" = skipped/done ]; then
    say "FIXED: daily-sales:2026-11-08 ran once; the replaced container's run was skipped."
fi

[ "$failures" = 0 ] || exit 1
