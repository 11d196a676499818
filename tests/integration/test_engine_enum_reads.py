"""No member of an enum is read off its class at each transition of the embedded engine: on
Python 3.11 such a read goes through `EnumType.__getattr__`'s slot hook, ~1,100 instructions
each (unum_entry.stores.base, at KIND_SET), and nine of them per map transition were ~4 % of
it. Counted through the real platform (memory and SQLite stores, one worker) on a chain and a
map + sum; what a workflow's start and end read is divided out by running several."""

from __future__ import annotations

import collections
import enum
import sys
from pathlib import Path

import pytest

from tests.support.maps import map_sum
from unum_entry.local.platform import LocalPlatform
from unum_entry.local.queue import MemoryQueue, SQLiteQueue
from unum_entry.stores.memory import MemoryStore
from unum_entry.stores.sqlite import SQLiteStore
from unum_entry.workflow import FunctionSource, load_workflow, write_workflow

pytestmark = pytest.mark.integration

CHAIN = 20  # functions of the chain


def chain(root: Path) -> Path:
    sources = {f"F{i}": FunctionSource("def handler(event, context):\n    return event\n",
                                       [{"op": "invoke", "function": f"F{i + 1}"}] if i + 1 < CHAIN else [])
               for i in range(CHAIN)}
    write_workflow(root, name="c", entry="F0", functions=sources)
    return root


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
@pytest.mark.parametrize("shape", ["chain", "map"])
def test_a_transition_reads_no_enum_member_off_its_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         shape: str, store_kind: str) -> None:
    reads: collections.Counter[str] = collections.Counter()
    counting = [False]
    plain = type.__getattribute__

    def counted(cls: type, name: str) -> object:
        if counting[0] and not name.startswith("_"):
            caller = sys._getframe(1).f_code
            reads[f"{cls.__name__}.{name} in {Path(caller.co_filename).name}:{caller.co_name}"] += 1
        return plain(cls, name)

    runs, items = (10, 0) if shape == "chain" else (4, 500)
    if shape == "chain":
        workflow = load_workflow(chain(tmp_path / "w"))
    else:
        workflow = write_workflow(tmp_path / "w", name="m", entry="Split", functions=map_sum(items))
    transitions = runs * (CHAIN if shape == "chain" else items + 2)
    store = SQLiteStore.open(tmp_path / "s.db") if store_kind == "sqlite" else MemoryStore()
    queue = SQLiteQueue(store.database) if isinstance(store, SQLiteStore) else MemoryQueue()  # as `run` does
    monkeypatch.setattr(enum.EnumType, "__getattribute__", counted)
    try:
        with LocalPlatform(workflow, store, workers=1, queue=queue, helpers=0) as platform:
            counting[0] = True
            for _ in range(runs):
                platform.start(None)
                platform.wait_idle(60)
            counting[0] = False
    finally:
        store.close()
    per_run = {where: n for where, n in reads.items() if n > runs * 4}  # a start's and an end's few reads are not per transition
    assert not per_run, f"enum members read per transition ({transitions} transitions): {per_run}"
    assert sum(reads.values()) < transitions / 10, reads
