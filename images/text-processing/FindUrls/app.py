import re


def handler(event, context):
    """Find the http(s) URLs in the post."""
    return {"text": event["text"], "urls": re.findall(r"https?://[^\s,;!?]+", event["text"])}
