"""The commands of docs/aws.md and docs/gcp.md, read from the pages and run as written from a
folder holding `images/`. A command that needs a real cloud account says so in its comment
(`# cloud only: why`, tests/support/doc_commands.py); every other one is run here or is one of
README's lines that tests/e2e/test_readme_commands.py runs (the image builds, `local-aws`), or,
for the time-scaled Wait example in containers, by tests/e2e/aws/test_timers_local_aws.py.
Placeholders (`<StoreTable output>`, `wf-<request id>`) are filled with the real table and id."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import uuid
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.support.doc_commands import DocCommand, doc_command, doc_commands

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PAGES = ("docs/aws.md", "docs/gcp.md")
# the commands run below, by how they start
RUN_HERE = {
    "docs/aws.md": ("python -m builder deploy images/chain --target aws", "aws lambda invoke ",
                    "python -m builder list --store 'dynamodb://", "python -m builder inspect wf-<request id> ",
                    "python -m builder compile images/asl-wait/"),
    "docs/gcp.md": ("python -m builder deploy images/chain --target gcp", "localstack/gcp-emulators.sh ",
                    'eval "$(localstack/gcp-emulators.sh env)"', "python -m pytest "),
}
RUN_IN_E2E = {"docs/aws.md": ("UNUM_ASL_TIME_SCALE=0.001 python -m builder local-aws build/asl-wait ",)}


def readme_build_commands() -> set[str]:
    """README's "Build, push, deploy" commands without their optional parts (run by the e2e test)."""
    text = (REPO / "README.md").read_text()
    block = text.split("## Build, push, deploy", 1)[1].split("```", 2)[1]
    return {re.sub(r"\s*\[[^\]]*\]", "", re.sub(r"\s+#\s.*$", "", line)).strip()
            for line in block.splitlines() if line.strip()}


def run(command: DocCommand | str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120,
        **fill: str) -> subprocess.CompletedProcess[str]:
    """`command` as written (placeholders replaced by `fill`), `python` being this interpreter."""
    line = command.text if isinstance(command, DocCommand) else command
    for name, value in fill.items():
        line = line.replace(name, value)
    argv = shlex.split(line)
    if argv[0] == "python":
        argv[0] = sys.executable
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    assert "Traceback" not in done.stderr, f"{line}:\n{done.stderr}"
    return done


@pytest.fixture
def here(tmp_path: Path) -> Path:
    (tmp_path / "images").symlink_to(REPO / "images")
    return tmp_path


def test_every_command_is_run_by_a_test_or_marked_cloud_only() -> None:
    readme = readme_build_commands()
    for page in PAGES:
        for command in doc_commands(page):
            if command.cloud_only:
                continue
            here = [p for p in RUN_HERE[page] + RUN_IN_E2E.get(page, ()) if command.text.startswith(p)]
            assert here or command.required in readme, (
                f"{page}: `{command.text}` is run by no test: run it, or mark it `# cloud only: <why>`")
        for prefix in RUN_HERE[page] + RUN_IN_E2E.get(page, ()):
            assert any(c.text.startswith(prefix) for c in doc_commands(page)), f"{page}: no line starts {prefix!r}"
    marked = [" ".join(c.text.split()[:4]) for page in PAGES for c in doc_commands(page) if c.cloud_only]
    assert marked == ["python -m builder push", "sam deploy --template-file template.yaml",
                      "python -m builder push", "bash deploy-chain.sh"], marked


def test_aws_deploy_line_writes_the_template(here: Path) -> None:
    done = run(doc_command("docs/aws.md", "python -m builder deploy images/chain --target aws"), here)
    assert done.returncode == 0, done.stderr
    template = (here / "template.yaml").read_text()
    for function in ("hello", "shout", "sign"):
        assert f"ImageUri: 123456789012.dkr.ecr.us-east-1.amazonaws.com/unum/chain-{function}:latest" in template
    assert "StoreTable:" in template  # the output the `list` / `inspect` lines name


def test_aws_invoke_list_and_inspect_lines_against_the_local_lambda_stack(here: Path, moto_server) -> None:
    """The deployed stack's stand-in: chain's functions as `chain-Hello`... under the Lambda RIE
    (`python -m unum_entry`, the image's entrypoint) behind the local Invoke endpoint, DynamoDB
    on moto. The AWS CLI line is run as written with the endpoints and dummy keys in the
    environment, as a user would point it at a local stack."""
    from builder.local_stack.lambda_containers import HostLambdaFunction
    from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry
    from unum_entry.stores import open_store
    from unum_entry.workflow import load_workflow

    table = f"chain-doc-{uuid.uuid4().hex[:8]}"
    store = open_store(f"dynamodb://{table}?endpoint={moto_server.endpoint}&region=us-east-1&create=1")
    workflow = load_workflow(REPO / "images" / "chain")
    aws = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
           "AWS_CONFIG_FILE": str(here / "no-config"), "AWS_SHARED_CREDENTIALS_FILE": str(here / "no-credentials"),
           "AWS_ENDPOINT_URL_DYNAMODB": moto_server.endpoint}
    try:
        with ExitStack() as stack:
            endpoint = stack.enter_context(AsyncInvokeEndpoint(retry=LambdaRetry(delays=(0.1, 0.2), unavailable_delay=0.1,
                                                                                 max_event_age=60.0)))
            environment = {"UNUM_STORE": f"dynamodb://{table}?endpoint={moto_server.endpoint}&region=us-east-1",
                           "UNUM_INVOKER": f"lambda://?prefix=chain-&region=us-east-1&endpoint={endpoint.endpoint}",
                           "UNUM_LOG_LEVEL": "WARNING"}
            for name, spec in workflow.functions.items():
                function = stack.enter_context(HostLambdaFunction(spec.folder, function_name=f"chain-{name}",
                                                                  environment=environment))
                endpoint.register(f"chain-{name}", function.invoke_url)
            invoked = run(doc_command("docs/aws.md", "aws lambda invoke "), here,
                          {**aws, "AWS_ENDPOINT_URL_LAMBDA": endpoint.endpoint}, timeout=60)
            assert invoked.returncode == 0 and json.loads(invoked.stdout)["StatusCode"] == 202, invoked.stderr
            assert endpoint.wait_idle(60), endpoint.stats

        listed = run(doc_command("docs/aws.md", "python -m builder list --store "), here, aws,
                     **{"<StoreTable output>": table})
        assert listed.returncode == 0, listed.stderr
        [workflow_id] = re.findall(r"\bwf-[0-9a-f-]{36}\b", listed.stdout)  # wf-<Lambda's request id>
        assert "succeeded" in listed.stdout, listed.stdout
        shown = run(doc_command("docs/aws.md", "python -m builder inspect wf-<request id> "), here, aws,
                    **{"<StoreTable output>": table, "wf-<request id>": workflow_id})
        assert shown.returncode == 0, shown.stderr
        report = json.loads(shown.stdout)
        assert report["status"] == "succeeded" and report["results"][0]["greeting"] == "HELLO, WORLD!", report
    finally:
        store.client.delete_table(TableName=table)
        store.close()


def test_aws_compile_line_of_the_wait_example(here: Path) -> None:
    done = run(doc_command("docs/aws.md", "python -m builder compile images/asl-wait/"), here)
    assert done.returncode == 0, done.stderr
    assert json.loads((here / "build/asl-wait/unum-workflow.json").read_text())["entry"]


def test_gcp_deploy_line_writes_the_script(here: Path) -> None:
    done = run(doc_command("docs/gcp.md", "python -m builder deploy images/chain --target gcp"), here)
    assert done.returncode == 0, done.stderr
    script = here / "deploy-chain.sh"
    assert "us-docker.pkg.dev/PROJECT/unum/chain-hello:latest" in script.read_text()
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, timeout=30).returncode == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_gcp_emulator_script_lines(tmp_path: Path) -> None:
    """`start|status|reset|stop` each run, and `eval "$(… env)"`, on free ports and a pid folder of
    their own (the machine's emulators, on the default ports, are not touched)."""
    line = doc_command("docs/gcp.md", "localstack/gcp-emulators.sh ")
    script, actions = line.text.split()
    env = {"FIRESTORE_PORT": str(free_port()), "PUBSUB_PORT": str(free_port()), "PROJECT": "demo-doc",
           "UNUM_EMULATOR_DIR": str(tmp_path)}
    try:
        for action in actions.split("|"):
            done = run(f"{script} {action}", REPO, env, timeout=150)
            assert done.returncode == 0, f"{action}: {done.stdout}{done.stderr}"
            if action == "start":
                assert done.stdout.count("emulator running on 127.0.0.1:") == 2, done.stdout
                evaluated = subprocess.run(["bash", "-c", doc_command("docs/gcp.md", "eval ").text
                                            + '; echo "$FIRESTORE_EMULATOR_HOST $PUBSUB_EMULATOR_HOST"'],
                                           cwd=REPO, capture_output=True, text=True, timeout=30, env={**os.environ, **env})
                assert evaluated.stdout.split() == [f"127.0.0.1:{env['FIRESTORE_PORT']}", f"127.0.0.1:{env['PUBSUB_PORT']}"]
            if action == "status":
                assert done.stdout.count(" running on ") == 2, done.stdout
            if action == "reset":
                assert "every document of demo-doc deleted" in done.stdout, done.stdout
        assert run(f"{script} status", REPO, env).stdout.count("not running") == 2
    finally:
        subprocess.run(["bash", script, "stop"], cwd=REPO, capture_output=True, timeout=60, env={**os.environ, **env})


def test_gcp_pytest_lines_select_their_tests() -> None:
    """The three `python -m pytest` lines, each with `--collect-only` added (running them is what
    the suite does anyway): they select tests and accept their options (`--schedules`)."""
    lines = [c for c in doc_commands("docs/gcp.md") if c.text.startswith("python -m pytest ")]
    assert len(lines) == 3
    for line in lines:
        done = run(line.text + " --collect-only -q -p no:cacheprovider", REPO, timeout=120)
        assert done.returncode == 0 and re.search(r"^\d+ tests? collected", done.stdout, flags=re.M), \
            f"{line.text}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
