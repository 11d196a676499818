"""The layering docs/architecture.md describes holds in the code, and its generated pictures are
up to date: the core never imports the steps layer, the rules import no core module, and no
unum_entry module imports builder."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_architecture", ROOT / "docs" / "gen_architecture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_core_does_not_import_the_steps_layer_and_the_rules_do_not_import_the_core():
    gen = _gen()
    for name, path in gen.modules().items():
        layer = gen.layer_of(name)
        imported = {gen.layer_of(m) for m in gen.module_imports(path)}
        if layer in ("runtime core", "rules", "adapters", "foundation"):
            assert "steps layer" not in imported, f"{name} imports the steps layer"
            assert "platforms" not in imported, f"{name} imports a platform"
        if layer in ("rules", "adapters", "foundation"):
            assert "runtime core" not in imported, f"{name} imports the runtime core"
        assert not any(m.startswith("builder") for m in gen.module_imports(path)), name


def test_every_module_has_a_layer():
    gen = _gen()
    assert [name for name in gen.modules() if gen.layer_of(name) is None] == []


def test_the_generated_pictures_are_up_to_date():
    run = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_architecture.py"), "--check"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
