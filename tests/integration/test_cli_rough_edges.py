"""Rough edges of the CLI (issue 22): each answered by one line naming what and where, exit 2 —
never a traceback — through the real CLI in a subprocess; and the commands that crashed or
surprised (non-ASCII results, `graph --out run.svg`, docs/gen_restructure_map.py --help,
bench/steps.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path = REPO, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr.strip()


def one_function(folder: Path, code: str) -> Path:
    (folder / "A").mkdir(parents=True)
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "a", "entry": "A"}))
    (folder / "A" / "app.py").write_text(code)
    (folder / "A" / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": "A", "handler": "app.handler",
                                                           "max_attempts": 1}))
    return folder


def test_a_non_utf8_input_file_names_the_file_and_the_byte(tmp_path):
    bad = tmp_path / "input.json"
    bad.write_bytes(b'{"name": "\xff\xfe"}')
    line = one_error_line(cli("run", "images/chain", "--input", f"@{bad}", "--store", str(tmp_path / "s")))
    assert line == f"error: --input {bad}: not UTF-8 text (byte 0xff at offset 10); JSON files are UTF-8"


def test_a_5000_deep_input_is_refused_in_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 5000 + "]" * 5000)
    line = one_error_line(cli("run", "images/chain", "--input", f"@{deep}", "--store", str(tmp_path / "s")))
    assert line.startswith(f"error: --input {deep}: nested more than 500 levels deep")


def test_ui_port_out_of_range(tmp_path):
    line = one_error_line(cli("ui", "--port", "99999"))
    assert "argument --port: 99999 is not a port number (0-65535)" in line


def test_a_store_url_with_a_port_that_is_not_a_number(tmp_path):
    url = "dynamodb://unum-t?endpoint=http://127.0.0.1:abc"
    line = one_error_line(cli("run", "images/chain", "--input", "{}", "--store", url))
    assert line == (f"error: DynamoDB store URL {url!r}: endpoint 'http://127.0.0.1:abc' has no valid port "
                    "(a number 0-65535, e.g. http://127.0.0.1:5001)")


def test_an_empty_store_is_refused_not_the_current_folder(tmp_path):
    for command in (["run", "images/chain", "--input", "{}"], ["list"], ["inspect", "wf-1"]):
        line = one_error_line(cli(*command, "--store", "", cwd=tmp_path if command[0] != "run" else REPO))
        assert "argument --store: expected a store URL, database file or folder, found '' (an unset variable?)" in line
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def mounts(tmp_path):
    """Small tmpfs mounts (a full one, a read-only one); skipped where mounting is not permitted."""
    made: list[Path] = []

    def mount(name: str, options: str) -> Path:
        where = tmp_path / name
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True,
                              timeout=30)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
        made.append(where)
        return where

    yield mount
    for where in made:
        subprocess.run(["umount", str(where)], capture_output=True, timeout=30)


def test_a_read_only_or_full_store_names_the_store_path(tmp_path, mounts):
    read_only = mounts("ro", "ro,size=64k")
    full = mounts("full", "size=64k")
    (full / "filler").write_bytes(b"x" * 60_000)
    for store in (read_only / "store.db", read_only / "folder", full / "store.db", full / "folder"):
        line = one_error_line(cli("run", "images/chain", "--input", '{"name": "x"}', "--store", str(store)))
        assert str(store) in line, line
        assert ("read-only" in line.lower()) or ("full" in line.lower()), line


def test_a_handler_calling_sys_exit_fails_the_workflow_as_its_own_error(tmp_path):
    folder = one_function(tmp_path / "wf", "import sys\n\ndef handler(event, context):\n    sys.exit(3)\n")
    done = cli("run", str(folder), "--store", str(tmp_path / "s"), "--workflow-id", "wf-exit")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == ("error: workflow wf-exit failed in function 'A' after 1 attempt(s): "
                                                    "SystemExit: the handler called sys.exit(3)")
    assert "internal error" not in done.stderr


def test_non_ascii_results_print_as_utf8(tmp_path):
    folder = one_function(tmp_path / "wf", "def handler(event, context):\n    return {'emoji': '\\U0001F600 café'}\n")
    done = subprocess.run([sys.executable, "-m", "builder", "run", str(folder), "--store", str(tmp_path / "s"),
                           "--compact"], cwd=REPO, capture_output=True, timeout=120)
    assert done.returncode == 0
    assert done.stdout.decode("utf-8") == '{"emoji": "\U0001F600 café"}\n'


def test_graph_out_infers_the_format_from_the_extension(tmp_path):
    import shutil

    if shutil.which("dot") is None:
        pytest.skip("Graphviz not installed: localstack/setup.d/40-browser.sh installs it")
    out = tmp_path / "run.svg"
    done = cli("graph", "images/chain", "--out", str(out))
    assert done.returncode == 0 and out.read_bytes().lstrip().startswith(b"<?xml") and b"<svg" in out.read_bytes()
    mermaid = tmp_path / "run.mmd"
    assert cli("graph", "images/chain", "--out", str(mermaid)).returncode == 0
    assert mermaid.read_text().startswith("flowchart")
    line = one_error_line(cli("graph", "images/chain", "--format", "mermaid", "--out", str(out)))
    assert line == f"error: --out {out}: --format mermaid does not write SVG (drop --format: the extension picks svg)"


def test_gen_restructure_map_help_and_a_bad_revision():
    done = subprocess.run([sys.executable, "docs/gen_restructure_map.py", "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("usage: docs/gen_restructure_map.py")
    bad = subprocess.run([sys.executable, "docs/gen_restructure_map.py", "no-such-rev"], cwd=REPO, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: 'no-such-rev' is not a commit")


def test_bench_steps_runs_as_written(tmp_path):
    out = tmp_path / "steps-report.txt"
    done = subprocess.run([sys.executable, "bench/steps.py", "--quick", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Store operations per step" in out.read_text()
