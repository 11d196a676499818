"""`python -m builder ui`: a local web page of a store's workflows (list, graph, result or
failure, history, actions; refreshed live), served on 127.0.0.1 — or on `--host` with an access
token (builder.ui.access)."""

from __future__ import annotations

import argparse
import os
import sys

from unum_entry.errors import UnumError

from builder.commands.options import add_store_option


def cmd_ui(args: argparse.Namespace) -> int:
    from builder.commands.options import open_existing_store
    from builder.ui.listing import parse_duration
    from builder.ui.server import UiServer

    from builder.ui.access import TOKEN_ENV

    token = args.access_token or os.environ.get(TOKEN_ENV) or None
    if args.host is not None and not token:
        raise UnumError(f"ui --host {args.host}: give an access token too (--access-token or ${TOKEN_ENV}): anyone "
                        "who reaches the page could stop and redrive workflows")
    store = open_existing_store(args.store)
    with UiServer(store, port=args.port, workflows=tuple(args.workflow or ()), ttl_seconds=parse_duration(args.ttl),
                  store_url=args.store, host=args.host or "127.0.0.1", access_token=token) as server:
        shown = f"{server.url}?access_token=…" if token else server.url
        print(f"unum ui: {shown} (store {args.store}); Ctrl-C stops", file=sys.stderr, flush=True)
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
    parser.add_argument("--host", default=None,
                        help="listen on this address instead of 127.0.0.1 (then --access-token is required)")
    parser.add_argument("--access-token", default=None, metavar="TOKEN",
                        help="require this token on every request (default: $UNUM_UI_TOKEN; required with --host)")
    parser.add_argument("--workflow", action="append", metavar="FOLDER",
                        help="workflow folder or state machine the page draws runs of (repeatable; default: "
                             "the folder each run recorded)")
    parser.add_argument("--ttl", default="7d", metavar="DURATION", help="the TTL the workflows ran with (default 7d)")
    parser.set_defaults(func=cmd_ui)
