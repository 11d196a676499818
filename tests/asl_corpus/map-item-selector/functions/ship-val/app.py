def handler(event, context):
    """Validate one parcel."""
    return {**event, "valid": event["parcel"]["quantity"] > 0}
