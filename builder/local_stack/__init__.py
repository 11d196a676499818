"""The local cloud stack tests and `local-aws` run against: managed processes (moto server,
Firestore / Pub/Sub emulators), Lambda containers behind an async Invoke endpoint."""
