"""The Step Functions API's image (`python -m builder build FOLDER --api`, `deploy --api`): the
unum base, the compiled workflow folder as one last layer in `/var/task` (the definition it
serves, every function's IR and ASL fragment, which GetExecutionHistory replays), and the API's
entry point (builder.serve.cloud_entry) instead of a function's. Built like a function image
(builder.image.build: an in-memory, reproducible context); tagged
`<tag-prefix><workflow>-unum-api:latest`, the repository deploy --api names.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from unum_entry.errors import BuildError
from unum_entry.workflow import load_workflow

from builder.image.build import (DEFAULT_BASE_TAG, DEFAULT_TAG_PREFIX, FUNCTION_DIR, BuiltImage, Progress,
                                 _build, _code_files, _tar_files, image_repository, stderr_progress)

API_FUNCTION = "unum-api"  # as builder.deploy.aws names it
ENTRYPOINT = ["python3", "-m", "builder.serve.cloud_entry"]


def api_dockerfile(base_tag: str) -> str:
    """The API image's Dockerfile: the folder in one layer, the API's entry point."""
    entry = ", ".join(f'"{part}"' for part in ENTRYPOINT)
    return (f"FROM {base_tag}\nCOPY workflow/ {FUNCTION_DIR}/\nENV UNUM_WORKFLOW_DIR={FUNCTION_DIR}\n"
            f"ENTRYPOINT [{entry}]\n")


def build_api_image(client: Any, folder: str | Path, *, base_tag: str = DEFAULT_BASE_TAG,
                    tag_prefix: str = DEFAULT_TAG_PREFIX, progress: Progress = stderr_progress) -> BuiltImage:
    """Build the API image of the compiled state machine in `folder`. BuildError for a folder
    that is not one (deploy --api refuses it too)."""
    started = time.monotonic()
    folder = Path(folder)
    workflow = load_workflow(folder)
    if not (folder / "statemachine.json").is_file():
        raise BuildError(f"build --api: {folder} is not a compiled state machine (no statemachine.json); "
                         "compile one with `python -m builder compile statemachine.json --out FOLDER`")
    files = [(f"workflow/{path.relative_to(folder).as_posix()}", path.read_bytes()) for path in _code_files(folder)]
    files.append(("Dockerfile", api_dockerfile(base_tag).encode()))
    tag = f"{image_repository(tag_prefix, workflow.name, API_FUNCTION)}:latest"
    label = f"{workflow.name}/{API_FUNCTION}"
    progress(f"[api] {label}")
    image_id = _build(client, _tar_files(files), tag=tag, buildargs={}, label=label, progress=progress)
    return BuiltImage(workflow.name, API_FUNCTION, tag, image_id, time.monotonic() - started)
