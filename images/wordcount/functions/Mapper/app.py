import json
import zlib
from collections import Counter

from app_objects import put_content
from wordcount_corpus import words


def reducer_of(word: bytes, reducers: int) -> int:
    """The reducer that owns a word: a hash that is the same in every process (not hash())."""
    return zlib.crc32(word) % reducers


def handler(event, context):
    """Count the words of one byte range, split the counts into one partition per reducer, and
    store them as one object: the result carries its key, not the counts."""
    r, reducers = event["range"], event["reducers"]
    counts = Counter(words(r["start"], r["end"]))
    partitions = [{} for _ in range(reducers)]
    for word, n in counts.items():
        partitions[reducer_of(word, reducers)][word.decode()] = n
    key = put_content(event["objects"], f"wordcount/{context.workflow_id}/map-{r['mapper']:05d}",
                      json.dumps(partitions, separators=(",", ":")).encode())
    return {"mapper": r["mapper"], "words": sum(counts.values()), "key": key}
