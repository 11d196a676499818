"""`python -m builder deploy <workflow> --target gcp|aws`: emit what deploying needs.

One sub-command for every cloud; each target lives in its own module (`builder.deploy.gcp`,
`builder.deploy.aws`) exposing `add_arguments(parser)` (its options, named so they do not clash)
and `deploy_<target>(args) -> int`. A target whose module is absent is refused by name.
"""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from unum_entry.errors import BuildError

TARGETS = ("gcp", "aws")


def _target_module(target: str) -> Any | None:
    try:
        return importlib.import_module(f"builder.deploy.{target}")
    except ModuleNotFoundError as exc:
        if exc.name == f"builder.deploy.{target}":
            return None
        raise


def cmd_deploy(args: argparse.Namespace) -> int:
    if getattr(args, "publish", False) or getattr(args, "ramp", None) is not None:
        return _publish(args)
    module = _target_module(args.target)
    if module is None:
        raise BuildError(f"deploy --target {args.target}: this installation has no builder.deploy.{args.target}")
    return getattr(module, f"deploy_{args.target}")(args)


def _publish(args: argparse.Namespace) -> int:
    """`deploy --target aws --publish [--ramp N]` (builder.deploy.aws.publish_aws)."""
    if args.target != "aws":
        raise BuildError(f"deploy --publish/--ramp: Lambda versions are --target aws only, not {args.target}")
    if not args.publish:
        raise BuildError("deploy --ramp: needs --publish (the ramp is of the build being published)")
    from builder.deploy.aws import publish_aws

    return publish_aws(args)


def register(sub: Any) -> None:
    deploy = sub.add_parser("deploy", help="emit a deploy script/template for a workflow's function images")
    deploy.add_argument("workflow", help="workflow folder (unum-workflow.json + one folder per function)")
    deploy.add_argument("--target", required=True, choices=TARGETS, help="cloud to deploy to")
    deploy.add_argument("--out", default=None, help="file to write (default: print to stdout)")
    deploy.add_argument("--image-prefix", default="", help="registry/repository the images were pushed to "
                        "(e.g. us-docker.pkg.dev/PROJECT/unum)")
    deploy.add_argument("--tag", default="latest", help="image tag (default: latest)")
    deploy.add_argument("--api", action="store_true", help="add the Step Functions API as one more function: aws, "
                        "behind a function URL with AWS_IAM auth; gcp, a Cloud Run service behind IAM "
                        "(docs/api.md, In the cloud)")
    for target in TARGETS:
        module = _target_module(target)
        if module is not None and hasattr(module, "add_arguments"):
            module.add_arguments(deploy)
    aws = _target_module("aws")
    if aws is not None and hasattr(aws, "add_publish_arguments"):
        aws.add_publish_arguments(deploy)
    deploy.set_defaults(func=cmd_deploy)
