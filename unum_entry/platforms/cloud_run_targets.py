"""The functions functions-framework serves (its `--target`s), loaded by `cloud_run.create_app`.

They hold no state: each finds its `CloudRunAdapter` in the serving app's config. Returning
acks the delivery (2xx); raising answers 500, and Pub/Sub redelivers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import flask

from unum_entry.platforms.cloud_run import ADAPTER_KEY, PUSH_PATH


def _adapter() -> Any:
    return flask.current_app.config[ADAPTER_KEY]


def unum_cloudevent(cloud_event: Any) -> None:
    """A Pub/Sub message as a CloudEvent (Eventarc, or a push body converted by the framework)."""
    data = cloud_event.data
    message = data.get("message") if isinstance(data, Mapping) else None
    _adapter().on_message(message)


def unum_http(request: flask.Request) -> Any:
    """The entry function: push deliveries on /pubsub, workflow starts on any other POST."""
    adapter = _adapter()
    if request.method == "GET":
        return {"function": adapter.function, "start": "POST a JSON input (?workflow_id=ID optional)"}
    if request.method != "POST":
        return {"error": f"method {request.method} not allowed: POST a JSON input"}, 405
    body = request.get_data()
    if request.path.rstrip("/") == PUSH_PATH:
        try:
            push = _json(body)
        except ValueError as exc:
            return {"error": f"the push body is not JSON: {exc}"}, 400
        if not isinstance(push, Mapping) or not isinstance(push.get("message"), Mapping):
            return {"error": "a Pub/Sub push body needs a 'message' object"}, 400
        return adapter.on_message(push["message"])
    try:
        input_value = _json(body) if body.strip() else None
    except ValueError as exc:
        return {"error": f"the request body is not JSON: {exc}"}, 400
    workflow_id = request.args.get("workflow_id") or None
    return adapter.start(input_value, workflow_id)


def _json(body: bytes) -> Any:
    return json.loads(body, parse_constant=_reject_constant)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")
