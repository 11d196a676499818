"""The Lambda adapter end to end without containers: the real RIE runs `python -m unum_entry`
on the host for each function, behind the local asynchronous Invoke endpoint, with DynamoDB on
moto. Covers what the example workflows do not: handler retries and `max_attempts`, failures
recorded through the adapter and through Lambda's on-failure destination after a crash, bytes
in envelopes, and envelopes over the event size limit sent by reference."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from builder.local_stack.lambda_containers import HostLambdaFunction
from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry
from tests.support.retained import assert_only_ttl_bounded, outcome_kinds
from unum_entry.invokers.aws_lambda import build_client
from unum_entry.outcome import RunResult, read_outcome
from unum_entry.runtime import new_workflow
from unum_entry.stores import open_store
from unum_entry.workflow import FunctionSource, Workflow, write_workflow

pytestmark = pytest.mark.integration

FAST = LambdaRetry(delays=(0.1, 0.2), unavailable_delay=0.1, max_event_age=60.0, request_timeout=60.0)


class HostStack:
    def __init__(self, workflow: Workflow, store, endpoint: AsyncInvokeEndpoint) -> None:
        self.workflow, self.store, self.endpoint = workflow, store, endpoint

    def run(self, input_value, timeout: float = 60.0) -> RunResult:
        env = new_workflow(input_value, f"wf-{uuid.uuid4().hex[:10]}")
        client = build_client(endpoint=self.endpoint.endpoint, region="us-east-1")
        response = client.invoke(FunctionName=self.workflow.entry, InvocationType="Event",
                                 Payload=json.dumps(env.to_wire()))
        assert response["StatusCode"] == 202
        assert self.endpoint.wait_idle(timeout), self.endpoint.stats
        return read_outcome(self.store, env.workflow)

    def outcome_kinds(self, workflow_id: str) -> list[str]:
        """The kinds of the workflow's outcome records, after checking that everything else it
        left is retained only until an expiry within the TTL (tests/support/retained.py)."""
        return outcome_kinds(assert_only_ttl_bounded(self.store, workflow_id))


@contextmanager
def host_stack(moto_server, workflow: Workflow, *, invoker_options: str = "") -> Iterator[HostStack]:
    table = f"unum-lambda-{uuid.uuid4().hex[:10]}"
    store_url = f"dynamodb://{table}?endpoint={moto_server.endpoint}&region=us-east-1"
    store = open_store(store_url + "&create=1")
    with ExitStack() as stack:
        endpoint = stack.enter_context(AsyncInvokeEndpoint(retry=FAST, keep_payloads=True))
        environment = {"UNUM_STORE": store_url, "UNUM_INVOKER": f"lambda://?endpoint={endpoint.endpoint}{invoker_options}",
                       "UNUM_RETRY_BASE_DELAY": "0.01", "UNUM_LOG_LEVEL": "WARNING"}
        for name, spec in workflow.functions.items():
            function = stack.enter_context(HostLambdaFunction(spec.folder, function_name=name, environment=environment))
            endpoint.register(name, function.invoke_url)
        try:
            yield HostStack(workflow, store, endpoint)
        finally:
            store.client.delete_table(TableName=table)
            store.close()


def write(root: Path, functions: dict[str, tuple[str, list, dict]]) -> Workflow:
    sources = {name: FunctionSource(code, instructions, fields) for name, (code, instructions, fields) in functions.items()}
    return write_workflow(root, name=root.name, entry=next(iter(functions)), functions=sources)


def test_handler_retried_by_the_adapter_with_the_attempt_count(moto_server, tmp_path: Path) -> None:
    workflow = write(tmp_path / "flaky", {
        "Start": ("def handler(event, context):\n    return event + 1\n", [{"op": "invoke", "function": "Flaky"}], {}),
        "Flaky": ("def handler(event, context):\n"
                  "    if context.attempt < 2:\n        raise RuntimeError(f'attempt {context.attempt}')\n"
                  "    return {'n': event, 'attempt': context.attempt}\n", [], {"max_attempts": 3}),
    })
    with host_stack(moto_server, workflow) as stack:
        outcome = stack.run(1)
        assert outcome.failure is None
        assert outcome.result == {"n": 2, "attempt": 2}
        assert stack.outcome_kinds(outcome.workflow_id) == ["result"]
        flaky = [a for a in stack.endpoint.attempts if a.function == "Flaky"]
        assert [a.outcome for a in flaky] == ["ok", "ok", "ok"]  # failures handled in unum, not by Lambda
        assert json.loads(flaky[0].detail)["retrying"] == 1


def test_handler_failing_every_attempt_records_the_failure(moto_server, tmp_path: Path) -> None:
    workflow = write(tmp_path / "doomed", {
        "Start": ("def handler(event, context):\n    return event\n", [{"op": "invoke", "function": "Boom"}], {}),
        "Boom": ("def handler(event, context):\n    raise ValueError(f'bad {event}')\n", [], {"max_attempts": 2}),
    })
    with host_stack(moto_server, workflow) as stack:
        outcome = stack.run(7)
        assert outcome.results == []
        assert outcome.failure is not None
        assert (outcome.failure["Function"], outcome.failure["Error"], outcome.failure["Attempts"]) == ("Boom", "ValueError", 2)
        assert "bad 7" in outcome.failure["Cause"]
        assert stack.outcome_kinds(outcome.workflow_id) == ["failure"]


def test_crash_retried_by_lambda_then_on_failure_destination_records_it(moto_server, tmp_path: Path) -> None:
    workflow = write(tmp_path / "crash", {
        "Start": ("def handler(event, context):\n    return event\n", [{"op": "invoke", "function": "Crash"}], {}),
        "Crash": ("import os\ndef handler(event, context):\n    os._exit(3)\n", [], {}),
    })
    with host_stack(moto_server, workflow) as stack:
        outcome = stack.run("x")
        crash = [a.outcome for a in stack.endpoint.attempts if a.function == "Crash"]
        # 1 attempt + 2 Lambda retries fail, then the destination record is delivered (to Crash itself)
        assert crash == ["function_error"] * 3 + ["destination", "ok"], stack.endpoint.attempts
        assert outcome.results == []
        assert outcome.failure is not None
        assert outcome.failure["Function"] == "Crash"
        assert outcome.failure["Attempts"] == 3
        assert stack.outcome_kinds(outcome.workflow_id) == ["failure"]


def test_bytes_and_oversized_envelopes_travel_wrapped_and_by_reference(moto_server, tmp_path: Path) -> None:
    width, pad = 30, 3000
    workflow = write(tmp_path / "wide", {
        "Split": (f"def handler(event, context):\n    return [bytes([i]) * 3 for i in range({width})]\n",
                  [{"op": "create_set", "function": "Sum", "shape": "aggregate"}, {"op": "map", "function": "Work"}], {}),
        "Work": ("def handler(event, context):\n    return {'len': len(event), 'first': event[0]}\n",
                 [{"op": "fan_in", "function": "Sum"}], {}),
        "Sum": ("def handler(event, context):\n"
                f"    return {{'total': sum(x['first'] * x['len'] for x in event), 'pad': 'x' * {pad}}}\n",
                [{"op": "invoke", "function": "Report"}], {}),
        "Report": (f"def handler(event, context):\n    assert event['pad'] == 'x' * {pad}\n    return event['total']\n",
                   [], {}),
    })
    # A fan-in envelope names the set and its width, not the members (docs/coordination.md), so
    # it stays small; Sum -> Report carries a value inline (under the 64 KB inline limit) that
    # makes its event over 2000 bytes: that envelope goes by reference.
    with host_stack(moto_server, workflow, invoker_options="&limit=2000") as stack:
        outcome = stack.run(None)
        assert outcome.failure is None, outcome.failure
        assert outcome.result == 3 * sum(range(width))
        # one result; stored envelopes, like every other object, only until their expiry
        assert stack.outcome_kinds(outcome.workflow_id) == ["result"]
        bodies = [json.loads(body) for function, body in stack.endpoint.payloads]
        assert sum("unum_msgpack" in b for b in bodies) == width  # map items are bytes
        by_ref = [function for (function, _), b in zip(stack.endpoint.payloads, bodies, strict=True)
                  if "unum_envelope_ref" in b]
        assert len(by_ref) >= 1 and set(by_ref) == {"Report"}, by_ref
        assert all(len(body) <= 2000 for _, body in stack.endpoint.payloads)
