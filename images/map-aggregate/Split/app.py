def handler(event, context):
    """Split the text into words (punctuation stripped)."""
    return {"words": [w.strip(".,;:!?\"'").lower() for w in event["text"].split() if w.strip(".,;:!?\"'")]}
