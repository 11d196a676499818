#!/usr/bin/env bash
# strace: the SQLite store's fsync audit (tests/integration/test_sqlite_store.py traces the
# fsync/fdatasync calls of commits to check what each durability setting syncs). Idempotent.
set -euo pipefail
. "$(dirname "$0")/../lib/common.bash"

install_command strace strace strace
echo "strace: $(strace -V | head -n 1)"
