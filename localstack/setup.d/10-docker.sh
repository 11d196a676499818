#!/usr/bin/env bash
# Docker engine for the e2e tests: install docker.io and start dockerd without a bridge or
# iptables (containers run with --network host only). Idempotent: does nothing when `docker info`
# already answers. Log: /tmp/unum-dockerd.log.
#
# Storage: overlay2 when the kernel and the filesystem under /var/lib/docker allow it (image
# builds, container starts and removals take well under a second per step), else vfs (every
# layer and every container start is a full copy of the image: seconds per step).
# UNUM_DOCKER_STORAGE_DRIVER=vfs|overlay2 forces one.
set -euo pipefail
. "$(dirname "$0")/../lib/common.bash"

if docker info >/dev/null 2>&1; then
  echo "dockerd: already running ($(docker info --format '{{.Driver}}' 2>/dev/null) storage)"
  exit 0
fi

install_command dockerd docker.io dockerd

start_dockerd() {  # $1 = storage driver; returns 0 once `docker info` answers with it
  setsid nohup dockerd --storage-driver="$1" --bridge=none --iptables=false --ip-forward=false \
    --ip-masq=false >/tmp/unum-dockerd.log 2>&1 </dev/null &
  local pid=$!
  for _ in $(seq 1 60); do          # up to ~30 s
    if [ "$(docker info --format '{{.Driver}}' 2>/dev/null)" = "$1" ]; then
      echo "dockerd: running ($1 storage)"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  return 1
}

if [ -n "${UNUM_DOCKER_STORAGE_DRIVER:-}" ]; then
  drivers="$UNUM_DOCKER_STORAGE_DRIVER"
elif grep -qw overlay /proc/filesystems; then
  drivers="overlay2 vfs"
else
  drivers="vfs"
fi
for driver in $drivers; do
  start_dockerd "$driver" && exit 0
  echo "dockerd: could not start with $driver storage; log tail:" >&2
  tail -n 5 /tmp/unum-dockerd.log >&2
done
echo "dockerd: did not start; log /tmp/unum-dockerd.log" >&2
exit 1
