"""`python -m builder ui` in a real browser (Debian's chromium + chromedriver, headless, driven
by selenium): the workflows list, one workflow's coloured graph and result, and the live
refresh picking up a workflow that appears while the page is open. Skipped only when chromium
is not installed (localstack/setup.d/40-browser.sh installs it; .ci/run runs that script)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ui import browser, click, needs_browser, running_ui, wait_for  # noqa: F401 - browser: a fixture

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "builder", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.fixture
def ui(tmp_path):
    """The real `python -m builder ui` over a file store holding one finished run."""
    store = str(tmp_path / "store")
    assert cli("run", "images/map-aggregate", "--input", "@images/map-aggregate/input.json", "--store", store,
               "--workflow-id", "wf-map").returncode == 0
    with running_ui(store) as port:
        yield f"http://127.0.0.1:{port}/", store


@needs_browser
def test_the_page_lists_draws_and_refreshes(browser, ui):
    url, store = ui
    browser.get(url)
    table = wait_for(browser, "#workflows", "wf-map")
    assert "succeeded" in table.text

    # one workflow: its graph (SVG drawn by graphviz, one node per function, coloured) and result
    click(browser, "#workflows a", "wf-map")
    wait_for(browser, "#status", "succeeded")
    wait_for(browser, "#graph svg")
    # read at once: the graph is drawn again at every refresh, so elements found earlier go stale
    shown = browser.execute_script(
        "const svg = document.querySelector('#graph svg');"
        "return {titles: [...svg.querySelectorAll('g.node > title')].map(t => t.textContent),"
        " labels: svg.textContent,"
        " fills: [...svg.querySelectorAll('g.node path, g.node polygon')].map(p => p.getAttribute('fill')),"
        " results: document.getElementById('results').textContent};")
    assert {"n0", "n1", "n2"} <= set(shown["titles"])
    for function in ("Split", "Measure", "Summarize"):
        assert function in shown["labels"]
    assert "#d9ead3" in shown["fills"]  # retained: committed, the workflow has ended
    expected = (REPO / "images/map-aggregate/expected.json").read_text()
    import json
    assert json.loads(shown["results"]) == [json.loads(expected)]

    # live: a workflow that fails while the page is open shows up without a reload, marked failed
    assert cli("run", "images/map-aggregate", "--input", '{"nope": 1}', "--store", store,
               "--workflow-id", "wf-bad").returncode in (1, 2)
    # (a refresh during that run may have drawn the row as running: the next one marks it failed)
    row = wait_for(browser, "tr[data-workflow='wf-bad']", "failed")
    assert "failed" in row.text


@needs_browser
def test_the_history_tab_shows_every_invocation_in_order(browser, ui):
    """A run's History tab: its input, start/end/duration, and every event numbered as
    `inspect --history` numbers them (one row per event, map items with their index); a
    screenshot of it is what README shows (docs/ui-history.png)."""
    import json

    url, store = ui
    browser.set_window_size(1400, 1000)
    browser.get(url + "?w=wf-map")
    wait_for(browser, "#status", "succeeded")
    click(browser, "#tab-history")
    wait_for(browser, "#history", "ExecutionSucceeded")
    expected = json.loads(cli("inspect", "wf-map", "--store", store, "--history", "--json").stdout)
    # read at once: the pane is redrawn every second, so elements found earlier go stale
    shown = browser.execute_script(
        "const rows = [...document.querySelectorAll('#history tr[data-type]')];"
        "return {types: rows.map(r => r.dataset.type), first: rows[0].cells[0].textContent,"
        " table: document.getElementById('history').textContent,"
        " input: document.getElementById('input').textContent, times: document.getElementById('times').textContent};")
    assert shown["types"] == [e["type"] for e in expected["events"]]
    assert shown["first"] == "1" and "Measure [0/" in shown["table"]
    assert json.loads(shown["input"]) == expected["input"]
    assert "duration" in shown["times"]
    assert "](docs/ui-history.png)" in (REPO / "README.md").read_text()  # README shows what is saved here
    browser.save_screenshot(str(REPO / "docs" / "ui-history.png"))


@needs_browser
def test_the_redrive_button_reruns_a_failed_workflow(browser, tmp_path):
    """A failed run's page has a Redrive button (a POST with the page's token); after the cause is
    fixed, clicking it re-runs the failed item and the page turns succeeded."""
    import json

    fixed = tmp_path / "fixed"
    folder = tmp_path / "wf"
    for name, code, instructions in (
            ("Split", "def handler(event, context):\n    return [1, 2, 3]\n",
             [{"op": "create_set", "function": "Sum", "shape": "aggregate"}, {"op": "map", "function": "Item"}]),
            ("Item", f"import pathlib\ndef handler(event, context):\n    if event == 2 and not pathlib.Path({str(fixed)!r})"
                     ".exists():\n        raise ValueError('not yet')\n    return event\n", [{"op": "fan_in", "function": "Sum"}]),
            ("Sum", "def handler(event, context):\n    return sum(event)\n", [])):
        (folder / name).mkdir(parents=True)
        (folder / name / "app.py").write_text(code)
        (folder / name / "unum-ir.json").write_text(json.dumps({"unum_ir": 1, "function": name, "handler": "app.handler",
                                                               "max_attempts": 1, "instructions": instructions}))
    (folder / "unum-workflow.json").write_text(json.dumps({"unum_workflow": 1, "name": "rd", "entry": "Split"}))
    store = str(tmp_path / "store.db")
    assert cli("run", str(folder), "--store", store, "--workflow-id", "wf-fix").returncode == 1
    fixed.touch()
    with running_ui(store) as port:
        browser.get(f"http://127.0.0.1:{port}/?w=wf-fix")
        wait_for(browser, "#status", "failed")
        wait_for(browser, "#redrive-button")
        browser.execute_script("document.getElementById('redrive-button').click()")  # the pane is redrawn each second
        wait_for(browser, "#status", "succeeded")
        assert json.loads(cli("inspect", "wf-fix", "--store", store).stdout)["results"] == [6]


@needs_browser
def test_a_waiting_run_shows_its_token_and_completes_from_the_page(browser, tmp_path):
    """A run waiting at a `.waitForTaskToken` Task: its page says waiting, shows the token and the
    command that completes it, and its Succeed form (a POST with the page's token) resumes it."""
    import json

    from tests.integration.test_task_tokens import _workflow_of, started

    _, env, token = started(tmp_path)
    workflow = _workflow_of(token)
    with running_ui(tmp_path / "store", env=env) as port:
        browser.get(f"http://127.0.0.1:{port}/?w={workflow}")
        wait_for(browser, "#status", "waiting")
        shown = browser.execute_script("return [document.querySelector('code.task-token').textContent,"
                                       " document.getElementById('complete').textContent]")
        assert shown[0] == token and "task-success TOKEN --output JSON" in shown[1]
        browser.execute_script("const f = document.querySelector('form.task-success');"
                               "f.querySelector('input[name=output]').value = '{\"ok\": true}'; f.submit();")
        wait_for(browser, "#status", "succeeded")
        report = json.loads(cli("inspect", workflow, "--store", str(tmp_path / "store")).stdout)
        assert report["results"] == [{"order": 42, "shipped": True}]


@needs_browser
def test_a_state_machine_run_shows_the_path_it_took(browser, tmp_path):
    """A compiled state machine's run page draws its states (definition order, Map/Parallel
    boxes) with the states its history entered coloured."""
    store = str(tmp_path / "store.db")
    assert cli("run", "images/asl-order/statemachine.json", "--input", "@images/asl-order/input.json", "--store", store,
               "--workflow-id", "wf-asl").returncode == 0
    with running_ui(store) as port:
        browser.get(f"http://127.0.0.1:{port}/?w=wf-asl")
        wait_for(browser, "#states svg")
        nodes = browser.execute_script(
            "return [...document.querySelectorAll('#states g.node')].map(g => ["
            " [...g.querySelectorAll('text')].map(t => t.textContent).join(' '),"
            " [...g.querySelectorAll('path, polygon, ellipse')].map(p => p.getAttribute('fill')).join(' ')]);")
        coloured = {text.split()[0] for text, fills in nodes if "#d9ead3" in fills}
        assert {"Received", "Price", "ReserveStock", "ChargeCard", "Ship"} <= coloured
        assert not any(text.startswith("Rejected") for text, fills in nodes if "#d9ead3" in fills)
