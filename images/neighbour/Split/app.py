def handler(event, context):
    """Cut the 'video' (a list of frame values) into chunks of chunk_size frames."""
    frames, size = event["frames"], event["chunk_size"]
    return [frames[i:i + size] for i in range(0, len(frames), size)]
