def handler(event, context):
    """Extract format, megapixels and orientation from the record."""
    w, h = event["width"], event["height"]
    return {"metadata": {"format": event["name"].rsplit(".", 1)[-1],
                         "megapixels": round(w * h / 1e6, 1),
                         "orientation": "landscape" if w >= h else "portrait",
                         **event.get("exif", {})}}
