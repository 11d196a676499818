"""The console's hardening (issue 45, OWASP's rules): every answer carries the headers that keep
other sites from framing it and scripts from anywhere but the server's own file; no action by
GET; workflow values shown escaped. In the real browser: a foreign page that frames the console
shows nothing of it, and the console's own script still runs under its policy."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from builder.ui.server import SECURITY_HEADERS
from tests.support.ui import browser, needs_browser, running_ui, wait_for  # noqa: F401 - browser: a fixture

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "<script>window.__pwned = 1</script>"
ATTRIBUTE = "\"'><img src=x onerror=\"window.__pwned = 2\">"


@pytest.fixture
def ui(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """The console over a store holding a run whose input and output carry markup."""
    store = str(tmp_path / "store")
    order = {"id": SCRIPT, "card": ATTRIBUTE, "lines": [{"sku": ATTRIBUTE, "qty": 1, "unit_cents": 1}]}
    done = subprocess.run([sys.executable, "-m", "builder", "run", "images/asl-order/statemachine.json", "--input",
                           json.dumps(order), "--store", store, "--workflow-id", "wf-markup"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with running_ui(store) as port:
        yield port, store


def get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, headers={"Host": f"127.0.0.1:{port}"})
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read().decode()
    finally:
        conn.close()


def test_every_answer_carries_the_hardening_headers(ui: tuple[int, str]) -> None:
    port, _ = ui
    csp = SECURITY_HEADERS["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in \
        csp.split("script-src", 1)[1].split(";", 1)[0]
    for method, path in [("GET", "/"), ("GET", "/static/app.js"), ("GET", "/fragment/list"),
                         ("GET", "/fragment/workflow?w=wf-markup"), ("GET", "/fragment/workflow?w=wf-markup&tab=history"),
                         ("GET", "/api/workflow?w=wf-markup"), ("GET", "/no/such/page"), ("POST", "/action/stop")]:
        status, headers, _ = get(port, path, method)
        for name, value in SECURITY_HEADERS.items():
            assert headers.get(name.lower()) == value, (method, path, status, name)
    assert get(port, "/static/app.js")[1]["content-type"].startswith("text/javascript")


def test_the_errors_http_server_writes_itself_carry_them_too(tmp_path: Path) -> None:
    """An unsupported method (501) and an overlong request line (414) are answered by http.server
    itself, not by the console's routes: their headers are closed by the same `end_headers`."""
    from builder.ui.server import UiServer
    from unum_entry.stores import open_store

    store = open_store(str(tmp_path / "unum.db"))
    try:
        with UiServer(store).start() as console:
            answers = [get(console.port, "/", method)[:2] for method in ("PUT", "DELETE", "HEAD", "OPTIONS", "PATCH")]
            conn = http.client.HTTPConnection("127.0.0.1", console.port, timeout=30)
            try:
                conn.putrequest("GET", "/" + "a" * 70_000, skip_host=True)
                conn.putheader("Host", f"127.0.0.1:{console.port}")
                conn.endheaders()
                answer = conn.getresponse()
                answers.append((answer.status, {k.lower(): v for k, v in answer.getheaders()}))
            finally:
                conn.close()
    finally:
        store.close()
    assert [status for status, _ in answers] == [501] * 5 + [414]
    for _, headers in answers:
        for name, value in SECURITY_HEADERS.items():
            assert headers.get(name.lower()) == value, name


def test_a_failure_and_an_id_carrying_markup_are_shown_escaped(tmp_path: Path) -> None:
    """A failed run whose id, error, cause and function name carry markup: every fragment shows
    them as text (no element made of them)."""
    from urllib.parse import quote

    from builder.ui.server import UiServer
    from unum_entry.outcome import failure_record, record_failure
    from unum_entry.stores import open_store

    workflow = "wf-<b>'\"bad"
    store = open_store(str(tmp_path / "unum.db"))
    try:
        assert record_failure(store, workflow, failure_record(SCRIPT, ATTRIBUTE, function=ATTRIBUTE,
                                                              invocation=SCRIPT, attempts=1))
        with UiServer(store).start() as console:
            bodies = {path: get(console.port, path)[2] for path in (
                "/fragment/list", f"/fragment/workflow?w={quote(workflow)}",
                f"/fragment/workflow?w={quote(workflow)}&tab=history")}
    finally:
        store.close()
    assert "window.__pwned" in bodies[f"/fragment/workflow?w={quote(workflow)}"]  # shown, as text
    for path, body in bodies.items():
        assert "wf-&lt;b&gt;" in body, path
        assert "<script" not in body and "<img" not in body and "<b>" not in body, path


def test_the_page_holds_no_inline_script_and_values_are_escaped(ui: tuple[int, str]) -> None:
    port, _ = ui
    page = get(port, "/?w=wf-markup")[2]
    assert "<script src='/static/app.js'></script>" in page and page.count("<script") == 1
    for path in ("/fragment/workflow?w=wf-markup", "/fragment/workflow?w=wf-markup&tab=history",
                 "/fragment/list"):
        body = get(port, path)[2]
        assert "window.__pwned" in body or path == "/fragment/list"  # the values are there, shown
        assert "<script" not in body and "<img" not in body and "onerror=\"" not in body, path


def test_no_action_is_taken_by_get(ui: tuple[int, str]) -> None:
    port, store = ui
    for action in ("stop", "redrive", "task-success"):
        status, _, _ = get(port, f"/action/{action}?w=wf-markup")
        assert status == 404
    shown = subprocess.run([sys.executable, "-m", "builder", "inspect", "wf-markup", "--store", store], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert json.loads(shown.stdout)["status"] == "succeeded"


class _Framing(BaseHTTPRequestHandler):
    target = ""

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        body = (f"<!doctype html><html><body><h1>elsewhere</h1>"
                f"<iframe id='console' src='{self.target}' width='800' height='600'></iframe></body></html>").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


@needs_browser
def test_a_foreign_page_framing_the_console_shows_nothing_of_it(browser: Any, ui: tuple[int, str]) -> None:
    from selenium.webdriver.common.by import By

    port, _ = ui
    console = f"http://127.0.0.1:{port}/?w=wf-markup"
    _Framing.target = console
    foreign = ThreadingHTTPServer(("127.0.0.1", 0), _Framing)
    threading.Thread(target=foreign.serve_forever, daemon=True).start()
    try:
        # the console itself, under its policy: its script runs (the list fills in) and no value executes
        browser.get(console)
        wait_for(browser, "#workflows", "wf-markup")
        wait_for(browser, "#status", "succeeded")
        assert browser.execute_script("return window.__pwned === undefined")
        # the same console framed by another origin: blocked, nothing of it inside the frame
        browser.get(f"http://127.0.0.1:{foreign.server_address[1]}/")
        wait_for(browser, "h1", "elsewhere")
        frame = browser.find_element(By.ID, "console")
        browser.switch_to.frame(frame)
        assert browser.find_elements(By.CSS_SELECTOR, "#workflows, #runs, #detail, form") == []
        browser.switch_to.default_content()
    finally:
        foreign.shutdown()
        foreign.server_close()
