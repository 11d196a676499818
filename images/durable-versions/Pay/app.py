"""A payment as a Lambda durable function (aws-durable-execution-sdk-python only): reserve the
amount, wait a cool-off, charge it. docs/versions.md upgrades a workflow of it while it waits."""

from aws_durable_execution_sdk_python import DurableContext, durable_execution
from aws_durable_execution_sdk_python.config import Duration


@durable_execution
def handler(event: dict, context: DurableContext) -> dict:
    reserved = context.step(lambda _: event["amount"], name="reserve")
    context.wait(Duration.from_seconds(event["cool_off_seconds"]), name="cool-off")
    return context.step(lambda _: {"order": event["order"], "charged": reserved, "charged_by": "v1"}, name="charge")
