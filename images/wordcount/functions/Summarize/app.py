def handler(event, context):
    """Merge the reducers' results: totals and the global top-N words."""
    meta, reduced = event["meta"], event["reduced"]
    ranked = sorted((tuple(item) for r in reduced for item in r["top"]), key=lambda item: (-item[1], item[0]))
    words = sum(r["words"] for r in reduced)
    if words != event["mapped_words"]:
        raise ValueError(f"reducers counted {words} words, mappers {event['mapped_words']}")
    return {"corpus_bytes": meta["corpus_bytes"], "mappers": meta["mappers"], "reducers": len(reduced),
            "words": words, "distinct": sum(r["distinct"] for r in reduced),
            "top": [list(item) for item in ranked[:meta["top"]]]}
