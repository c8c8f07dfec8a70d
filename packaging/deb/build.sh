#!/bin/sh
# Builds wiregate's Debian package from a built binary:
#
#   packaging/deb/build.sh [BINARY] [OUT_DIR] [CONFIG]
#
# BINARY defaults to target/release/wiregate (cargo build --release --locked), OUT_DIR to
# target/deb, CONFIG to packaging/deb/gateway.toml; prints the path of the .deb it wrote. The
# package holds the binary (stripped), CONFIG as /etc/wiregate/gateway.toml (a conffile),
# the systemd unit, and the maintainer scripts that add the wiregate system user. The unit's
# LimitNOFILE, TimeoutStopSec and capabilities follow the shipped configuration's effective
# values, read with the binary's own `check-config`. Needs dpkg-deb and binutils (objdump,
# strip); no root.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${1:-$repo/target/release/wiregate}
out=${2:-$repo/target/deb}
config=${3:-$here/gateway.toml}

die() { echo "packaging/deb/build.sh: $*" >&2; exit 2; }
[ -x "$bin" ] || die "no executable at $bin (cargo build --release --locked first)"

# "wiregate 0.1.0 (abcdef123456)" -> 0.1.0
version=$("$bin" --version | awk '{print $2}')
[ -n "$version" ] || die "$bin --version printed no version"
arch=$(dpkg --print-architecture)

# The shipped configuration's effective [server] settings (defaults filled in), without this
# shell's WIREGATE_* variables.
effective=$(env -i "$bin" check-config --config "$config") ||
    die "$config does not pass check-config"
server() {
    printf '%s\n' "$effective" |
        awk -v key="$1" '/^\[/ { s = ($0 == "[server]") } s && $1 == key { print $3 }'
}
port=$(server listen | sed 's/.*:\([0-9]*\)"$/\1/')
max_connections=$(server max_connections)
drain_ms=$(server drain_ms)
grace_ms=$(server shutdown_grace_ms)
# A descriptor for each client connection and one for its upstream connection, and room for
# sid children, the listener per worker, files and the Redis link.
limit_nofile=$((max_connections * 2 + 1024))
# systemd's own stop timeout must outlast the drain and the grace, or it kills mid-drain.
timeout_stop=$(((drain_ms + grace_ms) / 1000 + 5))
capabilities=
if [ "$port" -lt 1024 ]; then
    capabilities=CAP_NET_BIND_SERVICE
fi

# The lowest glibc the binary runs on: the newest symbol version it links.
glibc=$(objdump -T "$bin" | sed -n 's/.*GLIBC_\([0-9][0-9.]*\).*/\1/p' | sort -V | tail -n 1)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT INT TERM
root=$stage/root
install -d "$root/DEBIAN" "$root/usr/bin" "$root/etc/wiregate" "$root/lib/systemd/system" \
    "$root/usr/share/doc/wiregate"
install -m 0755 "$bin" "$root/usr/bin/wiregate"
strip --strip-unneeded "$root/usr/bin/wiregate"
install -m 0644 "$config" "$root/etc/wiregate/gateway.toml"
sed -e "s/@LIMIT_NOFILE@/$limit_nofile/" -e "s/@TIMEOUT_STOP@/$timeout_stop/" \
    -e "s/@CAPABILITIES@/$capabilities/g" "$here/wiregate.service" \
    >"$root/lib/systemd/system/wiregate.service"
chmod 0644 "$root/lib/systemd/system/wiregate.service"
install -m 0644 "$repo/docs/install.md" "$root/usr/share/doc/wiregate/install.md"
cat >"$root/usr/share/doc/wiregate/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: wiregate

Files: *
License: MIT or Apache-2.0
COPYRIGHT
for script in postinst prerm postrm; do
    install -m 0755 "$here/$script" "$root/DEBIAN/$script"
done
echo /etc/wiregate/gateway.toml >"$root/DEBIAN/conffiles"
size=$(du -sk "$root" | cut -f1)
cat >"$root/DEBIAN/control" <<CONTROL
Package: wiregate
Version: $version
Architecture: $arch
Maintainer: wiregate maintainers <wiregate@localhost>
Installed-Size: $size
Depends: libc6 (>= $glibc), libgcc-s1, adduser
Recommends: ca-certificates
Section: net
Priority: optional
Description: protocol gateway: legacy agent envelope, JSON-RPC 2.0, sid over HTTP and SSE
 wiregate translates between a legacy agent envelope and JSON-RPC 2.0 on one endpoint,
 bridges sid --raw to HTTP and Server-Sent Events, and migrates callers from one to the
 other with splits, shadows and rollbacks. It runs as the wiregate user under systemd.
CONTROL

mkdir -p "$out"
deb="$out/wiregate_${version}_$arch.deb"
dpkg-deb --build --root-owner-group -Zgzip "$root" "$deb" >/dev/null
echo "$deb"
