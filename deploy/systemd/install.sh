#!/usr/bin/env bash
# Installs jobhost's systemd units, its user and a sample job where the
# units expect them, from a checkout of the repository:
#
#   deploy/systemd/install.sh [--fleet] [--binary PATH] [--component PATH]
#                             [--data PATH] [--root DIR]
#
#   --fleet           the sample job for hosts sharing a PostgreSQL store
#                     (an HTTP destination), and the credentials folder of
#                     jobhost-fleet.service
#   --binary PATH     install this jobhost binary as /usr/local/bin/jobhost
#                     [default: leave /usr/local/bin/jobhost as it is]
#   --component PATH  the sample's report component [default:
#                     target/wasm32-wasip2/release/guest_report.wasm]
#   --data PATH       the sample's sales database [default: examples/sales.db]
#   --root DIR        install under DIR instead of / (an image, a test);
#                     creates no user and reloads nothing
#
# What goes where (ProtectSystem=strict lets jobhost write only the last two):
#
#   /usr/local/bin/jobhost              the binary
#   /usr/local/lib/jobhost/             the sample's component and data (read)
#   /etc/jobhost/daily-sales.toml       the sample job (kept if present)
#   /etc/jobhost/env                    secrets for ${VAR}s, 0600 (kept if present)
#   /etc/jobhost/credentials/           --fleet: store-url, dashboard-token,
#                                       reports-token, 0700
#   /etc/systemd/system/                the units
#   /etc/sysusers.d/jobhost.conf        the jobhost user
#   /var/lib/jobhost                    the store, file destinations (StateDirectory)
#   /var/cache/jobhost                  the compile cache (CacheDirectory)
#
# Enabling a unit is left to you: `systemctl enable --now jobhost-daemon`,
# `jobhost@daily-sales.timer` or `jobhost-fleet`.
set -euo pipefail
self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/../.."

fleet=""
binary=""
component="${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/guest_report.wasm"
data="examples/sales.db"
root=""
while [ $# -gt 0 ]; do
    case "$1" in
        --fleet) fleet=1 ;;
        --binary) binary="${2:?--binary needs a path}"; shift ;;
        --component) component="${2:?--component needs a path}"; shift ;;
        --data) data="${2:?--data needs a path}"; shift ;;
        --root) root="${2:?--root needs a folder}"; shift ;;
        -h|--help) sed -n '2,32p' "$self" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument \`$1\`; see --help" >&2; exit 2 ;;
    esac
    shift
done

fail() { echo "install.sh: $1" >&2; exit 2; }
[ -z "$binary" ] || [ -x "$binary" ] || fail "--binary \`$binary\` is not an executable file"
[ -f "$component" ] || fail "the component \`$component\` is missing; build it with \`cargo build --release -p guest-report --target wasm32-wasip2\` or name one with --component"
[ -f "$data" ] || fail "the sample data \`$data\` is missing; name it with --data"
if [ -z "$root" ] && [ "$(id -u)" != 0 ]; then
    fail "run it as root (it writes /etc and /usr/local), or give --root DIR"
fi

units=deploy/systemd
sample="$units/daily-sales.toml"
[ -n "$fleet" ] && sample="$units/daily-sales.fleet.toml"

install -d -m 0755 "$root/usr/local/lib/jobhost" "$root/etc/jobhost" \
    "$root/etc/systemd/system" "$root/etc/sysusers.d"
[ -n "$binary" ] && install -D -m 0755 "$binary" "$root/usr/local/bin/jobhost"
install -m 0644 "$component" "$root/usr/local/lib/jobhost/report.wasm"
install -m 0644 "$data" "$root/usr/local/lib/jobhost/sales.db"
if [ -e "$root/etc/jobhost/daily-sales.toml" ]; then
    echo "install.sh: kept /etc/jobhost/daily-sales.toml as it is (the sample is $sample)" >&2
else
    install -m 0644 "$sample" "$root/etc/jobhost/daily-sales.toml"
fi
if [ ! -e "$root/etc/jobhost/env" ]; then
    install -m 0600 /dev/null "$root/etc/jobhost/env"
fi
[ -n "$fleet" ] && install -d -m 0700 "$root/etc/jobhost/credentials"
for unit in jobhost-daemon.service jobhost@.service jobhost@.timer jobhost-fleet.service; do
    install -m 0644 "$units/$unit" "$root/etc/systemd/system/$unit"
done
install -m 0644 "$units/jobhost.sysusers" "$root/etc/sysusers.d/jobhost.conf"

if [ -z "$root" ]; then
    systemd-sysusers /etc/sysusers.d/jobhost.conf
    systemctl daemon-reload
fi
if [ -n "$fleet" ]; then
    cat >&2 <<NEXT
install.sh: installed under ${root:-/}. Next, on every host of the fleet:
  write the shared store's URL to $root/etc/jobhost/credentials/store-url (mode 0600)
  write a dashboard token to $root/etc/jobhost/credentials/dashboard-token (openssl rand -hex 32)
  write the receiver's token to $root/etc/jobhost/credentials/reports-token (mode 0600)
  set the destination's url in $root/etc/jobhost/daily-sales.toml
  systemctl enable --now jobhost-fleet
NEXT
else
    echo "install.sh: installed under ${root:-/}; next: systemctl enable --now jobhost-daemon (or jobhost@daily-sales.timer)" >&2
fi
