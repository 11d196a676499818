SIGN = {"open": 1, "deposit": 1, "interest": 1, "withdraw": -1, "fee": -1}


def handler(event, context):
    """Turn one ledger entry into a signed amount in cents (in parallel with the others)."""
    kind, amount = event
    return {"line": context.index, "kind": kind, "delta": SIGN[kind] * round(float(amount) * 100)}
