import re


def handler(event, context):
    """Collect the @mentions (deduplicated, in order of appearance) and the author."""
    return {"author": event["author"], "mentions": list(dict.fromkeys(re.findall(r"@(\w+)", event["text"])))}
