"""How a durable function's `context.invoke` tells an unknown target from a transient failure:
the invoker's own list of functions (Pub/Sub's `functions=`, as the GCP deploy writes it), or the
platform's refusal (Lambda's ResourceNotFoundException, Pub/Sub's NotFound); anything else is
transient (the platform redelivers the caller). Over the real exception types, no I/O."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError
from google.api_core import exceptions as google_errors

from unum_entry.durable_functions.adapter import _not_found
from unum_entry.errors import InvokeError
from unum_entry.invokers.pubsub import PubSubInvoker

pytestmark = pytest.mark.unit


def _raised_from(cause: Exception) -> InvokeError:
    try:
        raise InvokeError("publish failed") from cause
    except InvokeError as exc:
        return exc


def test_a_pubsub_invoker_knows_the_deployed_functions_only_when_told() -> None:
    told = PubSubInvoker.from_url("pubsub://p?prefix=unum-x-&functions=Order,Tax")
    assert told.has_function("Tax") and not told.has_function("Missing")
    untold = PubSubInvoker.from_url("pubsub://p?prefix=unum-x-")
    assert untold.has_function("Missing")  # not known here: the publish tells


@pytest.mark.parametrize("cause, refused", [
    (ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "no"}}, "Invoke"), True),
    (google_errors.NotFound("Resource not found (resource=unum-x-Missing)."), True),
    (ClientError({"Error": {"Code": "TooManyRequestsException", "Message": "slow down"}}, "Invoke"), False),
    (google_errors.ServiceUnavailable("try again"), False),
    (google_errors.PermissionDenied("no"), False),
    (TimeoutError("publish timed out"), False),
])
def test_only_the_platforms_not_found_refuses_an_invoke(cause: Exception, refused: bool) -> None:
    assert _not_found(_raised_from(cause)) is refused
