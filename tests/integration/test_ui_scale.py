"""`python -m builder ui` over a SQLite store holding 10,000 runs, in headless chromium (selenium):
server-side pagination newest first, the name / start / duration columns, filters by status,
name and time, search by id, and the Stop action — a POST that needs the page's Origin and its
session token (a page elsewhere cannot forge it). The runs are written through the store
contract (start record, result / failure / stop records with their history stamps, or only a
checkpoint for a running one), as the runtime and `run` write them."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.ui import browser, needs_browser, running_ui, wait_for  # noqa: F401 - browser: a fixture

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RUNS = 10_000


def fill(url: str, count: int, folders: list[str]) -> None:
    """`count` runs wf-00000… started one second apart (the newest last): every tenth failed, the
    next running, the next stopped, the rest succeeded; folders alternate (the name column)."""
    from unum_entry import naming
    from unum_entry.codec import encode
    from unum_entry.envelope import ROOT
    from unum_entry.history import end_stamp
    from unum_entry.outcome import failure_record, record_failure, stop_workflow
    from unum_entry.stores import open_store
    from unum_entry.stores.base import Kind

    store = open_store(url)
    base = int(time.time()) - count
    expires = int(time.time()) + 7 * 86400
    try:
        for i in range(count):
            wf = f"wf-{i:05d}"
            store.create(naming.start_key(wf), encode({"input": {"i": i}, "folder": folders[i % len(folders)],
                                                       "started": base + i}),
                         workflow=wf, kind=Kind.MARKER, expires_at=expires)
            kind = i % 10
            if kind == 0:
                record_failure(store, wf, failure_record("ValueError", f"bad {i}", function="A", invocation="c-x",
                                                         attempts=1), stamp=end_stamp("A", base + i + 0.5))
            elif kind in (1, 2):
                store.create(naming.checkpoint_key(wf, "A", ROOT), encode(i), workflow=wf, expires_at=expires)
                if kind == 2:
                    stop_workflow(store, wf, error="Ops.Cancelled", cause="by the test")
            else:
                store.create(naming.result_key(wf, ROOT), encode({"at": [], "of": [], "value": i})
                             + end_stamp("A", base + i + 0.25), workflow=wf, kind=Kind.RESULT, expires_at=expires)
    finally:
        store.close()


@pytest.fixture(scope="module")
def big_ui(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scale")
    db = folder / "runs.db"
    fill(f"sqlite:///{db}?durability=off", RUNS, [str(REPO / "images" / "chain"), str(REPO / "images" / "map-aggregate")])
    with running_ui(db) as port:
        url = f"http://127.0.0.1:{port}/"
        urllib.request.urlopen(url + "api/workflows", timeout=60).read()  # the server's first request imports its modules
        yield url


def rows(driver) -> list[list[str]]:
    """The list's rows, read at once (the pane is redrawn every second)."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#workflows tr[data-workflow]')]"
        ".map(r => [...r.cells].map(c => c.textContent));")


def wait_rows(driver, check, timeout: float = 20) -> list[list[str]]:
    deadline = time.monotonic() + timeout
    while True:
        found = rows(driver)
        if found and check(found):
            return found
        assert time.monotonic() < deadline, f"rows never matched: {found[:3]}"
        time.sleep(0.05)


@needs_browser
def test_ten_thousand_runs_paginated_filtered_searched(browser, big_ui):  # noqa: F811 - the fixture
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    loads = []
    for _ in range(3):  # the first load also starts the browser's renderer
        began = time.monotonic()
        browser.get(big_ui)
        first = wait_rows(browser, lambda r: len(r) == 50)
        loads.append(time.monotonic() - began)
    print(f"\nfirst page of {RUNS} runs shown in {', '.join(f'{s:.2f}' for s in loads)} s")  # a figure, not a rule
    # Paged by the server (builder.ui.run_index): the page asks for one page of runs, not all of them.
    body = urllib.request.urlopen(big_ui + "api/workflows", timeout=60).read()
    page = json.loads(body)
    assert (len(page["rows"]), page["total"], page["pages"]) == (50, RUNS, RUNS // 50)
    print(f"one page of runs: {len(body):,} bytes")
    assert len(body) < 64 * 1024, len(body)  # (all 10,000 rows: 200 times that)
    assert first[0][0] == "wf-09999" and [r[0] for r in first] == [f"wf-{i:05d}" for i in range(9999, 9949, -1)]
    workflow, name, status, started, duration, *_ = first[0]  # (objects, version)
    assert (name, status, duration) == ("map-aggregate", "succeeded", "250 ms") and started.endswith("Z")
    assert text(browser, "count") == f"{RUNS} run(s); page 1 of {RUNS // 50}"

    browser.execute_script("document.getElementById('next').click()")  # the list is redrawn every second
    assert wait_rows(browser, lambda r: r[0][0] == "wf-09949")[-1][0] == "wf-09900"

    browser.get(big_ui)
    wait_rows(browser, lambda r: len(r) == 50)
    Select(wait_for(browser, "#f-status")).select_by_value("failed")  # the form is drawn once, not refreshed
    browser.find_element(By.ID, "f-apply").click()
    failed = wait_rows(browser, lambda r: r[0][2] == "failed")
    assert all(r[2] == "failed" for r in failed) and failed[0][0] == "wf-09990"
    assert text(browser, "count").startswith(f"{RUNS // 10} run(s)")

    browser.get(big_ui + "?status=stopped&name=chain")
    stopped = wait_rows(browser, lambda r: r[0][2] == "stopped")
    assert all(r[2] == "stopped" and r[1] == "chain" for r in stopped)

    browser.get(big_ui + "?q=wf-0424")
    found = wait_rows(browser, lambda r: len(r) == 10)
    assert [r[0] for r in found] == [f"wf-0424{i}" for i in range(9, -1, -1)]

    browser.get(big_ui + "?since=1h")  # started within the last hour: the newest ~3,600 (one a second)
    recent = wait_rows(browser, lambda r: len(r) == 50)
    total = int(text(browser, "count").split()[0])
    assert 3000 < total <= 3600 and recent[0][0] == "wf-09999"


@needs_browser
def test_stop_is_a_post_from_the_page_only(browser, big_ui):  # noqa: F811 - the fixture
    from selenium.webdriver.common.by import By

    # a page elsewhere: no token, or the token with another Origin, is refused (403), nothing changes
    for headers, body in (({"Origin": big_ui.rstrip("/")}, b"w=wf-09981"),
                          ({"Origin": "http://evil.example"}, b"w=wf-09981&token=guess")):
        request = urllib.request.Request(big_ui + "action/stop", data=body, headers=headers, method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 403
    browser.get(big_ui + "?w=wf-09981")
    wait_for_status(browser, "running")
    token = browser.execute_script("return document.querySelector('#stop input[name=token]').value")
    forged = urllib.request.Request(big_ui + "action/stop", data=f"w=wf-09981&token={token}".encode(),
                                    headers={"Origin": "http://evil.example"}, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(forged, timeout=30)
    assert refused.value.code == 403
    assert browser.execute_script("return document.getElementById('status').textContent") == "running"

    browser.execute_script("document.getElementById('stop-button').click()")  # the pane is redrawn each second
    wait_for_status(browser, "stopped")
    assert browser.execute_script("return document.getElementById('stop-button')") is None


def text(driver, element_id: str) -> str:
    return driver.execute_script(f"return document.getElementById('{element_id}').textContent")


def wait_for_status(driver, status: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while driver.execute_script("const s = document.getElementById('status'); return s ? s.textContent : ''") != status:
        assert time.monotonic() < deadline, f"status never became {status}"
        time.sleep(0.05)
