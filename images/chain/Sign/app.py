def handler(event, context):
    return {**event, "signed_by": context.function_name, "workflow": context.workflow_id}
