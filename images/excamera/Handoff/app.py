def handler(event, context):
    """Hand this chunk's vpxenc output to its own re-encode (slot 0 of ReEncode[i]), while Decode
    hands its decoded state to the next chunk's (slot 1 of ReEncode[i+1]): a function joins one
    set, so the branch forks in two."""
    return event
