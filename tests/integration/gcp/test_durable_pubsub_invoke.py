"""On Cloud Run (Pub/Sub), a durable function's `context.invoke` of a function the workflow does
not have fails at once, as Lambda's Invoke refuses it: the invoker knows the deployed functions
(`functions=` in its URL, written by `python -m builder deploy --target gcp`), or, without that
list, Pub/Sub refuses a publish to a topic that does not exist (NotFound).

The functions run as `python -m unum_entry` (functions-framework) behind push subscriptions of
the Pub/Sub emulator, with Firestore's emulator as the store.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from builder.local_stack.gcp import HostFunctions, start_workflow, wait_for_outcome
from unum_entry.invokers.pubsub import PubSubInvoker
from unum_entry.stores.firestore import FirestoreStore
from unum_entry.workflow import FunctionSource, write_workflow

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]

CALLER = '''
from aws_durable_execution_sdk_python import durable_execution


@durable_execution
def handler(event, context):
    try:
        return {"result": context.invoke(event["target"], {"n": 1}, name="call")}
    except Exception as exc:
        return {"failed": type(exc).__name__, "message": str(exc)}
'''

TARGET = '''
from aws_durable_execution_sdk_python import durable_execution


@durable_execution
def handler(event, context):
    return {"doubled": context.step(lambda _: event["n"] * 2, name="double")}
'''


@pytest.mark.parametrize("known", [True, False], ids=["functions-known", "topic-not-found"])
def test_invoke_of_an_unknown_function_over_pubsub_fails_at_once(tmp_path: Path, firestore_emulator,
                                                                 pubsub_emulator, known: bool) -> None:
    workflow = write_workflow(tmp_path / "wf", name="durable-pubsub", entry="Caller", functions={
        "Caller": FunctionSource(CALLER), "Target": FunctionSource(TARGET)})
    collection, prefix = f"unum-{uuid.uuid4().hex[:10]}", f"t{uuid.uuid4().hex[:8]}-"
    store_url = f"firestore://{collection}?project={firestore_emulator.project}"
    invoker_url = f"pubsub://{pubsub_emulator.project}?prefix={prefix}" + ("&functions=Caller,Target" if known else "")
    store = FirestoreStore.from_url(store_url)
    try:
        with HostFunctions(workflow, store_url=store_url, invoker_url=invoker_url,
                           emulators={**firestore_emulator.env(), **pubsub_emulator.env()},
                           extra_env={"UNUM_RETRY_BASE_DELAY": "0.05"}) as functions:
            pubsub_emulator.wire_push(functions.urls, prefix=prefix)
            if known:  # a topic of that name exists (not this workflow's): only the list tells
                pubsub_emulator.create_topic(f"{prefix}Missing")
            started_at = time.monotonic()
            missing = start_workflow(functions.urls["Caller"], {"target": "Missing"})
            refused = wait_for_outcome(store, missing["workflow"], timeout=60)
            took = time.monotonic() - started_at
            known_target = start_workflow(functions.urls["Caller"], {"target": "Target"})
            invoked = wait_for_outcome(store, known_target["workflow"], timeout=60)
    finally:
        store.close()
    assert refused.failure is None, refused.failure
    assert refused.result["failed"] == "InvokeError", refused.result
    assert "Function not found: Missing" in refused.result["message"]
    assert took < 30  # at once, not after redeliveries until a deadline
    assert invoked.result == {"result": {"doubled": 2}}, invoked


def test_the_gcp_deploy_script_gives_the_invoker_the_workflows_functions(tmp_path: Path) -> None:
    script = tmp_path / "deploy.sh"
    done = subprocess.run([sys.executable, "-m", "builder", "deploy", str(ROOT / "images" / "durable-order"),
                           "--target", "gcp", "--project", "proj-1", "--image-prefix", "europe-docker.pkg.dev/proj-1/unum",
                           "--out", str(script)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    urls = re.findall(r"UNUM_INVOKER=(pubsub://[^;\"]+)", script.read_text())
    assert len(urls) == 2  # one per Cloud Run service (Order, Tax)
    invoker = PubSubInvoker.from_url(urls[0].replace("${PROJECT}", "proj-1").replace("${REGION}", "r")
                                     .replace("${RUN_SA}", "sa@proj-1.iam.gserviceaccount.com"))
    assert invoker.functions == {"Order", "Tax"}
    assert invoker.has_function("Tax") and not invoker.has_function("Missing")
