"""The cost of a durable timer (a Wait, a Task timeout, the per-workflow deadline watchdog), in
requests counted at the wire on the local stacks, and in dollars at list prices, next to what a
Wait costs in Step Functions.

    python bench/timers.py [--timers 40] [--out bench/timers-report.txt]

AWS: `LambdaInvoker.invoke_at` against moto's EventBridge Scheduler API (requests counted by
botocore's event hooks on the invoker's own scheduler client), the local stack's firing loop, the
local Invoke endpoint and a recording function (deliveries counted at its HTTP server). GCP:
`PubSubInvoker.invoke_at` against gcloud-tasks-emulator (CreateTask calls counted on the
client) and the Pub/Sub emulator pushing to a recording endpoint (deliveries counted at its HTTP
server). Every timer is armed twice, as two executions of one function would arm it (a duplicate
delivery): the second arming must not add a delivery where the service de-duplicates by name.
Needs the local stack (moto; the GCP emulators and localstack/setup.d/35-cloud-tasks-emulator.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from builder.local_stack.http_server import BackgroundHttpServer  # noqa: E402
from unum_entry.naming import timer_name  # noqa: E402

# List prices (us-east-1 / us-central1, November 2026), per million.
PRICES = {
    "scheduler_invocation": 1.00,    # EventBridge Scheduler, after 14 M free invocations a month; creating schedules is free
    "lambda_request": 0.20,          # Lambda requests
    "sfn_transition": 25.00,         # Step Functions Standard, per state transition (a Wait state is one)
    "cloud_tasks_operation": 0.40,   # Cloud Tasks: every API call and every push delivery attempt (first 1 M free)
    "pubsub_message_kib": 40.00 * 1e6 / 2**30,  # Pub/Sub $40/TiB, 1 KiB minimum per publish and per push
    "cloud_run_request": 0.40,       # Cloud Run requests
    "sqs_request": 0.40,             # SQS standard queue requests (the <= 15 min alternative)
}


class Recorder:
    """An HTTP endpoint that counts deliveries (a Lambda RIE or a Pub/Sub push endpoint)."""

    def __init__(self, reply: bytes = b'{"ok": true}') -> None:
        self.count = 0
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with owner.lock:
                    owner.count += 1
                    owner.bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = BackgroundHttpServer(Handler, name="bench-recorder").start()

    def wait(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.count < count and time.monotonic() < deadline:
            time.sleep(0.1)


def _envelope(i: int) -> dict[str, Any]:
    return {"unum": 1, "workflow": f"wf-bench-{i}", "function": "Later", "value": i}


def measure_aws(timers: int) -> dict[str, Any]:
    from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint
    from builder.local_stack.process import MotoServer
    from builder.local_stack.scheduler_loop import SchedulerFiringLoop
    from unum_entry.invokers.aws_lambda import LambdaInvoker, build_client

    calls: Counter[str] = Counter()
    with MotoServer() as moto, AsyncInvokeEndpoint() as endpoint:
        rie = Recorder()
        endpoint.register("Later", rie.server.url + "/2015-03-31/functions/function/invocations")
        scheduler = build_client(endpoint=moto.endpoint, region="us-east-1", service="scheduler")
        scheduler.create_schedule_group(Name="bench")
        counted = build_client(endpoint=moto.endpoint, region="us-east-1", service="scheduler")
        counted.meta.events.register("before-call.scheduler.*", lambda model, **_: calls.update([model.name]))
        counted.meta.events.register("after-call-error.scheduler.*", lambda **kw: calls.update(["error"]))

        def conflict(parsed: Any = None, model: Any = None, **_: Any) -> None:
            if isinstance(parsed, dict) and parsed.get("Error", {}).get("Code") == "ConflictException":
                calls.update(["ConflictException"])

        counted.meta.events.register("after-call.scheduler.*", conflict)
        invoker = LambdaInvoker.from_url(
            f"lambda://?endpoint={endpoint.endpoint}&scheduler_endpoint={moto.endpoint}"
            "&schedule_role=arn:aws:iam::123456789012:role/bench&schedule_group=bench", scheduler_client=counted)
        when = time.time() + 3
        for i in range(timers):
            for _ in range(2):  # two executions arm the same timer
                invoker.invoke_at(when, "Later", _envelope(i), name=timer_name(f"wf-bench-{i}", "wait"))
        loop = SchedulerFiringLoop(scheduler, build_client(endpoint=endpoint.endpoint, region="us-east-1"),
                                   group="bench", interval=0.2)
        with loop:
            rie.wait(timers, timeout=120)
            time.sleep(1.0)
        endpoint.wait_idle(30)
        rie.server.stop()
    return {"timers": timers, "armings": 2 * timers, "create_schedule": calls["CreateSchedule"],
            "conflicts": calls["ConflictException"], "deliveries": rie.count,
            "fired": loop.stats["fired"]}


def measure_gcp(timers: int) -> dict[str, Any]:
    from builder.local_stack.gcp import PubSubEmulator
    from builder.local_stack.gcp.cloud_tasks import CloudTasksEmulator
    from unum_entry.invokers.pubsub import PubSubInvoker, subscription_name, topic_name

    creates: Counter[str] = Counter()
    with PubSubEmulator() as pubsub, CloudTasksEmulator() as tasks:
        os.environ.update(pubsub.env())
        os.environ.update(tasks.env())
        queue = f"projects/{pubsub.project}/locations/local/queues/bench"
        tasks.create_queue(queue)
        push = Recorder(reply=b"")
        prefix = "bench-"
        pubsub.create_topic(topic_name(prefix, "Later"))
        pubsub.create_push_subscription(subscription_name(prefix, "Later"), topic_name(prefix, "Later"),
                                        push.server.url + "/pubsub")
        client = tasks.client()

        class CountingTasks:
            def create_task(self, **kwargs: Any) -> Any:
                creates.update(["CreateTask"])
                try:
                    return client.create_task(**kwargs)
                except Exception as exc:
                    creates.update([type(exc).__name__])
                    raise

        invoker = PubSubInvoker(pubsub.project, prefix=prefix, tasks_queue=queue, tasks_client=CountingTasks())
        when = time.time() + 3
        for i in range(timers):
            for _ in range(2):
                invoker.invoke_at(when, "Later", _envelope(i), name=timer_name(f"wf-bench-{i}", "wait"))
        push.wait(2 * timers, timeout=120)
        time.sleep(2.0)
        push.server.stop()
    return {"timers": timers, "armings": 2 * timers, "create_task": creates["CreateTask"],
            "already_exists": creates["AlreadyExists"], "deliveries": push.count}


def dollars(aws: dict[str, Any], gcp: dict[str, Any]) -> list[tuple[str, float, str]]:
    """($ per million) lines: a timer that fires, per platform, and Step Functions' Wait."""
    p = PRICES
    eb = p["scheduler_invocation"] + p["lambda_request"]
    # Cloud Tasks: the CreateTask of each arming (a duplicate's refused call is billed too) and one
    # push attempt; then the Pub/Sub publish and push (1 KiB minimum each) and the Cloud Run request.
    ct_ops = (gcp["create_task"] / gcp["timers"]) + 1
    ct = ct_ops * p["cloud_tasks_operation"] + 2 * p["pubsub_message_kib"] + p["cloud_run_request"]
    ct_single = 2 * p["cloud_tasks_operation"] + 2 * p["pubsub_message_kib"] + p["cloud_run_request"]
    sqs = 3 * p["sqs_request"] + p["lambda_request"]
    return [
        ("AWS, EventBridge Scheduler: 1 invocation + 1 Lambda request (CreateSchedule is free)", eb,
         "beyond 14 M invocations/month; $0.20 within the free tier"),
        ("AWS, SQS DelaySeconds (<= 15 min): send + receive + delete + 1 Lambda request", sqs,
         "unbatched; $0.68 with full batches of 10, plus the event source's idle polls; not used"),
        ("GCP, Cloud Tasks, one arming: CreateTask + push, Pub/Sub publish+push, Cloud Run request", ct_single, ""),
        (f"GCP, Cloud Tasks, armed twice as measured ({ct_ops:.0f} operations)", ct, ""),
        ("Step Functions Standard, a Wait state: 1 state transition", p["sfn_transition"], "waiting itself is free"),
    ]


def report(aws: dict[str, Any], gcp: dict[str, Any]) -> str:
    lines = [f"# Durable timers: requests at the wire and dollars (python {platform.python_version()}, "
             f"{os.cpu_count()} CPUs)", "",
             f"AWS (moto scheduler + firing loop + local Invoke endpoint): {aws['timers']} timers, each armed twice",
             f"  CreateSchedule requests {aws['create_schedule']} ({aws['create_schedule'] / aws['timers']:.1f}/timer), "
             f"of which ConflictException (already armed) {aws['conflicts']}",
             f"  deliveries to the function {aws['deliveries']} ({aws['deliveries'] / aws['timers']:.2f}/timer)",
             f"GCP (gcloud-tasks-emulator + Pub/Sub emulator push): {gcp['timers']} timers, each armed twice",
             f"  CreateTask requests {gcp['create_task']} ({gcp['create_task'] / gcp['timers']:.1f}/timer), "
             f"AlreadyExists {gcp['already_exists']}",
             f"  deliveries to the function {gcp['deliveries']} ({gcp['deliveries'] / gcp['timers']:.2f}/timer)"
             + ("  <- the emulator does not de-duplicate task names; Cloud Tasks does (one delivery)"
                if gcp["deliveries"] > gcp["timers"] else ""),
             "", "$ per million timers that fire (list prices; the woken function's own work not included):"]
    for label, value, note in dollars(aws, gcp):
        lines.append(f"  {value:7.2f}  {label}" + (f"  [{note}]" if note else ""))
    priced = dollars(aws, gcp)
    lines += ["", f"The deadline watchdog is one such timer per workflow: ${priced[0][1]:.2f}/M on AWS, "
              f"${priced[2][1]:.2f}/M on GCP, plus its run when it fires (the entry function for a few ms: "
              "one batch read of the workflow's two ending records, and a scan only when it has not ended)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timers", type=int, default=40)
    parser.add_argument("--out", default=str(Path(__file__).with_name("timers-report.txt")))
    args = parser.parse_args(argv)
    aws = measure_aws(args.timers)
    gcp = measure_gcp(args.timers)
    text = report(aws, gcp)
    print(text, end="")
    Path(args.out).write_text(text)
    print(json.dumps({"aws": aws, "gcp": gcp}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
