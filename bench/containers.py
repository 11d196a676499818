"""Container benchmarks for the AWS path (needs the Docker engine; builds what is missing).

    python bench/containers.py [--quick] [--out bench/report-containers.txt]

a. Image size: the unum base image, and what one function adds on top of it.
b. Cold start added by the entrypoint, inside the function image: importing awslambdaric alone,
   the Lambda adapter (`unum_entry.platforms.aws_lambda` + awslambdaric; the difference is the
   runtime's own import cost on top of the SDK), the Cloud Run adapter
   (`unum_entry.platforms.cloud_run` + functions-framework), and the whole init phase (IR,
   handler, boto3 DynamoDB and Lambda clients), each over a bare `python3 -c pass`. Every case
   is a fresh process, the cases interleaved (a busy moment slows all alike); medians of the wall
   time and of the process's CPU time (user + system), which a shared machine disturbs less.
c. Warm time per transition of the chain workflow (3 functions): function containers under the
   RIE behind the local Invoke endpoint, against the same workflow in-process (LocalPlatform),
   both on DynamoDB (moto). Reported as milliseconds per transition and their ratio.
d. Rebuilding one function image after its code changed (the code + IR layer only).
No asserts: numbers to read. Run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from builder.local_stack.lambda_containers import lambda_container_config, wait_for_rie  # noqa: E402
from builder.image.build import build_images, docker_client, ensure_base  # noqa: E402
from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint  # noqa: E402
from builder.local_stack.process import MotoServer  # noqa: E402
from unum_entry.invokers.aws_lambda import build_client  # noqa: E402
from unum_entry.local.platform import local_platform  # noqa: E402
from unum_entry.runtime import new_workflow  # noqa: E402
from unum_entry.stores import open_store  # noqa: E402
from unum_entry.workflow import load_workflow  # noqa: E402

CHAIN = REPO / "images" / "chain"
OS_IMAGE = os.environ.get("UNUM_TEST_BASE_OS_IMAGE", "local/debian-python:bookworm")

_COLD_PROBE = r"""
import json, os, statistics, subprocess, sys, time
n = int(sys.argv[1])
init = ("import os; os.environ.update(UNUM_STORE='dynamodb://bench-table?endpoint=http://127.0.0.1:1&region=us-east-1', "
        "UNUM_INVOKER='lambda://?endpoint=http://127.0.0.1:1'); "
        "from unum_entry.platforms.common import FunctionSettings, load_function; "
        "load_function(FunctionSettings.from_env(os.environ)); import awslambdaric.bootstrap")
cases = {"bare": "pass", "awslambdaric": "import awslambdaric.bootstrap",
         "adapter": "import unum_entry.platforms.aws_lambda, awslambdaric.bootstrap",
         "cloud_run": "import unum_entry.platforms.cloud_run, functions_framework", "init": init}
def run(code):
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code])
    _, status, usage = os.wait4(child.pid, 0)
    if status:
        raise SystemExit(f"cold probe failed: {code}")
    return (time.perf_counter() - start) * 1000, (usage.ru_utime + usage.ru_stime) * 1000
for code in cases.values():
    run(code)  # warm the page cache
wall, cpu = {name: [] for name in cases}, {name: [] for name in cases}
for _ in range(n):
    for name, code in cases.items():
        w, c = run(code)
        wall[name].append(w)
        cpu[name].append(c)
print(json.dumps({"wall": {k: statistics.median(v) for k, v in wall.items()},
                  "cpu": {k: statistics.median(v) for k, v in cpu.items()}}))
"""


def image_sizes(client, base_tag: str, function_tag: str) -> dict[str, float]:
    base = client.images.get(base_tag).attrs["Size"]
    function = client.images.get(function_tag).attrs["Size"]
    return {"base_mb": base / 1e6, "function_added_kb": (function - base) / 1e3}


def cold_start(client, function_tag: str, runs: int) -> dict[str, dict[str, float]]:
    output = client.containers.run(function_tag, entrypoint=["python3", "-c", _COLD_PROBE, str(runs)],
                                   network_mode="host", remove=True, environment={"UNUM_FUNCTION_DIR": "/var/task"})
    return json.loads(output.decode().strip().splitlines()[-1])


def warm_transitions(client, tags: dict[str, str], runs: int) -> dict[str, float]:
    workflow = load_workflow(CHAIN)
    transitions = len(workflow.functions)  # a chain of 3: 3 committed invocations per run
    with MotoServer() as moto, AsyncInvokeEndpoint() as endpoint:
        url = f"dynamodb://bench-{uuid.uuid4().hex[:8]}?endpoint={moto.endpoint}&region=us-east-1"
        store = open_store(url + "&create=1")
        env = {"UNUM_STORE": url, "UNUM_INVOKER": f"lambda://?endpoint={endpoint.endpoint}", "UNUM_LOG_LEVEL": "WARNING"}
        containers = []
        try:
            for name in workflow.functions:
                config = lambda_container_config(tags[name], function_name=name, environment=env)
                containers.append(client.containers.run(detach=True, **config.run_kwargs()))
                wait_for_rie(containers[-1], config)
                endpoint.register(name, config.ports.invoke_url)
            lam = build_client(endpoint=endpoint.endpoint, region="us-east-1")

            def one() -> float:
                start = time.perf_counter()
                lam.invoke(FunctionName=workflow.entry, InvocationType="Event",
                           Payload=json.dumps(new_workflow({"name": "bench"}).to_wire()))
                endpoint.wait_idle(60)
                return time.perf_counter() - start

            one()  # warm every container (first invoke runs the init phase)
            container_times = [one() for _ in range(runs)]
        finally:
            for container in containers:
                container.remove(force=True)
        with local_platform(workflow, store, workers=4) as platform:
            platform.run({"name": "warm"}, timeout=60)
            local_times = []
            for _ in range(runs):
                start = time.perf_counter()
                platform.run({"name": "bench"}, timeout=60)
                local_times.append(time.perf_counter() - start)
        store.close()
    containers_ms = statistics.median(container_times) / transitions * 1000
    local_ms = statistics.median(local_times) / transitions * 1000
    return {"containers_ms": containers_ms, "in_process_ms": local_ms, "ratio": containers_ms / local_ms}


def rebuild_after_code_change(client, base: str) -> float:
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="unum-bench-") as tmp:
        folder = Path(tmp) / "chain"
        shutil.copytree(CHAIN, folder)
        build_images(client, folder, base_tag=base, tag_prefix="unum-bench-rebuild/", functions=["Shout"],
                     progress=lambda line: None)
        app = folder / "Shout" / "app.py"
        app.write_text(app.read_text() + f"\n# changed {uuid.uuid4().hex}\n")
        start = time.perf_counter()
        build_images(client, folder, base_tag=base, tag_prefix="unum-bench-rebuild/", functions=["Shout"],
                     progress=lambda line: None)
        return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cold-runs", type=int, default=None, help="fresh processes per cold-start case "
                        "(default 15, --quick 5)")
    parser.add_argument("--out", default=str(REPO / "bench" / "report-containers.txt"))
    args = parser.parse_args()
    client = docker_client()
    # Rebuilt every run (cached steps are cheap): the image must hold this checkout's runtime.
    base = ensure_base(client, base_image=OS_IMAGE, rebuild=True, progress=lambda line: None)
    tags = {b.function: b.tag for b in build_images(client, CHAIN, base_tag=base, tag_prefix="unum-bench/",
                                                    progress=lambda line: None)}
    runs = 3 if args.quick else 10
    cold_runs = args.cold_runs or (5 if args.quick else 15)
    sizes = image_sizes(client, base, tags["Hello"])
    cold = cold_start(client, tags["Hello"], cold_runs)
    warm = warm_transitions(client, tags, runs)
    rebuild = rebuild_after_code_change(client, base)
    driver = client.info().get("Driver", "?")
    wall, cpu = cold["wall"], cold["cpu"]

    def over(case: str, width: int = 8) -> str:
        return f"{wall[case] - wall['bare']:{width}.1f} ms   cpu {cpu[case] - cpu['bare']:7.1f} ms"

    lines = [
        f"unum container bench ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
        f"base on {OS_IMAGE}, {runs} runs ({cold_runs} for cold start), medians)",
        "",
        "a. image size",
        f"   unum base image            {sizes['base_mb']:8.1f} MB",
        f"   one function adds          {sizes['function_added_kb']:8.1f} kB   (code + IR, one layer)",
        "",
        "b. cold start inside the image (process start to exit, over `python3 -c pass`; wall, and the process's CPU)",
        f"   bare python3               {wall['bare']:8.1f} ms   cpu {cpu['bare']:7.1f} ms",
        f"   + awslambdaric alone       {over('awslambdaric')}",
        f"   + Lambda adapter imports   {over('adapter')}   (unum_entry.platforms.aws_lambda, awslambdaric)",
        f"     unum's own share         {wall['adapter'] - wall['awslambdaric']:8.1f} ms   "
        f"cpu {cpu['adapter'] - cpu['awslambdaric']:7.1f} ms   (the adapter line minus awslambdaric alone)",
        f"   + Cloud Run adapter imports {over('cloud_run', 7)}   (unum_entry.platforms.cloud_run, functions_framework)",
        f"   + whole init phase         {over('init')}   (IR, handler, boto3 DynamoDB + Lambda clients)",
        "",
        "c. warm time per transition, chain of 3, DynamoDB on moto",
        f"   containers (RIE + endpoint) {warm['containers_ms']:7.1f} ms",
        f"   in-process (LocalPlatform)  {warm['in_process_ms']:7.1f} ms",
        f"   ratio                       {warm['ratio']:7.1f} x",
        "",
        f"d. rebuild of one function image after a code change ({driver} storage)",
        f"   seconds                     {rebuild:7.2f} s",
    ]
    report = "\n".join(lines) + "\n"
    print(report, end="")
    Path(args.out).write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
