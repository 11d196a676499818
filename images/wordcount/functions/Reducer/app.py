import json
from collections import Counter

from app_objects import get


def handler(event, context):
    """Sum one reducer's word counts over every mapper (read from its object); keep its `top`
    most frequent words (ties by word), which is enough for an exact global top-N (each word has
    one reducer)."""
    total = Counter()
    for counts in json.loads(get(event["objects"], event["key"])):
        total.update(counts)
    ranked = sorted(total.items(), key=lambda item: (-item[1], item[0]))
    return {"reducer": event["reducer"], "words": sum(total.values()), "distinct": len(total),
            "top": [list(item) for item in ranked[:event["top"]]]}
