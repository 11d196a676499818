def handler(event, context):
    return {"greeting": event["greeting"].upper() + "!"}
