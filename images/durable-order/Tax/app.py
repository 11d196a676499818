"""The tax of an order, a durable function that the order invokes (`context.invoke("Tax", ...)`)."""

from aws_durable_execution_sdk_python import DurableContext, durable_execution


@durable_execution
def handler(event: dict, context: DurableContext) -> dict:
    rate = context.step(lambda _: 0.2, name="rate")
    return {"rate": rate, "tax": round(event["subtotal"] * rate, 2)}
