class CustomError(Exception):
    pass


def handler(event, context):
    """Always fail."""
    raise CustomError("This is a custom error!")
