import zlib
from collections import Counter

from wordcount_corpus import words


def reducer_of(word: bytes, reducers: int) -> int:
    """The reducer that owns a word: a hash that is the same in every process (not hash())."""
    return zlib.crc32(word) % reducers


def handler(event, context):
    """Count the words of one byte range and split the counts into one partition per reducer."""
    r, reducers = event["range"], event["reducers"]
    counts = Counter(words(r["start"], r["end"]))
    partitions = [{} for _ in range(reducers)]
    for word, n in counts.items():
        partitions[reducer_of(word, reducers)][word.decode()] = n
    return {"mapper": r["mapper"], "words": sum(counts.values()), "partitions": partitions}
