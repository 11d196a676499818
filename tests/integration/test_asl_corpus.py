"""The Step Functions corpus (tests/asl_corpus): each state machine compiled and run end to end
on the embedded platform with a file store; its result (or failure) must be what Step Functions
documents for that input, and the store must hold nothing afterwards but that outcome and
retained objects that expire within the store's TTL (tests/support/retained.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.compiler import compile_state_machine
from builder.compiler.load import find_definition
from tests.support.retained import assert_only_ttl_bounded, outcome_kinds
from unum_entry.ir import TIME_SCALE_ENV
from unum_entry.local.platform import local_platform
from unum_entry.stores import open_store
from unum_entry.workflow import load_workflow

pytestmark = pytest.mark.integration

CORPUS = Path(__file__).resolve().parents[1] / "asl_corpus"
CASES = sorted(p for p in CORPUS.iterdir() if p.is_dir())


def run_case(folder: Path, tmp_path: Path, input_value=None):
    out = compile_state_machine(find_definition(folder), tmp_path / "wf", functions=folder / "functions").out
    store = open_store(str(tmp_path / "store"))
    with local_platform(load_workflow(out), store, workers=8) as platform:
        outcome = platform.run(json.loads((folder / "input.json").read_text()) if input_value is None else input_value,
                               timeout=60)
        dead = list(platform.dead_letters)
    try:
        kinds = outcome_kinds(assert_only_ttl_bounded(store))
    finally:
        store.close()
    return outcome, dead, kinds


def test_corpus_is_found() -> None:
    assert len(CASES) >= 12, [p.name for p in CASES]


@pytest.mark.parametrize("folder", CASES, ids=[p.name for p in CASES])
def test_corpus_case(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "0.001")  # Wait 10 s and Retry back-off take 10 ms
    outcome, dead, kinds = run_case(folder, tmp_path)

    assert dead == []
    if (folder / "expected_failure.json").is_file():
        expected = json.loads((folder / "expected_failure.json").read_text())
        assert outcome.failure is not None, outcome.results
        assert {k: outcome.failure[k] for k in expected} == expected
        assert outcome.results == []
        assert kinds == ["failure"]
    else:
        assert outcome.failure is None, outcome.failure
        assert outcome.result == json.loads((folder / "expected.json").read_text())
        assert outcome.results and kinds == ["result"] * len(outcome.results)
