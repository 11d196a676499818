#!/usr/bin/env bash
# GCP part of the local stack: Google's Firestore and Pub/Sub emulators (gcloud components, java).
# Idempotent. The tests start their own emulator processes on free ports (tests/integration/gcp/
# conftest.py), so this script only makes sure the emulators are installed and can start.
set -euo pipefail
. "$(dirname "$0")/../lib/common.bash"
cd "$(dirname "$0")/../.."

have_emulators() {
  command -v gcloud >/dev/null && command -v java >/dev/null \
    && [[ -d "$(dirname "$(readlink -f "$(command -v gcloud)")")/../platform/cloud-firestore-emulator" \
          || -d /usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator ]] \
    && [[ -d "$(dirname "$(readlink -f "$(command -v gcloud)")")/../platform/pubsub-emulator" \
          || -d /usr/lib/google-cloud-sdk/platform/pubsub-emulator ]]
}

if ! have_emulators; then
  echo "gcp emulators: not installed; trying apt (google-cloud-cli-*-emulator, default-jre-headless)"
  apt_get update -qq || true
  if apt-cache show google-cloud-cli-firestore-emulator >/dev/null 2>&1; then
    apt_get install -y -qq google-cloud-cli google-cloud-cli-firestore-emulator \
      google-cloud-cli-pubsub-emulator default-jre-headless
  else
    echo "gcp emulators: no apt source offers google-cloud-cli here; the GCP tests need them" >&2
    exit 1
  fi
fi

# Smoke test: both emulators start, answer and stop (process groups killed).
python3 - <<'PY'
from builder.local_stack.gcp import FirestoreEmulator, PubSubEmulator
with FirestoreEmulator() as firestore, PubSubEmulator() as pubsub:
    print(f"gcp emulators: firestore on {firestore.host}, pubsub on {pubsub.host}: ok")
PY
