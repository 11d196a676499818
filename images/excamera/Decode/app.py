import app_objects
from excamera_codec import load_packets, xcdec


def handler(event, context):
    """xcdec: decode this chunk's encoding; its last decoded frame is the state the next chunk's
    re-encode starts from (stored in the bucket, the result carries its key)."""
    chunk = event["chunk"]
    shown, state = xcdec(load_packets(chunk["objects"], event["packets"]))
    if shown != chunk["count"]:
        raise ValueError(f"chunk {chunk['index']}: decoded {shown} frames, encoded {chunk['count']}")
    key = app_objects.put_content(chunk["objects"], f"excamera/{context.workflow_id}/state-{chunk['index']:05d}", state)
    return {"index": chunk["index"], "state": key}
