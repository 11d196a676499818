"""`python -m builder inspect WF --history [--json]` and `inspect WF --value KEY`: a workflow's
execution history read from the store (unum_entry.history), as a table or as JSON.

The text form prints the workflow's status, start, end, duration and input, then one line per
event (numbered like a Step Functions execution history: docs/history.md); `--json` prints the
same as one document (`events` and `steps`). Values longer than the inline limit show as
`{"$ref": KEY, "bytes": N}`; `--value KEY` prints one of them whole.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from builder.commands.io import to_json
from builder.runs.history import history_document

if TYPE_CHECKING:
    from unum_entry.stores.base import Store

DETAIL_CHARS = 100  # one event's detail in the text form is cut to this many characters


def add_history_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--history", action="store_true",
                        help="print the execution history: every invocation in order with its input, output or "
                             "error, attempts and times (events numbered as Step Functions numbers them)")
    parser.add_argument("--json", action="store_true", help="with --history: one JSON document")
    parser.add_argument("--value", metavar="KEY",
                        help="print the whole value the history shows by reference ({\"$ref\": KEY})")


def history_text(document: dict[str, Any]) -> str:
    """The text form: a header, then one line per event."""
    lines = [f"workflow {document['workflow']}: {document['status']}",
             f"  started {document['started'] or '-'}   ended {document['ended'] or '-'}   "
             f"duration {_ms(document['duration_ms'])}",
             f"  input {_cut(document['input'])}", "",
             f"{'id':>4} {'prev':>4}  {'+ms':>7}  {'type':<26} {'function':<22} {'ms':>6} {'att':>3}  detail"]
    origin = document["events"][0]["timestamp"] if document["events"] else None
    for event in document["events"]:
        where = event.get("function") or ""
        if "index" in event:
            where += f"[{event['index']}/{event['size']}]"
        if event.get("iteration"):
            where += f" #{event['iteration']}"
        if "state" in event:
            where = f"{event['state']} ({where})"
        detail = event.get("details") or {}
        lines.append(f"{event['id']:>4} {event['previousEventId']:>4}  {_offset(origin, event['timestamp']):>7}  "
                     f"{event['type']:<26} {where:<22} {_ms_cell(event):>6} {event.get('attempts', ''):>3}  "
                     f"{_cut(detail) if detail else ''}")
    if document.get("durable"):
        lines += ["", "durable operations (in log order)",
                  f"{'function':<14} {'type':<15} {'subtype':<18} {'name':<24} {'status':<10} {'att':>3}  {'+ms':>7}  "
                  "result / error"]
        first = document["durable"][0]["started"]
        for op in document["durable"]:
            outcome = op["error"] if op["error"] is not None else op["result"]
            lines.append(f"{op['function'] or '':<14} {op['type']:<15} {op['subType'] or '':<18} "
                         f"{(op['name'] or '')[:24]:<24} {op['status']:<10} {op['attempt'] or '':>3}  "
                         f"{_offset(first, op['started']):>7}  {_cut(outcome) if outcome is not None else ''}")
    return "\n".join(lines)


def _offset(origin: str | None, when: str | None) -> str:
    from datetime import datetime

    if origin is None or when is None:
        return "-"
    delta = datetime.fromisoformat(when.replace("Z", "+00:00")) - datetime.fromisoformat(origin.replace("Z", "+00:00"))
    return str(int(delta.total_seconds() * 1000))


def _ms_cell(event: dict[str, Any]) -> str:
    value = event.get("durationMs")
    return "" if value is None or not event["type"].endswith(("Succeeded", "Failed")) else str(value)


def _ms(value: int | None) -> str:
    return "-" if value is None else f"{value} ms"


def _cut(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    return text if len(text) <= DETAIL_CHARS else text[:DETAIL_CHARS - 1] + "…"


def print_history(store: Store, workflow_id: str, status: str, failure: dict[str, Any] | None,
                  folder: str | None, *, as_json: bool) -> None:
    document = history_document(store, workflow_id, status, failure, folder)
    print(to_json(document, compact=False) if as_json else history_text(document))


def print_value(store: Store, workflow_id: str, key: str) -> None:
    from unum_entry.history import value

    print(to_json(value(store, workflow_id, key), compact=False))
