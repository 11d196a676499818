def handler(event, context):
    """Re-encode chunk i against chunk i-1's last frame: its keyframe becomes a delta."""
    chunk = event[0]
    if len(event) == 1:
        return {"last": chunk["last"], "stream": chunk["tokens"], "keyframes_dropped": 0}
    prev = event[1]
    rebased = [f"{chunk['first'] - prev['last']:+d}"] + chunk["tokens"][1:]
    return {"last": chunk["last"], "stream": prev["stream"] + rebased,
            "keyframes_dropped": prev["keyframes_dropped"] + 1}
