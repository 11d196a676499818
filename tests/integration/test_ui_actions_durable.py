"""The console's redrive is the command line's (issue 45): `/action/redrive` runs `python -m
builder redrive` as a child process of its own session (builder.ui.actions.CommandAction), so
it runs the workflow's pinned version (not the folder as it is now), is journaled on run's
durable queue, and goes on when the console is closed right after the click; a refusal is the
command's one line (409)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.ui import running_ui

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def _workflow(folder: Path, fixed: Path, factor: int) -> None:
    """Split -> map Item (fails for 2 until `fixed` exists) -> fan-in Sum (sum x factor)."""
    for name, code, instructions in (
            ("Split", "def handler(event, context):\n    return [1, 2, 3]\n",
             [{"op": "create_set", "function": "Sum", "shape": "aggregate"}, {"op": "map", "function": "Item"}]),
            ("Item", f"import pathlib\ndef handler(event, context):\n    if event == 2 and not pathlib.Path({str(fixed)!r})"
                     ".exists():\n        raise ValueError('not yet')\n    return event\n", [{"op": "fan_in", "function": "Sum"}]),
            ("Sum", f"def handler(event, context):\n    return sum(event) * {factor}\n", [])):
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "app.py").write_text(code)
        (folder / name / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": name, "handler": "app.handler",
                                                               "max_attempts": 1, "instructions": instructions}))
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "rd", "entry": "Split"}))


def _post(port: int, action: str, workflow: str, _token_page: str = "") -> tuple[int, str]:
    page = urllib.request.urlopen(f"http://127.0.0.1:{port}/fragment/workflow?w={workflow}", timeout=30).read().decode()
    token = re.search(r"name='token' value='([^']+)'", page) or re.search(r"name='token' value='([^']+)'", _token_page)
    assert token, "the page carries its session token"
    request = urllib.request.Request(f"http://127.0.0.1:{port}/action/{action}", method="POST",
                                     data=f"w={workflow}&token={token.group(1)}".encode(),
                                     headers={"Origin": f"http://127.0.0.1:{port}",
                                              "Content-Type": "application/x-www-form-urlencoded"})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _results(store: str, workflow: str, timeout: float = 90.0) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = cli("inspect", workflow, "--store", store)
        if shown.returncode == 0 and json.loads(shown.stdout).get("status") == "succeeded":
            return json.loads(shown.stdout)["results"]
        time.sleep(0.5)
    raise AssertionError(f"{workflow} did not succeed in {timeout:.0f} s: {cli('inspect', workflow, '--store', store).stdout}")


def test_the_console_redrive_runs_the_pinned_version_and_outlives_the_console(tmp_path: Path) -> None:
    folder, fixed, store = tmp_path / "wf", tmp_path / "fixed", str(tmp_path / "store.db")
    _workflow(folder, fixed, factor=1)
    assert cli("run", str(folder), "--store", store, "--workflow-id", "wf-ui").returncode == 1
    _workflow(folder, fixed, factor=100)  # the folder changes after the start: a new version
    fixed.touch()
    with running_ui(store) as port:
        form = urllib.request.urlopen(f"http://127.0.0.1:{port}/fragment/workflow?w=wf-ui", timeout=30).read().decode()
        status, body = _post(port, "redrive", "wf-ui")
        assert status == 303, body
        # a second click: the first redrive holds the workflow, or has already ended it - refused in one line
        status, body = _post(port, "redrive", "wf-ui", form)
        assert status == 409 and body.strip().count("\n") == 0 and "Traceback" not in body, body
    # the console is gone (its process group stopped); the redrive goes on in its own session
    assert _results(store, "wf-ui") == [6]  # the version the workflow started with, not 600
