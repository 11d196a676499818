from app_objects import resolve
from wordcount_corpus import ranges

DEFAULTS = {"mappers": 262, "reducers": 250, "corpus_fraction": 1.0, "top": 10, "objects": None}  # the paper's 262 x 250


def handler(event, context):
    """Cut the corpus (or its first `corpus_fraction`) into one line-aligned byte range per mapper,
    and fix the bucket the mappers' and the shuffle's data go through (app_objects.py)."""
    config = {**DEFAULTS, **(event or {})}
    unknown = sorted(set(config) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"unknown input field {unknown[0]!r} (fields: {', '.join(DEFAULTS)})")
    mappers, reducers, top = int(config["mappers"]), int(config["reducers"]), int(config["top"])
    fraction = float(config["corpus_fraction"])
    if mappers < 1 or reducers < 1 or top < 1 or not 0 < fraction <= 1:
        raise ValueError(f"need mappers >= 1, reducers >= 1, top >= 1 and 0 < corpus_fraction <= 1, got {config}")
    used, cut = ranges(fraction, mappers)
    return {"ranges": [{"mapper": i, "start": s, "end": e} for i, (s, e) in enumerate(cut)],
            "meta": {"mappers": mappers, "reducers": reducers, "top": top, "corpus_bytes": used,
                     "objects": resolve(config["objects"])}}
