def handler(event, context):
    """Split a ledger ('open 100', 'deposit 50', ...) into one entry per line."""
    return [line.split() for line in event["ledger"].strip().splitlines()]
