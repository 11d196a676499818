"""`python3 -m unum_entry`: the entrypoint of every function image. Picks the platform adapter.

`AWS_LAMBDA_RUNTIME_API` set (Lambda, or the Runtime Interface Emulator) → the awslambdaric loop
around the unum handler; otherwise → the Cloud Run functions (functions-framework) server.
Adapters are imported lazily: each pulls in its own SDK.
"""

from __future__ import annotations

import importlib
import os
import sys


def _adapter_module(environ: os._Environ[str] | dict[str, str]) -> str:
    if environ.get("AWS_LAMBDA_RUNTIME_API"):
        return "unum_entry.platforms.aws_lambda"
    return "unum_entry.platforms.cloud_run"


def main() -> int:
    name = _adapter_module(os.environ)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            print(f"unum_entry: platform adapter {name} is not installed in this image "
                  f"(AWS_LAMBDA_RUNTIME_API is {'set' if 'aws' in name else 'not set'})", file=sys.stderr)
            return 2
        raise
    return module.main() or 0


if __name__ == "__main__":
    sys.exit(main())
