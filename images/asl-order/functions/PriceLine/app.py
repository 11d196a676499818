def handler(event, context):
    """Price one order line: quantity x unit price (cents)."""
    return {"sku": event["line"]["sku"], "cents": event["line"]["qty"] * event["line"]["unit_cents"]}
