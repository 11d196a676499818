def handler(event, context):
    """Price the order and list what is wrong with it (if anything)."""
    total = sum(line["qty"] * line["price"] for line in event.get("lines", []))
    problems = [f"line {i}: quantity must be positive" for i, line in enumerate(event.get("lines", [])) if line["qty"] <= 0]
    if not event.get("lines"):
        problems.append("order has no lines")
    return {"order": event["id"], "customer": event["customer"], "tier": event.get("tier", "standard"),
            "total": total, "status": "invalid" if problems else "valid", "problems": problems}
