#!/bin/sh
# Builds wiregate's OCI image from a built binary:
#
#   packaging/oci/build.sh [BINARY] [IMAGE] [CONFIG]
#
# BINARY defaults to target/release/wiregate (cargo build --release --locked), IMAGE to
# localhost/wiregate:<version>, CONFIG (the image's /etc/wiregate/gateway.toml) to
# packaging/oci/gateway.toml. The image is FROM scratch: the script stages its root (the
# binary stripped, every library `ldd` names with the dynamic loader, the CA roots, passwd and
# group lines for the wiregate user, /etc/wiregate/gateway.toml) and builds
# packaging/oci/Containerfile over it with buildah (or BUILDER=podman), so no registry is
# reached. BUILDER_ARGS go before `bud`/`build` (say `--root DIR --runroot DIR
# --storage-driver vfs` for a storage of its own). With OCI_ARCHIVE=FILE the image is also
# written there as an oci-archive (podman load, skopeo copy). Prints the image's name.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${1:-$repo/target/release/wiregate}
builder=${BUILDER:-buildah}
builder_args=${BUILDER_ARGS:-}

die() { echo "packaging/oci/build.sh: $*" >&2; exit 2; }
[ -x "$bin" ] || die "no executable at $bin (cargo build --release --locked first)"
command -v "$builder" >/dev/null || die "$builder is not installed (apt-get install buildah)"

# "wiregate 0.1.0 (abcdef123456)": the version, and the commit it was built from.
version=$("$bin" --version | awk '{print $2}')
commit=$("$bin" --version | sed -n 's/.*(\(.*\)).*/\1/p')
image=${2:-localhost/wiregate:$version}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT INT TERM
rootfs=$stage/rootfs
install -d "$rootfs/usr/bin" "$rootfs/etc/wiregate" "$rootfs/etc/ssl/certs" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
install -m 0755 "$bin" "$rootfs/usr/bin/wiregate"
strip --strip-unneeded "$rootfs/usr/bin/wiregate"
# Each library at the path the loader looks for it, and the loader itself.
ldd "$bin" | awk '/=> \// { print $3 } /^[[:space:]]*\// { print $1 }' | while read -r lib; do
    install -d "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
done
ca=/etc/ssl/certs/ca-certificates.crt
[ -f "$ca" ] || die "no CA roots at $ca (apt-get install ca-certificates)"
install -m 0644 "$ca" "$rootfs$ca"
printf 'root:x:0:0:root:/:/sbin/nologin\nwiregate:x:65532:65532:wiregate:/:/sbin/nologin\n' \
    >"$rootfs/etc/passwd"
printf 'root:x:0:\nwiregate:x:65532:\n' >"$rootfs/etc/group"
install -m 0644 "${3:-$here/gateway.toml}" "$rootfs/etc/wiregate/gateway.toml"
cp "$here/Containerfile" "$stage/Containerfile"

case "$builder" in
    podman) verb=build ;;
    *) verb=bud ;;
esac
# shellcheck disable=SC2086 # BUILDER_ARGS is a list of words
$builder $builder_args $verb --quiet --isolation chroot --file "$stage/Containerfile" \
    --build-arg "VERSION=$version" --build-arg "COMMIT=$commit" --tag "$image" "$stage" >/dev/null
if [ -n "${OCI_ARCHIVE:-}" ]; then
    # shellcheck disable=SC2086
    $builder $builder_args push --quiet "$image" "oci-archive:$OCI_ARCHIVE:$image" >/dev/null
fi
echo "$image"
