"""`python -m builder ui`: a local web page of a store's workflows (list, graph, result or
failure, refreshed live), served on 127.0.0.1 only."""

from __future__ import annotations

import argparse
import sys

from builder.commands.options import add_store_option


def cmd_ui(args: argparse.Namespace) -> int:
    from builder.commands.inspect import open_existing_store
    from builder.ui.listing import parse_duration
    from builder.ui.server import UiServer

    store = open_existing_store(args.store)
    with UiServer(store, port=args.port, workflows=tuple(args.workflow or ()), ttl_seconds=parse_duration(args.ttl)) as server:
        print(f"unum ui: {server.url} (store {args.store}); Ctrl-C stops", file=sys.stderr, flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("unum ui: stopped", file=sys.stderr)
    return 0


def port_number(text: str) -> int:
    """A TCP port, 0-65535 (0: a free one), for argparse (its error is one line, exit 2)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0-65535)")
    return port


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("ui", help="a local web page: the workflows in a store, each one's graph and result, live")
    add_store_option(parser)
    parser.add_argument("--port", type=port_number, default=8400, help="port on 127.0.0.1 (default 8400; 0 picks a free one)")
    parser.add_argument("--workflow", action="append", metavar="FOLDER",
                        help="workflow folder or state machine the page draws runs of (repeatable; default: "
                             "the folder each run recorded)")
    parser.add_argument("--ttl", default="7d", metavar="DURATION", help="the TTL the workflows ran with (default 7d)")
    parser.set_defaults(func=cmd_ui)
