"""Measurements of bench/paper: the paper's apps on the embedded platform (file store, DynamoDB
on moto with requests counted at the wire by bench/wire.py's DynamoWire) and in Lambda
containers, the per-transition overhead by result size, fan-out + fan-in by branching degree,
and ExCamera's two versions side by side. Models live in model.py; the report in run.py."""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.paper.model import Invocation
from bench.run import (
    RecordingInvoker,
    bare,
    chain,
    envelopes,
    make_runtime,
    map_aggregate,
    time_calls,
    write_workflow,
)
from bench.wire import DynamoWire, counted_dynamodb
from unum_entry.local.platform import LocalPlatform
from unum_entry.runtime import new_workflow
from unum_entry.stores import open_store
from unum_entry.stores.base import Kind, Store
from unum_entry.stores.counting import CountingStore
from unum_entry.stores.memory import MemoryStore
from unum_entry.workflow import Workflow, load_workflow

REPO = Path(__file__).resolve().parents[2]  # imported as bench.paper.measure, so already on sys.path
IMAGES = REPO / "images"


# ---- the apps --------------------------------------------------------------------------------

@dataclass(frozen=True)
class App:
    """One row of Table 2: what unum runs, the state machine Step Functions would run."""

    key: str                  # the paper's name (Table 2)
    label: str
    unum: Path                # workflow folder or state machine file, as `builder run` takes it
    statemachine: Path        # the Step Functions definition the SFN cost is computed from
    memory_mb: int = 128      # the paper's Lambda memory (§5.1: 128 MB, ExCamera 3 GB)
    quick_input: Mapping[str, Any] | None = None  # replaces input.json in --quick
    full_input: Mapping[str, Any] | None = None   # replaces input.json in the full run
    sfn_runs_from: str | None = None  # another App label whose measured Task runs give the SFN count
    uses_objects: bool = False  # passes bulk data through a bucket (input field "objects": app_objects.py)

    @property
    def folder(self) -> Path:
        return self.unum if self.unum.is_dir() else self.unum.parent

    def input(self, quick: bool, objects: str | None = None) -> Any:
        """The app's input.json with the mode's replacements, and the bucket its data goes through."""
        base = json.loads((self.folder / "input.json").read_text())
        extra = self.quick_input if quick else self.full_input
        given = {**base, **extra} if extra else base
        return {**given, "objects": objects} if self.uses_objects and objects else given

    def expected(self, quick: bool) -> Any | None:
        """The checked result, when the input is the app's own input.json."""
        if (self.quick_input if quick else self.full_input):
            return None
        path = self.folder / "expected.json"
        return json.loads(path.read_text()) if path.is_file() else None


APPS = (
    App("IoT Pipeline", "IoT pipeline (SFN, compiled)", IMAGES / "iot-pipeline-sfn" / "statemachine.json",
        IMAGES / "iot-pipeline-sfn" / "statemachine.json"),
    App("Text Processing", "Text processing (SFN, compiled)", IMAGES / "text-processing-sfn" / "statemachine.json",
        IMAGES / "text-processing-sfn" / "statemachine.json"),
    App("Wordcount", "Wordcount (SFN, compiled)", IMAGES / "wordcount" / "statemachine.json",
        IMAGES / "wordcount" / "statemachine.json", quick_input={"mappers": 32, "reducers": 25, "corpus_fraction": 0.05},
        uses_objects=True),
    App("ExCamera", "ExCamera (hand-written IR, neighbour)", IMAGES / "excamera",
        IMAGES / "excamera-sfn" / "statemachine.json", memory_mb=3072,
        full_input={"seconds": 8, "width": 320, "height": 180}, sfn_runs_from="ExCamera Map", uses_objects=True),
    App("ExCamera Map", "ExCamera (SFN Map version, compiled)", IMAGES / "excamera-sfn" / "statemachine.json",
        IMAGES / "excamera-sfn" / "statemachine.json", memory_mb=3072,
        full_input={"seconds": 8, "width": 320, "height": 180}, uses_objects=True),
)


_compiled: dict[Path, Path] = {}


def workflow_folder(app: App) -> Path:
    """The runnable workflow folder: the app's own, or the state machine compiled (once)."""
    if app.unum.is_dir():
        return app.unum
    if app.unum not in _compiled:
        from builder.compiler import compile_state_machine

        out = Path(tempfile.mkdtemp(prefix="unum-paper-")) / app.unum.parent.name
        compile_state_machine(app.unum, out)
        _compiled[app.unum] = out
    return _compiled[app.unum]


# ---- an instrumented local platform -----------------------------------------------------------

def chunk_index(function: str, event: Any) -> int | None:
    """ExCamera's chunk index of an event (Split and Assemble: -1); None for other apps."""
    if function in ("Split", "Assemble"):
        return -1
    if isinstance(event, list) and event:
        return chunk_index(function, event[0])
    if isinstance(event, dict):
        if "__unum_asl__" in event:  # a compiled Task's handler gets its state input wrapped
            return chunk_index(function, event.get("input"))
        if isinstance(event.get("own"), dict):
            return chunk_index(function, event["own"])
        if isinstance(event.get("chunk"), dict):
            return chunk_index(function, event["chunk"])
        if isinstance(event.get("index"), int):
            return event["index"]
    return None


class TimedPlatform(LocalPlatform):
    """The local platform, recording per delivery the handler's and the whole delivery's thread
    CPU and wall time, and the invokes it sent (model.Invocation)."""

    def __init__(self, workflow: Workflow, store: Store, **kwargs: Any) -> None:
        self._local = threading.local()
        self._records_lock = threading.Lock()
        self.invocations: list[Invocation] = []
        super().__init__(workflow, store, wrap=self._wrap, **kwargs)
        for name, runtime in self.runtimes.items():
            runtime.handle = self._timed_handle(name, runtime.handle)  # type: ignore[method-assign]

    def _wrap(self, name: str, handler: Any) -> Any:
        local = self._local

        def timed(event: Any, context: Any) -> Any:
            c0, w0 = time.thread_time(), time.perf_counter()
            try:
                return handler(event, context)
            finally:
                c1, w1 = time.thread_time(), time.perf_counter()
                h = getattr(local, "h", None)
                if h is not None:
                    h[0] += c1 - c0
                    h[1] += w1 - w0
                    h[2], h[3], h[4] = w0, w1, chunk_index(name, event)

        return timed

    def _timed_handle(self, name: str, handle: Any) -> Any:
        local = self._local

        def timed(env: Any) -> Any:
            local.h = [0.0, 0.0, 0.0, 0.0, None]
            c0, w0 = time.thread_time(), time.perf_counter()
            report = handle(env)
            c1, w1 = time.thread_time(), time.perf_counter()
            h = local.h
            inv = Invocation(name, h[0], h[1], c1 - c0, w1 - w0, report.invoked if report is not None else 0,
                             h[2], h[3], h[4], committed=bool(report is not None and report.created))
            with self._records_lock:
                self.invocations.append(inv)
            return report

        return timed

    def take(self) -> list[Invocation]:
        with self._records_lock:
            taken, self.invocations = self.invocations, []
        return taken


class LatencyStore(CountingStore):
    """CountingStore that also sleeps `latency` seconds per store request (one sleep per call:
    a batch read is one request), standing in for a datastore's round trip."""

    def __init__(self, inner: Store, latency: float) -> None:
        super().__init__(inner)
        self.latency = latency

    def _count(self, kind: str, n: int = 1) -> None:
        if kind not in ("transact_item", "sweep"):
            time.sleep(self.latency)
        super()._count(kind, n)


def load_average() -> tuple[float, float, float]:
    try:
        return os.getloadavg()
    except OSError:
        return (float("nan"),) * 3


# ---- apps on the embedded platform -----------------------------------------------------------

@dataclass
class WireCounts:
    """What a DynamoWire counted, as plain data (picklable): requests by operation, write units
    by item kind, read units."""

    requests: Counter[str]
    write_units: Counter[str]
    read_units: int

    @classmethod
    def of(cls, wire: DynamoWire) -> WireCounts:
        return cls(Counter(wire.requests), Counter(wire.write_units), wire.read_units)


@dataclass
class AppRuns:
    """Runs of one app on one store."""

    app: App
    store: str
    seconds: list[float]
    invocations: list[Invocation]          # every delivery of the measured runs
    runs: int
    checked: str                           # "matches expected.json" / "not checked (...)"
    wire: WireCounts | None = None
    stats: Counter[str] = field(default_factory=Counter)
    objects_written: float = 0.0           # objects put in the bucket per execution (S3 PUTs)
    object_bytes: float = 0.0              # their bytes per execution

    def per_run(self, n: float) -> float:
        return n / self.runs

    def task_runs(self) -> dict[str, int]:
        """Committed invocations per function, per execution."""
        counts = Counter(inv.function for inv in self.invocations if inv.committed)
        return {k: round(v / self.runs) for k, v in counts.items()}


def _check(app: App, quick: bool, result: Any) -> str:
    want = app.expected(quick)
    if want is None:
        return "not checked (reduced input: no expected.json for it)"
    if result != want:
        raise RuntimeError(f"{app.label}: result differs from {app.folder / 'expected.json'}: "
                           f"{json.dumps(result)[:300]}")
    return "matches expected.json"


def run_app(app: App, store: Store, *, runs: int, quick: bool, workers: int = 8, wire: DynamoWire | None = None,
            label: str = "file", timeout: float = 900, warmup: bool = True) -> AppRuns:
    """One warm-up run (not counted; `warmup`), then `runs` timed runs; each result checked. A
    data-heavy app's bucket is a fresh local folder (the embedded platform's stand-in for S3);
    the objects the timed runs wrote are counted."""
    with tempfile.TemporaryDirectory(prefix="unum-paper-objects-") as bucket:
        return _run_app(app, store, runs=runs, quick=quick, workers=workers, wire=wire, label=label,
                        timeout=timeout, warmup=warmup, bucket=Path(bucket))


def _folder_objects(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def _run_app(app: App, store: Store, *, runs: int, quick: bool, workers: int, wire: DynamoWire | None,
             label: str, timeout: float, warmup: bool, bucket: Path) -> AppRuns:
    workflow = load_workflow(workflow_folder(app))
    given = app.input(quick, objects=str(bucket))
    seconds: list[float] = []
    checked = ""
    paused = wire.paused if wire is not None else _nothing
    with TimedPlatform(workflow, store, workers=workers) as plat:
        if warmup:
            with paused():
                out = plat.run(given, timeout=timeout)
            _raise_if_failed(app, out, plat)
        plat.take()
        plat.stats.clear()
        before = _folder_objects(bucket)
        for _ in range(runs):
            start = time.perf_counter()
            wf = plat.start(given)
            plat.wait_idle(timeout)
            seconds.append(time.perf_counter() - start)
            with paused():
                out = plat.outcome(wf)
            _raise_if_failed(app, out, plat)
            checked = _check(app, quick, out.result)
        after = _folder_objects(bucket)
        return AppRuns(app, label, seconds, plat.take(), runs, checked, WireCounts.of(wire) if wire else None,
                       Counter(plat.stats), (after[0] - before[0]) / runs, (after[1] - before[1]) / runs)


def _raise_if_failed(app: App, out: Any, plat: LocalPlatform) -> None:
    if out.failure is not None or not out.complete:
        raise RuntimeError(f"{app.label}: workflow did not succeed: failure={out.failure} dead={plat.dead_letters[:3]}")


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def run_app_file(app: App, *, runs: int, quick: bool) -> AppRuns:
    with tempfile.TemporaryDirectory(prefix="unum-paper-store-") as tmp:
        store = open_store(tmp)
        try:
            return run_app(app, store, runs=runs, quick=quick, label="file")
        finally:
            store.close()


def run_app_dynamodb(app: App, endpoint: str, *, runs: int, quick: bool, warmup: bool = True) -> AppRuns:
    with counted_dynamodb(f"unum-paper-{uuid.uuid4().hex[:12]}", endpoint) as (store, wire):
        return run_app(app, store, runs=runs, quick=quick, wire=wire, label="dynamodb", warmup=warmup)


# ---- Lambda containers (local-aws) -----------------------------------------------------------

@dataclass
class ContainerRuns:
    app: App
    seconds: list[float]
    checked: str
    deliveries: int
    error: str | None = None


def run_app_containers(apps: Sequence[App], *, runs: dict[str, int], quick: bool,
                       log: Any = sys.stderr) -> dict[str, ContainerRuns]:
    """Each app's function images (built from this checkout, as `builder local-aws` does) under
    the RIE behind the local async Invoke endpoint, DynamoDB on moto: one warm-up run, then
    timed runs (start to the endpoint idle). One container per function (as local-aws starts
    them), so a Map's branches run one after another in their function's container."""
    from builder.local_stack.aws_stack import LocalLambdaStack
    from builder.image.build import build_images, docker_client, ensure_base
    from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint
    from builder.local_stack.process import MotoServer
    from builder.commands.local_aws import _default_base

    client = docker_client()
    base = ensure_base(client, base_image=_default_base(client), rebuild=True, progress=lambda line: None)
    out: dict[str, ContainerRuns] = {}
    for app in apps:
        print(f"  containers: {app.label} ...", file=log, flush=True)
        folder = workflow_folder(app)
        workflow = load_workflow(folder)
        try:
            images = {b.function: b.tag for b in build_images(client, folder, base_tag=base,
                                                              tag_prefix="unum-paper-bench/",
                                                              progress=lambda line: None)}
            with MotoServer() as moto, AsyncInvokeEndpoint() as endpoint:
                # the containers share no folder: the data-heavy apps' bucket is S3 on the same moto
                given = app.input(quick, objects=f"s3://paper-{uuid.uuid4().hex[:8]}?endpoint={moto.endpoint}&create=1")
                url = f"dynamodb://paper-{uuid.uuid4().hex[:8]}?endpoint={moto.endpoint}&region=us-east-1"
                with LocalLambdaStack(workflow, images, store_url=url, endpoint=endpoint) as stack:
                    stack.run(given, timeout=1800)  # warm-up: every container's init phase
                    seconds, checked = [], ""
                    before = endpoint.stats["ok"]
                    for _ in range(runs[app.key]):
                        start = time.perf_counter()
                        outcome = stack.run(given, timeout=1800)
                        seconds.append(time.perf_counter() - start)
                        if outcome.failure is not None:
                            raise RuntimeError(f"failed: {outcome.failure}")
                        checked = _check(app, quick, outcome.result)
                    deliveries = (endpoint.stats["ok"] - before) // max(1, runs[app.key])
            out[app.key] = ContainerRuns(app, seconds, checked, deliveries)
        except Exception as exc:  # reported, not fatal: the rest of the report still stands
            out[app.key] = ContainerRuns(app, [], "", 0, error=f"{type(exc).__name__}: {str(exc)[:300]}")
    return out


# ---- Figure 4: per-transition overhead by result size ----------------------------------------

@dataclass
class OverheadRow:
    size: int
    runtime_cpu_us: float      # Runtime.handle of a chain hop, process CPU, handler subtracted
    store_ms: float            # the hop's checkpoint write (conditional PutItem) on moto, median
    store_wu: float            # its write units, counted at the wire (bench/wire.py)
    invoke_ms: float           # the hop's async Invoke (boto3, Event) to a local Invoke endpoint, median
    payload_bytes: int         # the envelope it sends (values over 64 KB travel by reference)
    checkpoint_bytes: int


class _Sink(BaseHTTPRequestHandler):
    """A function container that accepts every invocation at once."""

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


def transition_overhead(sizes: Sequence[int], endpoint: str, *, iterations: int, samples: int) -> list[OverheadRow]:
    """For each result size: the runtime's CPU for a middle chain hop (F1 of F0 -> F1 -> F2:
    no read, commit, invoke F2) over MemoryStore with a recording invoker (bench/run.py's
    method); the checkpoint it commits, written again to DynamoDB on moto; the envelope it sends,
    sent again with unum's Lambda invoker to a local async Invoke endpoint."""
    from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint
    from unum_entry.invokers.aws_lambda import LambdaInvoker, build_client

    rows = []
    sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    try:
        with counted_dynamodb(f"unum-paper-fig4-{uuid.uuid4().hex[:8]}", endpoint) as (dyn, wire), \
                tempfile.TemporaryDirectory(prefix="unum-paper-fig4-") as tmp, AsyncInvokeEndpoint() as ep:
            ep.register("F2", f"http://127.0.0.1:{sink.server_address[1]}/2015-03-31/functions/function/invocations")
            invoker = LambdaInvoker(build_client(endpoint=ep.endpoint, region="us-east-1"), store=dyn)
            wf = write_workflow(Path(tmp), chain(3))
            for size in sizes:
                value = {"blob": "x" * size}
                store, inv0, inv1 = MemoryStore(), RecordingInvoker(), RecordingInvoker()
                f0, f1 = make_runtime(wf, "F0", store, inv0), make_runtime(wf, "F1", store, inv1)
                try:
                    for tag in ("warm", "cpu"):
                        n = max(3, iterations // 5) if tag == "warm" else iterations
                        for i in range(n):
                            f0.handle(new_workflow(value, f"wf-{tag}-{size}-{i}"))
                        handled = time_calls(f1.handle, envelopes(inv0.take()))
                    cpu = handled.minus(bare(f1, value, iterations)).process / iterations * 1e6
                    payload = inv1.take()[-1][1]
                    checkpoint = max((r for r in store.records() if r.kind is Kind.CHECKPOINT),
                                     key=lambda r: len(r.value))
                finally:
                    f0.close()
                    f1.close()
                store_times, invoke_times = [], []
                units_before = sum(wire.write_units.values())
                for i in range(samples):
                    key = f"c-fig4-{size}-{i}-{uuid.uuid4().hex[:6]}"
                    t0 = time.perf_counter()
                    dyn.create(key, checkpoint.value, workflow="wf-fig4", expires_at=int(time.time()) + 3600)
                    store_times.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    invoker.invoke("F2", payload)
                    invoke_times.append(time.perf_counter() - t0)
                ep.wait_idle(60)
                units = (sum(wire.write_units.values()) - units_before) / samples
                body = json.dumps(payload).encode()
                rows.append(OverheadRow(size, cpu, statistics.median(store_times) * 1000,
                                        units,
                                        statistics.median(invoke_times) * 1000, len(body), len(checkpoint.value)))
    finally:
        sink.shutdown()
    return rows


# ---- Figure 5: fan-out + fan-in by branching degree -------------------------------------------

@dataclass
class FanoutPoint:
    degree: int
    seconds: list[float]
    label: str


def fanout_latency(degrees: Sequence[int], *, repeats: int, store_latency: float, invoke_latency: float,
                   workers: int, model: bool) -> list[FanoutPoint]:
    """Split -> map Work over `degree` items -> aggregate Sum (bench/run.py's map_aggregate), on
    the local platform over a FileStore; with `model`, each store request sleeps
    `store_latency` and each invoke `invoke_latency` (LocalPlatform's invoke_latency, paid by
    the caller: the runtime's 64 dispatch threads). Start to idle, after one warm-up."""
    points = []
    with tempfile.TemporaryDirectory(prefix="unum-paper-fig5-") as tmp:
        for degree in degrees:
            wf = write_workflow(Path(tmp) / f"d{degree}-{model}", map_aggregate(degree))
            inner = open_store(str(Path(tmp) / f"store-{degree}-{model}"))
            store: Store = LatencyStore(inner, store_latency) if model else inner
            kwargs = {"invoke_latency": invoke_latency} if model else {}
            times = []
            with TimedPlatform(wf, store, workers=workers, **kwargs) as plat:
                plat.run({"m": degree}, timeout=600)
                for _ in range(repeats):
                    start = time.perf_counter()
                    out = plat.run({"m": degree}, timeout=600)
                    times.append(time.perf_counter() - start)
                    if out.failure is not None or out.result != degree * (degree - 1):
                        raise RuntimeError(f"fan-out {degree}: wrong result {out.result!r} ({out.failure})")
                plat.take()
            inner.close()
            points.append(FanoutPoint(degree, times, "model" if model else "raw"))
    return points


def fanout_containers(degrees: Sequence[int], *, repeats: int, work_containers: int) -> list[FanoutPoint]:
    """Figure 5 in Lambda containers: the same Split -> map Work -> Sum workflow built into
    function images and run under the RIE behind the local async Invoke endpoint, DynamoDB on
    moto (serial server) — `builder local-aws`'s stack (LocalLambdaStack), plus
    `work_containers - 1` more `Work` containers registered for the same function, so up to
    `work_containers` branches run at once (Lambda would start one container per concurrent
    branch; this machine has 2 CPUs). Start (the entry's async Invoke) to the endpoint idle, one
    warm-up per degree, `repeats` timed runs, each result checked."""
    from builder.commands.local_aws import _default_base
    from builder.image.build import build_images, docker_client, ensure_base
    from builder.local_stack.aws_stack import DockerSdkContainer, LocalLambdaStack
    from builder.local_stack.lambda_containers import lambda_container_config
    from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint
    from builder.local_stack.process import MotoServer

    client = docker_client()
    base = ensure_base(client, base_image=_default_base(client), rebuild=True, progress=lambda line: None)
    points = []
    with tempfile.TemporaryDirectory(prefix="unum-paper-fig5c-") as tmp:
        workflow = write_workflow(Path(tmp), map_aggregate(max(degrees)))
        images = {b.function: b.tag for b in build_images(client, workflow.folder, base_tag=base,
                                                          tag_prefix="unum-paper-bench/", progress=lambda line: None)}
        with MotoServer() as moto, AsyncInvokeEndpoint(workers=work_containers + 2) as endpoint:
            url = f"dynamodb://paper-fig5-{uuid.uuid4().hex[:8]}?endpoint={moto.endpoint}&region=us-east-1"
            with LocalLambdaStack(workflow, images, store_url=url, endpoint=endpoint) as stack:
                extra = []
                try:
                    for _ in range(work_containers - 1):
                        config = lambda_container_config(images["Work"], function_name="Work",
                                                         environment=stack.environment)
                        extra.append(DockerSdkContainer(client, config))
                    endpoint.register("Work", [c.config.ports.invoke_url for c in extra]
                                      + [_registered_url(stack, "Work")])
                    stack.run({"m": 4 * work_containers}, timeout=600)  # every container's init phase
                    for degree in degrees:
                        times = []
                        for i in range(repeats + 1):  # the first is the warm-up
                            start = time.perf_counter()
                            out = stack.run({"m": degree}, timeout=600)
                            if i:
                                times.append(time.perf_counter() - start)
                            if out.failure is not None or out.result != degree * (degree - 1):
                                raise RuntimeError(f"fan-out {degree} in containers: {out.result!r} ({out.failure})")
                        points.append(FanoutPoint(degree, times, f"containers x{work_containers}"))
                finally:
                    for c in extra:
                        c.stop()
    return points


def _registered_url(stack: Any, function: str) -> str:
    return stack.containers[function].config.ports.invoke_url


# ---- ExCamera side by side --------------------------------------------------------------------

@dataclass
class ExcameraRuns:
    ir_seconds: list[float]
    sfn_seconds: list[float]
    ir_durations: dict[str, dict[int, float]]
    sfn_durations: dict[str, dict[int, float]]
    ir_invocations: int
    sfn_invocations: int
    input: Any
    ir_cpu: float   # total handler CPU per run
    sfn_cpu: float
    checked: str = ""


def excamera_side_by_side(ir: App, sfn: App, *, rounds: int, quick: bool, workers: int = 8) -> ExcameraRuns:
    """Alternating rounds (IR, then the Map version) on one file store each, after a warm-up
    each; per-chunk handler CPU seconds (median over rounds) for the critical-path model."""
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="unum-paper-excamera-") as tmp:
        given = ir.input(quick, objects=str(Path(tmp) / "bucket"))
        stores = {name: open_store(str(Path(tmp) / name)) for name in ("ir", "sfn")}
        plats = {"ir": TimedPlatform(load_workflow(workflow_folder(ir)), stores["ir"], workers=workers),
                 "sfn": TimedPlatform(load_workflow(workflow_folder(sfn)), stores["sfn"], workers=workers)}
        try:
            for name, plat in plats.items():
                out = plat.run(given, timeout=900)
                _raise_if_failed(ir if name == "ir" else sfn, out, plat)
                plat.take()
            seconds: dict[str, list[float]] = {"ir": [], "sfn": []}
            invs: dict[str, list[Invocation]] = {"ir": [], "sfn": []}
            results = {}
            for _ in range(rounds):
                for name, plat in plats.items():
                    start = time.perf_counter()
                    out = plat.run(given, timeout=900)
                    seconds[name].append(time.perf_counter() - start)
                    _raise_if_failed(ir if name == "ir" else sfn, out, plat)
                    results[name] = out.result
                    invs[name] += plat.take()
            if results["ir"] != results["sfn"]:
                raise RuntimeError("ExCamera: the two versions' results differ")
            checked = _check(ir, quick, results["ir"])
            for name in ("ir", "sfn"):
                per: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
                for inv in invs[name]:
                    if inv.committed and inv.chunk is not None:
                        per[inv.function][inv.chunk].append(inv.handler_cpu)
                result[name] = {fn: {i: statistics.median(v) for i, v in by.items()} for fn, by in per.items()}
                result[name + "_n"] = sum(1 for inv in invs[name] if inv.committed) // rounds
                result[name + "_cpu"] = sum(inv.handler_cpu for inv in invs[name] if inv.committed) / rounds
        finally:
            for plat in plats.values():
                plat.close()
            for store in stores.values():
                store.close()
    return ExcameraRuns(seconds["ir"], seconds["sfn"], result["ir"], result["sfn"], result["ir_n"], result["sfn_n"],
                        {k: v for k, v in given.items() if k != "objects"}, result["ir_cpu"], result["sfn_cpu"], checked)
