def handler(event, context):
    """Total and lines."""
    return {"total": sum(i["price"] for i in event["items"]), "lines": [i["name"] for i in event["items"]]}
