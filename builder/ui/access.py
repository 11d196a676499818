"""Who may use the web UI.

By default the UI listens on 127.0.0.1 and answers only requests addressed to it by that name
(`Host: 127.0.0.1:PORT` or `localhost:PORT`): a page elsewhere that rebinds its own DNS name to
127.0.0.1 gets 403, so it can neither read the page (and its session token) nor post actions.
`ui --host HOST` listens elsewhere and then requires an access token (`--access-token` or
`$UNUM_UI_TOKEN`): every request carries it — `?access_token=T` once (the answer sets an
HttpOnly, SameSite=Strict cookie), the cookie, or `Authorization: Bearer T`. Actions are
checked on top of this (builder.ui.actions).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.cookies import SimpleCookie

LOOPBACK = "127.0.0.1"
COOKIE = "unum_ui_access"
TOKEN_ENV = "UNUM_UI_TOKEN"


@dataclass(frozen=True)
class Verdict:
    """`Access.admit`'s answer: allowed, or the status and one line saying why not; a cookie to set."""

    allowed: bool
    status: HTTPStatus = HTTPStatus.OK
    reason: str = ""
    set_cookie: str | None = None


@dataclass(frozen=True)
class Access:
    host: str                 # the address the server listens on
    token: str | None = None  # required on every request when set

    def admit(self, port: int, headers: Mapping[str, str], query: Mapping[str, list[str]]) -> Verdict:
        """Whether a request with these headers and query string may be answered."""
        host = headers.get("Host") or ""
        if self.host == LOOPBACK and host not in (f"{LOOPBACK}:{port}", f"localhost:{port}"):
            return Verdict(False, HTTPStatus.FORBIDDEN, f"unum ui: this server answers http://{LOOPBACK}:{port}/ only "
                                                        f"(Host {host!r})")
        if self.token is None:
            return Verdict(True)
        given = (query.get("access_token") or [""])[0]
        if given and _same(given, self.token):
            return Verdict(True, set_cookie=f"{COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/")
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("Cookie") or "")
        except Exception:  # noqa: BLE001 - a malformed cookie header is no token
            cookie = SimpleCookie()
        sent = cookie[COOKIE].value if COOKIE in cookie else ""
        bearer = (headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        if (sent and _same(sent, self.token)) or (bearer and _same(bearer, self.token)):
            return Verdict(True)
        return Verdict(False, HTTPStatus.UNAUTHORIZED, "unum ui: access token required (open the page once as "
                                                       "/?access_token=TOKEN, or send Authorization: Bearer TOKEN)")


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode(), token.encode())
