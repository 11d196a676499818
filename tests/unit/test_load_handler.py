"""`load_handler`: a handler imports its sibling modules, and `sys.path` is left as it was."""

from __future__ import annotations

import sys

import pytest

from unum_entry.errors import HandlerLoadError
from unum_entry.handlers import load_handler

pytestmark = pytest.mark.unit


def test_a_handler_imports_its_sibling_modules_and_sys_path_is_unchanged(tmp_path):
    (tmp_path / "helper_eng12.py").write_text("def shout(s):\n    return s.upper()\n")
    (tmp_path / "app.py").write_text("import helper_eng12\n\ndef handler(event, ctx):\n"
                                     "    return helper_eng12.shout(event)\n")
    before = list(sys.path)
    handler = load_handler(tmp_path, "app.handler", function="F")
    assert sys.path == before
    assert str(tmp_path) not in sys.path
    assert handler("hi", None) == "HI"


def test_sys_path_is_unchanged_when_the_import_fails(tmp_path):
    (tmp_path / "app.py").write_text("import no_such_module_eng12\n")
    before = list(sys.path)
    with pytest.raises(HandlerLoadError, match="importing .*app.py failed: ModuleNotFoundError"):
        load_handler(tmp_path, "app.handler", function="F")
    assert sys.path == before


def test_two_functions_with_the_same_module_name_do_not_collide(tmp_path):
    for name in ("A", "B"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "app.py").write_text(f"def handler(event, ctx):\n    return {name!r}\n")
    a = load_handler(tmp_path / "A", "app.handler", function="A")
    b = load_handler(tmp_path / "B", "app.handler", function="B")
    assert (a(None, None), b(None, None)) == ("A", "B")
