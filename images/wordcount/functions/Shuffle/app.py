import json

from app_objects import get, put_content


def handler(event, context):
    """The shuffle: read every mapper's object, regroup the partitions by reducer (reducer r gets
    partition r of every mapper that produced one) and store one object per reducer."""
    reducers, objects = event["reducers"], event["objects"]
    parts = [[] for _ in range(reducers)]
    for mapped in event["mapped"]:
        partitions = json.loads(get(objects, mapped["key"]))
        if len(partitions) != reducers:
            raise ValueError(f"mapper {mapped['mapper']} made {len(partitions)} partitions, expected {reducers}")
        for r, counts in enumerate(partitions):
            if counts:
                parts[r].append(counts)
    keys = [put_content(objects, f"wordcount/{context.workflow_id}/reduce-{r:05d}",
                        json.dumps(p, separators=(",", ":")).encode()) for r, p in enumerate(parts)]
    return {"partitions": keys, "mapped_words": sum(m["words"] for m in event["mapped"])}
