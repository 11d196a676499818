"""The commands of docs/embedded-store.md, docs/durable-functions.md, docs/history.md (its blocks
after the first, which tests/integration/test_cli_history.py runs) and docs/embedded-engine.md,
read from the files and run through the real CLI from a folder holding `images/`. Placeholders
(CALLBACK_ID, WORKFLOW_ID, KEY) are filled with real ids; `[optional parts]` are run both left
out and filled in as written. The other docs' commands: README (tests/e2e/test_readme_commands.py),
docs/tracing.md (test_docs_tracing.py); docs/aws.md and docs/gcp.md (test_docs_cloud_commands.py)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def blocks(doc: str) -> list[list[str]]:
    """The `python -m builder` lines (comments cut) of each plain code block of `doc`."""
    text = (REPO / "docs" / doc).read_text()
    found = re.findall(r"^```\n(.*?)^```", text, flags=re.S | re.M)
    return [[re.sub(r"\s+#\s.*$", "", line) for line in block.splitlines()
             if re.match(r"^([A-Z_]+=\S+ )*python -m ", line)] for block in found]


def sh(line: str, cwd: Path, **fill: str) -> subprocess.CompletedProcess[str]:
    for name, value in fill.items():
        line = line.replace(name, value)
    argv = shlex.split(line)
    assert argv[:2] == ["python", "-m"], line
    done = subprocess.run([sys.executable, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr and "usage:" not in done.stderr, f"{line}: {done.stderr}"
    return done


@pytest.fixture
def here(tmp_path: Path) -> Path:
    (tmp_path / "images").symlink_to(REPO / "images")
    return tmp_path


def test_docs_embedded_store(here: Path) -> None:
    [lines] = blocks("embedded-store.md")
    assert len(lines) == 3 and all(line.startswith("python -m builder run images/chain ") for line in lines)
    for line in lines:
        done = sh(line, here)
        assert done.returncode == 0 and json.loads(done.stdout)["greeting"], f"{line}: {done.stderr}"
    assert (here / ".unum" / "unum.db").exists()


def test_docs_durable_functions(here: Path) -> None:
    run, callbacks = blocks("durable-functions.md")
    [line] = run
    done = sh(line, here)
    assert done.returncode == 0 and json.loads(done.stdout)["approval"] == "auto-approved", done.stderr
    # an order that waits for its approval: the callback id the execution hands out
    waiting = dict(json.loads((here / "images/durable-order/input.json").read_text()), callback_file=str(here / "cb"))
    started = subprocess.run([sys.executable, "-m", "builder", "run", "images/durable-order", "--input",
                              json.dumps(waiting)], cwd=here, capture_output=True, text=True, timeout=300)
    assert started.returncode == 0 and started.stdout == "", started.stderr
    callback_id = (here / "cb").read_text()
    success, failure = callbacks
    done = sh(success, here, CALLBACK_ID=callback_id)
    assert done.returncode == 0 and json.loads(done.stdout)["approval"] == {"by": "ana"}, done.stderr
    refused = sh(failure, here, CALLBACK_ID=callback_id)  # the first completion won
    assert refused.returncode == 2 and refused.stderr.strip().startswith("error: callback "), refused.stderr
    assert "already completed" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_docs_history_value_stop_redrive(here: Path) -> None:
    first, value, stop, redrive = blocks("history.md")[:4]
    assert sh(first[0], here).returncode == 0  # wf-doc (test_cli_history.py checks its history)
    document = json.loads(sh(first[2], here).stdout)
    key = document["steps"][0]["key"]
    [line] = value
    done = sh(line, here, KEY=key)
    assert done.returncode == 0 and json.loads(done.stdout) == document["steps"][0]["output"], done.stderr
    [line] = stop
    synopsis = re.sub(r" \[[^\]]*\]", "", line)      # required parts only
    full = line.replace("[", "").replace("]", "").replace("--store …", "--store .unum/unum.db")
    ended = sh(synopsis, here, WORKFLOW_ID="wf-doc")
    assert ended.returncode == 2 and "has already ended (succeeded)" in ended.stderr, ended.stderr
    assert sh(full, here, WORKFLOW_ID="wf-doc").returncode == 2
    [line] = redrive
    synopsis = re.sub(r" \[[^\]]*\]", "", line)
    full = (line.replace("[", "").replace("]", "").replace("--store …", "--store .unum/unum.db")
            .replace("FOLDER", "images/map-aggregate"))
    for each in (synopsis, full):
        refused = sh(each, here, WORKFLOW_ID="wf-doc")
        assert refused.returncode == 2 and "did not fail (succeeded)" in refused.stderr, refused.stderr


def test_docs_embedded_engine_command_selects_its_tests(here: Path) -> None:
    """The kill-rounds command is itself a test run (tests/integration/test_run_durable_queue.py runs
    its rounds): here it is checked to select that test, with `--collect-only` added."""
    [[line]] = blocks("embedded-engine.md")
    env_part, _, command = line.partition(" python ")
    assert env_part.startswith("UNUM_KILL_ROUNDS=")
    argv = shlex.split("python " + command)
    done = subprocess.run([sys.executable, *argv[1:], "--collect-only"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "random" in done.stdout, done.stdout + done.stderr


def readme_block(after_line_starting: str) -> str:
    text = (REPO / "README.md").read_text()
    start = next(m for m in re.finditer(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M)
                 if m.group(1).startswith(after_line_starting))
    return start.group(1)


def test_readme_quick_start_asl_and_python_api(here: Path) -> None:
    """README's quick start (its `python -m builder` part: the install is the machine's setup),
    its Step Functions lines and its Python example, as written."""
    quick = readme_block("pip install ").split(" && ", 1)[1].strip()
    assert json.loads(sh(quick, here).stdout)
    run, compile_ = [re.sub(r"\s+#\s.*$", "", line) for line in readme_block("python -m builder run images/asl-order")
                     .splitlines()]
    assert sh(run, here).returncode == 0
    assert sh(compile_, here).returncode == 0 and (here / "build/asl-order/unum-workflow.json").exists()
    code = readme_block("from unum_entry import ")
    done = subprocess.run([sys.executable, "-c", code], cwd=here, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.startswith("succeeded "), done.stderr


def test_readme_list_and_rm_lines_with_their_options(here: Path) -> None:
    """README's `list` and `rm` lines (`graph`'s: tests/integration/test_graph_cli.py), with every
    `[option]` filled in as written and WORKFLOW_ID a real one."""
    lines = [re.sub(r"\s+#\s.*$", "", line) for line in readme_block("python -m builder graph ").splitlines()]
    assert sh("python -m builder run images/chain --input '{\"name\": \"ada\"}' --workflow-id wf-readme",
              here).returncode == 0
    [listing] = [line for line in lines if line.startswith("python -m builder list ")]
    done = sh(listing.replace("[", "").replace("]", ""), here)
    assert done.returncode == 0 and json.loads(done.stdout) == []  # wf-readme succeeded, and is not 2 days old
    done = sh(re.sub(r" \[[^\]]*\]", "", listing), here)
    assert done.returncode == 0 and "wf-readme" in done.stdout and "succeeded" in done.stdout
    [rm] = [line for line in lines if line.startswith("python -m builder rm ")]
    one, finished = rm.split(" | ")
    refused = sh(one, here, WORKFLOW_ID="wf-readme")  # younger than the redelivery window: refused, one line
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    done = sh("python -m builder " + finished.replace("[", "").replace("]", ""), here)
    assert done.returncode == 0 and "wf-readme" not in done.stdout  # nothing finished 2 days ago
