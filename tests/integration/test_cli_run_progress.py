"""`run`'s progress line on a real pseudo-terminal of a given width (the real CLI in a
subprocess, a real file store): never wider than the terminal (so it never wraps), warnings on
lines of their own, rate, running and queued, an ETA for the map, the failed items named."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.support.terminal import run_on_terminal

pytestmark = pytest.mark.integration

CLEAR = "\r\x1b[K"


def map_workflow(folder: Path, items: int, failing: int) -> Path:
    """Split -> `items` Work items (item `failing` raises on its first attempt) -> Sum."""
    work = ("import time\n\ndef handler(e, c):\n    time.sleep(0.05)\n"
            f"    if e == {failing} and c.attempt == 0:\n        raise ValueError('not yet')\n    return e\n")
    for name, code, ir in [("Split", f"def handler(e, c):\n    return list(range({items}))\n",
                            {"instructions": [{"op": "map", "function": "Work"}]}),
                           ("Work", work, {"instructions": [{"op": "fan_in", "function": "Sum"}], "max_attempts": 3}),
                           ("Sum", "def handler(e, c):\n    return sum(e)\n", {})]:
        (folder / name).mkdir(parents=True)
        (folder / name / "app.py").write_text(code)
        (folder / name / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": name, "handler": "app.handler",
                                                                **ir}))
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "m", "entry": "Split"}))
    return folder


def test_a_narrow_terminal_gets_lines_that_fit_and_warnings_of_their_own(tmp_path: Path) -> None:
    folder = map_workflow(tmp_path / "wf", items=60, failing=7)
    code, drawn, out = run_on_terminal(["run", str(folder), "--store", str(tmp_path / "s"), "--workers", "2"], 72)
    assert code == 0, drawn
    assert json.loads(out) == sum(range(60))
    statuses = [part.split("\n")[0] for part in drawn.split(CLEAR)[1:] if part.strip()]
    progress = [s for s in statuses if re.match(r"^\s*\d+\.\d s  committed \d+", s)]
    assert len(progress) >= 5, drawn
    assert all(len(s) < 72 for s in progress)  # never as wide as the terminal: no wrap
    assert any(re.search(r"running [0-2]  queued \d+", s) for s in progress)  # 2 workers: at most 2 running
    assert any(re.search(r"\(\d+(\.\d)?/s\)", s) for s in progress)  # the rate
    for line in drawn.split("\n"):  # a message is whole on its own line: never after a status on the same line
        if "warning:" in line:
            assert line.split(CLEAR)[-1].startswith("warning: "), repr(line)


def test_a_wide_terminal_names_the_failed_item_and_shows_an_eta(tmp_path: Path) -> None:
    folder = map_workflow(tmp_path / "wf", items=60, failing=7)
    code, drawn, out = run_on_terminal(["run", str(folder), "--store", str(tmp_path / "s"), "--workers", "2"], 200)
    assert code == 0, drawn
    assert "errors: Work[7] ValueError" in drawn  # the failed item, by its map index
    assert re.search(r"Work \[[=>-]+\] \d+/60 ETA \d+ s", drawn), drawn
