"""Function images: build (base + one layered image per function), the offline wheelhouse,
and pushing to a registry (local, ECR, Artifact Registry)."""
