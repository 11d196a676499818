"""Issue 44 on the local AWS stack, end to end: images/asl-versions (take an order, wait an hour
on an EventBridge Scheduler timer, confirm it) built twice as real function images, each build in
its own Lambda containers behind ONE local Invoke endpoint, one DynamoDB table; each build
published with the real CLI (`deploy --target aws --publish`), every function's invoker qualified
with its build, as deploy's template configures it.

A workflow started on build one waits on its timer while build two (Confirm says "v2") is
published: it ends with build one's result, a new workflow with build two's; after `rollback`
a new workflow is on build one again. Waits are bounded."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from builder.local_stack.aws_stack import LocalLambdaStack
from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint
from builder.versions import content_id
from tests.e2e.aws.conftest import FAST_RETRY, LambdaFunctionContainer
from unum_entry.invokers.aws_lambda import build_client
from unum_entry.invokers.lambda_event import to_event
from unum_entry.outcome import read_outcome
from unum_entry.runtime import new_workflow
from unum_entry.stores import open_store
from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[3]
IMAGES = ROOT / "images"
SCALE = "0.02"  # the hour is 72 s: long enough to publish build two while the first workflow waits


def _cli(*args: str, timeout: float = 120) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "builder", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout)) if proc.stdout.strip().startswith("{") else {}


def _compile(source: Path, out: Path) -> Path:
    proc = subprocess.run([sys.executable, "-m", "builder", "compile", str(source / "statemachine.json"), "--out",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return out


def _start(client: Any, workflow_id: str) -> None:
    body = to_event(new_workflow({"order": 7}, workflow_id).to_wire(), store=None)
    assert client.invoke(FunctionName="Take:live", InvocationType="Event", Payload=body)["StatusCode"] == 202


def _wait_result(store: Any, workflow_id: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        outcome = read_outcome(store, workflow_id)
        if outcome.failure is not None:
            raise AssertionError(f"{workflow_id} failed: {outcome.failure}")
        if outcome.results:
            return outcome.results[0]
        time.sleep(0.5)
    raise AssertionError(f"{workflow_id}: no outcome within {timeout} s")


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory, docker_client, base_tag) -> dict[str, Any]:
    """images/asl-versions compiled twice (Confirm "v1", then "v2") and built as images:
    {"folders": {name: folder}, "builds": {name: version id}, "images": {name: {function: tag}}}."""
    from builder.image.build import build_images

    tmp_path = tmp_path_factory.mktemp("versions")
    source = tmp_path / "src"
    shutil.copytree(IMAGES / "asl-versions", source)
    one = _compile(source, tmp_path / "one")
    app = source / "functions" / "Confirm" / "app.py"
    app.write_text(app.read_text().replace('"v1"', '"v2"'))
    two = _compile(source, tmp_path / "two")
    folders = {"one": one, "two": two}
    builds = {name: content_id(folder) for name, folder in folders.items()}
    assert builds["one"] != builds["two"]
    images = {name: {image.function: image.tag for image in build_images(
        docker_client, folder, base_tag=base_tag, tag_prefix=f"unum-e2e-{name}/", progress=lambda line: None)}
        for name, folder in folders.items()}
    return {"folders": folders, "builds": builds, "images": images}


def _deployer(stacks: ExitStack, endpoint: AsyncInvokeEndpoint, store_url: str, moto: str, builds: dict[str, str],
              images: dict[str, dict[str, str]], scale: str) -> Any:
    """deploy(name, folder, *publish options): the build's containers (invoker qualified with the
    build, as deploy's template configures it), then the real CLI's `deploy --publish`."""
    def deploy(name: str, folder: Path, *options: str) -> dict[str, Any]:
        stack = LocalLambdaStack(load_workflow(folder), images[name], endpoint=endpoint, store_url=store_url,
                                 start_container=lambda config: LambdaFunctionContainer(config).start(),
                                 environment={"UNUM_ASL_TIME_SCALE": scale, "UNUM_RETRY_BASE_DELAY": "0.05",
                                              "UNUM_WORKFLOW_VERSION": builds[name], "UNUM_WORKFLOW_ALIAS": "live"},
                                 scheduler_endpoint=moto, scheduler_interval=0.2)
        stack.environment["UNUM_INVOKER"] += f"&qualifier={builds[name]}"  # as deploy's template does
        stacks.enter_context(stack)
        published = _cli("deploy", str(folder), "--target", "aws", "--publish", "--aws-endpoint", endpoint.endpoint,
                         *options)
        assert published["build"] == builds[name]
        return published

    return deploy


def test_running_workflow_ends_on_its_build_new_ones_on_the_new(two_builds, aws_moto) -> None:
    one, two = two_builds["folders"]["one"], two_builds["folders"]["two"]
    builds = two_builds["builds"]
    store_url = f"dynamodb://unum-e2e-versions-{uuid.uuid4().hex[:8]}?endpoint={aws_moto.endpoint}&region=us-east-1"
    with AsyncInvokeEndpoint(retry=FAST_RETRY) as endpoint, ExitStack() as stacks:
        client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
        lam = ["--aws-endpoint", endpoint.endpoint]

        deploy = _deployer(stacks, endpoint, store_url, aws_moto.endpoint, builds, two_builds["images"], SCALE)
        deploy("one", one)
        store = open_store(store_url)
        _start(client, "wf-e2e-v-old")
        started = time.monotonic()
        deploy("two", two)  # $LATEST, the new versions and the alias live: build two
        assert not read_outcome(store, "wf-e2e-v-old").results, "the first workflow ended before build two was out"
        published_at = time.monotonic() - started
        _start(client, "wf-e2e-v-new")
        assert endpoint.wait_idle(60)  # its Take ran on build two and armed its timer
        back = _cli("rollback", str(two), *lam)
        assert back["stable"] == builds["one"]
        time.sleep(6)  # the entries' cached alias reads (5 s) expire
        _start(client, "wf-e2e-v-back")
        assert _wait_result(store, "wf-e2e-v-old", 240) == {"order": 7, "confirmed_by": "v1"}
        assert _wait_result(store, "wf-e2e-v-new", 240) == {"order": 7, "confirmed_by": "v2"}
        assert _wait_result(store, "wf-e2e-v-back", 240) == {"order": 7, "confirmed_by": "v1"}
    assert published_at < 72, published_at


def test_ramp_50_splits_200_new_workflows_and_rollback(two_builds, aws_moto) -> None:
    """`deploy --publish --ramp 50`: 200 new workflows through Take:live, each ends on the build
    `pick_version` gives its id (v2 for the ramped build), the split within binomial bounds, 20
    duplicate starts never switch; after `rollback` 20 new workflows all end on build one."""
    from unum_entry.ramp import pick_version

    builds = two_builds["builds"]
    store_url = f"dynamodb://unum-e2e-ramp-{uuid.uuid4().hex[:8]}?endpoint={aws_moto.endpoint}&region=us-east-1"
    with AsyncInvokeEndpoint(retry=FAST_RETRY) as endpoint, ExitStack() as stacks:
        client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
        deploy = _deployer(stacks, endpoint, store_url, aws_moto.endpoint, builds, two_builds["images"], "0.0005")
        deploy("one", two_builds["folders"]["one"])
        ramped = deploy("two", two_builds["folders"]["two"], "--ramp", "50")
        assert (ramped["stable"], ramped["ramped"], ramped["weight"]) == (builds["one"], builds["two"], 0.5)
        store = open_store(store_url)
        ids = [f"wf-e2e-ramp-{n}" for n in range(200)]
        for workflow_id in ids + ids[:20]:
            _start(client, workflow_id)
        got = {workflow_id: _wait_result(store, workflow_id, 300)["confirmed_by"] for workflow_id in ids}
        expected = {workflow_id: "v2" if pick_version(workflow_id, builds["one"], builds["two"], 0.5) == builds["two"]
                    else "v1" for workflow_id in ids}
        assert got == expected
        assert 60 <= list(got.values()).count("v2") <= 140  # 0.5 of 200: sigma 7.1, these bounds 5.6 sigma

        back = _cli("rollback", str(two_builds["folders"]["two"]), "--aws-endpoint", endpoint.endpoint)
        assert (back["stable"], back["ramped"]) == (builds["one"], None)
        time.sleep(6)  # the entries' cached alias reads (5 s) expire
        after = [f"wf-e2e-after-{n}" for n in range(20)]
        for workflow_id in after:
            _start(client, workflow_id)
        assert {_wait_result(store, workflow_id, 300)["confirmed_by"] for workflow_id in after} == {"v1"}
