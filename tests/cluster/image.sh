#!/usr/bin/env bash
# Builds the Switchboard image without a registry or a Docker engine: the binaries built in
# this tree (`switchboard` without the local feature, `switchboard-operator`), the shared
# libraries they load (as `ldd` lists them, at the same paths), the CA bundle, and a
# passwd/group naming user 65532 `nonroot` — the same paths, user and default command as
# the Dockerfile's result (a distroless cc image): no shell, non-root, fine with a
# read-only root filesystem.
#
# Usage: image.sh [--load]   --load also imports it into the real node (load-image.sh).
# Env:   SWITCHBOARD_PROFILE  cargo profile to build with (default: dev, the test build);
#                             `shipping` builds what the Dockerfile builds: `switchboard` with
#                             release-dataplane, `switchboard-operator` with release-operator
#        SWITCHBOARD_IMAGE    image name (default: the operator's default runtime image,
#                             ghcr.io/switchboard-dev/switchboard:<version>, so the chart
#                             and the operator use it as they are)
#        CARGO_TARGET_DIR     as for cargo
# Prints the image name and the archive path (docker-archive) as its last two lines.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PROFILE="${SWITCHBOARD_PROFILE:-dev}"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n1)"
IMAGE="${SWITCHBOARD_IMAGE:-ghcr.io/switchboard-dev/switchboard:$VERSION}"
CACHE="${SWITCHBOARD_CACHE:-$HOME/.cache/switchboard}"
OUT="$CACHE/image"
log() { echo "[cluster/image] $*" >&2; }

command -v buildah >/dev/null || { log "installing buildah"; apt-get update -qq >&2; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah >&2; }
# The gateway's WebRTC edge links libopus, which the `opus` crate builds with CMake.
command -v cmake >/dev/null || { log "installing cmake"; apt-get update -qq >&2; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cmake >&2; }

# The profile each binary is built with, and the folder cargo puts it in.
if [ "$PROFILE" = shipping ]; then
  DATAPLANE_PROFILE=release-dataplane OPERATOR_PROFILE=release-operator
else
  DATAPLANE_PROFILE="$PROFILE" OPERATOR_PROFILE="$PROFILE"
fi
out_dir() { local dir="${CARGO_TARGET_DIR:-$ROOT/target}/$1"; [ "$1" = dev ] && dir="${CARGO_TARGET_DIR:-$ROOT/target}/debug"; echo "$dir"; }
log "building the binaries (switchboard: $DATAPLANE_PROFILE, switchboard-operator: $OPERATOR_PROFILE)"
# --no-default-features: the shipping switchboard has no local mode and no simulator.
if [ "$DATAPLANE_PROFILE" = "$OPERATOR_PROFILE" ]; then
  (cd "$ROOT" && cargo build --locked --profile "$PROFILE" -p switchboard-dataplane -p switchboard-operator \
    --no-default-features --bin switchboard --bin switchboard-operator >&2)
else
  (cd "$ROOT" && cargo build --locked --profile "$DATAPLANE_PROFILE" -p switchboard-dataplane --no-default-features \
    --bin switchboard >&2 && cargo build --locked --profile "$OPERATOR_PROFILE" -p switchboard-operator \
    --bin switchboard-operator >&2)
fi
BINARIES=("$(out_dir "$DATAPLANE_PROFILE")/switchboard" "$(out_dir "$OPERATOR_PROFILE")/switchboard-operator")

WORK="$(mktemp -d)"
had_varlib=""; [ -e /var/lib/containers ] && had_varlib=1
cleanup() { rm -rf "$WORK"; [ -n "$had_varlib" ] || rm -rf /var/lib/containers; }
trap cleanup EXIT
FS="$WORK/rootfs"
mkdir -p "$FS/usr/local/bin" "$FS/etc/ssl/certs" "$FS/tmp"
chmod 1777 "$FS/tmp"
for bin in "${BINARIES[@]}"; do
  install -m 0755 "$bin" "$FS/usr/local/bin/$(basename "$bin")"
  # The libraries the dynamic loader will look for, at the paths it will look.
  ldd "$bin" | grep -o '/[^ ]*' | while read -r lib; do
    mkdir -p "$FS$(dirname "$lib")"
    cp -L "$lib" "$FS$lib"
  done
done
cp -L /etc/ssl/certs/ca-certificates.crt "$FS/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$FS/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$FS/etc/group"

B="buildah --storage-driver vfs --root $WORK/storage --runroot $WORK/run"
c="$($B from scratch)"
$B copy "$c" "$FS" / >/dev/null
$B config --user 65532:65532 --workingdir / \
  --env PATH=/usr/local/bin --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --cmd '["switchboard","--help"]' --label "org.opencontainers.image.version=$VERSION" "$c"
$B commit -q "$c" "$IMAGE" >/dev/null
mkdir -p "$OUT"
ARCHIVE="$OUT/switchboard-$VERSION.tar"
rm -f "$ARCHIVE"
$B push -q "$IMAGE" "docker-archive:$ARCHIVE:$IMAGE" >&2
log "$IMAGE: $(du -m "$FS" | tail -n1 | cut -f1) MB unpacked, archive $(du -m "$ARCHIVE" | cut -f1) MB"
if [ "${1:-}" = "--load" ]; then
  "$HERE/load-image.sh" "$ARCHIVE"
fi
echo "$IMAGE"
echo "$ARCHIVE"
