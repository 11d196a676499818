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
