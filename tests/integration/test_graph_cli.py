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


def test_graph_view_states_draws_the_definition_and_inspect_colours_the_path(tmp_path):
    """`graph FILE --view states` (definition order, Map/Parallel boxes, the Catch label), and
    `inspect WF --graph --view states` colouring the states the run's history entered."""
    import shutil

    done = subprocess.run([sys.executable, "-m", "builder", "graph", "images/asl-order/statemachine.json",
                           "--view", "states", "--format", "dot"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert 'label="catch CardDeclined"' in done.stdout and 'label="branch 2"' in done.stdout
    assert done.stdout.index('"Received') < done.stdout.index('"Total') < done.stdout.index('"Summary')
    refused = subprocess.run([sys.executable, "-m", "builder", "graph", "images/chain", "--view", "states"], cwd=REPO,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "is not a state machine" in refused.stderr
    store = str(tmp_path / "store.db")
    ran = subprocess.run([sys.executable, "-m", "builder", "run", "images/asl-order/statemachine.json", "--input",
                          "@images/asl-order/input.json", "--store", store, "--workflow-id", "wf-g"], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    coloured = subprocess.run([sys.executable, "-m", "builder", "inspect", "wf-g", "--store", store, "--graph",
                               "--view", "states", "--format", "dot"], cwd=REPO, capture_output=True, text=True,
                              timeout=120)
    assert coloured.returncode == 0, coloured.stderr
    green = [line for line in coloured.stdout.splitlines() if "#6aa84f" in line]
    assert {"Received", "Price", "Ship", "Summary"} <= {line.split('label="')[1].split("\\n")[0].split('"')[0]
                                                        for line in green}
    assert not any("Rejected" in line for line in green)  # the Catch path was not taken
    if shutil.which("dot"):
        out = tmp_path / "run.svg"
        assert subprocess.run([sys.executable, "-m", "builder", "inspect", "wf-g", "--store", store, "--graph",
                               "--view", "states", "--out", str(out)], cwd=REPO, capture_output=True,
                              timeout=120).returncode == 0
        assert b"<svg" in out.read_bytes()


def test_the_readme_graph_commands_work_as_written(tmp_path):
    """README's "See your workflows" `graph` lines (those without placeholders), as written."""
    import shlex

    if shutil.which("dot") is None:
        pytest.skip("Graphviz not installed: localstack/setup.d/40-browser.sh installs it")
    block = (REPO / "README.md").read_text().split("### See your workflows", 1)[1].split("```", 2)[1]
    commands = [shlex.split(re.sub(r"\s+#\s.*$", "", line)) for line in block.splitlines()
                if line.startswith("python -m builder graph ")]
    assert len(commands) >= 3
    (tmp_path / "images").symlink_to(REPO / "images")
    for argv in commands:
        done = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, timeout=120)
        assert done.returncode == 0 and b"Traceback" not in done.stderr, (argv, done.stderr)
        if "--out" in argv:
            written = tmp_path / argv[argv.index("--out") + 1]
            assert b"<svg" in written.read_bytes()
