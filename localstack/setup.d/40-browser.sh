#!/usr/bin/env bash
# Pictures and a real browser: Graphviz (`dot`, for `python -m builder graph --format svg|png`
# and the web page's graphs) and Debian's chromium + chromedriver (the web page's browser test,
# driven by selenium from the dev extra). Idempotent: installs only what is missing.
set -euo pipefail
. "$(dirname "$0")/../lib/common.bash"

missing=()
command -v dot >/dev/null || missing+=(graphviz)
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)

if ((${#missing[@]})); then
  echo "browser: installing ${missing[*]}"
  apt_get update -qq || true
  apt_get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "browser: $(dot -V 2>&1 | head -n 1); $(chromium --version 2>/dev/null | head -n 1); $(chromedriver --version | head -n 1)"
