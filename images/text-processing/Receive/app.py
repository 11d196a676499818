def handler(event, context):
    """Accept a social-media post: trim it and collapse whitespace."""
    return {"author": event["author"], "text": " ".join(event["text"].split())}
