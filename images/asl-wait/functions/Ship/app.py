def handler(event, context):
    """Book the shipment."""
    return {"tracking": f"TRK-{event['order']}"}
