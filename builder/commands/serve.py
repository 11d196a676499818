"""`python -m builder serve [--port 8083] [--store …]`: the Step Functions API and the Lambda
durable-execution API on 127.0.0.1, over the store and the embedded engine (builder.serve).

It prints `serving http://127.0.0.1:PORT` on stderr once it answers, then runs until Ctrl-C or
SIGTERM (exit 130 / 143), which stop it cleanly: nothing in flight is lost, the next `serve`
resumes it. Point any AWS SDK or the AWS CLI at it with `--endpoint-url http://127.0.0.1:8083`.
"""

from __future__ import annotations

import argparse
import threading

from builder.commands.console import Console
from builder.commands.options import WORKERS_ENV, add_store_option, env_option, positive_int
from builder.serve.mocks import MOCK_CONFIG_ENV

EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


def port_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}: a number from 0 (any free port) to 65535")
    return value


def cmd_serve(args: argparse.Namespace) -> int:
    from unum_entry.errors import UnumError

    from builder.commands.interrupts import Terminated, raised
    from builder.serve.app import Serving, Settings

    settings = Settings(store=args.store, state_dir=args.state_dir, functions=args.functions, port=args.port,
                        region=args.region, account=args.account, workers=args.workers,
                        mock_config=args.mock_config or None)
    console = Console()
    try:
        serving = Serving(settings)
    except OSError as exc:
        raise UnumError(f"serve: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}") from None
    try:
        with raised(sigterm=True):
            serving.start()
            console.message(f"serving http://127.0.0.1:{serving.server.server_address[1]} (Step Functions and "
                            f"Lambda durable-execution APIs; store {args.store}, state {args.state_dir}); Ctrl-C stops")
            threading.Event().wait()
    except KeyboardInterrupt as stop:
        serving.close()
        console.message("stopped; pending work is kept for the next serve")
        return EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("serve", help="answer the Step Functions API on 127.0.0.1 (boto3, the AWS CLI, Step "
                                          "Functions Local test suites) over the embedded engine")
    parser.add_argument("--port", type=port_number, default=8083, help="port on 127.0.0.1 (default 8083; 0: any free)")
    add_store_option(parser)
    parser.add_argument("--state-dir", default=".unum/serve",
                        help="where state machines, compiled code and the delivery queues are kept (default .unum/serve)")
    parser.add_argument("--functions", default=None,
                        help="folder with one sub-folder of code per Lambda function name: what Tasks call, and the "
                             "durable functions that Invoke starts")
    parser.add_argument("--region", default="us-east-1", help="the region in ARNs (default us-east-1)")
    parser.add_argument("--account", default="123456789012", help="the account in ARNs (default 123456789012)")
    env_option(parser, "--workers", envvar=WORKERS_ENV, default=8, type=positive_int,
               help="concurrent executions per state machine")
    env_option(parser, "--mock-config", envvar=MOCK_CONFIG_ENV, default=None, default_text="no mocks",
               help="Step Functions Local's mock configuration file: StartExecution of "
                    "'...:stateMachine:NAME#TestCase' runs that test case's mocked Tasks")
    parser.set_defaults(func=cmd_serve)
