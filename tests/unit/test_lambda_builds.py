"""Issue 44: the build record of a deployed workflow and the invoker that continues each workflow
on its recorded build (unum_entry.invokers.lambda_builds), with a recording Lambda client."""

from __future__ import annotations

import time
from typing import Any

from unum_entry.invokers.aws_lambda import LambdaInvoker, QualifiedTimers
from unum_entry.invokers.lambda_builds import RecordedBuilds, read_build, record_build, recorded_builds
from unum_entry.stores.memory import MemoryStore


class _Lambda:
    class meta:  # noqa: N801 (boto3's attribute)
        region_name = "us-east-1"

    def __init__(self) -> None:
        self.names: list[str] = []

    def invoke(self, **kwargs: Any) -> dict[str, Any]:
        self.names.append(kwargs["FunctionName"])
        return {"StatusCode": 202}


class _Scheduler:
    def __init__(self) -> None:
        self.targets: list[str] = []

    def create_schedule(self, **kwargs: Any) -> None:
        self.targets.append(kwargs["Target"]["Arn"])


def test_the_first_recorded_build_stays() -> None:
    store = MemoryStore()
    assert read_build(store, "w1") is None
    assert record_build(store, "w1", "vone") == "vone"
    assert record_build(store, "w1", "vtwo") == "vone"  # a duplicate start on another build changes nothing
    assert read_build(store, "w1") == "vone"


def test_invokes_and_timers_go_to_the_recorded_build_else_as_configured() -> None:
    store = MemoryStore()
    record_build(store, "pinned", "vone")
    client, scheduler = _Lambda(), _Scheduler()
    plain = LambdaInvoker.from_url("lambda://?prefix=s-&region=us-east-1&schedule_role=arn:aws:iam::123456789012:role/r",
                                   client=client, scheduler_client=scheduler)
    invoker = recorded_builds(plain, store)
    assert isinstance(invoker, RecordedBuilds)
    invoker.invoke("B", {"workflow": "pinned"})
    invoker.invoke("B", {"workflow": "unrecorded"})
    invoker.invoke_at(time.time() + 3600, "B", {"workflow": "pinned"}, name="t1")
    invoker.invoke_at(time.time() - 1, "B", {"workflow": "pinned"}, name="t2")  # due now: an invoke, same build
    assert client.names == ["s-B:vone", "s-B", "s-B:vone"]
    assert scheduler.targets == ["arn:aws:lambda:us-east-1:123456789012:function:s-B:vone"]
    pinned = invoker.for_workflow("pinned")
    assert isinstance(pinned.timers, QualifiedTimers) and pinned.timers.qualifier == "vone"
    assert plain.qualifier is None and plain.function_name("B") == "s-B"  # the configured invoker is unchanged
    assert recorded_builds(plain, None) is plain and recorded_builds(object(), store) is not None
