#!/usr/bin/env bash
# The Cloud Tasks emulator (gcloud-tasks-emulator, PyPI) for durable timers on the GCP local stack
# (builder/local_stack/gcp/cloud_tasks.py). It needs protobuf<5 while unum pins protobuf 7, so it
# gets a virtualenv of its own under the unum cache, pinned by localstack/gcloud-tasks-emulator.txt.
# Idempotent: reinstalls only when the pins changed.
set -euo pipefail
cd "$(dirname "$0")/../.."

pins=localstack/gcloud-tasks-emulator.txt
venv="${UNUM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/unum}/gcloud-tasks-emulator"
stamp="$venv/.pins"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$pins" "$stamp"; then
  echo "cloud tasks emulator: installing into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$pins"
  cp "$pins" "$stamp"
fi

# Smoke test: it starts on loopback, takes a queue, and stops.
python3 - <<'PY'
from builder.local_stack.gcp.cloud_tasks import CloudTasksEmulator
with CloudTasksEmulator() as tasks:
    tasks.create_queue("projects/demo-test/locations/local/queues/smoke")
    print(f"cloud tasks emulator on {tasks.host}: ok")
PY
