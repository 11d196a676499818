def handler(event, context):
    """Reserve stock for every line (an inventory service would be called here)."""
    return {"reserved": sum(line["qty"] for line in event["lines"])}
