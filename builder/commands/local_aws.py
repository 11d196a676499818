"""`python -m builder local-aws <workflow>`: run a workflow's images on the local AWS stack.

Builds the images (unless `--no-build`), starts moto (DynamoDB, and EventBridge Scheduler for durable
timers, fired by `builder.local_stack.scheduler_loop`) unless `--moto-endpoint` is given,
the asynchronous Invoke endpoint on `--port`, and one Lambda container per function. With
`--input` it runs one workflow and prints its result like `builder run`; without, it stays up
(Ctrl-C stops everything) and prints how to invoke the entry function with boto3 or the AWS CLI.
`UNUM_ASL_TIME_SCALE`, when set, is passed into the function containers (time-scaled Waits and
timeouts of a compiled state machine).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from contextlib import ExitStack
from typing import Any

FORWARDED = ("UNUM_ASL_TIME_SCALE",)  # set in the caller's environment: passed into the containers


def cmd_local_aws(args: argparse.Namespace) -> int:
    from builder.local_stack.aws_stack import LocalLambdaStack
    from builder.commands.io import parse_input as _parse_input, to_json as _to_json
    from builder.image.build import build_images, docker_client, ensure_base, image_repository, resolve_functions, stderr_progress
    from builder.local_stack.lambda_endpoint import AsyncInvokeEndpoint, LambdaRetry
    from builder.local_stack.process import MotoServer
    from unum_entry.errors import WorkflowFailed
    from unum_entry.workflow import load_workflow

    workflow = load_workflow(args.workflow)
    input_value = _parse_input(args.input) if args.input is not None else None
    client = docker_client()
    if args.no_build:
        name, specs = resolve_functions(workflow.folder)
        images = {s.ir.function: f"{image_repository(args.tag_prefix, name, s.ir.function)}:latest" for s in specs}
    else:
        base = ensure_base(client, base_image=args.base_image or os.environ.get("UNUM_BASE_IMAGE"), rebuild=True,
                           progress=stderr_progress)
        images = {b.function: b.tag for b in build_images(client, workflow.folder, base_tag=base,
                                                          tag_prefix=args.tag_prefix, progress=stderr_progress)}
    with ExitStack() as stack:
        moto_endpoint = args.moto_endpoint or stack.enter_context(MotoServer()).endpoint
        retry = LambdaRetry(delays=(args.retry_delay, args.retry_delay * 2))
        endpoint = stack.enter_context(AsyncInvokeEndpoint(retry=retry, port=args.port))
        table = args.table or f"unum-{workflow.name}-{uuid.uuid4().hex[:8]}"
        store_url = f"dynamodb://{table}?endpoint={moto_endpoint}&region=us-east-1"
        forwarded = {name: os.environ[name] for name in FORWARDED if name in os.environ}
        lambdas = stack.enter_context(LocalLambdaStack(workflow, images, store_url=store_url, endpoint=endpoint,
                                                       scheduler_endpoint=moto_endpoint, environment=forwarded))
        print(f"local-aws: {len(lambdas.containers)} function containers behind {endpoint.endpoint}; "
              f"store {store_url}", file=sys.stderr)
        if input_value is None and args.input is None:
            print(f"invoke: aws lambda invoke --endpoint-url {endpoint.endpoint} --region us-east-1 "
                  f"--function-name {workflow.entry} --invocation-type Event --payload fileb://INPUT.json /dev/null "
                  "(any AWS keys; AWS CLI v1 or v2)\n"
                  f"inspect: python -m builder inspect wf-<request id> --store '{store_url}'\n"
                  "Ctrl-C stops the stack.", file=sys.stderr)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                return 0
        outcome = lambdas.run(input_value, workflow_id=args.workflow_id, timeout=args.timeout)
        print(f"workflow {outcome.workflow_id}: {endpoint.stats['ok']} deliveries, "
              f"{endpoint.stats['function_error']} function errors", file=sys.stderr)
        if outcome.failure is not None:
            f = outcome.failure
            raise WorkflowFailed(f"workflow {outcome.workflow_id} failed in function {f['Function']!r} "
                                 f"after {f['Attempts']} attempt(s): {f['Error']}: {f['Cause']}")
        print(_to_json(outcome.result, args.compact), flush=True)
    return 0


def _default_base(client: Any) -> str:
    """$UNUM_BASE_IMAGE, else the base `build` picks (builder.image.build.resolve_base_image);
    bench/paper/measure.py calls it by this name."""
    from builder.image.build import resolve_base_image

    return resolve_base_image(client, os.environ.get("UNUM_BASE_IMAGE"), progress=lambda line: None)


def register(sub: Any) -> None:
    from builder.commands.options import add_wait_options

    p = sub.add_parser("local-aws", help="run a workflow's Lambda images locally: containers + async Invoke endpoint + moto")
    p.add_argument("workflow", help="workflow folder")
    p.add_argument("--input", default=None, help="run one workflow with this input (JSON or @file) and print its result")
    p.add_argument("--workflow-id", default=None, help="workflow id (default: a new one)")
    p.add_argument("--base-image", default=None, help="Python image for the unum base (default: $UNUM_BASE_IMAGE, "
                   "else python:3.11-slim when local or pullable, else the local local/debian-python:bookworm)")
    p.add_argument("--tag-prefix", default="unum/", help="image tag prefix (default: unum/)")
    p.add_argument("--no-build", action="store_true", help="use the images built before")
    p.add_argument("--port", type=int, default=0, help="Invoke endpoint port on 127.0.0.1 (default: a free one)")
    p.add_argument("--moto-endpoint", default=None, help="use this moto server instead of starting one")
    p.add_argument("--table", default=None, help="DynamoDB table (default: a new one)")
    p.add_argument("--retry-delay", type=float, default=1.0, help="seconds before Lambda's first retry (default: 1)")
    add_wait_options(p, workers=False, timeout_help="seconds to wait for the workflow")
    p.set_defaults(func=cmd_local_aws)
