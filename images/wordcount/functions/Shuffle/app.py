def handler(event, context):
    """The shuffle: regroup the mappers' partitions by reducer (reducer r gets partition r of
    every mapper that produced one)."""
    reducers = event["reducers"]
    parts = [[] for _ in range(reducers)]
    for mapped in event["mapped"]:
        if len(mapped["partitions"]) != reducers:
            raise ValueError(f"mapper {mapped['mapper']} made {len(mapped['partitions'])} partitions, expected {reducers}")
        for r, counts in enumerate(mapped["partitions"]):
            if counts:
                parts[r].append(counts)
    return {"partitions": parts, "mapped_words": sum(m["words"] for m in event["mapped"])}
