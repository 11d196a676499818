"""The embedded platform's failure paths: bad envelopes, unknown targets, failing handlers,
transient store errors (redelivered through the delivery policy the cloud adapters use), a
failure record that cannot be written at first, a store that never recovers.

Each must give a clear error naming what and where, mark the workflow failed where there is a
workflow, leave nothing corrupted (no result where it failed; whatever else it wrote retained
with an expiry), and never lose a worker thread or hang."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from unum_entry.errors import StoreError, StoreUnusable
from unum_entry.local.platform import LocalPlatform, local_platform
from unum_entry.runtime import new_workflow
from unum_entry.stores.file import FileStore
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration


def write(root: Path, functions: dict[str, tuple[str, list]], **ir_fields: dict) -> Path:
    """A workflow with entry A whose functions are one-line handler bodies."""
    sources = {name: FunctionSource(f"def handler(event, context):\n    {body}\n", instructions, ir_fields.get(name, {}))
               for name, (body, instructions) in functions.items()}
    write_workflow(root, name="t", entry="A", functions=sources)
    return root


def kinds(store: FileStore) -> list[str]:
    """The outcome records (results, failure) the store holds. Everything else a workflow wrote
    is retained until it expires (docs/coordination.md, rule 2): checked to carry an expiry."""
    records = list(store.records())
    assert all(r.expires_at > 0 for r in records), [r.key for r in records if not r.expires_at > 0]
    return sorted(r.kind.value for r in records if r.kind.value in ("result", "failure"))


def test_handler_that_always_fails_marks_the_workflow_failed(tmp_path):
    folder = write(tmp_path / "wf", {
        "A": ("return {'n': event}", [{"op": "invoke", "function": "B"}]),
        "B": ("raise ValueError(f'bad n {event[\"n\"]}')", []),
    }, B={"max_attempts": 2})
    store = FileStore(tmp_path / "store")
    with local_platform(load_workflow(folder), store) as platform:
        outcome = platform.run(7, timeout=30)
        assert platform.stats["handler_retries"] == 1
    assert outcome.results == []
    assert outcome.failure == {"Error": "ValueError", "Cause": "bad n 7", "Function": "B",
                               "Invocation": outcome.failure["Invocation"], "Attempts": 2,
                               "Trace": [{"File": str(folder / "B" / "app.py"), "Line": 2, "Function": "handler",
                                          "Code": "raise ValueError(f'bad n {event[\"n\"]}')"}]}
    assert kinds(store) == ["failure"]


def test_handler_that_recovers_on_retry_sees_the_attempt_number(tmp_path):
    folder = write(tmp_path / "wf", {
        "A": ("return context.attempt if context.attempt >= 2 else 1 / 0", []),
    })
    store = FileStore(tmp_path / "store")
    with local_platform(load_workflow(folder), store) as platform:
        outcome = platform.run(None, timeout=30)
    assert outcome.failure is None and outcome.results == [2]
    assert kinds(store) == ["result"]


@pytest.mark.parametrize("instructions, words", [
    ([{"op": "invoke", "function": "B"}], "output of function 'A' cannot be stored"),
    ([], "workflow result cannot be stored"),  # a terminal function's output is the result record
])
def test_output_that_cannot_be_stored_fails_with_the_function_named(tmp_path, instructions, words):
    folder = write(tmp_path / "wf", {"A": ("return {1, 2}", instructions), "B": ("return event", [])})
    with local_platform(load_workflow(folder), FileStore(tmp_path / "store")) as platform:
        outcome = platform.run(None, timeout=30)
        assert platform.stats["handler_retries"] == 0 and platform.stats["redeliveries"] == 0
    assert outcome.failure["Function"] == "A"
    assert words in outcome.failure["Cause"]


def test_map_over_a_non_list_fails_without_a_retry(tmp_path):
    folder = write(tmp_path / "wf", {
        "A": ("return {'xs': 3}", [{"op": "map", "function": "B", "items": "$.xs"}]),
        "B": ("return event", []),
    })
    with local_platform(load_workflow(folder), FileStore(tmp_path / "store")) as platform:
        outcome = platform.run(None, timeout=30)
        assert platform.stats["handler_retries"] == 0
    assert outcome.failure["Error"] == "PlanError"
    assert "map over 'B' needs a list at $.xs, found int" in outcome.failure["Cause"]


@pytest.mark.parametrize("payload, words", [
    ({"unum": 2, "workflow": "wf-x", "frames": [[0, 1]], "inputs": [{"value": 1}]}, "envelope.frames[0]"),
    ({"unum": 2, "workflow": "wf-x", "frames": [[0, 1, 0]], "inputs": [{"ref": 5}]}, "envelope.inputs[0].ref"),
    ({"hello": "world"}, "envelope.unum"),
])
def test_malformed_envelopes_are_dead_lettered_with_the_field(tmp_path, payload, words):
    folder = write(tmp_path / "wf", {"A": ("return event", [])})
    store = FileStore(tmp_path / "store")
    with local_platform(load_workflow(folder), store) as platform:
        platform.submit("A", payload)
        platform.wait_idle(10)
        assert len(platform.dead_letters) == 1 and words in platform.dead_letters[0]
    assert kinds(store) == []


def test_invoke_of_an_unknown_function_is_dead_lettered(tmp_path):
    folder = write(tmp_path / "wf", {"A": ("return event", [])})
    with local_platform(load_workflow(folder), FileStore(tmp_path / "store")) as platform:
        platform.submit("Nope", {"unum": 2, "workflow": "wf-x", "frames": [[0, 1, 0]], "inputs": [{"value": 1}]})
        platform.wait_idle(10)
        assert platform.dead_letters == ["invoke of unknown function 'Nope' in workflow wf-x"]


def test_duplicate_start_after_the_workflow_ran_does_not_change_the_result(tmp_path):
    folder = write(tmp_path / "wf", {
        "A": ("import random; return random.random()", [{"op": "invoke", "function": "B"}]),
        "B": ("return event", []),
    })
    store = FileStore(tmp_path / "store")
    with local_platform(load_workflow(folder), store) as platform:
        first = platform.run(None, workflow_id="wf-dup", timeout=30)
        again = platform.run(None, workflow_id="wf-dup", timeout=30)
    assert again.results == first.results
    assert kinds(store) == ["result"]


# ---- transient store errors: the delivery policy (unum_entry.platforms.common.deliver) ----------

class FlakyStore(FileStore):
    """A file store whose `operation` raises `error` on its first `failures` calls (None: on
    every call), as a throttled or unreachable backend does."""

    def __init__(self, root: Path, operation: str, failures: int | None, error: type[Exception] = StoreError) -> None:
        super().__init__(root)
        self.raised = 0
        lock = threading.Lock()
        real = getattr(self, operation)

        def flaky(*args, **kwargs):
            with lock:
                throttle = failures is None or self.raised < failures
                self.raised += throttle
            if throttle:
                raise error(f"{operation}: throttled (injected)")
            return real(*args, **kwargs)

        setattr(self, operation, flaky)


CHAIN = {
    "A": ("return event + 1", [{"op": "invoke", "function": "B"}]),
    "B": ("return event * 2", [{"op": "invoke", "function": "C"}]),
    "C": ("return {'done': event}", []),
}
MAP_SUM = {
    "A": ("return {'xs': [1, 2, 3]}", [{"op": "create_set", "function": "Sum"},
                                       {"op": "map", "function": "W", "items": "$.xs"}]),
    "W": ("return event * 10", [{"op": "fan_in", "function": "Sum"}]),
    "Sum": ("return {'sum': sum(event)}", []),
}


def alive(platform: LocalPlatform) -> bool:
    return all(thread.is_alive() for thread in platform._workers)


@pytest.mark.parametrize("functions, operation, failures, result", [
    (CHAIN, "create", 3, {"done": 16}),
    (MAP_SUM, "create", 4, {"sum": 60}),
    (MAP_SUM, "add_to_set", 2, {"sum": 60}),
])
def test_transient_store_errors_are_redelivered_and_the_workflow_completes(tmp_path, functions, operation,
                                                                           failures, result):
    folder = write(tmp_path / "wf", functions)
    store = FlakyStore(tmp_path / "store", operation, failures)
    with local_platform(load_workflow(folder), store, workers=2) as platform:
        outcome = platform.run(7, timeout=30)
        assert alive(platform)
        assert platform.dead_letters == []
        assert platform.stats["redeliveries"] == failures and platform.stats["failed"] == 0
    assert store.raised == failures
    assert outcome.failure is None and outcome.results == [result]


def test_failure_record_that_cannot_be_written_at_first_is_written_on_redelivery(tmp_path):
    folder = write(tmp_path / "wf", {
        "A": ("return {'n': event}", [{"op": "invoke", "function": "B"}]),
        "B": ("raise ValueError(f'bad n {event[\"n\"]}')", []),
        "C": ("return event", []),
    }, B={"max_attempts": 2})
    with local_platform(load_workflow(folder), FileStore(tmp_path / "store"), workers=1) as platform:
        runtime = platform.runtimes["B"]
        real_fail, calls = runtime.fail, []

        def fail_throttled_once(env, error):
            calls.append(env.attempt)
            if len(calls) == 1:
                raise StoreError("failure record: throttled (injected)")
            real_fail(env, error)

        runtime.fail = fail_throttled_once  # type: ignore[method-assign]
        outcome = platform.run(7, timeout=30)
        assert calls == [1, 1]  # the last attempt, redelivered as it was
        assert alive(platform) and platform.dead_letters == []
        assert (platform.stats["handler_retries"], platform.stats["redeliveries"], platform.stats["failed"]) == (1, 1, 1)
        # the only worker survived: another workflow still runs to the end
        assert platform.run(8, timeout=30).failure["Cause"] == "bad n 8"
    assert outcome.results == []
    assert (outcome.failure["Error"], outcome.failure["Cause"], outcome.failure["Function"],
            outcome.failure["Attempts"]) == ("ValueError", "bad n 7", "B", 2)


def test_a_store_that_never_recovers_dead_letters_the_delivery_instead_of_hanging(tmp_path):
    folder = write(tmp_path / "wf", CHAIN)
    store = FlakyStore(tmp_path / "store", "create", None)
    with local_platform(load_workflow(folder), store, workers=2, max_redeliveries=5) as platform:
        began = time.monotonic()
        outcome = platform.run(7, timeout=30)  # returns: the delivery is dead-lettered
        assert time.monotonic() - began < 10
        assert alive(platform)
        (message,) = platform.dead_letters
        assert message.startswith(f"A: workflow {outcome.workflow_id}: gave up after 6 consecutive failed deliveries")
        assert message.endswith("last error: StoreError: create: throttled (injected)")
        assert platform.stats["deliveries"] == 6 and platform.stats["redeliveries"] == 5
    # the failure write is a transaction (outcome.create_failure: it also requires the root result
    # key absent), which this store's injected fault does not hit: the workflow ends FAILED, not unended
    assert outcome.results == [] and outcome.failure is not None
    assert outcome.failure["Error"] == "StoreError" and "gave up after 6" in outcome.failure["Cause"]


def test_an_unusable_store_stops_the_platform_at_once_with_the_deliveries_still_queued(tmp_path):
    """A full disk or a read-only file (StoreUnusable) heals only when someone acts: the
    platform stops taking deliveries at the first one and `wait_idle` raises it - no redelivery
    storm, nothing dead-lettered; the failed delivery is queued again, for a later run."""
    folder = write(tmp_path / "wf", CHAIN)
    store = FlakyStore(tmp_path / "store", "create", None, error=StoreUnusable)
    platform = LocalPlatform(load_workflow(folder), store, workers=2)
    try:
        began = time.monotonic()
        platform.start(7)
        with pytest.raises(StoreUnusable, match="create: throttled"):
            platform.wait_idle(30)
        assert time.monotonic() - began < 10
        assert platform.dead_letters == [] and platform.stats["redeliveries"] == 1 and store.raised == 1
        queued = [(d.function, d.failures) for _, d in platform.queue.snapshot() if not d.background]  # (not the watchdog)
        assert queued == [("A", 1)]  # requeued, and not taken again
        for thread in platform._workers:
            thread.join(5)
        assert not any(thread.is_alive() for thread in platform._workers)
    finally:
        platform.close()


def test_a_bug_that_keeps_crashing_a_delivery_ends_the_workflow_with_a_failure_record(tmp_path):
    folder = write(tmp_path / "wf", MAP_SUM)
    store = FlakyStore(tmp_path / "store", "add_to_set", None, error=RuntimeError)
    with local_platform(load_workflow(folder), store, workers=2) as platform:
        outcome = platform.run(None, timeout=30)
        assert alive(platform)
        assert len(platform.dead_letters) == 3  # each map item's delivery, after 3 tries (not 50)
        assert all("gave up after 3 consecutive failed deliveries of 'W'; last error: RuntimeError: "
                   "add_to_set: throttled (injected)" in m for m in platform.dead_letters)
    assert outcome.results == []
    assert outcome.failure["Error"] == "RuntimeError" and outcome.failure["Function"] == "W"
    assert "add_to_set: throttled (injected)" in outcome.failure["Cause"]


def test_deliveries_are_taken_earliest_due_first(tmp_path):
    folder = write(tmp_path / "wf", {"A": ("return event", [])})
    with local_platform(load_workflow(folder), FileStore(tmp_path / "store"), workers=0) as platform:
        envelope = new_workflow(1, "wf-x").to_wire()
        for function, delay in [("late", 0.05), ("first", 0.0), ("second", 0.0), ("soon", 0.01)]:
            platform.submit(function, envelope, delay=delay)
        began = time.monotonic()
        order = [platform._take().function for _ in range(4)]
        assert order == ["first", "second", "soon", "late"]
        assert time.monotonic() - began >= 0.045  # the delayed ones were not taken early


def test_wait_idle_does_not_scan_the_deadline_watchdogs_of_every_workflow_started(tmp_path):
    """Each workflow started queues its deadline watchdog (a timer due at its retention's end),
    which `wait_idle` never waits for. A platform that has run many workflows must not scan all
    of those timers whenever it checks for idleness: O(workflows) per check, O(n²) over a
    process that runs n workflows and waits for each (the benchmarks do)."""
    folder = write(tmp_path / "wf", {"A": ("return event", [])})
    with local_platform(load_workflow(folder), FileStore(tmp_path / "store")) as platform:
        for n in range(40):
            platform.run(n, timeout=30)
        watchdogs = [d for _, d in platform.queue.snapshot() if d.background]
        assert len(watchdogs) == 40  # one per workflow started, still queued
        scans = []
        snapshot = platform.queue.snapshot
        platform.queue.snapshot = lambda: scans.append(1) or snapshot()  # type: ignore[method-assign]
        for n in range(40, 50):
            platform.run(n, timeout=30)
        assert scans == []
        assert platform.next_timer() is None  # (a watchdog's is not a timer anyone waits for)
        platform.submit_at(time.time() + 3600, "A", new_workflow(1, "wf-later").to_wire(), name="m-" + "3" * 32)
        assert platform.next_timer() == pytest.approx(time.time() + 3600, abs=5)
        assert scans  # a timer wait_idle may wait for is looked up in the queue
