import base64

from excamera_codec import pack, unpack, xcdec, xcenc


def handler(event, context):
    """xcenc: re-encode chunk i after chunk i-1's decoded state. `event` is [own vpxenc output]
    for the first chunk (it keeps its key frame) and [own vpxenc output, Decode[i-1]] after (the
    neighbour join); the Step Functions version sends {"own": ..., "prev": ... or null}."""
    if isinstance(event, dict):  # images/excamera-sfn
        event = [event["own"]] + ([event["prev"]] if event.get("prev") is not None else [])
    own = event[0]
    chunk, guide = own["chunk"], unpack(own["packets"])
    if len(event) == 1:
        packets = guide
    else:
        neighbour = event[1]
        if neighbour["index"] != chunk["index"] - 1:
            raise ValueError(f"chunk {chunk['index']} got the state of chunk {neighbour['index']}")
        packets = xcenc(chunk["video"], chunk, base64.b64decode(neighbour["state"]), guide)
    shown, _ = xcdec(packets)  # on its own (the hidden reference included) it must show every frame
    return {"index": chunk["index"], "frames": chunk["count"], "packets": pack(packets),
            "decodable": shown == chunk["count"], "vpxenc_bytes": own["bytes"], "video": chunk["video"]}
