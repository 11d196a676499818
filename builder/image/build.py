"""Images: the unum base image and one image per function (base + requirements + code + IR).

Layer order is what keeps rebuilds fast (on the vfs storage driver every uncached step costs
seconds): the base, then the function's wheels, then its code and IR. Changing user code or IR
rebuilds the last step only.

    client = docker_client()
    base = build_base(client, base_image="local/debian-python:bookworm")
    images = build_images(client, "images/chain", base_tag=base.tag)

Builds use host networking and never pull: the base is resolved first (`resolve_base_image`):
the image asked for, else the public default when it is local or can be pulled, else the locally
made OS image (`localstack/setup.d/20-base-image.sh`), else an error saying what to pass.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.image.wheelhouse import (DEFAULT_TARGET, WheelTarget, base_requirements, download_wheels, project_root, read_requirements,
                                write_unum_wheel)
from unum_entry.errors import BuildError
from unum_entry.ir import IR_FILE_NAME, load_ir
from unum_entry.workflow import WORKFLOW_FILE_NAME, FunctionSpec, load_workflow

Progress = Callable[[str], None]

DEFAULT_BASE_IMAGE = "python:3.11-slim"
LOCAL_BASE_IMAGE = "local/debian-python:bookworm"  # made offline by localstack/setup.d/20-base-image.sh
DEFAULT_BASE_TAG = "unum/base:latest"
DEFAULT_TAG_PREFIX = "unum/"
FUNCTION_DIR = "/var/task"
_EXCLUDED = {"__pycache__", ".pytest_cache", ".mypy_cache", ".git", ".venv", "node_modules"}


@dataclass(frozen=True)
class BuiltImage:
    """One built image: what it runs and how to refer to it."""

    workflow: str
    function: str
    tag: str
    image_id: str
    seconds: float


def stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def docker_client() -> Any:
    """A docker SDK client from the environment (DOCKER_HOST or the local socket)."""
    try:
        import docker  # heavy; only for commands that talk to the daemon
    except ImportError as exc:
        raise BuildError("the docker SDK is not installed: pip install docker") from exc
    try:
        client = docker.from_env(timeout=600)
        client.ping()
    except docker.errors.DockerException as exc:
        raise BuildError(f"cannot reach the Docker engine ({exc}); start dockerd "
                         f"(localstack/setup.d/10-docker.sh does it here)") from exc
    return client


def image_repository(tag_prefix: str, workflow: str, function: str) -> str:
    """`<prefix><workflow>-<function>`, lowercased to a valid repository name."""
    name = re.sub(r"[^a-z0-9._-]+", "-", f"{workflow}-{function}".lower()).strip("-._")
    return f"{tag_prefix}{name}"


# ---- the base image ------------------------------------------------------------------------

def resolve_base_image(client: Any, requested: str | None, *, progress: Progress = stderr_progress) -> str:
    """The image the unum base builds on. `requested` (from --base-image or $UNUM_BASE_IMAGE) is
    used as given. Otherwise the public `DEFAULT_BASE_IMAGE` when it is local or can be pulled,
    else `LOCAL_BASE_IMAGE` when present (said on `progress`); else BuildError naming what to pass."""
    if requested:
        return requested
    if _have_image(client, DEFAULT_BASE_IMAGE):
        return DEFAULT_BASE_IMAGE
    reason = _pull(client, DEFAULT_BASE_IMAGE)
    if reason is None:
        return DEFAULT_BASE_IMAGE
    if _have_image(client, LOCAL_BASE_IMAGE):
        progress(f"base: {DEFAULT_BASE_IMAGE} cannot be pulled ({reason}); using the local {LOCAL_BASE_IMAGE}")
        return LOCAL_BASE_IMAGE
    raise BuildError(f"the default base {DEFAULT_BASE_IMAGE} is not local and cannot be pulled ({reason}): pass "
                     f"--base-image IMAGE (a local image with python3 and venv; localstack/setup.d/20-base-image.sh "
                     f"makes {LOCAL_BASE_IMAGE} offline)")


def _have_image(client: Any, name: str) -> bool:
    import docker

    try:
        client.images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False


def _pull(client: Any, name: str) -> str | None:
    """Pull `name`; None when it worked, else the engine's reason in one line."""
    import docker

    repository, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "latest")
    try:
        client.images.pull(repository, tag=tag)
        return None
    except docker.errors.APIError as exc:
        return " ".join(str(exc.explanation or exc).split())[:200]


def build_base(client: Any, *, base_image: str = DEFAULT_BASE_IMAGE, tag: str = DEFAULT_BASE_TAG,
               target: WheelTarget = DEFAULT_TARGET, progress: Progress = stderr_progress) -> BuiltImage:
    """Build `Dockerfile.base` on `base_image` (a public Python image, or a local OS image with
    python3 and venv) from a hermetic wheelhouse, tagged `tag`."""
    root = project_root()
    started = time.monotonic()
    deps = download_wheels(base_requirements(root), target=target, progress=progress)
    with tempfile.TemporaryDirectory(prefix="unum-base-") as tmp:
        context = Path(tmp)
        shutil.copy(root / "Dockerfile.base", context / "Dockerfile")
        shutil.copytree(deps, context / "wheelhouse" / "deps", ignore=shutil.ignore_patterns(".complete"))
        write_unum_wheel(root, context / "wheelhouse" / "unum")
        tar = _tar_folder(context)
    image_id = _build(client, tar, tag=tag, buildargs={"BASE_IMAGE": base_image}, label="base", progress=progress)
    return BuiltImage("", "", tag, image_id, time.monotonic() - started)


def ensure_base(client: Any, *, base_image: str | None, tag: str = DEFAULT_BASE_TAG, rebuild: bool = False,
                progress: Progress = stderr_progress) -> str:
    """The base tag, built first when absent (or always when `rebuild`: cached steps are cheap),
    on `resolve_base_image(client, base_image)`."""
    if not rebuild and _have_image(client, tag):
        return tag
    build_base(client, base_image=resolve_base_image(client, base_image, progress=progress), tag=tag, progress=progress)
    return tag


# ---- function images -----------------------------------------------------------------------

def function_dockerfile(base_tag: str, *, has_requirements: bool) -> str:
    """The Dockerfile of one function image. Code and IR are one last layer (each uncached step
    copies the whole image on the vfs driver): a code or IR change rebuilds exactly one step."""
    lines = [f"FROM {base_tag}"]
    if has_requirements:
        lines += ["COPY wheels /tmp/unum-wheels",
                  "RUN pip install --no-cache-dir --no-index --find-links /tmp/unum-wheels "
                  "-r /tmp/unum-wheels/requirements.txt && rm -rf /tmp/unum-wheels"]
    lines += [f"COPY function/ {FUNCTION_DIR}/"]
    return "\n".join(lines) + "\n"


def build_function(client: Any, spec: FunctionSpec, *, workflow: str, base_tag: str = DEFAULT_BASE_TAG,
                   tag_prefix: str = DEFAULT_TAG_PREFIX, target: WheelTarget = DEFAULT_TARGET,
                   progress: Progress = stderr_progress) -> BuiltImage:
    """Build one function's image: base + its requirements + its code + its IR."""
    started = time.monotonic()
    function = spec.ir.function
    requirements_file = spec.folder / "requirements.txt"
    requirements = read_requirements(requirements_file) if requirements_file.is_file() else []
    files: list[tuple[str, bytes]] = []
    if requirements:
        wheels = download_wheels(requirements, target=target, progress=progress)
        files += [(f"wheels/{p.name}", p.read_bytes()) for p in sorted(wheels.iterdir()) if p.is_file() and p.name != ".complete"]
    for path in _code_files(spec.folder):  # the IR sorts with the code; one layer
        files.append((f"function/{path.relative_to(spec.folder).as_posix()}", path.read_bytes()))
    dockerfile = function_dockerfile(base_tag, has_requirements=bool(requirements))
    files.append(("Dockerfile", dockerfile.encode()))
    tag = f"{image_repository(tag_prefix, workflow, function)}:latest"
    image_id = _build(client, _tar_files(files), tag=tag, buildargs={}, label=f"{workflow}/{function}", progress=progress)
    return BuiltImage(workflow, function, tag, image_id, time.monotonic() - started)


def build_images(client: Any, folder: str | Path, *, base_tag: str = DEFAULT_BASE_TAG,
                 tag_prefix: str = DEFAULT_TAG_PREFIX, functions: Iterable[str] | None = None,
                 progress: Progress = stderr_progress) -> list[BuiltImage]:
    """Build every function of a workflow folder, or the one function of a function folder
    (its workflow name is then the parent folder's manifest name, or the folder's name)."""
    folder = Path(folder)
    workflow_name, specs = resolve_functions(folder)
    wanted = set(functions) if functions is not None else None
    if wanted is not None:
        unknown = wanted - {s.ir.function for s in specs}
        if unknown:
            raise BuildError(f"{folder}: unknown function {sorted(unknown)[0]!r} (functions: {', '.join(s.ir.function for s in specs)})")
        specs = [s for s in specs if s.ir.function in wanted]
    built = []
    for i, spec in enumerate(specs, 1):
        progress(f"[{i}/{len(specs)}] {workflow_name}/{spec.ir.function}")
        built.append(build_function(client, spec, workflow=workflow_name, base_tag=base_tag,
                                    tag_prefix=tag_prefix, progress=progress))
    return built


def resolve_functions(folder: Path) -> tuple[str, list[FunctionSpec]]:
    """(workflow name, function specs) of a workflow folder or a single function folder."""
    if (folder / WORKFLOW_FILE_NAME).is_file():
        workflow = load_workflow(folder)
        return workflow.name, [workflow.functions[name] for name in sorted(workflow.functions)]
    if (folder / IR_FILE_NAME).is_file():
        ir = load_ir(folder / IR_FILE_NAME)
        parent = folder.resolve().parent
        name = parent.name
        if (parent / WORKFLOW_FILE_NAME).is_file():
            name = json.loads((parent / WORKFLOW_FILE_NAME).read_text()).get("name") or name
        return name, [FunctionSpec(ir=ir, folder=folder)]
    raise BuildError(f"{folder}: neither a workflow folder ({WORKFLOW_FILE_NAME}) nor a function folder ({IR_FILE_NAME})")


# ---- helpers -------------------------------------------------------------------------------

def _code_files(folder: Path) -> Iterator[Path]:
    """The function's code and IR (requirements get their own, earlier layer)."""
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part in _EXCLUDED for part in rel.parts) or path.suffix == ".pyc" or not path.is_file():
            continue
        if rel.as_posix() == "requirements.txt":
            continue
        yield path


def _tar_files(files: Iterable[tuple[str, bytes]]) -> io.BytesIO:
    """A build context as an in-memory tar with fixed metadata (reproducible, cache-friendly)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))
    buffer.seek(0)
    return buffer


def _tar_folder(folder: Path) -> io.BytesIO:
    return _tar_files((p.relative_to(folder).as_posix(), p.read_bytes())
                      for p in sorted(folder.rglob("*")) if p.is_file())


def _build(client: Any, context: io.BytesIO, *, tag: str, buildargs: dict[str, str], label: str,
           progress: Progress) -> str:
    """Run one build, streaming its steps to `progress`; returns the image id."""
    import docker

    replaced = _image_id(client, tag)
    image_id = None
    try:
        stream = client.api.build(fileobj=context, custom_context=True, tag=tag, buildargs=buildargs,
                                  network_mode="host", rm=True, forcerm=True, pull=False, decode=True)
        for chunk in stream:
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                raise BuildError(f"building {label} ({tag}) failed: {detail.strip()}")
            text = chunk.get("stream", "")
            for line in text.splitlines():
                if line.startswith("Step ") or "Using cache" in line:
                    progress(f"  {label}: {line.strip()}")
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
    except docker.errors.APIError as exc:
        raise BuildError(f"building {label} ({tag}) failed: {exc.explanation or exc}") from exc
    if image_id is None:
        image_id = client.images.get(tag).id
    if replaced is not None and replaced != image_id:
        _remove_if_untagged(client, replaced)
    progress(f"  {label}: built {tag}")
    return image_id


def _image_id(client: Any, tag: str) -> str | None:
    import docker

    try:
        image_id: str = client.images.get(tag).id
        return image_id
    except docker.errors.ImageNotFound:
        return None


def _remove_if_untagged(client: Any, image_id: str) -> None:
    """Delete the image a rebuild moved its tag away from, unless something still names or runs
    it: rebuilds leave no `<none>` images behind."""
    import docker

    try:
        if client.images.get(image_id).tags:
            return
        client.images.remove(image_id, force=False, noprune=False)
    except docker.errors.APIError:
        pass  # in use by a container, a child image, or already gone: keep it
