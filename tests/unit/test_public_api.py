"""The public API of `unum_entry`: every documented name resolves, lazily, and importing the
package imports no cloud SDK (a Lambda cold start pays only for what it uses)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import unum_entry

pytestmark = pytest.mark.unit

HEAVY = ("boto3", "botocore", "google.cloud.firestore", "google.cloud.pubsub", "google.cloud.pubsub_v1",
         "google.api_core", "grpc")


def test_every_exported_name_resolves_to_the_documented_object():
    from unum_entry.context import InvocationContext
    from unum_entry.errors import UnumError
    from unum_entry.local.platform import local_platform
    from unum_entry.steps import durable
    from unum_entry.stores import open_store

    assert (unum_entry.durable, unum_entry.InvocationContext, unum_entry.local_platform, unum_entry.open_store,
            unum_entry.UnumError) == (durable, InvocationContext, local_platform, open_store, UnumError)
    for name in unum_entry.__all__:
        assert getattr(unum_entry, name) is not None, name
        assert name in (unum_entry.__doc__ or "") or name in unum_entry._ERRORS, f"{name} is not documented"


def test_every_exported_error_is_an_unum_error():
    for name in unum_entry._ERRORS:
        assert issubclass(getattr(unum_entry, name), unum_entry.UnumError), name


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        unum_entry.nope  # noqa: B018


def test_importing_the_package_imports_no_cloud_sdk_and_no_runtime_module():
    code = ("import sys; before = set(sys.modules); import unum_entry; "
            "print('\\n'.join(sorted(set(sys.modules) - before)))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    new = loaded.stdout.split()
    assert "unum_entry" in new
    assert not [m for m in new if m.startswith(HEAVY)], new
    # only the lazy-export helper (stdlib imports only), which hands the names on
    assert [m for m in new if m.startswith("unum_entry.")] == ["unum_entry.lazy"], f"imported eagerly: {new}"


def test_the_package_is_marked_typed():
    from importlib.resources import files

    assert files("unum_entry").joinpath("py.typed").is_file()
