def handler(event, context):
    """Accept an uploaded photo record and normalise its name."""
    return {**event, "name": event["name"].strip().lower()}
