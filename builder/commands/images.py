"""`python -m builder build|push`: function images (see builder.image.build and builder.image.push)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from builder.image.build import (DEFAULT_BASE_IMAGE, DEFAULT_BASE_TAG, DEFAULT_TAG_PREFIX, LOCAL_BASE_IMAGE,
                                 image_repository, resolve_functions, stderr_progress)
from unum_entry.errors import BuildError


def cmd_build(args: argparse.Namespace) -> int:
    from builder.image.build import build_images, docker_client, ensure_base

    client = docker_client()
    base = ensure_base(client, base_image=args.base_image or os.environ.get("UNUM_BASE_IMAGE"), tag=args.base_tag, rebuild=not args.no_base_rebuild,
                       progress=stderr_progress)
    if args.folder is None:
        print(base)
        return 0
    built = build_images(client, args.folder, base_tag=base, tag_prefix=args.tag_prefix,
                         functions=args.function or None, progress=stderr_progress)
    if getattr(args, "api", False):  # the Step Functions API's image (builder.image.api_image, deploy --api)
        from builder.image.api_image import build_api_image

        built.append(build_api_image(client, args.folder, base_tag=base, tag_prefix=args.tag_prefix,
                                     progress=stderr_progress))
    if args.json:
        print(json.dumps([{"workflow": b.workflow, "function": b.function, "tag": b.tag, "id": b.image_id,
                           "seconds": round(b.seconds, 2)} for b in built], indent=2))
    else:
        for b in built:
            print(f"{b.tag}\t{b.image_id[:19]}\t{b.seconds:.1f}s")
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    from builder.image.build import docker_client
    from builder.image.push import Registry, ecr_registry, push_images, registry_location

    if not args.ecr and not args.registry:
        raise BuildError("push: give --registry HOST[:PORT][/NAMESPACE] or --ecr")
    workflow, specs = resolve_functions(Path(args.folder))
    images = [f"{image_repository(args.tag_prefix, workflow, s.ir.function)}:latest" for s in specs]
    if getattr(args, "api", False):  # the Step Functions API's image, as `build --api` tagged it
        images.append(f"{image_repository(args.tag_prefix, workflow, 'unum-api')}:latest")
    if args.ecr:
        registry = ecr_registry(_ecr_client(args), location=registry_location(args.registry) if args.registry else None)
    else:
        registry = Registry(registry_location(args.registry), args.username,
                            os.environ.get("UNUM_REGISTRY_PASSWORD") if args.username else None)
    pushed = push_images(docker_client(), images, registry, progress=stderr_progress)
    if args.json:
        print(json.dumps([{"image": p.source, "remote": p.remote, "digest": p.digest} for p in pushed], indent=2))
    else:
        for p in pushed:
            print(f"{p.remote}\t{p.digest}")
    return 0


def _ecr_client(args: argparse.Namespace) -> Any:
    import boto3

    kwargs: dict[str, Any] = {"region_name": args.region or os.environ.get("AWS_REGION")
                              or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"}
    if args.endpoint_url:
        kwargs["endpoint_url"] = args.endpoint_url
        if not (os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_PROFILE")):
            kwargs.update(aws_access_key_id="testing", aws_secret_access_key="testing")
    return boto3.client("ecr", **kwargs)


def register(sub: Any) -> None:
    build = sub.add_parser("build", help="build the unum base image and one image per function")
    build.add_argument("folder", nargs="?", help="workflow folder or function folder (omit with --base-only)")
    build.add_argument("--base-image", default=None,
                       help=f"Python image the unum base builds on (default: $UNUM_BASE_IMAGE, else {DEFAULT_BASE_IMAGE} "
                       f"when local or pullable, else the local {LOCAL_BASE_IMAGE})")
    build.add_argument("--base-tag", default=DEFAULT_BASE_TAG, help=f"tag of the unum base image (default: {DEFAULT_BASE_TAG})")
    build.add_argument("--tag-prefix", default=DEFAULT_TAG_PREFIX,
                       help=f"function images are tagged <prefix><workflow>-<function>:latest (default: {DEFAULT_TAG_PREFIX})")
    build.add_argument("--function", action="append", help="build only this function (repeatable)")
    build.add_argument("--no-base-rebuild", action="store_true", help="use the existing base image as it is")
    build.add_argument("--json", action="store_true", help="print the built images as JSON")
    build.add_argument("--api", action="store_true", help="also build the Step Functions API's image "
                       "(<prefix><workflow>-unum-api, for deploy --api; a compiled state machine only)")
    build.set_defaults(func=cmd_build)

    push = sub.add_parser("push", help="push a workflow's function images to ECR, Artifact Registry or any registry; prints digests")
    push.add_argument("folder", help="workflow folder or function folder (as given to build)")
    push.add_argument("--registry", help="registry host[:port][/namespace] (required without --ecr; "
                      "with --ecr it overrides ECR's endpoint)")
    push.add_argument("--ecr", action="store_true", help="authenticate with ECR GetAuthorizationToken and create repositories")
    push.add_argument("--region", help="AWS region for --ecr (default: $AWS_REGION or us-east-1)")
    push.add_argument("--endpoint-url", help="ECR API endpoint (e.g. moto at http://127.0.0.1:5001)")
    push.add_argument("--username", help="registry user (password from $UNUM_REGISTRY_PASSWORD)")
    push.add_argument("--tag-prefix", default=DEFAULT_TAG_PREFIX, help=f"as given to build (default: {DEFAULT_TAG_PREFIX})")
    push.add_argument("--json", action="store_true", help="print the pushed images as JSON")
    push.add_argument("--api", action="store_true", help="also push the Step Functions API's image (build --api)")
    push.set_defaults(func=cmd_push)
