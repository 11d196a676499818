def handler(event, context):
    """Sum a batch; refuse a batch of one."""
    if len(event["Items"]) == 1:
        raise ValueError("last batch refused")
    return {"tag": event["BatchInput"]["tag"], "sum": sum(event["Items"])}
