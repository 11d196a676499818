# Shell helpers sourced by the scripts of localstack/setup.d/. Not a setup step itself: .ci/run
# runs every setup.d/*.sh in name order, so this library lives outside that folder.
#   . "$(dirname "$0")/../lib/common.bash"    (before any `cd`)

# install_command COMMAND PACKAGE [LABEL]: apt-get install PACKAGE (no recommends, quietly)
# unless COMMAND is already on PATH; says "LABEL: installing PACKAGE" first when LABEL is given.
# Leaves DEBIAN_FRONTEND=noninteractive exported after an install.
# Every apt call goes through apt_get: it waits up to 10 minutes for the dpkg lock (another apt
# running, e.g. a fresh machine's unattended upgrades) instead of failing at once.
apt_get() {
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"
}

install_command() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if [ -n "${3:-}" ]; then
    echo "$3: installing $2"
  fi
  apt_get update -qq >/dev/null
  apt_get install -y -qq --no-install-recommends "$2" >/dev/null
}
