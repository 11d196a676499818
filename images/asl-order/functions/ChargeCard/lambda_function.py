class CardDeclined(Exception):
    """The payment provider declined the card."""


def lambda_handler(event, context):
    """Charge the sum of the priced lines; cards starting with 0000 are declined."""
    if event["card"].startswith("0000"):
        raise CardDeclined(f"card ending {event['card'][-4:]} declined")
    total = sum(line["cents"] for line in event["priced"])
    return {"charged_cents": total, "receipt": f"r-{event['order_id']}"}
