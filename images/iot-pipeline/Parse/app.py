def handler(event, context):
    """Parse 'sensor,time,value' CSV lines; count the malformed ones instead of failing."""
    readings, bad = [], 0
    for line in event["csv"].strip().splitlines():
        try:
            sensor, t, value = line.split(",")
            readings.append({"sensor": sensor.strip(), "t": int(t), "value": float(value)})
        except ValueError:
            bad += 1
    return {"readings": readings, "malformed": bad}
