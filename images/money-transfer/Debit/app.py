"""Debit the source account: one transactional step (balance update + step record, atomically)."""

from unum_entry.steps import durable

ACCOUNTS = "accounts"


def open_accounts(tx, balances):
    """Demo set-up: give accounts that do not exist yet their opening balance."""
    for account, balance in sorted(balances.items()):
        if tx.get(ACCOUNTS, account) is None:
            tx.put(ACCOUNTS, account, {"balance": balance, "status": "open"})
    return sorted(balances)


def debit(tx, account, amount):
    """Take `amount` from `account`; returns the new balance, or None when it cannot."""
    item = tx.get(ACCOUNTS, account)
    if item is None or item["status"] != "open" or item["balance"] < amount:
        return None
    tx.put(ACCOUNTS, account, {**item, "balance": item["balance"] - amount})
    return item["balance"] - amount


def refund(tx, balance_after, account, amount):
    """Compensation of `debit`: give the amount back."""
    if balance_after is None:
        return None  # the debit did not happen: nothing to undo
    item = tx.get(ACCOUNTS, account)
    tx.put(ACCOUNTS, account, {**item, "balance": item["balance"] + amount})
    return item["balance"] + amount


@durable
def handler(event, ctx):
    ctx.transact("open accounts", open_accounts, event.get("open", {}))
    balance = ctx.transact("debit", debit, event["from"], event["amount"], compensate=refund)
    if balance is None:
        ctx.abort("InsufficientFunds", f"account {event['from']!r} cannot pay {event['amount']}")
    return {**event, "from_balance": balance}
