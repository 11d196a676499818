#!/usr/bin/env bash
# The local OS image every test image builds on (no registry can be pulled from here):
# mmdebstrap a Debian bookworm with Python 3.11 and `docker import` it as
# local/debian-python:bookworm. Idempotent: skipped when the image exists.
set -euo pipefail
. "$(dirname "$0")/../lib/common.bash"

IMAGE="${UNUM_OS_IMAGE:-local/debian-python:bookworm}"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base OS image: $IMAGE already present"
  exit 0
fi
install_command mmdebstrap mmdebstrap
MIRROR="${UNUM_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
tarball="$(mktemp -d)/base.tar"
echo "base OS image: mmdebstrap bookworm -> $IMAGE"
mmdebstrap --quiet --variant=apt --include=python3,python3-venv,python3-pip,ca-certificates \
  bookworm "$tarball" "$MIRROR"
docker import "$tarball" "$IMAGE" >/dev/null
rm -rf "$(dirname "$tarball")"
echo "base OS image: $IMAGE ready"
