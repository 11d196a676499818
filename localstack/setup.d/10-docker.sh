#!/usr/bin/env bash
# Docker engine for the e2e tests: install docker.io and start dockerd (vfs storage, no bridge,
# no iptables: containers run with --network host only). Idempotent: does nothing when
# `docker info` already answers. Log: /tmp/unum-dockerd.log.
set -euo pipefail

if docker info >/dev/null 2>&1; then
  echo "dockerd: already running"
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "dockerd: installing docker.io"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends docker.io >/dev/null
fi

setsid nohup dockerd --storage-driver=vfs --bridge=none --iptables=false --ip-forward=false \
  --ip-masq=false >/tmp/unum-dockerd.log 2>&1 </dev/null &

for _ in $(seq 1 60); do          # up to ~30 s
  if docker info >/dev/null 2>&1; then
    echo "dockerd: running"
    exit 0
  fi
  sleep 0.5
done
echo "dockerd: did not answer within 30 s; log /tmp/unum-dockerd.log:" >&2
tail -n 30 /tmp/unum-dockerd.log >&2
exit 1
