"""The Step Functions API as a Lambda function (issue 43's cloud front door): the entry point of
the API image `python -m builder build FOLDER --api` makes and `deploy --api` deploys.

Init phase (once per execution environment): read the configuration from the environment, open
the workflow's store and the platform's invoker, load the deployed workflow folder, and build
StatesApi over the store-backed registry (builder.serve.store_registry) and the invoker-backed
engine (builder.serve.cloud_engine). Per event: builder.serve.lambda_entry.answer turns the
function URL event into the API call and its response. Heavy modules (boto3, botocore's service
model, the compiler) are imported here, in the init phase, never by importing this module.

Environment: `UNUM_STORE` and `UNUM_INVOKER` (as every function's), `UNUM_WORKFLOW_DIR` (the
compiled workflow folder; default `UNUM_FUNCTION_DIR`, then `/var/task`), `AWS_REGION` (Lambda
sets it) and `UNUM_API_ACCOUNT` (the account in the ARNs it answers; deploy sets it).
"""

from __future__ import annotations

import logging
import os
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from unum_entry.errors import ConfigurationError, UnumError

HANDLER_MODULE = "unum_api_handler"  # the module name awslambdaric imports the handler from
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


@dataclass(frozen=True)
class ApiSettings:
    """What the API function reads from its environment (module docstring)."""

    store: str
    invoker: str
    workflow_dir: str
    region: str
    account: str

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ApiSettings:
        """Raises ConfigurationError naming the first missing variable."""
        from builder.serve.arns import DEFAULT_ACCOUNT, DEFAULT_REGION

        for name in ("UNUM_STORE", "UNUM_INVOKER"):
            if not env.get(name):
                raise ConfigurationError(f"{name} is not set (the API function needs the workflow's store and invoker)")
        return cls(store=env["UNUM_STORE"], invoker=env["UNUM_INVOKER"],
                   workflow_dir=env.get("UNUM_WORKFLOW_DIR") or env.get("UNUM_FUNCTION_DIR") or "/var/task",
                   region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION,
                   account=env.get("UNUM_API_ACCOUNT") or DEFAULT_ACCOUNT)


def build_handler(settings: ApiSettings) -> Handler:
    """The Lambda handler answering function URL events with StatesApi over the deployment."""
    from unum_entry.invokers import open_invoker
    from unum_entry.stores import open_store
    from unum_entry.workflow import load_workflow

    from builder.serve.arns import Arns
    from builder.serve.cloud_engine import CloudEngine
    from builder.serve.lambda_entry import answer
    from builder.serve.states_api import StatesApi
    from builder.serve.store_registry import StoreRegistry
    from builder.serve.wire import Service

    workflow = load_workflow(settings.workflow_dir)
    store = open_store(settings.store)
    invoker = open_invoker(settings.invoker, store=store)
    engine = CloudEngine(store, workflow, invoker)
    registry = StoreRegistry(store, on_repeat=engine.restart)  # a repeated start completes one cut short
    states = StatesApi(registry, engine, store, Arns(settings.region, settings.account))  # type: ignore[arg-type]
    service = Service("stepfunctions")  # botocore's model, loaded once per execution environment

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return answer(event, states, service)

    return handler


def main() -> int:
    """Init phase, then hand the handler to awslambdaric's loop (as unum_entry's Lambda adapter)."""
    logging.basicConfig(level=os.environ.get("UNUM_LOG_LEVEL", "INFO"))
    try:
        handler = build_handler(ApiSettings.from_env(os.environ))
    except UnumError as exc:
        print(f"unum api: cannot start: {exc}", file=sys.stderr)
        return 2
    module = types.ModuleType(HANDLER_MODULE)
    module.handler = handler  # type: ignore[attr-defined]
    sys.modules[HANDLER_MODULE] = module
    from awslambdaric.__main__ import main as ric_main  # type: ignore[import-untyped]  # only in a Lambda process

    ric_main([sys.argv[0], f"{HANDLER_MODULE}.handler"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
