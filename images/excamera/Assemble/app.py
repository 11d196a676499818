from excamera_codec import splice_and_check


def handler(event, context):
    """Splice the re-encoded chunks (in chunk order) into one stream, decode it and check it."""
    if [c["index"] for c in event] != list(range(len(event))):
        raise ValueError(f"chunks out of order: {[c['index'] for c in event]}")
    return splice_and_check(event[0]["video"], event)
