"""Seeing workflows: `listing` (the workflows in a store, their status and age; removing them)
and `server` (the local web page of `python -m builder ui`)."""
