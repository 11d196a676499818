#!/usr/bin/env bash
# The SQLite store's durability checks (tests/integration/test_sqlite_store.py): strace (the
# fsync audit of each durability setting) and e2fsprogs (mkfs.ext4: the power-loss test runs the
# store on a loop-mounted ext4 image). Idempotent: installs only what is missing.
set -euo pipefail
. "$(dirname "$0")/../lib/common.bash"

install_command strace strace durability-tools
install_command mkfs.ext4 e2fsprogs durability-tools
echo "durability-tools: $(strace -V | head -n 1); $(mkfs.ext4 -V 2>&1 | head -n 1)"
