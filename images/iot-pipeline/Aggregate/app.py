import statistics


def handler(event, context):
    """Group readings per sensor and compute count, mean, median and median absolute deviation."""
    by_sensor = {}
    for r in event["readings"]:
        by_sensor.setdefault(r["sensor"], []).append([r["t"], r["value"]])
    stats = {}
    for sensor, series in sorted(by_sensor.items()):
        values = [v for _, v in series]
        median = statistics.median(values)
        stats[sensor] = {"count": len(values), "mean": round(statistics.fmean(values), 2), "median": median,
                         "mad": statistics.median(abs(v - median) for v in values), "series": series}
    return {"sensors": stats, "malformed": event["malformed"]}
