def handler(event, context):
    """x squared."""
    return event * event
