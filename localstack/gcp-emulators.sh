#!/usr/bin/env bash
# Start/stop/reset Google's Firestore and Pub/Sub emulators in the background on loopback.
#   localstack/gcp-emulators.sh start|stop|reset|status|env
# Environment: FIRESTORE_PORT (default 8681), PUBSUB_PORT (default 8685), PROJECT (demo-test).
# Each emulator runs in its own process group (the gcloud wrapper has a java child): stop kills
# the group. Pid files $UNUM_EMULATOR_DIR/unum-{firestore,pubsub}-emulator.pid (default /tmp), logs
# beside them (.log): a second set of emulators (other ports, another folder) stays apart.
# Point clients at them with: eval "$(localstack/gcp-emulators.sh env)"
set -euo pipefail

FIRESTORE_PORT="${FIRESTORE_PORT:-8681}"
PUBSUB_PORT="${PUBSUB_PORT:-8685}"
PROJECT="${PROJECT:-demo-test}"
STATE_DIR="${UNUM_EMULATOR_DIR:-/tmp}"
HOST=127.0.0.1                      # loopback only, always

port_of() { if [[ $1 == firestore ]]; then echo "$FIRESTORE_PORT"; else echo "$PUBSUB_PORT"; fi; }
pid_file() { echo "$STATE_DIR/unum-$1-emulator.pid"; }
log_file() { echo "$STATE_DIR/unum-$1-emulator.log"; }
running() { [[ -f "$(pid_file "$1")" ]] && kill -0 "$(cat "$(pid_file "$1")")" 2>/dev/null; }
answers() { curl -sf --noproxy '*' --max-time 1 "http://${HOST}:$(port_of "$1")/" 2>/dev/null | grep -q Ok; }

start_one() {
  local name=$1 port
  port=$(port_of "$name")
  if running "$name" && answers "$name"; then
    echo "$name emulator already running on ${HOST}:${port}"
    return 0
  fi
  command -v gcloud >/dev/null || { echo "gcloud is not installed (see localstack/setup.d/30-gcp-emulators.sh)" >&2; return 1; }
  if [[ $name == firestore ]]; then
    setsid nohup gcloud emulators firestore start --host-port="${HOST}:${port}" >"$(log_file "$name")" 2>&1 </dev/null &
  else
    setsid nohup gcloud beta emulators pubsub start --host-port="${HOST}:${port}" --project="$PROJECT" \
      >"$(log_file "$name")" 2>&1 </dev/null &
  fi
  echo $! >"$(pid_file "$name")"
  for _ in $(seq 1 120); do          # up to ~60 s (the first java start is the slowest)
    if answers "$name"; then
      echo "$name emulator running on ${HOST}:${port} (process group $(cat "$(pid_file "$name")")); log $(log_file "$name")"
      return 0
    fi
    if ! running "$name"; then
      echo "$name emulator exited; log $(log_file "$name"):" >&2
      tail -n 20 "$(log_file "$name")" >&2
      return 1
    fi
    sleep 0.5
  done
  echo "$name emulator did not answer on ${HOST}:${port} in time" >&2
  stop_one "$name"
  return 1
}

stop_one() {
  local name=$1 pid
  [[ -f "$(pid_file "$name")" ]] || { echo "$name emulator not running (no pid file)"; return 0; }
  pid=$(cat "$(pid_file "$name")")
  kill -TERM -- "-$pid" 2>/dev/null || true   # the whole group: wrapper and java
  for _ in $(seq 1 50); do
    kill -0 -- "-$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  rm -f "$(pid_file "$name")"
  echo "$name emulator stopped"
}

reset_all() {
  curl -sf --noproxy '*' -X DELETE \
    "http://${HOST}:${FIRESTORE_PORT}/emulator/v1/projects/${PROJECT}/databases/(default)/documents" >/dev/null \
    && echo "firestore: every document of ${PROJECT} deleted"
  local base="http://${HOST}:${PUBSUB_PORT}/v1/projects/${PROJECT}"
  for kind in subscriptions topics; do
    curl -sf --noproxy '*' "$base/$kind" | python3 -c '
import json, sys
for item in json.load(sys.stdin).get(sys.argv[1], []):
    print(item["name"] if isinstance(item, dict) else item)' "$kind" | while read -r name; do
      curl -sf --noproxy '*' -X DELETE "http://${HOST}:${PUBSUB_PORT}/v1/${name}" >/dev/null
    done
  done
  echo "pubsub: every subscription and topic of ${PROJECT} deleted"
}

case "${1:-}" in
  start) start_one firestore; start_one pubsub ;;
  stop) stop_one pubsub; stop_one firestore ;;
  restart) stop_one pubsub; stop_one firestore; start_one firestore; start_one pubsub ;;
  reset) reset_all ;;
  status)
    for name in firestore pubsub; do
      if answers "$name"; then echo "$name emulator running on ${HOST}:$(port_of "$name")"; else echo "$name emulator not running"; fi
    done ;;
  env)
    echo "export FIRESTORE_EMULATOR_HOST=${HOST}:${FIRESTORE_PORT} PUBSUB_EMULATOR_HOST=${HOST}:${PUBSUB_PORT} GOOGLE_CLOUD_PROJECT=${PROJECT}" ;;
  *) echo "usage: $0 start|stop|restart|reset|status|env   (FIRESTORE_PORT=${FIRESTORE_PORT} PUBSUB_PORT=${PUBSUB_PORT})" >&2; exit 2 ;;
esac
