"""docs/tracing.md's commands, read from the file and run as written through the real CLI (from
a folder holding `images/`): the log lines, the console spans, and OTLP/HTTP spans sent over
the wire to a receiver on 127.0.0.1:4318 (tests.support.otlp_receiver), decoded there."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from tests.support.otlp_receiver import OtlpReceiver  # noqa: E402

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
ENV_PREFIX = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def doc_commands() -> list[tuple[dict[str, str], list[str]]]:
    """Each shell line of docs/tracing.md's plain code blocks: (its VAR=value prefixes, argv)."""
    text = (REPO / "docs" / "tracing.md").read_text()
    blocks = re.findall(r"^```\n(.*?)^```", text, flags=re.S | re.M)
    commands = []
    for block in blocks:
        for line in block.splitlines():
            words = shlex.split(line) if re.match(r"^([A-Z_]+=\S+ )*python -m builder ", line) else []
            env = {}
            while words and ENV_PREFIX.match(words[0]):
                name, _, value = words.pop(0).partition("=")
                env[name] = value
            if words:
                commands.append((env, words))
    return commands


def run(env: dict[str, str], argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "UNUM_"))}
    done = subprocess.run([sys.executable, *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**environ, **env})
    assert done.returncode == 0 and "Traceback" not in done.stderr, f"{shlex.join(argv)}: {done.stderr}"
    assert json.loads(done.stdout)["greeting"] == "HELLO, ADA!"
    return done


def test_every_command_in_docs_tracing_works_as_written(tmp_path: Path) -> None:
    (tmp_path / "images").symlink_to(REPO / "images")
    commands = doc_commands()
    assert [env.get("UNUM_TRACING") for env, _ in commands] == [None, None, "console", "otlp"]
    log_json, verbose, console = (run(env, argv, tmp_path) for env, argv in commands[:3])

    lines = [json.loads(line) for line in log_json.stderr.splitlines() if line.startswith("{")]
    assert sorted(line["function"] for line in lines) == ["Hello", "Shout", "Sign"]  # lines are written as deliveries end
    assert sum(" attempt 1: done in " in line for line in verbose.stderr.splitlines()) == 3

    spans = [json.loads(line) for line in console.stderr.splitlines() if line.startswith("{")]
    assert {s["name"] for s in spans} >= {"Hello", "Shout", "Sign", "ingress", "handler", "egress", "store.create"}
    assert len({s["context"]["trace_id"] for s in spans}) == 1

    env, argv = commands[3]
    started = int(time.time())
    with OtlpReceiver(4318) as receiver:
        run(env, argv, tmp_path)
    got = receiver.spans
    assert receiver.services == {"chain"} and receiver.requests >= 1
    [trace_id] = {s.trace_id for s in got}
    assert abs(int.from_bytes(trace_id[:4], "big") - started) < 60  # X-Ray's epoch-seconds prefix
    by_id = {s.span_id: s for s in got}
    deliveries = {s.name: s for s in got if s.name in ("Hello", "Shout", "Sign")}
    assert not deliveries["Hello"].parent_span_id  # the workflow's start: the root
    for child, parent in (("Shout", "Hello"), ("Sign", "Shout")):
        sender = by_id[deliveries[child].parent_span_id]
        assert sender.name == "egress" and sender.parent_span_id == deliveries[parent].span_id
