"""Stores: the datastore each function coordinates through. `open_store` picks one by URL."""

from __future__ import annotations

from unum_entry.errors import StoreError
from unum_entry.stores.base import Kind, Record, SetState, Store


def open_store(url: str, **kwargs) -> Store:
    """Open a store from a URL.

    - `sqlite:///abs/path/unum.db?durability=full|normal|off`, or a bare path ending in `.db`
      (`.sqlite`, `.sqlite3`): the embedded SQLite store (`run`'s default; unum_entry.stores.sqlite).
    - `file:///abs/path` or another bare path: the embedded file store (a folder).
    - `dynamodb://TABLE?endpoint=http://127.0.0.1:PORT&region=us-east-1`: DynamoDB (boto3).
    - `firestore://COLLECTION?project=PROJECT&database=(default)`: Firestore (honours
      `FIRESTORE_EMULATOR_HOST`).
    """
    if url.startswith("dynamodb://"):
        from unum_entry.stores.dynamodb import DynamoDBStore  # lazy: boto3 is heavy

        return DynamoDBStore.from_url(url, **kwargs)
    if url.startswith("firestore://"):
        from unum_entry.stores.firestore import FirestoreStore  # lazy: google-cloud-firestore is heavy

        return FirestoreStore.from_url(url, **kwargs)
    from unum_entry.stores.sqlite import is_sqlite_location

    if is_sqlite_location(url):
        from unum_entry.stores.sqlite import SQLiteStore

        return SQLiteStore.from_url(url, **kwargs)
    if url.startswith("file://"):
        url = url[len("file://"):]
    if "://" in url:
        raise StoreError(f"unknown store URL {url!r}: use sqlite:///path.db, file:///path, dynamodb://TABLE or "
                         "firestore://COLLECTION")
    from unum_entry.stores.file import FileStore

    return FileStore(url, **kwargs)


__all__ = ["Kind", "Record", "SetState", "Store", "open_store"]
