"""`python -m builder deploy --target gcp --api`: the generated script also deploys the Step
Functions API (builder.serve.cloud_run_entry) as a Cloud Run service behind IAM
(`--no-allow-unauthenticated`) running as its own service account, granted only
`roles/datastore.user` and `roles/pubsub.publisher` on the workflow's topics. The script is run
as written with a fake `gcloud` that records every call."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MACHINE = REPO / "tests" / "support" / "front_door"
PREFIX = "europe-docker.pkg.dev/proj-1/unum"
API_SA = "unum-front-door-api@proj-1.iam.gserviceaccount.com"  # the workflow is named front_door

FAKE_GCLOUD = r"""#!/usr/bin/env bash
# Records its arguments; answers like gcloud would for a project where nothing exists yet.
printf '%s\n' "$(printf '%q ' "$@")" >> "$GCLOUD_LOG"
args=" $* "
case "$args" in
  *" describe "*"--format=value(projectNumber)"*) echo 123456 ;;
  *" run services describe "*) svc=$(echo "$args" | sed -E 's/.* describe ([a-z0-9-]+) .*/\1/'); echo "https://$svc-xyz.a.run.app" ;;
  *" describe "*) exit 1 ;;
esac
exit 0
"""


def _builder(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def _script_calls(tmp_path: Path, script: Path) -> tuple[str, list[list[str]]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcloud").write_text(FAKE_GCLOUD)
    (bin_dir / "gcloud").chmod(0o755)
    log = tmp_path / "gcloud.log"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GCLOUD_LOG": str(log)}
    run = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout, [shlex.split(line) for line in log.read_text().splitlines()]


def test_gcp_api_service_behind_iam_with_least_privilege(tmp_path: Path) -> None:
    folder = tmp_path / "greeter"
    assert _builder("compile", str(MACHINE / "statemachine.json"), "--out", str(folder),
                    "--functions", str(MACHINE / "functions")).returncode == 0
    functions = sorted(load_workflow(folder).functions)
    script = tmp_path / "deploy.sh"
    proc = _builder("deploy", str(folder), "--target", "gcp", "--api", "--project", "proj-1",
                    "--image-prefix", PREFIX, "--tag", "v7", "--out", str(script))
    assert proc.returncode == 0, proc.stderr
    out, calls = _script_calls(tmp_path, script)
    wf = "front-door"  # slug of the workflow's name, front_door

    (deploy,) = [c for c in calls if c[3:5] == ["run", "deploy"] and c[5] == f"{wf}-unum-api"]
    assert deploy[deploy.index("--image") + 1] == f"{PREFIX}/front_door-unum-api:v7"  # what `build --api` names it
    assert "--no-allow-unauthenticated" in deploy and "--allow-unauthenticated" not in deploy
    assert deploy[deploy.index("--service-account") + 1] == API_SA
    assert deploy[deploy.index("--command") + 1] == "python3"
    assert "--args=-m,builder.serve.cloud_run_entry" in deploy
    env = deploy[deploy.index("--set-env-vars") + 1]
    assert f"UNUM_STORE=firestore://unum-{wf}?project=proj-1" in env
    assert f"UNUM_INVOKER=pubsub://proj-1?prefix=unum-{wf}-&functions={','.join(functions)}" in env

    # Least privilege: the API's account has exactly datastore.user on the project and
    # pubsub.publisher on each of the workflow's function topics; nothing else anywhere.
    member = f"--member=serviceAccount:{API_SA}"
    granted = sorted((c[3], c[c.index("add-iam-policy-binding") + 1], next(a for a in c if a.startswith("--role=")))
                     for c in calls if member in c)
    assert granted == sorted([("projects", "proj-1", "--role=roles/datastore.user")]
                             + [("pubsub", f"unum-{wf}-{f}", "--role=roles/pubsub.publisher") for f in functions]), granted
    assert f"{wf}-unum-api-xyz.a.run.app" in out and "roles/run.invoker" in out

    plain = tmp_path / "plain.sh"
    assert _builder("deploy", str(folder), "--target", "gcp", "--project", "proj-1",
                    "--out", str(plain)).returncode == 0
    assert "unum-api" not in plain.read_text()  # only with --api


def test_gcp_api_of_a_folder_that_is_no_state_machine_is_one_line() -> None:
    proc = _builder("deploy", "images/chain", "--target", "gcp", "--api")
    assert proc.returncode == 2, proc
    assert "not a compiled state machine" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def _subsection() -> str:
    text = (REPO / "docs" / "api.md").read_text()
    return text.split("\n### On Google Cloud\n", 1)[1].split("\n## ", 1)[0]


def _doc_commands() -> list[tuple[str, str]]:
    """(command, comment) of the subsection's `console` block (a fence no other docs test reads)."""
    import re

    [block] = re.findall(r"^```console\n(.*?)^```", _subsection(), flags=re.S | re.M)
    return [(c.strip(), m.strip()) for c, _, m in (line.partition("   # ") for line in block.splitlines()) if c.strip()]


def test_docs_gcp_commands_run_as_written(tmp_path: Path) -> None:
    """docs/api.md "On Google Cloud": every line is run here or marked `cloud only: why`; the
    `compile` and `deploy` lines run as written from a folder holding `images/`."""
    import re

    (tmp_path / "images").symlink_to(REPO / "images")
    ran = 0
    for command, comment in _doc_commands():
        if not command.startswith(("python -m builder compile ", "python -m builder deploy ")):
            assert re.match(r"cloud only: \S", comment), f"`{command}` is run by no test and not marked cloud only"
            continue
        argv = shlex.split(command)
        argv[0] = sys.executable
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and "Traceback" not in done.stderr, f"{command}:\n{done.stderr}"
        ran += 1
    assert ran == 2
    script = (tmp_path / "deploy.sh").read_text()
    assert "run deploy asl-order-unum-api" in script and "us-docker.pkg.dev/PROJECT/unum/asl-order-unum-api:latest" in script


def test_docs_gcp_client_code_sends_the_id_token_to_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """The subsection's client code, run against builder.serve.cloud_run_entry.ApiApp under a
    loopback wsgiref server (the ID token stubbed: no Google credentials here): boto3's call
    arrives with `X-Serverless-Authorization: Bearer <token>` and its answer is printed."""
    import contextlib
    import io
    import re
    import threading
    from typing import Any
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    import google.oauth2.id_token

    from builder.serve.cloud_entry import ApiSettings
    from builder.serve.cloud_run_entry import ApiApp

    seen: list[dict[str, str]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        seen.append(event["headers"])
        return {"statusCode": 200, "headers": {"Content-Type": "application/x-amz-json-1.0"},
                "body": '{"stateMachines": [{"name": "order", "stateMachineArn": '
                        '"arn:aws:states:us-east-1:123456789012:stateMachine:order", "type": "STANDARD", '
                        '"creationDate": 1.0}]}'}

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    settings = ApiSettings(store="memory://", invoker="local://", workflow_dir=".", region="us-east-1", account="1")
    server = make_server("127.0.0.1", 0, ApiApp(settings, build=lambda _: handler), handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    audiences: list[str] = []
    monkeypatch.setattr(google.oauth2.id_token, "fetch_id_token",
                        lambda request, audience: audiences.append(audience) or "the-id-token")
    [code] = re.findall(r"^```python3\n(.*?)^```", _subsection(), flags=re.S | re.M)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(code.replace("<API_URL>", url), "docs/api.md", "exec"), {})  # noqa: S102 - the docs' code
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert audiences == [url]
    assert [h.get("x-serverless-authorization") for h in seen] == ["Bearer the-id-token"]
    assert printed.getvalue().strip() == "['order']"
