"""The path a run took through its state machine (what `inspect --graph --view states` and the
web console draw): the machine's state view, the states the run entered, and the states of the
invocation that failed it, read from its history document (builder.runs.history)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from builder.graphing.states import StateView


def load_state_view(source: str) -> StateView:
    """The state view of a state machine file (or a folder holding one); raises UnumError (one
    line) for anything else, e.g. an IR workflow folder."""
    from pathlib import Path

    from builder.compiler.load import find_definition, load_definition
    from builder.compiler.validate import validate
    from builder.graphing.states import state_view
    from unum_entry.errors import UnumError

    path = Path(source)
    found = find_definition(path) if path.is_dir() else (path if path.is_file() else None)
    if found is None:  # an IR workflow folder (a compiled one keeps its statemachine.json: drawn)
        raise UnumError(f"--view states: {source} is not a state machine (a .json/.yaml definition, or a folder "
                        "holding one); an IR workflow has functions only (--view functions)")
    validate(load_definition(found), str(found))
    doc = load_definition(found)
    return state_view(doc, found.resolve().parent.name if found.stem.lower().startswith("statemachine")
                      else found.stem.split(".")[0])


def run_path(store: Any, workflow_id: str, source: str) -> tuple[StateView, set[str], set[str]]:
    """The state view of a run's state machine and the path it took, from its history: the
    states it entered, and (if it failed) the states of the invocation that failed it."""
    from builder.runs.history import history_document
    from unum_entry.outcome import read_outcome

    view = load_state_view(source)
    outcome = read_outcome(store, workflow_id)
    document = history_document(store, workflow_id, str(outcome.status), outcome.failure, source)
    ran = {e["state"] for e in document["events"] if "state" in e}
    failing = {(e.get("function"), e.get("index")) for e in document["events"] if e["type"] == "LambdaFunctionFailed"}
    failed = {e["state"] for e in document["events"] if outcome.failure is not None and "state" in e
              and e["type"].endswith("StateEntered") and (e.get("function"), e.get("index")) in failing}
    return view, ran - failed, failed
