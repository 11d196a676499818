"""`python -m builder deploy --target gcp` (the real CLI) and the script it writes, executed by
bash with a recording `gcloud` on PATH (no Google Cloud here): every command the script would
run, in order, is checked for what deploying needs and for least privilege. Plus Artifact
Registry credentials for `push` (google-auth)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from builder.image.artifact_registry import USERNAME, auth_config, is_artifact_registry
from unum_entry.errors import BuildError

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]

FAKE_GCLOUD = r"""#!/usr/bin/env bash
# Records its arguments; answers like gcloud would for a project where nothing exists yet.
printf '%s\n' "$(printf '%q ' "$@")" >> "$GCLOUD_LOG"
args=" $* "
case "$args" in
  *" describe "*"--format=value(projectNumber)"*) echo 123456 ;;
  *" run services describe "*) svc=$(echo "$args" | sed -E 's/.* describe ([a-z0-9-]+) .*/\1/'); echo "https://$svc-xyz.a.run.app" ;;
  *" describe "*) exit 1 ;;   # topics, accounts, subscriptions: absent
esac
exit 0
"""


def _deploy(tmp_path: Path, workflow: str, *extra: str) -> tuple[str, list[list[str]]]:
    script = tmp_path / "deploy.sh"
    cli = subprocess.run([sys.executable, "-m", "builder", "deploy", str(ROOT / "images" / workflow), "--target", "gcp",
                          "--project", "proj-1", "--image-prefix", "europe-docker.pkg.dev/proj-1/unum",
                          "--tag", "v7", "--out", str(script), *extra],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcloud").write_text(FAKE_GCLOUD)
    (bin_dir / "gcloud").chmod(0o755)
    log = tmp_path / "gcloud.log"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GCLOUD_LOG": str(log)}
    run = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout, [shlex.split(line) for line in log.read_text().splitlines()]


def _calls(calls: list[list[str]], *words: str) -> list[list[str]]:
    return [c for c in calls if all(w in c for w in words)]


def test_the_script_deploys_every_function_with_least_privilege(tmp_path: Path) -> None:
    out, calls = _deploy(tmp_path, "parallel")
    functions = {"Upload": "http", "Resize": "cloudevent", "DetectObjects": "cloudevent",
                 "ExtractMetadata": "cloudevent", "Combine": "cloudevent"}
    assert calls and all(c[:3] == ["--quiet", "--project", "proj-1"] for c in calls)

    ttl = _calls(calls, "firestore", "ttls", "update")
    assert len(ttl) == 1 and "expire_at" in ttl[0] and "--collection-group=unum-parallel" in ttl[0] and "--enable-ttl" in ttl[0]

    for function, signature in functions.items():
        service = f"parallel-{function.lower()}"
        deploy = _calls(calls, "run", "deploy", service)
        assert len(deploy) == 1
        cmd = deploy[0]
        assert cmd[cmd.index("--image") + 1] == f"europe-docker.pkg.dev/proj-1/unum/parallel-{function.lower()}:v7"
        assert cmd[cmd.index("--service-account") + 1] == "unum-parallel-run@proj-1.iam.gserviceaccount.com"
        assert "--no-allow-unauthenticated" in cmd
        env = cmd[cmd.index("--set-env-vars") + 1]
        assert f"FUNCTION_SIGNATURE_TYPE={signature}" in env
        assert "UNUM_STORE=firestore://unum-parallel?project=proj-1" in env
        assert "UNUM_INVOKER=pubsub://proj-1?prefix=unum-parallel-" in env
        assert _calls(calls, "pubsub", "topics", "create", f"unum-parallel-{function}")
        sub = _calls(calls, "pubsub", "subscriptions", "create", f"unum-parallel-{function}-push")
        assert len(sub) == 1
        assert f"--topic=unum-parallel-{function}" in sub[0]
        assert f"--push-endpoint=https://{service}-xyz.a.run.app/pubsub" in sub[0]
        assert "--push-auth-service-account=unum-parallel-push@proj-1.iam.gserviceaccount.com" in sub[0]
        assert "--dead-letter-topic=unum-parallel-dead-letter" in sub[0]
        invoker = _calls(calls, "run", "services", "add-iam-policy-binding", service)
        assert len(invoker) == 1 and "--role=roles/run.invoker" in invoker[0]
        assert "--member=serviceAccount:unum-parallel-push@proj-1.iam.gserviceaccount.com" in invoker[0]

    # Least privilege: publish only to the workflow's own topics, no project-wide Pub/Sub or Run roles.
    publishers = _calls(calls, "--role=roles/pubsub.publisher")
    assert {c[c.index("add-iam-policy-binding") + 1] for c in publishers} == \
        {f"unum-parallel-{f}" for f in functions} | {"unum-parallel-dead-letter"}
    project_roles = {arg for c in _calls(calls, "projects", "add-iam-policy-binding") for arg in c if arg.startswith("--role=")}
    assert project_roles == {"--role=roles/datastore.user"}
    # Timers: one Cloud Tasks queue; the runtime account may enqueue there and act as itself only
    # (a due task publishes to the workflow's topics with its token), nothing project-wide.
    queue = _calls(calls, "tasks", "queues", "create", "unum-parallel-timers")
    assert len(queue) == 1 and queue[0][queue[0].index("--location") + 1] == "us-central1"
    enqueue = _calls(calls, "tasks", "queues", "add-iam-policy-binding", "unum-parallel-timers")
    assert len(enqueue) == 1 and "--role=roles/cloudtasks.enqueuer" in enqueue[0]
    assert "--member=serviceAccount:unum-parallel-run@proj-1.iam.gserviceaccount.com" in enqueue[0]
    act_as = _calls(calls, "iam", "service-accounts", "add-iam-policy-binding")
    assert len(act_as) == 1 and act_as[0][act_as[0].index("add-iam-policy-binding") + 1] == \
        "unum-parallel-run@proj-1.iam.gserviceaccount.com" and "--role=roles/iam.serviceAccountUser" in act_as[0]
    assert ("&tasks_queue=projects/proj-1/locations/us-central1/queues/unum-parallel-timers"
            "&tasks_sa=unum-parallel-run@proj-1.iam.gserviceaccount.com") in env
    # Services exist before subscriptions point at them.
    order = [i for i, c in enumerate(calls) if "deploy" in c or ("subscriptions" in c and "create" in c)]
    assert all("deploy" in calls[i] for i in order[:len(functions)])
    assert "parallel-upload-xyz.a.run.app/" in out  # how to start a workflow


def test_rerunning_updates_existing_subscriptions(tmp_path: Path) -> None:
    script = tmp_path / "d.sh"
    subprocess.run([sys.executable, "-m", "builder", "deploy", str(ROOT / "images" / "chain"), "--target", "gcp",
                    "--out", str(script)], cwd=ROOT, check=True, capture_output=True, timeout=60)
    text = script.read_text()
    assert "ACTION=(update unum-chain-Shout-push)" in text  # describe succeeds -> update, not create
    assert 'PROJECT="${PROJECT:-${GOOGLE_CLOUD_PROJECT:?' in text  # no project given: required when run


def test_bad_options_are_named(tmp_path: Path) -> None:
    cli = subprocess.run([sys.executable, "-m", "builder", "deploy", str(ROOT / "images" / "chain"), "--target", "gcp",
                          "--max-delivery-attempts", "2"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert cli.returncode == 2 and "--max-delivery-attempts" in cli.stderr and "Traceback" not in cli.stderr


def test_artifact_registry_credentials_are_an_access_token() -> None:
    from google.oauth2.credentials import Credentials

    assert is_artifact_registry("us-docker.pkg.dev/p/repo/img:1") and is_artifact_registry("gcr.io/p/img")
    assert not is_artifact_registry("127.0.0.1:5000/unum/img") and not is_artifact_registry("1234.dkr.ecr.us-east-1.amazonaws.com/x")
    assert auth_config("us-docker.pkg.dev/p/r/i", credentials=Credentials(token="ya29.token")) == \
        {"username": USERNAME, "password": "ya29.token"}


def test_artifact_registry_without_credentials_is_a_clear_error() -> None:
    from google.oauth2.credentials import Credentials

    expired = Credentials(token=None, refresh_token="r", client_id="c", client_secret="s",
                          token_uri="http://127.0.0.1:9/token")  # nothing listens: refresh fails
    with pytest.raises(BuildError, match="us-docker.pkg.dev.*no usable Google credentials"):
        auth_config("us-docker.pkg.dev/p/r/i", credentials=expired)
