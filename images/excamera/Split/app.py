from excamera_codec import plan, require_codec


def handler(event, context):
    """Cut the video into chunks (and fail at once, in one line, if the encoder is missing)."""
    require_codec()
    return plan(event)
