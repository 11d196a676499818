def handler(event, context):
    """Shelve the books."""
    return {"shelved": f"{event['label']} for {event['execution']}"}
