#!/usr/bin/env bash
# The local registry the README pushes to: Debian's docker-registry serving 127.0.0.1:5000
# (UNUM_REGISTRY_PORT), images kept under ~/.cache/unum/registry (UNUM_REGISTRY_ROOT) across
# restarts. Idempotent: does nothing when a registry already answers there. Log:
# /tmp/unum-registry-$PORT.log. Docker treats 127.0.0.0/8 registries as plain HTTP by default.
#   python -m builder push images/chain --registry 127.0.0.1:5000
set -euo pipefail
. "$(dirname "$0")/../lib/common.bash"

PORT="${UNUM_REGISTRY_PORT:-5000}"
ROOT="${UNUM_REGISTRY_ROOT:-${HOME:-/root}/.cache/unum/registry}"
LOG="/tmp/unum-registry-${PORT}.log"
URL="http://127.0.0.1:${PORT}/v2/"

probe() {  # prints "registry" when the distribution API answers /v2/, "other" for anything else
  python3 - "$URL" <<'PY' 2>/dev/null || true
import sys, urllib.error, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
try:
    headers = opener.open(sys.argv[1], timeout=2).headers
except urllib.error.HTTPError as exc:
    headers = exc.headers
except OSError:
    sys.exit(0)
print("registry" if headers.get("Docker-Distribution-Api-Version", "").startswith("registry/2") else "other")
PY
}
answers_as_registry() { [ "$(probe)" = registry ]; }

if answers_as_registry; then
  echo "registry: already serving 127.0.0.1:${PORT}"
  exit 0
fi
if [ "$(probe)" = other ]; then
  echo "registry: 127.0.0.1:${PORT} is taken by something that is not a registry; set UNUM_REGISTRY_PORT" >&2
  exit 1
fi
install_command docker-registry docker-registry registry

mkdir -p "$ROOT"
CONFIG="$ROOT/config-${PORT}.yml"
cat >"$CONFIG" <<YAML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $ROOT/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:${PORT}
YAML
setsid nohup docker-registry serve "$CONFIG" >"$LOG" 2>&1 </dev/null &
pid=$!
for _ in $(seq 1 60); do          # up to ~30 s
  if answers_as_registry; then
    echo "registry: serving 127.0.0.1:${PORT} (pid $pid, storage $ROOT/data, log $LOG)"
    exit 0
  fi
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.5
done
echo "registry: did not start on 127.0.0.1:${PORT}; log $LOG:" >&2
tail -n 10 "$LOG" >&2
exit 1
