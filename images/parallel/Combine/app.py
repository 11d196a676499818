def handler(event, context):
    """Merge the three branch results (a list in branch order) into one record."""
    merged = {}
    for part in event:
        merged.update(part)
    return merged
