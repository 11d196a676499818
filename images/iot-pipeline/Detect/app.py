def handler(event, context):
    """Flag readings more than 5 MADs from their sensor's median (robust to few samples)."""
    anomalies, summary = [], {}
    for sensor, s in event["sensors"].items():
        limit = 5 * max(s["mad"], 0.1)
        anomalies += [{"sensor": sensor, "t": t, "value": v} for t, v in s["series"] if abs(v - s["median"]) > limit]
        summary[sensor] = {k: s[k] for k in ("count", "mean", "median")}
    return {"summary": summary, "malformed": event["malformed"], "anomaly_count": len(anomalies), "anomalies": anomalies}
