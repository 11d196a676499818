"""`python -m builder promote WORKFLOW` / `rollback WORKFLOW`: the workflow alias on AWS Lambda.

WORKFLOW is the workflow folder (its manifest names the entry function, whose alias new workflows
start through). `promote` makes the ramped build (`deploy --target aws --publish --ramp N`) the
alias' only one; `rollback` drops a ramp, or without one goes back to the previous build
(builder.deploy.aws_versions). Each prints the alias' new state as JSON; no ramp to promote,
nothing to roll back, an unknown build: one error line, exit 2, nothing changed. Running
workflows are unaffected either way: each stays on the build it started on.
"""

from __future__ import annotations

import argparse
import json
from typing import Any


def cmd_alias(args: argparse.Namespace) -> int:
    from builder.deploy.aws_versions import promote, rollback
    from unum_entry.invokers.aws_lambda import build_client
    from unum_entry.workflow import load_workflow

    workflow = load_workflow(args.workflow)
    client = build_client(endpoint=args.aws_endpoint, region=args.aws_region)
    act = promote if args.command == "promote" else rollback
    state = act(client, entry=workflow.entry, prefix=args.aws_prefix, alias=args.alias)
    print(json.dumps({"alias": args.alias, "stable": state.stable, "ramped": state.ramped,
                      "weight": state.weight, "previous": state.previous}))
    return 0


def register(sub: Any) -> None:
    from builder.deploy.aws import add_lambda_arguments

    for name, help_text in (("promote", "aws: the ramped build becomes the workflow alias' only one"),
                            ("rollback", "aws: drop the ramp, or go back to the previous build")):
        parser = sub.add_parser(name, help=help_text)
        parser.add_argument("workflow", help="workflow folder (its entry function holds the alias)")
        add_lambda_arguments(parser)
        parser.set_defaults(func=cmd_alias)
