"""A Task handler with a transactional, compensated step (issue 6 API inside a compiled Task)."""

from unum_entry.steps import durable


def debit(tx, account, amount):
    item = tx.get("accounts", account) or {"balance": 100}
    tx.put("accounts", account, {"balance": item["balance"] - amount})
    return item["balance"] - amount


def refund(tx, balance_after, account, amount):
    item = tx.get("accounts", account)
    tx.put("accounts", account, {"balance": item["balance"] + amount})


@durable
def handler(event, ctx):
    balance = ctx.transact("debit", debit, event["account"], event["amount"], compensate=refund)
    if event.get("abort"):
        ctx.abort("Cancelled", "the caller cancelled the transfer")
    return {"balance": balance, "ref": ctx.uuid4()}
