"""Deployment artefacts per cloud: a SAM template for AWS (`aws.py`), a gcloud script for
Google Cloud Run functions (`gcp.py`)."""
