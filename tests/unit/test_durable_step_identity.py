"""`transact` finds its step through `effects.step_identity`, the one place that reads the SDK's
private step-logger context (the SDK has no public accessor for a step's operation id). Checked
against the pinned SDK version: when the installed SDK differs from the one it was checked with,
the first test fails and says to re-check; a StepContext without the identity fails with one
line naming the version, and anything that is not a step's context is told where to call it."""

from __future__ import annotations

import logging
import re
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace

import pytest
from aws_durable_execution_sdk_python.identifier import OperationIdentifier
from aws_durable_execution_sdk_python.lambda_service import OperationType
from aws_durable_execution_sdk_python.logger import Logger, LogInfo
from aws_durable_execution_sdk_python.types import StepContext

from unum_entry.durable_functions import transact
from unum_entry.durable_functions.effects import SDK_CHECKED, SDK_DISTRIBUTION, step_identity
from unum_entry.errors import StepError

pytestmark = pytest.mark.unit

CONSTRAINTS = Path(__file__).resolve().parents[2] / "constraints.txt"


def _sdk_step_context(arn: str, operation_id: str) -> StepContext:
    """A StepContext built by the SDK's own calls, as StepOperation.execute builds it."""
    state = SimpleNamespace(durable_execution_arn=arn)
    handler_logger = Logger.from_log_info(logging.getLogger("test"), LogInfo(execution_state=state))  # type: ignore[arg-type]
    identifier = OperationIdentifier(operation_id=operation_id, parent_id=None, name="pay",
                                     operation_type=OperationType.STEP, sub_type=None)
    step_logger = handler_logger.with_log_info(LogInfo.from_operation_identifier(state, identifier, 1))  # type: ignore[arg-type]
    return StepContext(logger=step_logger, attempt=1)


def test_the_installed_sdk_is_the_one_step_identity_was_checked_with() -> None:
    pinned = re.search(rf"^{re.escape(SDK_DISTRIBUTION)}==(\S+)$", CONSTRAINTS.read_text(), re.MULTILINE)
    assert pinned is not None, f"{SDK_DISTRIBUTION} is not pinned in constraints.txt"
    assert version(SDK_DISTRIBUTION) == pinned.group(1) == SDK_CHECKED, (
        "the SDK changed: re-check effects.step_identity against its StepContext, then update SDK_CHECKED")


def test_step_identity_reads_the_arn_and_operation_id_of_an_sdk_step_context() -> None:
    assert step_identity(_sdk_step_context("unum:Pay/c-1", "op-7")) == ("unum:Pay/c-1", "op-7")


def test_a_step_context_without_its_identity_fails_with_one_line_naming_the_sdk_version() -> None:
    moved = StepContext(logger=SimpleNamespace(), attempt=1)  # type: ignore[arg-type]  # an SDK that moved it
    with pytest.raises(StepError) as raised:
        step_identity(moved, what="transact('credit')")
    message = str(raised.value)
    assert "\n" not in message and SDK_DISTRIBUTION in message and f"=={SDK_CHECKED}" in message
    assert message.startswith("transact('credit'): the installed")


@pytest.mark.parametrize("context", [None, object(), SimpleNamespace(logger=SimpleNamespace())])
def test_what_is_not_a_step_context_is_told_where_transact_belongs(context) -> None:
    assert step_identity(context) is None
    with pytest.raises(StepError, match="call it inside a durable step"):
        transact(context, "credit", lambda tx: None)


def test_a_step_context_of_an_execution_not_running_here_is_told_the_same() -> None:
    with pytest.raises(StepError, match="call it inside a durable step"):
        transact(_sdk_step_context("unum:Elsewhere/c-9", "op-1"), "credit", lambda tx: None)
