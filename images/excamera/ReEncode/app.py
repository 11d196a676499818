import app_objects
from excamera_codec import load_packets, store_packets, xcdec, xcenc


def handler(event, context):
    """xcenc: re-encode chunk i after chunk i-1's decoded state. `event` is [own vpxenc output]
    for the first chunk (it keeps its key frame) and [own vpxenc output, Decode[i-1]] after (the
    neighbour join); the Step Functions version sends {"own": ..., "prev": ... or null}. Packets
    and states are read from the bucket by key; the re-encoded chunk goes back to it."""
    if isinstance(event, dict):  # images/excamera-sfn
        event = [event["own"]] + ([event["prev"]] if event.get("prev") is not None else [])
    own = event[0]
    chunk = own["chunk"]
    objects = chunk["objects"]
    guide = load_packets(objects, own["packets"])
    if len(event) == 1:
        packets = guide
    else:
        neighbour = event[1]
        if neighbour["index"] != chunk["index"] - 1:
            raise ValueError(f"chunk {chunk['index']} got the state of chunk {neighbour['index']}")
        packets = xcenc(chunk["video"], chunk, app_objects.get(objects, neighbour["state"]), guide)
    shown, _ = xcdec(packets)  # on its own (the hidden reference included) it must show every frame
    key = store_packets(objects, f"excamera/{context.workflow_id}/xcenc-{chunk['index']:05d}", packets)
    return {"index": chunk["index"], "frames": chunk["count"], "packets": key, "decodable": shown == chunk["count"],
            "vpxenc_bytes": own["bytes"], "video": chunk["video"], "objects": objects}
