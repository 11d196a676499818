"""Issue 44, step 2: `deploy --target aws --publish [--ramp N]`, `promote`, `rollback` against the
local Lambda endpoint (real CLI subprocesses over boto3), and the entry's deterministic start
routing while a build is ramped (real unum functions behind in-process RIE stand-ins)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from builder.deploy.aws_versions import publish_build
from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry
from builder.versions import content_id
from tests.integration.test_lambda_endpoint import FakeRie
from tests.integration.test_lambda_version_pinning import InProcessRie, _build, _result
from unum_entry.invokers.aws_lambda import build_client
from unum_entry.invokers.lambda_event import to_event
from unum_entry.platforms.aws_lambda import LambdaAdapter, start_router
from unum_entry.platforms.common import FunctionSettings, RetryPolicy, load_function
from unum_entry.ramp import pick_version
from unum_entry.runtime import new_workflow

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def _ok(*args: str) -> dict[str, Any]:
    proc = _cli(*args)
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


def _refused(*args: str, says: str) -> None:
    proc = _cli(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def _alias(client: Any, function: str, name: str = "live") -> tuple[str, dict[str, float]]:
    shape = client.get_alias(FunctionName=function, Name=name)
    return shape["FunctionVersion"], dict((shape.get("RoutingConfig") or {}).get("AdditionalVersionWeights") or {})


def test_publish_ramp_promote_rollback_cli(tmp_path: Path) -> None:
    folder = _build(tmp_path / "wf", "old")
    servers = [FakeRie() for _ in range(4)]
    try:
        with AsyncInvokeEndpoint(retry=LambdaRetry(delays=(0.05,), request_timeout=10)) as endpoint:
            client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
            lam = ["--aws-endpoint", endpoint.endpoint]
            publish = ["deploy", str(folder), "--target", "aws", "--publish", *lam]
            _refused("promote", str(folder), *lam, says="no alias live")
            endpoint.register("A", servers[0].url, image="sha256:a1")
            endpoint.register("B", servers[1].url, image="sha256:b1")
            _refused(*publish, "--ramp", "10", says="nothing to ramp from")
            one = _ok(*publish)
            b1 = content_id(folder)
            assert one == {"build": b1, "versions": {"A": "1", "B": "1"}, "alias": "live", "stable": b1,
                           "ramped": None, "weight": 0.0, "previous": None}
            assert _alias(client, "A") == ("1", {}) and _alias(client, "A", b1) == ("1", {})
            assert _alias(client, "B", b1) == ("1", {})
            _refused("promote", str(folder), *lam, says="ramps no build")
            _refused("rollback", str(folder), *lam, says="nothing to roll back")

            (folder / "B" / "app.py").write_text("def handler(event, context):\n    return 'new'\n")
            b2 = content_id(folder)
            endpoint.register("A", servers[2].url, image="sha256:a2")
            endpoint.register("B", servers[3].url, image="sha256:b2")
            for bad in ("150", "-1"):
                _refused(*publish, "--ramp", bad, says="0 to 100")
            _refused("deploy", str(folder), "--target", "aws", "--ramp", "5", *lam, says="needs --publish")
            _refused("deploy", str(folder), "--target", "gcp", "--publish", *lam, says="--target aws only")
            assert [v["Version"] for v in client.list_versions_by_function(FunctionName="A")["Versions"]] == \
                ["$LATEST", "1"]  # refused: nothing published
            ramped = _ok(*publish, "--ramp", "50")
            assert (ramped["stable"], ramped["ramped"], ramped["weight"]) == (b1, b2, 0.5)
            assert _alias(client, "A") == ("1", {"2": 0.5}) and _alias(client, "B", b2) == ("2", {})

            promoted = _ok("promote", str(folder), *lam)
            assert (promoted["stable"], promoted["ramped"], promoted["previous"]) == (b2, None, b1)
            assert _alias(client, "A") == ("2", {})
            back = _ok("rollback", str(folder), *lam)
            assert (back["stable"], back["previous"]) == (b1, None) and _alias(client, "A") == ("1", {})
            _refused("rollback", str(folder), *lam, says="nothing to roll back")
            assert _alias(client, "A") == ("1", {})

            _ok(*publish, "--ramp", "20")
            assert _alias(client, "A") == ("1", {"2": 0.2})
            dropped = _ok("rollback", str(folder), *lam)
            assert (dropped["stable"], dropped["ramped"]) == (b1, None) and _alias(client, "A") == ("1", {})
    finally:
        for server in servers:
            server.close()


def _serve_routed(folder: Path, store_url: str, endpoint: str, build: str, servers: list[InProcessRie]) -> dict[str, str]:
    urls = {}
    for function in ("A", "B"):
        environ = {"UNUM_FUNCTION_DIR": str(folder / function), "UNUM_STORE": store_url, "UNUM_WATCHDOG": "0",
                   "UNUM_INVOKER": f"lambda://?endpoint={endpoint}&region=us-east-1&qualifier={build}"}
        loaded = load_function(FunctionSettings.from_env(environ))
        router = start_router(loaded, {"UNUM_WORKFLOW_ALIAS": "live"} if function == "A" else {})
        servers.append(InProcessRie(LambdaAdapter(loaded, retry=RetryPolicy(base=0.0), router=router)))
        urls[function] = servers[-1].url
    return urls


def test_ramp_50_splits_new_workflows_by_id(tmp_path: Path) -> None:
    """200 starts through `A:live` (Lambda's random split), each ends on the build pick_version
    gives its id (forwarded by the entry when Lambda chose the other), the split within binomial
    bounds; a duplicate start of an id never switches."""
    store_url = f"sqlite://{tmp_path / 'unum.db'}"
    gate = tmp_path / "gate"
    gate.write_text("open")
    servers: list[InProcessRie] = []
    try:
        with AsyncInvokeEndpoint(retry=LambdaRetry(delays=(0.05,), request_timeout=30)) as endpoint:
            client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
            builds = {}
            for answer, ramp in (("old", None), ("new", 50.0)):
                folder = _build(tmp_path / answer, answer)
                builds[answer] = build = content_id(folder)
                for function, url in _serve_routed(folder, store_url, endpoint.endpoint, build, servers).items():
                    endpoint.register(function, url, image=f"sha256:{answer}")
                publish_build(client, functions=["A", "B"], entry="A", build=build, ramp=ramp)
            ids = [f"wf-ramp-{n}" for n in range(200)]
            for workflow_id in ids + ids[:20]:  # the first 20 started twice
                body = to_event(new_workflow({"gate": str(gate)}, workflow_id).to_wire(), store=None)
                client.invoke(FunctionName="A:live", InvocationType="Event", Payload=body)
            assert endpoint.wait_idle(120)
            got = {workflow_id: _result(store_url, workflow_id, timeout=10) for workflow_id in ids}
            expected = {workflow_id: "new" if pick_version(workflow_id, builds["old"], builds["new"], 0.5)
                        == builds["new"] else "old" for workflow_id in ids}
            assert got == expected
            assert 60 <= list(got.values()).count("new") <= 140  # 0.5 of 200: sigma 7.1, these bounds 5.6 sigma
    finally:
        for server in servers:
            server.close()


def test_router_without_alias_runs_here(tmp_path: Path) -> None:
    """Before `deploy --publish` made the alias, a start runs where it landed (no error)."""
    from unum_entry.platforms.lambda_routing import StartRouter

    rie = FakeRie()
    try:
        with AsyncInvokeEndpoint(retry=LambdaRetry(delays=(0.05,), request_timeout=10)) as endpoint:
            endpoint.register("A", rie.url)
            client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
            assert StartRouter(client, function="A", alias="live", build="v0").elsewhere("wf-1") is None
    finally:
        rie.close()


def test_template_pins_the_build(tmp_path: Path) -> None:
    """`deploy --target aws` configures every function for the folder's build: UNUM_WORKFLOW_VERSION,
    an invoker qualified with it, grants on the qualified ARNs (functions and scheduler role), the
    alias on the entry with lambda:GetAlias on itself."""
    import yaml

    folder = _build(tmp_path / "wf", "old")
    out = tmp_path / "template.yaml"
    proc = _cli("deploy", str(folder), "--target", "aws", "--image-prefix", "1.dkr.ecr.us-east-1.amazonaws.com",
                "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    template = yaml.safe_load(out.read_text())
    build = content_id(folder)
    for logical, name in (("FnA", "A"), ("FnB", "B")):
        props = template["Resources"][logical]["Properties"]
        variables = props["Environment"]["Variables"]
        assert variables["UNUM_WORKFLOW_VERSION"] == build
        assert variables["UNUM_INVOKER"]["Fn::Sub"].endswith(f"&qualifier={build}")
        assert ("UNUM_WORKFLOW_ALIAS" in variables) == (name == "A")
        pinned = props["Policies"][-1]["Statement"]
        targets = {arn["Fn::Sub"].rsplit("}-", 1)[1] for arn in pinned[0]["Resource"]}
        assert targets == ({"A:*", "B:*"} if name == "A" else {"B:*"})
        assert [s["Action"] for s in pinned[1:]] == ([["lambda:GetAlias"]] if name == "A" else [])
    scheduler = template["Resources"]["UnumSchedulerBuilds"]["Properties"]
    assert scheduler["Roles"] == [{"Ref": "UnumSchedulerRole"}]
    assert {arn["Fn::Sub"].rsplit("}-", 1)[1] for arn in scheduler["PolicyDocument"]["Statement"][0]["Resource"]} \
        == {"A:*", "B:*"}


def _section_commands(page: Path, heading: str) -> list[tuple[str, str]]:
    """(command, trailing comment) of the shell block of `heading`'s section, as written."""
    import re

    section = page.read_text().split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"^```shell\n(.*?)^```", section, flags=re.S | re.M)
    found = []
    for line in block.splitlines():
        command, _, comment = line.partition("   # ")
        found.append((command.strip(), comment.strip()))
    return found


def test_docs_versions_on_aws_lambda_run_as_written(tmp_path: Path) -> None:
    """docs/versions.md "On AWS Lambda", each command as written (bash, from a folder holding
    images/), the Lambda API being the local Invoke endpoint (AWS_ENDPOINT_URL_LAMBDA, dummy keys);
    each `cloud only` `sam deploy` line is replaced by registering the functions' new code."""
    import os
    import shutil

    commands = _section_commands(ROOT / "docs" / "versions.md", "On AWS Lambda")
    assert len(commands) == 10
    shutil.copytree(ROOT / "images" / "asl-versions", tmp_path / "images" / "asl-versions")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (bin_dir / "python").chmod(0o755)
    servers: list[FakeRie] = []
    outputs: dict[str, dict[str, Any]] = {}
    try:
        with AsyncInvokeEndpoint(retry=LambdaRetry(delays=(0.05,), request_timeout=10)) as endpoint:
            env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
                   "AWS_ENDPOINT_URL_LAMBDA": endpoint.endpoint, "AWS_ACCESS_KEY_ID": "testing",
                   "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}
            builds = []
            for command, comment in commands:
                if comment.startswith("cloud only"):
                    assert command.startswith("sam deploy ")
                    for function in ("Take", "Confirm"):  # what sam deploy does to $LATEST
                        servers.append(FakeRie())
                        endpoint.register(f"orders-{function}", servers[-1].url, image=f"sha256:{len(servers)}")
                    builds.append(content_id(tmp_path / "orders"))
                    continue
                done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True,
                                      timeout=120, env=env)
                assert done.returncode == 0 and "Traceback" not in done.stderr, f"{command}: {done.stderr}"
                if done.stdout.startswith("{"):
                    outputs[command] = json.loads(done.stdout)
            one, two = builds
            assert one != two
            client = build_client(endpoint=endpoint.endpoint, region="us-east-1")
            publish = "python -m builder deploy orders --target aws --publish --aws-prefix orders-"
            assert outputs[publish]["stable"] == one
            assert (outputs[publish + " --ramp 10"]["ramped"], outputs[publish + " --ramp 10"]["weight"]) == (two, 0.1)
            assert outputs["python -m builder promote orders --aws-prefix orders-"]["stable"] == two
            assert outputs["python -m builder rollback orders --aws-prefix orders-"]["stable"] == one
            assert _alias(client, "orders-Take") == ("1", {})
            assert _alias(client, "orders-Confirm", two) == ("2", {})
    finally:
        for server in servers:
            server.close()
