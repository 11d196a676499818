"""Executions through the Step Functions API (`python -m builder serve`) side by side with the
CLI path (`python -m builder run statemachine.json`), in one run, on a 10-state chain and a
100-item map.

    python bench/serve.py [--runs 10] [--clients 8] [--out bench/serve-report.txt]

Per workload:
- API latency: StartExecution, then DescribeExecution every 5 ms until SUCCEEDED, one
  execution at a time through a boto3 client (median and spread of `--runs`), with the
  requests each execution took;
- API throughput: `--clients` threads, each its own boto3 client, starting and polling
  executions for the same total count: executions per second;
- CLI: `python -m builder run` of the same state machine as a fresh process per execution (what
  a script or a test suite calling the CLI pays: interpreter start, compile, run), median.
The ratio CLI / API is what keeping one server up saves per execution. Times are for reading;
nothing asserts on them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from builder.serve.app import Serving, Settings  # noqa: E402

ROLE = "arn:aws:iam::123456789012:role/bench"
POLL = 0.005
HANDLER = "def handler(event, context):\n    return {'n': event.get('n', 0) + 1}\n"


def chain(states: int) -> dict[str, Any]:
    names = [f"Step{i}" for i in range(states)]
    return {"StartAt": names[0], "States": {
        name: {"Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Inc",
               **({"Next": names[i + 1]} if i + 1 < states else {"End": True})} for i, name in enumerate(names)}}


def item_map() -> dict[str, Any]:
    return {"StartAt": "Each", "States": {"Each": {
        "Type": "Map", "ItemsPath": "$.items", "End": True,
        "ItemProcessor": {"StartAt": "Work", "States": {"Work": {
            "Type": "Task", "Resource": "arn:aws:lambda:us-east-1:123456789012:function:Inc", "End": True}}}}}}


WORKLOADS = {
    "chain-10": (chain(10), {"n": 0}),
    "map-100": (item_map(), {"items": [{"n": i} for i in range(100)]}),
}


def client(url: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client("stepfunctions", endpoint_url=url, region_name="us-east-1", aws_access_key_id="bench",
                        aws_secret_access_key="bench", config=Config(retries={"max_attempts": 1}))


def one_execution(sfn: Any, machine_arn: str, input_value: Any) -> tuple[float, int]:
    """(seconds from StartExecution to a DescribeExecution that says SUCCEEDED, requests made)."""
    began = time.perf_counter()
    arn = sfn.start_execution(stateMachineArn=machine_arn, input=json.dumps(input_value))["executionArn"]
    requests = 1
    while True:
        requests += 1
        status = sfn.describe_execution(executionArn=arn)["status"]
        if status != "RUNNING":
            break
        time.sleep(POLL)
    if status != "SUCCEEDED":
        raise SystemExit(f"bench: an execution ended {status}")
    return time.perf_counter() - began, requests


def throughput(url: str, machine_arn: str, input_value: Any, total: int, clients: int) -> float:
    """Executions per second with `clients` threads sharing `total` executions."""
    counts = [total // clients + (1 if i < total % clients else 0) for i in range(clients)]
    errors: list[BaseException] = []

    def work(count: int) -> None:
        sfn = client(url)
        try:
            for _ in range(count):
                one_execution(sfn, machine_arn, input_value)
        except BaseException as exc:  # noqa: BLE001 - reported after the join
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in counts]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    elapsed = time.perf_counter() - began
    if errors:
        raise SystemExit(f"bench: {errors[0]}")
    return total / elapsed


def cli_execution(definition: Path, functions: Path, input_value: Any, store: Path) -> float:
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "builder", "run", str(definition), "--functions", str(functions),
                           "--store", str(store), "--input", json.dumps(input_value)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"bench: run failed: {done.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - began


def spread(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f} ms (min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--out", default=str(REPO / "bench" / "serve-report.txt"))
    args = parser.parse_args()
    lines = [f"# serve vs run, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; Python "
             f"{platform.python_version()}, {os.cpu_count()} CPUs; {args.runs} runs, {args.clients} clients"]
    with tempfile.TemporaryDirectory(prefix="unum-bench-serve-") as tmp:
        root = Path(tmp)
        functions = root / "functions" / "Inc"
        functions.mkdir(parents=True)
        (functions / "app.py").write_text(HANDLER)
        server = Serving(Settings(store=str(root / "serve.db"), state_dir=str(root / "serve"),
                                  functions=str(root / "functions"), port=0)).start()
        try:
            sfn = client(server.url)
            for name, (definition, input_value) in WORKLOADS.items():
                text = json.dumps(definition)
                arn = sfn.create_state_machine(name=name, definition=text, roleArn=ROLE)["stateMachineArn"]
                one_execution(sfn, arn, input_value)  # warm: the compiled folder and the platform
                api = [one_execution(sfn, arn, input_value) for _ in range(args.runs)]
                per_second = throughput(server.url, arn, input_value, args.runs * args.clients, args.clients)
                source = root / f"{name}.json"
                source.write_text(text)
                cli = [cli_execution(source, root / "functions", input_value, root / f"cli-{name}.db")
                       for _ in range(max(3, args.runs // 2))]
                api_times = [t for t, _ in api]
                lines += [f"\n## {name}",
                          f"API  StartExecution -> SUCCEEDED: {spread(api_times)}; "
                          f"{statistics.median(r for _, r in api):.0f} requests per execution (polling every "
                          f"{POLL * 1000:g} ms)",
                          f"API  {args.clients} clients: {per_second:.1f} executions/s",
                          f"CLI  python -m builder run:      {spread(cli)}",
                          f"ratio CLI / API latency (medians): {statistics.median(cli) / statistics.median(api_times):.1f}"]
        finally:
            server.close()
    report = "\n".join(lines) + "\n"
    print(report, end="")
    Path(args.out).write_text(report)


if __name__ == "__main__":
    main()
