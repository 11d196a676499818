#!/usr/bin/env bash
# AWS pieces of the local stack beyond moto (which pip installs): Debian's docker-registry (a
# real OCI registry for `builder push` tests) and the Lambda Runtime Interface Emulator, taken
# out of the aws-sam-cli wheel into the unum cache (~/.cache/unum). Idempotent.
set -euo pipefail
. "$(dirname "$0")/../lib/common.bash"
cd "$(dirname "$0")/../.."

install_command docker-registry docker-registry aws
python3 -c "from builder.local_stack.lambda_containers import rie_binary; print('aws: Lambda RIE at', rie_binary())"
