MAX_SIDE = 256


def handler(event, context):
    """Compute the thumbnail size: longest side MAX_SIDE, aspect ratio kept."""
    w, h = event["width"], event["height"]
    scale = MAX_SIDE / max(w, h)
    return {"thumbnail": {"width": round(w * scale), "height": round(h * scale)}}
