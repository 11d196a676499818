"""Fails with TransientError on the first `failures` attempts of each invocation."""
_attempts: dict[str, int] = {}


class TransientError(Exception):
    pass


def handler(event, context):
    """Succeed on attempt failures+1."""
    seen = _attempts.get(context.aws_request_id, 0) + 1
    _attempts[context.aws_request_id] = seen
    if seen <= event["failures"]:
        raise TransientError(f"attempt {seen} failed")
    return {"attempts": seen}
