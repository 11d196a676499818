"""The version in the web UI (builder/ui/pages.py, list_view.py; docs/versions.md), through the
real CLI over HTTP on 127.0.0.1: the list (its HTML and /api/workflows, the JSON it reads) shows
the version each workflow runs now and its upgrades; the workflow page (/fragment/workflow and
/api/workflow) its version and each upgrade n: from -> to, when."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from tests.integration.test_durable_upgrade import CHARGE, RESERVE, WAIT, cli, code, inspected, start, write
from tests.support.ui import browser, click, needs_browser, running_ui, wait_for  # noqa: F401 - browser: a fixture

pytestmark = pytest.mark.integration


def get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as answer:
        return answer.read().decode()


def test_the_list_and_the_workflow_page_show_the_version_and_its_upgrades(tmp_path: Path) -> None:
    start(tmp_path, "moved", 3600)
    first = str(inspected(tmp_path, "moved")["version"])
    write(tmp_path, code(RESERVE, WAIT, CHARGE, by="v2"))
    assert cli(tmp_path, "upgrade", "moved", "--to", "wf").returncode == 0
    second = str(inspected(tmp_path, "moved")["version"])
    start(tmp_path, "stayed", 3600)  # the folder as first written again: the first version
    assert inspected(tmp_path, "stayed")["version"] == first and second != first
    with running_ui(tmp_path / ".unum" / "unum.db") as port:
        rows = {row["workflow"]: row for row in json.loads(get(port, "/api/workflows"))["rows"]}
        assert rows["moved"]["version"] == second and rows["stayed"]["version"] == first
        [upgrade] = rows["moved"]["upgrades"]
        assert (upgrade["number"], upgrade["from"], upgrade["to"]) == (1, first, second)
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", upgrade["at"]), upgrade
        assert rows["stayed"]["upgrades"] == []
        listed = get(port, "/fragment/list")
        assert "<th>version</th>" in listed
        moved_row = re.search(r"<tr[^>]*data-workflow='moved'>.*?</tr>", listed).group(0)
        assert f"<code>{second}</code> <small class='upgrades'>(1 upgrade(s))</small>" in moved_row
        assert f"upgrade 1: {first} -&gt; {second} at {upgrade['at']}" in moved_row
        stayed_row = re.search(r"<tr[^>]*data-workflow='stayed'>.*?</tr>", listed).group(0)
        assert f"<code>{first}</code></td>" in stayed_row and "upgrade" not in stayed_row

        shown = json.loads(get(port, "/api/workflow?w=moved"))
        assert shown["version"] == second
        assert shown["upgrades"] == [{"number": 1, "from": first, "to": second, "at": upgrade["at"]}]
        page = get(port, "/fragment/workflow?w=moved")
        assert f"<p id='version'>Version <code>{second}</code> (upgraded 1 time(s))</p>" in page
        assert (f"<table id='upgrades'><tr><th>upgrade</th><th>from</th><th>to</th><th>when</th></tr>"
                f"<tr><td>1</td><td><code>{first}</code></td><td><code>{second}</code></td>"
                f"<td>{upgrade['at']}</td></tr></table>") in page
        plain = get(port, "/fragment/workflow?w=stayed")
        assert f"<p id='version'>Version <code>{first}</code></p>" in plain and "id='upgrades'" not in plain
        assert json.loads(get(port, "/api/workflow?w=stayed"))["upgrades"] == []


@needs_browser
def test_a_browser_shows_the_version_in_the_list_and_the_upgrades_on_the_page(browser, tmp_path: Path) -> None:  # noqa: F811
    start(tmp_path, "moved", 3600)
    first = str(inspected(tmp_path, "moved")["version"])
    write(tmp_path, code(RESERVE, WAIT, CHARGE, by="v2"))
    assert cli(tmp_path, "upgrade", "moved", "--to", "wf").returncode == 0
    second = str(inspected(tmp_path, "moved")["version"])
    with running_ui(tmp_path / ".unum" / "unum.db") as port:
        browser.get(f"http://127.0.0.1:{port}/")
        wait_for(browser, "#workflows", "moved")
        cell = browser.execute_script("const c = document.querySelector(\"tr[data-workflow='moved'] td.version\");"
                                      "return {text: c.textContent, title: c.getAttribute('title')};")
        assert cell["text"] == f"{second} (1 upgrade(s))"
        assert cell["title"].startswith(f"upgrade 1: {first} -> {second} at ")
        click(browser, "#workflows a", "moved")
        wait_for(browser, "#version", second)
        rows = browser.execute_script("return [...document.querySelectorAll('#upgrades tr')]"
                                      ".map(r => [...r.cells].map(c => c.textContent));")
        assert rows[0] == ["upgrade", "from", "to", "when"] and rows[1][:3] == ["1", first, second]
