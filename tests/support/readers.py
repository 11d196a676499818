"""Every reader of a workflow's ending, asked as a user asks it (issue 45: "every reader sees the
one ending"). `every_reader` starts the web console once over a store (`python -m builder ui`,
tests/support/ui.py) and `Readers.says` asks, for each workflow:

- `read_outcome` (the library);
- `python -m builder inspect ID` (its status, and its exit code agreeing: 0 succeeded / running /
  waiting, 1 otherwise);
- the history (the document of `python -m builder inspect ID --history --json`, as the
  console serves it at `/api/history?w=ID`: one process less per workflow);
- `python -m builder list --json` (one call for every workflow asked);
- the console's JSON (`/api/workflow?w=ID`) and its HTML page of the workflow
  (`/fragment/workflow?w=ID`, the `<span id='status'>` it draws);
- when the workflow was started through `python -m builder serve` (its execution ARN given):
  the Step Functions API's DescribeExecution through boto3, its status mapped to unum's word.

`Readers.one_ending` asserts they all agree and returns that word. All waits are bounded."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.ui import running_ui
from unum_entry.outcome import read_outcome
from unum_entry.stores.base import Store

REPO = Path(__file__).resolve().parents[2]
CLI_TIMEOUT = 120.0   # seconds any one CLI reader may take
HTTP_TIMEOUT = 30.0   # seconds any one console request may take
CLI_PARALLEL = 2      # CLI readers run at once (the machine's cores)
AWS_WORDS = {"SUCCEEDED": "succeeded", "FAILED": "failed", "ABORTED": "stopped", "TIMED_OUT": "timed out",
             "RUNNING": "running"}  # DescribeExecution's status -> unum's word (docs/history.md)
_STATUS_SPAN = re.compile(r"<span id='status' class='status [^']*'>([^<]*)</span>")


class Readers:
    """The readers of one store (module docstring); `port`: the running console's."""

    def __init__(self, store: Store, store_url: str, port: int, env: Mapping[str, str] | None = None) -> None:
        self.store, self.store_url, self.port = store, store_url, port
        self.env = {**os.environ, **(env or {})}

    def _cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "builder", *args, "--store", self.store_url], cwd=REPO,
                              capture_output=True, text=True, timeout=CLI_TIMEOUT, check=False, env=self.env)

    def _get(self, path: str) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=HTTP_TIMEOUT) as answer:
            return str(answer.read().decode())

    def says(self, workflows: list[str], arns: Mapping[str, str] | None = None,
             sfn: Any = None) -> dict[str, dict[str, str]]:
        """What every reader says of each of `workflows` (reader name -> status word); `arns`
        names the serve execution of a workflow started through serve, asked through `sfn` (a
        boto3 Step Functions client at that serve)."""
        from urllib.parse import quote

        listed = self._cli("list", "--json")
        assert listed.returncode == 0, listed.stderr
        rows = {row["workflow"]: row["status"] for row in json.loads(listed.stdout)}
        with ThreadPoolExecutor(max_workers=CLI_PARALLEL) as pool:
            inspected = dict(zip(workflows, pool.map(lambda w: self._cli("inspect", w), workflows), strict=True))
        said: dict[str, dict[str, str]] = {}
        for workflow in workflows:
            shown = inspected[workflow]
            status = json.loads(shown.stdout)["status"]
            expected_exit = 0 if status in ("succeeded", "running", "waiting", "interrupted") else 1
            assert shown.returncode == expected_exit, (workflow, shown.returncode, shown.stderr)
            history = json.loads(self._get(f"/api/history?w={quote(workflow)}"))
            page = self._get(f"/fragment/workflow?w={quote(workflow)}")
            drawn = _STATUS_SPAN.search(page)
            assert drawn is not None, page[:400]
            said[workflow] = {"read_outcome": str(read_outcome(self.store, workflow).status), "inspect": status,
                              "history": history["status"], "list": rows.get(workflow, "absent"),
                              "console-json": json.loads(self._get(f"/api/workflow?w={quote(workflow)}"))["status"],
                              "console-page": drawn.group(1)}
            if arns and workflow in arns and sfn is not None:
                described = sfn.describe_execution(executionArn=arns[workflow])
                said[workflow]["DescribeExecution"] = AWS_WORDS[described["status"]]
        return said

    def one_ending(self, workflows: list[str], arns: Mapping[str, str] | None = None,
                   sfn: Any = None) -> dict[str, str]:
        """Assert every reader says the same of each workflow; returns workflow -> that word."""
        said = self.says(workflows, arns, sfn)
        for workflow, words in said.items():
            assert len(set(words.values())) == 1, f"readers disagree on {workflow}: {words}"
        return {workflow: next(iter(words.values())) for workflow, words in said.items()}


@contextmanager
def every_reader(store: Store, store_url: str, env: Mapping[str, str] | None = None) -> Iterator[Readers]:
    """The readers of `store` (reached by the CLI and the console at `store_url`), the console
    running for the block."""
    with running_ui(store_url, env=env) as port:
        yield Readers(store, store_url, port, env)
