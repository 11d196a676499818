def handler(event, context):
    """Join the branches ([shortened, mentions] in branch order) into one post."""
    shortened, mentions = event
    return {"author": mentions["author"], "text": shortened["text"],
            "mentions": mentions["mentions"], "links": shortened["links"]}
