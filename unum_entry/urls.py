"""Resource URLs (`dynamodb://TABLE?…`, `firestore://COLLECTION?…`, `lambda://?…`,
`pubsub://PROJECT?…`): one parser, so every store and invoker rejects bad URLs the same way."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import parse_qs, urlsplit


def parse_resource_url(url: str, *, scheme: str, allowed: Sequence[str], usage: str,
                       error: Callable[[str], Exception], name: bool | None = True) -> tuple[str, dict[str, str]]:
    """(name, options) of `scheme://NAME?option=value&…`. `name` True: NAME is required; False:
    it must be absent (options only); None: optional. Raises `error(message)` for a wrong scheme,
    a path, an unknown or repeated option; each message quotes the URL and shows `usage`."""
    parts = urlsplit(url)
    bad_name = (name is True and not parts.netloc) or (name is False and parts.netloc)
    if parts.scheme != scheme or bad_name or parts.path not in ("", "/"):
        raise error(f"URL {url!r} is malformed: expected {usage}")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - set(allowed))
    if unknown:
        raise error(f"URL {url!r}: unknown option {', '.join(repr(u) for u in unknown)} (allowed: {', '.join(allowed)})")
    repeated = sorted(option for option, values in query.items() if len(values) > 1)
    if repeated:
        raise error(f"URL {url!r}: option(s) {', '.join(repeated)} given more than once")
    return parts.netloc, {option: values[0] for option, values in query.items()}
