"""docs/api.md's "In the cloud" section, run as written. Its commands are in a `shell` block and
its client code in a `py` block, so that the tests of the page's `serve` section
(tests/integration/test_serve_docs.py, which reads every plain/`sh` block and the one `python`
block of the page) do not pick them up. Here: every line is run by a test or marked
`# cloud only: why`; `compile` and `deploy --api` run as written from a folder holding
`images/`, and the template they write is the one test_deploy_api checks. `build --api` and the
client code need Docker: tests/e2e/aws/test_api_front_door.py runs them."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RUN_HERE = ("python -m builder compile ", "python -m builder deploy ")
RUN_IN_E2E = ("python -m builder build ",)


def section() -> str:
    text = (REPO / "docs" / "api.md").read_text()
    return text.split("\n## In the cloud\n", 1)[1].split("\n## ", 1)[0]


def cloud_commands() -> list[tuple[str, str]]:
    """(command, comment) of the section's `shell` block."""
    [block] = re.findall(r"^```shell\n(.*?)^```", section(), flags=re.S | re.M)
    found = []
    for line in block.splitlines():
        command, _, comment = line.partition("   # ")
        if command.strip():
            found.append((command.strip(), comment.strip()))
    return found


def client_code() -> str:
    [block] = re.findall(r"^```py\n(.*?)^```", section(), flags=re.S | re.M)
    return block


def test_every_line_is_run_or_cloud_only() -> None:
    for command, comment in cloud_commands():
        run = any(command.startswith(p) for p in RUN_HERE + RUN_IN_E2E)
        assert run or re.match(r"cloud only: \S", comment), f"`{command}` is run by no test and not marked cloud only"
    assert "<ApiUrl output>" in client_code()


def test_compile_and_deploy_as_written(tmp_path: Path) -> None:
    (tmp_path / "images").symlink_to(REPO / "images")
    for command, _ in cloud_commands():
        if not command.startswith(RUN_HERE):
            continue
        argv = shlex.split(command)
        argv[0] = sys.executable
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{command}:\n{done.stderr}"
    resources = yaml.safe_load((tmp_path / "template.yaml").read_text())["Resources"]
    assert resources["UnumApiUrl"]["Properties"]["AuthType"] == "AWS_IAM"
    assert resources["UnumApi"]["Properties"]["ImageUri"].endswith("/unum/asl-order-unum-api:latest")
