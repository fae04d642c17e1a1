#!/usr/bin/env bash
# Builds the jobhost container image from deploy/container/Containerfile
# without network access inside the build: cargo builds the static musl
# binary and the reference component here, the binary fills a compile cache
# for the component, and `podman build` only copies the staged files.
#
#   deploy/build-image.sh [--debug | --binary PATH] [--tag NAME] [--stage-only DIR]
#
#   --debug           a debug build of the binary (faster to build, slower
#                     to compile a component; for tests of the image)
#   --binary PATH     stage this jobhost binary instead of building the
#                     static one (CI's test of the image recipe uses the
#                     host build it already has; such an image needs the
#                     host's libc, so it is for tests, not for shipping)
#   --tag NAME        the image's name [default: localhost/jobhost:VERSION]
#   --stage-only DIR  stage the build context in DIR and stop (no podman)
#
# Needs rustup's x86_64-unknown-linux-musl and wasm32-wasip2 targets (added
# when missing) and musl-gcc (Debian: musl-tools) for the C parts (SQLite,
# zstd, ring). Set ENGINE=docker to build with docker instead of podman.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
tag=""
stage=""
given=""
while [ $# -gt 0 ]; do
    case "$1" in
        --debug) profile=debug ;;
        --binary) given="${2:?--binary needs a path}"; shift ;;
        --tag) tag="${2:?--tag needs a name}"; shift ;;
        --stage-only) stage="${2:?--stage-only needs a folder}"; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-image.sh: unknown argument \`$1\`; see --help" >&2; exit 2 ;;
    esac
    shift
done

target="${CARGO_TARGET_DIR:-target}"
rustup target list --installed | grep -q '^wasm32-wasip2$' || rustup target add wasm32-wasip2
if [ -n "$given" ]; then
    [ -x "$given" ] || { echo "build-image.sh: --binary \`$given\` is not an executable file" >&2; exit 2; }
    bin="$given"
    profile=debug
else
    musl=x86_64-unknown-linux-musl
    rustup target list --installed | grep -q "^$musl\$" || rustup target add "$musl"
    command -v musl-gcc >/dev/null 2>&1 \
        || { echo "build-image.sh: musl-gcc is missing; install it (Debian, Ubuntu: apt-get install musl-tools)" >&2; exit 2; }
    flags=()
    [ "$profile" = release ] && flags=(--release)
    # The C parts are built by musl-gcc; the final link is Rust's own
    # (self-contained musl, static).
    CC_x86_64_unknown_linux_musl=musl-gcc \
        cargo build "${flags[@]}" --locked -p jobhost --bin jobhost --target "$musl"
    bin="$target/$musl/$profile/jobhost"
    if readelf -l "$bin" 2>/dev/null | grep -q 'Requesting program interpreter'; then
        echo "build-image.sh: $bin is not statically linked" >&2; exit 1
    fi
fi
cargo build --release --locked -p guest-report --target wasm32-wasip2

context="${stage:-$(mktemp -d "${TMPDIR:-/tmp}/jobhost-image.XXXXXX")}"
# A folder staged before is replaced; any other folder that holds files is
# left alone.
if [ -n "$(ls -A "$context" 2>/dev/null)" ] && [ ! -e "$context/.jobhost-image-context" ]; then
    echo "build-image.sh: \`$context\` holds files and was not staged by this script; name an empty or new folder" >&2
    exit 2
fi
rm -rf "$context"
mkdir -p "$context/etc" "$context/cache" "$context/empty" "$context/root/var/lib" "$context/root/var/cache"
chmod 0755 "$context/root" "$context/root/var" "$context/root/var/lib" "$context/root/var/cache"
touch "$context/.jobhost-image-context"
# A binary given with --binary is the host's own build, not the shipped one.
[ -n "$given" ] && touch "$context/.host-binary"
cp "$bin" "$context/jobhost"
# A debug build carries ~400 MB of debug info; the image does not need it.
if [ "$profile" = debug ] && command -v strip >/dev/null 2>&1; then
    strip --strip-debug "$context/jobhost"
fi
cp "$target/wasm32-wasip2/release/guest_report.wasm" "$context/report.wasm"
cp examples/sales.db "$context/sales.db"
cp deploy/container/daily-sales.toml "$context/etc/daily-sales.toml"
cp deploy/container/Containerfile "$context/Containerfile"
# The image's binary compiles the component now, so a container's first
# run does not (the cache is keyed by the engine, so it must be this binary).
"$context/jobhost" compile --cache-dir "$context/cache" "$context/report.wasm" >/dev/null
echo "build-image.sh: staged the build context in $context" >&2
[ -n "$stage" ] && exit 0

version="$("$context/jobhost" --version | awk '{print $2}')"
tag="${tag:-localhost/jobhost:$version}"
"${ENGINE:-podman}" build --pull=never --network=none -f "$context/Containerfile" -t "$tag" "$context"
rm -rf "$context"
echo "build-image.sh: built $tag" >&2
