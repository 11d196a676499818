import hashlib
import json


def handler(event, context):
    """'Publish' the post: give it a content-derived id and notify the mentioned users."""
    post_id = hashlib.sha256(json.dumps(event, sort_keys=True).encode()).hexdigest()[:12]
    return {"id": post_id, "post": event, "notified": [f"@{m}" for m in event["mentions"]]}
