def handler(event, context):
    """Running balance: [entry_i] at i == 0, else [entry_i, balance_(i-1)]."""
    entry, prev = event[0], (event[1] if len(event) > 1 else {"balance": 0, "lowest": 0, "history": []})
    balance = prev["balance"] + entry["delta"]
    lowest = balance if not prev["history"] else min(prev["lowest"], balance)
    return {"balance": balance, "lowest": lowest, "history": prev["history"] + [balance]}
