import base64

from excamera_codec import unpack, xcdec


def handler(event, context):
    """xcdec: decode this chunk's encoding; its last decoded frame is the state the next chunk's
    re-encode starts from."""
    shown, state = xcdec(unpack(event["packets"]))
    if shown != event["chunk"]["count"]:
        raise ValueError(f"chunk {event['chunk']['index']}: decoded {shown} frames, encoded {event['chunk']['count']}")
    return {"index": event["chunk"]["index"], "state": base64.b64encode(state).decode("ascii")}
