"""The README's "Build, push, deploy" commands, read from README.md and run as written (real CLI,
real Docker engine, the registry `localstack/setup.d/40-registry.sh` serves on 127.0.0.1:5000,
the local OS image as the only base there is), in order, from a folder holding `images/`: so
the README stays true. Optional parts (`[--base-image IMG]`) and comments are left out."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from builder.local_stack.lambda_containers import manifest_digest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
REGISTRY = "127.0.0.1:5000"


def readme_commands(section: str = "## Build, push, deploy") -> list[list[str]]:
    """The `python -m builder ...` lines of the first code block after `section`, as argv."""
    text = (REPO / "README.md").read_text()
    block = text.split(section, 1)[1].split("```", 2)[1]
    commands = []
    for line in block.splitlines():
        line = re.sub(r"\s+#\s.*$", "", line)        # a trailing comment
        line = re.sub(r"\s*\[[^\]]*\]", "", line)    # optional parts
        if line.startswith("python -m builder "):
            commands.append(shlex.split(line))
    return commands


def test_the_readme_lists_the_commands_this_test_runs() -> None:
    assert [argv[3] for argv in readme_commands()] == ["build", "push", "deploy", "deploy", "local-aws"]


def test_readme_build_push_deploy_local_aws_work_as_written(tmp_path: Path, docker_client, base_os_image,
                                                            local_registry) -> None:
    (tmp_path / "images").symlink_to(REPO / "images")  # relative paths as in the README; outputs land here
    outputs = []
    for argv in readme_commands():
        proc = subprocess.run([sys.executable, *argv[1:]], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, f"{shlex.join(argv)}:\n{proc.stderr[-3000:]}"
        assert "Traceback" not in proc.stderr, proc.stderr
        outputs.append(proc)
    build, push, deploy_aws, deploy_gcp, local_aws = outputs

    built = build.stdout.splitlines()
    assert [line.split("\t")[0] for line in built] == [f"unum/chain-{f}:latest" for f in ("hello", "shout", "sign")]

    pushed = [line.split("\t") for line in push.stdout.splitlines()]
    assert len(pushed) == 3
    for remote, digest in pushed:
        repository = remote.split("/", 1)[1].rsplit(":", 1)[0]
        assert manifest_digest(f"http://{REGISTRY}", repository, "latest") == digest
    assert "layer" in push.stderr  # progress, not 28 s of silence

    template = deploy_aws.stdout
    assert "ACCOUNT.dkr.ecr.REGION.amazonaws.com/unum/chain-hello:latest" in template
    script = tmp_path / "deploy.sh"
    assert "REGION-docker.pkg.dev/PROJECT/unum/chain-sign:latest" in script.read_text()
    assert deploy_gcp.stdout == "" and deploy_gcp.stderr.startswith("wrote deploy.sh: ")

    result = json.loads(local_aws.stdout)
    assert {k: result[k] for k in ("greeting", "signed_by")} == {"greeting": "HELLO, WORLD!", "signed_by": "Sign"}


def test_deploy_to_a_folder_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    for target, extra in (("aws", ["--image-prefix", "X"]), ("gcp", [])):
        out = tmp_path / "missing" / "t.yaml"
        proc = subprocess.run([sys.executable, "-m", "builder", "deploy", str(REPO / "images" / "chain"),
                               "--target", target, *extra, "--out", str(out)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip() == f"error: deploy --out {out}: cannot write: No such file or directory"
        assert not out.parent.exists()


def test_local_aws_with_an_unreachable_dynamodb_is_one_line(docker_client) -> None:
    proc = subprocess.run([sys.executable, "-m", "builder", "local-aws", str(REPO / "images" / "chain"), "--no-build",
                           "--moto-endpoint", "http://127.0.0.1:1", "--input", "{}"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "127.0.0.1:1" in lines[0], proc.stderr
