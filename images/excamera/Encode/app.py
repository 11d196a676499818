from excamera_codec import pack, vpxenc


def handler(event, context):
    """vpxenc: encode this chunk on its own (a key frame, then inter frames)."""
    packets = vpxenc(event["video"], event)
    return {"chunk": event, "packets": pack(packets), "bytes": sum(map(len, packets))}
