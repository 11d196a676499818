#!/usr/bin/env bash
# Start/stop moto's server in the background on loopback.
#   localstack/moto-server.sh start|stop|status|restart
# Environment: PORT (default 5001; the registry of setup.d/40-registry.sh serves 5000), PYTHON (default python3).
# Pid file /tmp/unum-moto-server-$PORT.pid, log /tmp/unum-moto-server-$PORT.log.
set -euo pipefail

PORT="${PORT:-5001}"
PYTHON="${PYTHON:-python3}"
HOST=127.0.0.1                      # loopback only, always
PID_FILE="/tmp/unum-moto-server-${PORT}.pid"
LOG_FILE="/tmp/unum-moto-server-${PORT}.log"

running() {
  [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

start() {
  if running; then
    echo "moto server already running (pid $(cat "$PID_FILE")) on http://${HOST}:${PORT}"
    return 0
  fi
  "$PYTHON" -c 'import moto.server, flask' 2>/dev/null || {
    echo "moto server is not installed for $PYTHON: pip install 'moto[server]'" >&2
    return 1
  }
  # One request at a time, as atomic as DynamoDB (builder/local_stack/moto_serialized.py says why).
  nohup "$PYTHON" -m builder.local_stack.moto_serialized "$HOST" "$PORT" >"$LOG_FILE" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
  for _ in $(seq 1 100); do          # up to ~20 s
    if ! running; then
      echo "moto server exited; log $LOG_FILE:" >&2
      tail -n 20 "$LOG_FILE" >&2
      rm -f "$PID_FILE"
      return 1
    fi
    if "$PYTHON" - "$HOST" "$PORT" <<'PY' 2>/dev/null
import sys, urllib.request
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
opener.open(f"http://{sys.argv[1]}:{sys.argv[2]}/moto-api/", timeout=1).read()
PY
    then
      echo "moto server running (pid $(cat "$PID_FILE")) on http://${HOST}:${PORT}; log $LOG_FILE"
      return 0
    fi
    sleep 0.2
  done
  echo "moto server did not answer on http://${HOST}:${PORT} in time; log $LOG_FILE:" >&2
  tail -n 20 "$LOG_FILE" >&2
  stop
  return 1
}

stop() {
  if ! [[ -f "$PID_FILE" ]]; then
    echo "moto server not running (no $PID_FILE)"
    return 0
  fi
  local pid
  pid="$(cat "$PID_FILE")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 50); do         # up to ~5 s, then kill
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
  fi
  rm -f "$PID_FILE"
  echo "moto server stopped (pid $pid)"
}

status() {
  if running; then
    echo "moto server running (pid $(cat "$PID_FILE")) on http://${HOST}:${PORT}"
  else
    echo "moto server not running"
    return 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  restart) stop; start ;;
  *) echo "usage: $0 start|stop|status|restart   (PORT=${PORT})" >&2; exit 2 ;;
esac
