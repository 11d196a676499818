"""Credit the target account (transactional step); abort the transfer when it cannot be credited."""

from unum_entry.steps import durable

ACCOUNTS = "accounts"


def credit(tx, account, amount):
    """Add `amount` to `account`; returns the new balance, or None when the account is closed or unknown."""
    item = tx.get(ACCOUNTS, account)
    if item is None or item["status"] != "open":
        return None
    tx.put(ACCOUNTS, account, {**item, "balance": item["balance"] + amount})
    return item["balance"] + amount


def take_back(tx, balance_after, account, amount):
    """Compensation of `credit`."""
    if balance_after is None:
        return None
    item = tx.get(ACCOUNTS, account)
    tx.put(ACCOUNTS, account, {**item, "balance": item["balance"] - amount})
    return item["balance"] - amount


@durable
def handler(event, ctx):
    balance = ctx.transact("credit", credit, event["to"], event["amount"], compensate=take_back)
    if balance is None:
        # Runs the debit's compensation (in Debit's code) exactly once: the money goes back.
        ctx.abort("AccountUnavailable", f"account {event['to']!r} cannot be credited")
    return {**event, "to_balance": balance}
