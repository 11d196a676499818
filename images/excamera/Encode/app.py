from excamera_codec import store_packets, vpxenc


def handler(event, context):
    """vpxenc: encode this chunk on its own (a key frame, then inter frames); the packets go to
    the bucket, the result carries their key."""
    packets = vpxenc(event["video"], event)
    key = store_packets(event["objects"], f"excamera/{context.workflow_id}/vpxenc-{event['index']:05d}", packets)
    return {"chunk": event, "packets": key, "bytes": sum(map(len, packets))}
