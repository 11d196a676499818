"""Image build inputs without Docker: the unum wheel, the function Dockerfile's layer order,
reproducible build contexts, requirements parsing, names."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import pytest

from builder.image.build import _tar_files, function_dockerfile, image_repository, resolve_functions
from builder.image.wheelhouse import base_requirements, project_root, read_requirements, write_unum_wheel
from unum_entry.errors import BuildError

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]


def test_unum_wheel_is_reproducible_and_complete(tmp_path: Path) -> None:
    first = write_unum_wheel(project_root(), tmp_path / "a").read_bytes()
    second = write_unum_wheel(project_root(), tmp_path / "b").read_bytes()
    assert first == second
    with zipfile.ZipFile(io.BytesIO(first)) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read("unum-0.1.0.dist-info/METADATA").decode()
        record = wheel.read("unum-0.1.0.dist-info/RECORD").decode()
    assert {"unum_entry/__main__.py", "unum_entry/platforms/aws_lambda.py", "builder/cli.py"} <= names
    assert not any("__pycache__" in n for n in names)
    assert 'Requires-Dist: awslambdaric>=2.0 ; extra == "aws"' in metadata
    assert all(line.split(",")[0] in names for line in record.splitlines())


def test_base_requirements_include_both_clouds() -> None:
    requirements = " ".join(base_requirements(project_root()))
    for package in ("boto3", "awslambdaric", "google-cloud-firestore", "google-cloud-pubsub", "functions-framework", "msgpack"):
        assert package in requirements
    with pytest.raises(BuildError, match="no optional-dependencies extra 'azure'"):
        base_requirements(project_root(), extras=("azure",))


def test_function_dockerfile_puts_code_and_ir_last() -> None:
    plain = function_dockerfile("unum/base:latest", has_requirements=False).splitlines()
    assert plain == ["FROM unum/base:latest", "COPY function/ /var/task/"]
    with_reqs = function_dockerfile("b", has_requirements=True).splitlines()
    assert with_reqs[-1] == "COPY function/ /var/task/"
    assert "--no-index" in with_reqs[2] and with_reqs.index("COPY wheels /tmp/unum-wheels") < len(with_reqs) - 1


def test_build_context_is_reproducible() -> None:
    files = [("function/app.py", b"print(1)\n"), ("function/unum-ir.json", b"{}")]
    first, second = _tar_files(files).getvalue(), _tar_files(files).getvalue()
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        assert {m.name: m.mtime for m in tar.getmembers()} == {"function/app.py": 0, "function/unum-ir.json": 0}


def test_requirements_are_plain_lines(tmp_path: Path) -> None:
    path = tmp_path / "requirements.txt"
    path.write_text("# tools\nsix==1.16.0  # pinned\n\nidna\n")
    assert read_requirements(path) == ["six==1.16.0", "idna"]
    path.write_text("six\n--index-url http://example\n")
    with pytest.raises(BuildError, match="requirements.txt:2"):
        read_requirements(path)


def test_function_folder_takes_its_workflow_name_from_the_parent(tmp_path: Path) -> None:
    name, specs = resolve_functions(REPO / "images" / "chain" / "Shout")
    assert (name, [s.ir.function for s in specs]) == ("chain", ["Shout"])
    name, specs = resolve_functions(REPO / "images" / "chain")
    assert [s.ir.function for s in specs] == ["Hello", "Shout", "Sign"]
    with pytest.raises(BuildError, match="neither a workflow folder"):
        resolve_functions(tmp_path)


def test_repository_names_are_valid() -> None:
    assert image_repository("unum/", "IoT Pipeline", "Detect_Anomaly") == "unum/iot-pipeline-detect_anomaly"
    assert json.dumps(image_repository("", "a", "B")) == '"a-b"'


def test_two_wheelhouse_downloads_at_once_both_get_the_complete_folder(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Two builds of the same requirements at once (two e2e test workers, two terminals): each
    downloads into a folder of its own and the first to finish puts it in place, so neither
    deletes or fills the other's (one shared `.partial` folder failed both: FileExistsError,
    FileNotFoundError, a pip download whose folder vanished)."""
    import subprocess
    import threading
    import time

    from builder.image import wheelhouse

    def fake_pip(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        target = Path(command[command.index("-d") + 1])
        time.sleep(0.2)  # both downloads overlap
        (target / "msgpack-1.0.0-py3-none-any.whl").write_bytes(b"wheel")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setenv("UNUM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(wheelhouse.subprocess, "run", fake_pip)
    found: list[Path | BaseException] = []

    def download() -> None:
        try:
            found.append(wheelhouse.download_wheels(["msgpack>=1.0"]))
        except BaseException as exc:  # reported below
            found.append(exc)

    threads = [threading.Thread(target=download) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(found) == 2 and found[0] == found[1], found
    folder = found[0]
    assert isinstance(folder, Path)
    assert sorted(p.name for p in folder.iterdir()) == [".complete", "msgpack-1.0.0-py3-none-any.whl", "requirements.txt"]
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no partial folder left behind
