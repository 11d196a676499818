#!/usr/bin/env bash
# AWS pieces of the local stack beyond moto (which pip installs): Debian's docker-registry (a
# real OCI registry for `builder push` tests) and the Lambda Runtime Interface Emulator, taken
# out of the aws-sam-cli wheel into the unum cache (~/.cache/unum). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v docker-registry >/dev/null 2>&1; then
  echo "aws: installing docker-registry"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
fi
python3 -c "from builder.local_stack.lambda_containers import rie_binary; print('aws: Lambda RIE at', rie_binary())"
