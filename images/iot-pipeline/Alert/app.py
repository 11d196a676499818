def handler(event, context):
    """Turn the anomalies into alert messages (terminal)."""
    return {"alerts": [f"{a['sensor']} read {a['value']} at t={a['t']}" for a in event["anomalies"]],
            "malformed": event["malformed"], "summary": event["summary"]}
