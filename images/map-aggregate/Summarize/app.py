def handler(event, context):
    """Sum the measurements (a list in word order) and find the longest word."""
    return {"words": len(event),
            "lengths": [m["length"] for m in event],
            "total_length": sum(m["length"] for m in event),
            "sum_of_squares": sum(m["square"] for m in event),
            "longest": max(event, key=lambda m: m["length"])["word"] if event else None}
