def handler(event, context):
    """Emit the stream and decode it again as a check."""
    frames = []
    for token in event["stream"]:
        frames.append(int(token[1:]) if token[0] == "K" else frames[-1] + int(token))
    return {"stream": " ".join(event["stream"]), "keyframes_dropped": event["keyframes_dropped"],
            "decoded": frames}
