"""`python -m builder graph` and `inspect --graph`, through the real CLI (and real Graphviz)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from unum_entry import naming
from unum_entry.envelope import ROOT
from unum_entry.stores.file import FileStore

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz not installed: run localstack/setup.d/40-browser.sh")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env)


def styles(mermaid: str) -> dict[str, str]:
    """Function name -> fill colour, from Mermaid text."""
    names = dict(re.findall(r'^  (n\d+)\["([^" (]+)', mermaid, re.MULTILINE))
    return {names[node]: fill for node, fill in re.findall(r"^  style (n\d+) fill:(#[0-9a-f]+)", mermaid, re.MULTILINE)}


def test_graph_prints_mermaid_by_default():
    done = cli("graph", "images/map-aggregate")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("flowchart TD")
    assert re.search(r'n0 ==>\|"map"\| n1', done.stdout)       # Split ==> Measure
    assert re.search(r'n1 -.->\|"fan-in"\| n2', done.stdout)   # Measure -.-> Summarize


@needs_dot
def test_graph_svg_and_png(tmp_path):
    svg = cli("graph", "images/asl-order/statemachine.json", "--format", "svg")
    assert svg.returncode == 0, svg.stderr
    assert "<svg" in svg.stdout and "cluster_" in svg.stdout and "ReserveAndCharge" in svg.stdout
    out = tmp_path / "loop.png"
    png = cli("graph", "images/loop", "--format", "png", "--out", str(out))
    assert png.returncode == 0, png.stderr
    assert out.read_bytes().startswith(b"\x89PNG")


def test_graph_without_graphviz_is_one_line(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": str(bin_dir)}
    done = cli("graph", "images/chain", "--format", "svg", env=env)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "graphviz" in done.stderr.lower(), done.stderr
    assert cli("graph", "images/chain", "--format", "dot", env=env).returncode == 0


def test_graph_of_nothing_is_one_line(tmp_path):
    done = cli("graph", str(tmp_path / "missing"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no such file" in done.stderr


def test_inspect_graph_colours_a_finished_a_failed_and_a_stopped_run(tmp_path):
    store = str(tmp_path / "store")
    assert cli("run", "images/chain", "--input", '{"name": "ada"}', "--store", store, "--workflow-id", "ok").returncode == 0
    ok = cli("inspect", "ok", "--store", store, "--graph")
    assert ok.returncode == 0, ok.stderr
    assert styles(ok.stdout) == {"Hello": "#d9ead3", "Shout": "#d9ead3", "Sign": "#d9ead3"}  # all retained

    # a run stopped after Shout: remove Sign's commit (its result record) -> Sign is running
    assert cli("run", "images/chain", "--input", '{"name": "bo"}', "--store", store, "--workflow-id", "half").returncode == 0
    files = FileStore(store)
    files.delete([naming.result_key("half", ROOT)])
    files.close()
    half = cli("inspect", "half", "--store", store, "--graph", "images/chain")
    assert half.returncode == 0, half.stderr
    assert styles(half.stdout) == {"Hello": "#93d37c", "Shout": "#93d37c", "Sign": "#9fc5f8"}

    bad = cli("run", "images/map-aggregate", "--input", '{"nope": 1}', "--store", store, "--workflow-id", "bad")
    assert bad.returncode == 1, bad.stderr
    failed = cli("inspect", "bad", "--store", store, "--graph")
    assert failed.returncode == 0, failed.stderr
    colours = styles(failed.stdout)
    assert "#f28b82" in colours.values()
    assert colours.get("Summarize") == "#ffffff"  # never reached
