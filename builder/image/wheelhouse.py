"""Hermetic inputs for image builds: wheels downloaded on the host, installed with `--no-index`.

pip inside a build cannot reach (or verify) an index here, and a build that downloads is neither
offline nor reproducible. So the builder downloads every wheel once on the host (`pip download
--only-binary=:all:` for the image's Python and platform, cached under `cache_dir()` by a hash
of the requirements), writes the unum wheel itself from the source tree (deterministic zip, no
build backend), and images install from those folders only.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from unum_entry.errors import BuildError

Progress = Callable[[str], None]
PACKAGES = ("unum_entry", "builder")
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class WheelTarget:
    """The interpreter and platform inside the image (the base images run CPython 3.11, glibc)."""

    python_version: str = "3.11"
    implementation: str = "cp"
    platforms: tuple[str, ...] = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")


DEFAULT_TARGET = WheelTarget()


def project_root() -> Path:
    """The unum source tree this builder runs from (holds pyproject.toml and Dockerfile.base)."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "pyproject.toml").is_file():
        raise BuildError(f"{root}: no pyproject.toml; the builder needs the unum source tree to build images")
    return root


def cache_dir() -> Path:
    """`$UNUM_CACHE_DIR`, else `$XDG_CACHE_HOME/unum`, else `~/.cache/unum`."""
    if os.environ.get("UNUM_CACHE_DIR"):
        return Path(os.environ["UNUM_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "unum"


def project_metadata(root: Path) -> dict:
    with open(root / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def base_requirements(root: Path, extras: Sequence[str] = ("aws", "gcp")) -> list[str]:
    """unum's own dependencies plus those of `extras`, from pyproject.toml."""
    project = project_metadata(root)
    requirements = list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise BuildError(f"{root / 'pyproject.toml'}: no optional-dependencies extra {extra!r}")
        requirements += [r for r in optional[extra] if r not in requirements]
    return requirements


def download_wheels(requirements: Sequence[str], *, target: WheelTarget = WheelTarget(),
                    progress: Progress = lambda _: None) -> Path:
    """A folder holding wheels for `requirements` and all their dependencies, plus a
    `requirements.txt` naming the top-level ones. Cached: the second call does no I/O."""
    requirements = sorted(set(requirements))
    key = hashlib.sha256(json.dumps([requirements, target.__dict__], sort_keys=True).encode()).hexdigest()[:16]
    folder = cache_dir() / "wheels" / key
    if (folder / ".complete").is_file():
        return folder
    progress(f"wheelhouse: downloading wheels for {', '.join(requirements)}")
    # A folder of this call's own: two builds at once (two test workers, two terminals) must not
    # download into, or delete, each other's; the first to finish puts its folder in place.
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=key + ".partial-", dir=folder.parent))
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
               "--only-binary=:all:", "--python-version", target.python_version,
               "--implementation", target.implementation, "-d", str(partial)]
    for platform in target.platforms:
        command += ["--platform", platform]
    result = subprocess.run([*command, *requirements], capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        errors = [line for line in result.stderr.splitlines() if "ERROR" in line] or result.stderr.splitlines()[-5:]
        shutil.rmtree(partial, ignore_errors=True)
        raise BuildError(f"wheelhouse: pip download of {', '.join(requirements)} failed: {' '.join(errors)}")
    (partial / "requirements.txt").write_text("".join(f"{r}\n" for r in requirements))
    (partial / ".complete").write_text("")
    try:
        partial.rename(folder)  # atomic: `folder` is absent or complete, never half-written
    except OSError:  # it exists: another call's, put in place first (as good as ours), or a stray one
        if not (folder / ".complete").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            with contextlib.suppress(OSError):
                partial.rename(folder)
    shutil.rmtree(partial, ignore_errors=True)
    if not (folder / ".complete").is_file():
        raise BuildError(f"wheelhouse: {folder} could not be put in place; delete it and build again")
    progress(f"wheelhouse: {sum(1 for _ in folder.glob('*.whl'))} wheels in {folder}")
    return folder


def read_requirements(path: Path) -> list[str]:
    """Requirement lines of a requirements.txt (comments and blanks dropped). Options such as
    `-r` or `--index-url` are refused: builds are hermetic."""
    lines = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("-"):
            raise BuildError(f"{path}:{number}: pip options ({line.split()[0]}) are not supported; list requirements only")
        lines.append(line)
    return lines


def write_unum_wheel(root: Path, dest: Path) -> Path:
    """Write `unum-VERSION-py3-none-any.whl` from the source tree into `dest` (deterministic:
    sorted entries, fixed timestamps), with the project's dependencies as metadata."""
    project = project_metadata(root)
    name, version = project["name"], project["version"]
    dist_info = f"{name}-{version}.dist-info"
    files: list[tuple[str, bytes]] = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files.append((path.relative_to(root).as_posix(), path.read_bytes()))
    metadata = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
                f"Requires-Python: {project.get('requires-python', '>=3.11')}"]
    metadata += [f"Requires-Dist: {r}" for r in project.get("dependencies", [])]
    for extra, requirements in sorted(project.get("optional-dependencies", {}).items()):
        metadata.append(f"Provides-Extra: {extra}")
        metadata += [f"Requires-Dist: {r} ; extra == \"{extra}\"" for r in requirements]
    scripts = project.get("scripts", {})
    files.append((f"{dist_info}/METADATA", ("\n".join(metadata) + "\n").encode()))
    files.append((f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: unum-builder\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    if scripts:
        entry_points = "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in sorted(scripts.items()))
        files.append((f"{dist_info}/entry_points.txt", entry_points.encode()))
    record = "".join(f"{path},sha256={_digest(data)},{len(data)}\n" for path, data in files) + f"{dist_info}/RECORD,,\n"
    files.append((f"{dist_info}/RECORD", record.encode()))
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for member, data in files:
            info = zipfile.ZipInfo(member, date_time=_ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return wheel


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
