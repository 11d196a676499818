"""Every apt call of the setup scripts waits for the dpkg lock: a fresh machine's CI failed once
while another apt was running (issue 46). The one apt-get invocation is `apt_get` in
localstack/lib/common.bash (with `-o DPkg::Lock::Timeout=600`); every script calls that."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = [*sorted((ROOT / "localstack").rglob("*.sh")), *sorted((ROOT / "localstack").rglob("*.bash")),
           ROOT / ".ci" / "run", ROOT / ".ci" / "lock"]
APT_CALL = re.compile(r"(?<![\w-])(apt-get|apt)\s+(install|update|upgrade|remove|purge|-y)")


def test_every_apt_call_waits_for_the_dpkg_lock() -> None:
    unguarded = []
    for script in SCRIPTS:
        if not script.is_file():
            continue
        for number, line in enumerate(script.read_text().splitlines(), start=1):
            code = line.split("#", 1)[0]
            if APT_CALL.search(code) and "DPkg::Lock::Timeout=" not in code:
                unguarded.append(f"{script.relative_to(ROOT)}:{number}: {line.strip()}")
    assert unguarded == []


def test_the_shared_apt_get_waits_and_the_scripts_that_install_source_it() -> None:
    common = (ROOT / "localstack" / "lib" / "common.bash").read_text()
    assert re.search(r"apt_get\(\) \{\n\s+DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600", common)
    for script in sorted((ROOT / "localstack" / "setup.d").glob("*.sh")):
        text = script.read_text()
        if "apt_get " in text or "install_command " in text:
            assert "lib/common.bash" in text, script.name
