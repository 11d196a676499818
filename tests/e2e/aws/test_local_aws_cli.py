"""`python -m builder local-aws`: the user's one command for running Lambda images locally (docker
SDK containers, the Invoke endpoint, its own moto), end to end through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.aws.conftest import local_aws_cli
from tests.e2e.aws.test_lambda_workflows import in_process_result

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", ["map-aggregate"])
def test_local_aws_runs_a_workflow_and_prints_its_result(name: str, built_images) -> None:
    folder = REPO / "images" / name
    built_images(folder)
    proc = local_aws_cli(folder, "wf-cli", timeout=300)
    result = json.loads(proc.stdout)
    assert result == json.loads((folder / "expected.json").read_text())
    assert result == in_process_result(folder, json.loads((folder / "input.json").read_text()), "wf-cli")
    assert "function containers behind http://127.0.0.1:" in proc.stderr


def test_localstack_readme_stack_answers_the_aws_cli_line(built_images, aws_moto) -> None:
    """localstack/README.md's `local-aws images/chain --port 9000` (staying up) and its `aws lambda
    invoke` line, read from the page and run as written but for a free port and this session's
    images: the invoked workflow succeeds in the stack's table."""
    import os
    import queue
    import re
    import shlex
    import signal
    import subprocess
    import sys
    import threading
    import time

    from tests.e2e.conftest import E2E_TAG_PREFIX
    from tests.support.doc_commands import doc_command
    from tests.support.ui import free_port

    serve = doc_command("localstack/README.md", "python -m builder local-aws images/chain --port 9000")
    invoke = doc_command("localstack/README.md", "AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local aws lambda invoke ")
    port = str(free_port())
    built_images(REPO / "images" / "chain")
    argv = shlex.split(serve.text.replace("9000", port))
    proc = subprocess.Popen([sys.executable, *argv[1:], "--no-build", "--tag-prefix", E2E_TAG_PREFIX,
                             "--moto-endpoint", aws_moto.endpoint], cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
    try:
        store_url, deadline = None, time.monotonic() + 240
        while store_url is None:
            assert proc.poll() is None and time.monotonic() < deadline, "local-aws --port did not come up"
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            found = re.search(r"store (dynamodb://\S+)", line)
            store_url = found.group(1) if found else None
        assignments, _, rest = invoke.text.partition(" aws ")
        keys = dict(item.split("=", 1) for item in assignments.split())
        command = ["aws", *shlex.split(rest.replace("9000", port))]
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=60,
                              env={**os.environ, **keys, "AWS_CONFIG_FILE": "/nonexistent",
                                   "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"})
        assert done.returncode == 0 and '"StatusCode": 202' in done.stdout, done.stdout + done.stderr
        while True:  # the workflow's outcome, in the table the stack printed
            listed = subprocess.run([sys.executable, "-m", "builder", "list", "--store", store_url, "--json"], cwd=REPO,
                                    capture_output=True, text=True, timeout=60,
                                    env={**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"})
            assert listed.returncode == 0, listed.stderr
            if any(row["status"] == "succeeded" for row in json.loads(listed.stdout)):
                break
            assert time.monotonic() < deadline, listed.stdout
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
