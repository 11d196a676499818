def handler(event, context):
    """Send the customer a review request carrying the task token (an email service would be
    called here; whoever answers completes the Task: python -m builder task-success TOKEN ...)."""
    return {"asked": event["order"]}
