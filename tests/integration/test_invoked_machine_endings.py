"""Adversarial schedules against a durable function's `context.invoke` of a compiled state
machine (unum_entry/durable_functions/chained.py): the machine ends from OUTSIDE its functions.

- `python -m builder stop` of the invoked machine while it waits (its Wait timer then fires and
  the in-flight invocation drains to the end, where the result record is already claimed by the
  stop): the caller's invoke fails with the stop's error. Before the fix the claim was read as a
  result: the invoke SUCCEEDED with `null` and the caller crashed on it.
- the machine's top-level `TimeoutSeconds` elapses while it waits 30 s: the caller's invoke fails
  with States.Timeout at once. Before the fix an invoked machine (started with its caller's
  deadline) armed no timers at all, so its TimeoutSeconds was ignored; and an ending recorded by
  a timer never answered the caller.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration import test_durable_invoke_state_machine as machine
from unum_entry import naming
from unum_entry.local.platform import LocalPlatform
from unum_entry.stores import open_store
from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.integration

BOUND = 20.0  # seconds any wait below may take


def _until(predicate, what: str) -> None:
    deadline = time.monotonic() + BOUND
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not within {BOUND} s"
        time.sleep(0.05)


def _invoked(store) -> str | None:
    return next((e.workflow for e in store.workflows() if naming.INVOKED in e.workflow), None)


@pytest.mark.parametrize("ending", ["stop", "execution-timeout"])
def test_an_invoked_machine_ended_from_outside_fails_the_callers_invoke_once(tmp_path: Path, monkeypatch,
                                                                            ending: str) -> None:
    states = json.loads(json.dumps(machine.MACHINE))
    states["States"]["Pause"]["Seconds"] = 5 if ending == "stop" else 30  # the stop lands in the Wait
    if ending == "execution-timeout":
        states["TimeoutSeconds"] = 1
    monkeypatch.setattr(machine, "MACHINE", states)
    folder = machine._folder(tmp_path)
    (tmp_path / "sink").mkdir()
    path = tmp_path / "unum.db"
    store = open_store(str(path))
    platform = LocalPlatform(load_workflow(folder), store, workers=4)
    try:
        began = time.monotonic()
        caller = platform.start({"target": "Double", "n": 3, "fail": False, "sink": str(tmp_path / "sink")})
        if ending == "stop":
            _until(lambda: (tmp_path / "sink" / "calls").exists(), "Double")  # the machine is in its Wait
            invoked = _invoked(store)
            assert invoked is not None
            stopped = subprocess.run([sys.executable, "-m", "builder", "stop", invoked, "--store", str(path)],
                                     cwd=machine.REPO, capture_output=True, text=True, timeout=60)
            assert stopped.returncode == 0, stopped.stderr
        _until(lambda: platform.outcome(caller).status == "succeeded", "the caller's end")
        out = platform.outcome(caller).result
        assert out["failed"] == "InvokeError", out
        assert out["message"] == ("stopped by request" if ending == "stop"
                                  else "the execution timed out: its TimeoutSeconds (1 s) elapsed"), out
        invoked = _invoked(store)
        assert platform.outcome(invoked).status == ("stopped" if ending == "stop" else "timed out")
        if ending == "execution-timeout":
            assert time.monotonic() - began < 10, "the caller waited for the machine's 30 s Wait"
        else:  # the Wait's timer fired after the stop is dropped (unum_entry.timers): Triple never runs,
            # and that dropped timer is what answers the caller (Runtime: EndedBeforeDelivery)
            platform.wait_idle(BOUND)
            assert "Triple" not in (tmp_path / "sink" / "calls").read_text()
        machine._check_one_outcome_per_operation(store, caller)
    finally:
        platform.close()
        store.close()
