"""Lambda's names for durable executions, in AWS's format (botocore's `lambda` model patterns).

- a durable execution: `arn:aws:lambda:REGION:ACCOUNT:function:FUNCTION:$LATEST/durable-execution/NAME/ID`
  (the model's `DurableExecutionArn` pattern; the SDK splits it on `/`);
- a function: a name, `NAME:QUALIFIER`, a partial ARN `ACCOUNT:function:NAME[:QUALIFIER]` or a
  full ARN (the model's `NamespacedFunctionName`), qualified only by `$LATEST` here: unum
  publishes no Lambda versions or aliases.

Parsing refuses what Lambda refuses: `InvalidParameterValueException` for an ARN of another
shape, `ResourceNotFoundException` for another region, account or qualifier.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.serve.wire import ApiError

LATEST = "$LATEST"
_EXECUTION = re.compile(r"arn:([a-zA-Z0-9-]+):lambda:([a-zA-Z0-9-]+):(\d{12}):function:([a-zA-Z0-9_-]+):"
                        r"(\$LATEST(?:\.PUBLISHED)?|[0-9]+)/durable-execution/([a-zA-Z0-9_-]+)/([a-zA-Z0-9_-]+)")
_FUNCTION = re.compile(r"(?:arn:aws[a-zA-Z-]*:lambda:([a-z0-9-]+):)?(?:(\d{12}):)?(?:function:)?"
                       r"([a-zA-Z0-9_.-]+)(?::(\$LATEST(?:\.PUBLISHED)?|[a-zA-Z0-9_-]+))?")
_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


@dataclass(frozen=True)
class ExecutionRef:
    function: str
    name: str
    id: str


@dataclass(frozen=True)
class LambdaArns:
    """ARNs of one account and region (`serve --region --account`)."""

    region: str
    account: str

    def function(self, name: str) -> str:
        return f"arn:aws:lambda:{self.region}:{self.account}:function:{name}"

    def execution(self, function: str, name: str, execution_id: str) -> str:
        return f"{self.function(function)}:{LATEST}/durable-execution/{name}/{execution_id}"

    def parse_execution(self, arn: str) -> ExecutionRef:
        """The function, name and id of a durable execution ARN (module docstring)."""
        found = _EXECUTION.fullmatch(arn)
        if found is None:
            raise ApiError("InvalidParameterValueException",
                           f"DurableExecutionArn {arn!r} is not a durable execution ARN (arn:aws:lambda:REGION:"
                           "ACCOUNT:function:FUNCTION:$LATEST/durable-execution/NAME/ID)")
        _, region, account, function, _qualifier, name, execution_id = found.groups()
        if region != self.region or account != self.account:
            raise ApiError("ResourceNotFoundException", f"Durable execution not found: {arn} (this server answers "
                                                        f"region {self.region}, account {self.account})", 404)
        return ExecutionRef(function, name, execution_id)

    def parse_function(self, text: str) -> str:
        """The function name in a FunctionName member (module docstring)."""
        found = _FUNCTION.fullmatch(text)
        if found is None:
            raise ApiError("InvalidParameterValueException", f"FunctionName {text!r} is not a function name or ARN")
        region, account, name, qualifier = found.groups()
        if (region is not None and region != self.region) or (account is not None and account != self.account):
            raise ApiError("ResourceNotFoundException", f"Function not found: {text} (this server answers region "
                                                        f"{self.region}, account {self.account})", 404)
        if qualifier is not None and qualifier != LATEST:
            raise ApiError("ResourceNotFoundException", f"Function not found: {self.function(name)}:{qualifier} "
                                                        "(unum serve runs $LATEST only: no versions or aliases)", 404)
        return name


def check_execution_name(name: str) -> str:
    """`name` if Lambda accepts it as a durable execution name (1-64 of [a-zA-Z0-9_-])."""
    if not _NAME.fullmatch(name):
        raise ApiError("InvalidParameterValueException",
                       f"DurableExecutionName {name!r}: 1-64 characters from a-z, A-Z, 0-9, '-' and '_'")
    return name
