#!/usr/bin/env bash
# valgrind: bench/instructions.py counts the embedded engine's instructions per transition under
# callgrind (tests/integration/test_bench_instructions.py runs its quick form). Idempotent.
set -euo pipefail
. "$(dirname "$0")/../lib/common.bash"

install_command valgrind valgrind bench-tools
echo "bench-tools: $(valgrind --version)"
