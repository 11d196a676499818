"""An order as a Lambda durable function, written against aws-durable-execution-sdk-python only
(nothing from unum): it runs unchanged on Lambda's durable service and on unum.

map (price each line) -> invoke (the Tax function) -> parallel (stock and fraud checks) ->
run_in_child_context (shipping) -> wait (cool-off) -> wait_for_condition (poll a warehouse) ->
wait_for_callback (approval, when the input asks for one) -> step (charge)."""

import json
from pathlib import Path

from aws_durable_execution_sdk_python import DurableContext, StepContext, durable_execution, durable_step
from aws_durable_execution_sdk_python.config import Duration, WaitForCallbackConfig
from aws_durable_execution_sdk_python.waits import WaitForConditionConfig, WaitForConditionDecision


@durable_step
def price_line(step_context: StepContext, line: dict) -> dict:
    return {"sku": line["sku"], "total": round(line["qty"] * line["price"], 2)}


@durable_step
def charge(step_context: StepContext, order_id: str, amount: float) -> dict:
    return {"order": order_id, "charged": amount}


def poll_warehouse(state: dict, check_context) -> dict:
    return {"polls": state["polls"] + 1, "ready": state["polls"] + 1 >= 2}


def until_ready(state: dict, attempts: int) -> WaitForConditionDecision:
    if state["ready"]:
        return WaitForConditionDecision.stop_polling()
    return WaitForConditionDecision.continue_waiting(Duration.from_seconds(1))


def shipping(context: DurableContext, order: dict) -> dict:
    label = context.step(lambda _: f"label-{order['id']}", name="label")
    return {"label": label, "carrier": "unum-post"}


@durable_execution
def handler(event: dict, context: DurableContext) -> dict:
    lines = context.map(event["lines"], lambda ctx, line, i, all_lines: ctx.step(price_line(line)),
                        name="price-lines").get_results()
    subtotal = round(sum(line["total"] for line in lines), 2)
    tax = context.invoke("Tax", {"subtotal": subtotal}, name="tax")
    checks = context.parallel([
        lambda ctx: ctx.step(lambda _: "in-stock", name="stock"),
        lambda ctx: ctx.step(lambda _: "low-risk", name="fraud"),
    ], name="checks").get_results()
    ship = context.run_in_child_context(lambda ctx: shipping(ctx, event), name="shipping")
    context.wait(Duration.from_seconds(event.get("cool_off_seconds", 1)), name="cool-off")
    warehouse = context.wait_for_condition(
        poll_warehouse, WaitForConditionConfig(wait_strategy=until_ready, initial_state={"polls": 0, "ready": False}),
        name="warehouse")
    approval = "auto-approved"
    if event.get("callback_file"):  # someone else approves: the submitter hands them the callback id
        def submit(callback_id: str, ctx) -> None:
            Path(event["callback_file"]).write_text(callback_id)

        approval = json.loads(context.wait_for_callback(
            submit, name="approval", config=WaitForCallbackConfig(timeout=Duration.from_seconds(300))))
    charged = context.step(charge(event["id"], round(subtotal + tax["tax"], 2)), name="charge")
    return {"order": event["id"], "subtotal": subtotal, "tax": tax["tax"], "checks": checks, "shipping": ship,
            "warehouse_polls": warehouse["polls"], "approval": approval, "charged": charged["charged"]}
