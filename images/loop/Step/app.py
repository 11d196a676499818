def handler(event, context):
    """One Collatz step: n -> n/2 if even, else 3n+1; track the step count and the peak."""
    n = event["n"]
    nxt = n // 2 if n % 2 == 0 else 3 * n + 1
    return {"start": event.get("start", n), "n": nxt, "steps": context.iteration + 1,
            "peak": max(event.get("peak", n), nxt)}
