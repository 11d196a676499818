"""The list pane of the web UI: a filter form (status, workflow name, started within, id search;
drawn once), one page of runs newest first (builder.ui.pages; refreshed), and links to the
other pages. The filter and
page travel in the page's own query string (`?status=…&name=…&q=…&since=2d&page=3`), so a
filtered view is a link that can be shared or reloaded."""

from __future__ import annotations

import html
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from unum_entry.errors import UnumError
from unum_entry.outcome import WorkflowStatus

from builder.ui.pages import RunFilter, RunPage

FILTER_KEYS = ("status", "name", "q", "since", "page")


def run_filter(query: Mapping[str, list[str]], *, now: float | None = None) -> RunFilter:
    """The filter a query string asks for; bad values are ignored (the full list is shown)."""
    from builder.ui.listing import parse_duration

    def one(key: str) -> str:
        return (query.get(key) or [""])[0].strip()

    status = one("status") if one("status") in {s.value for s in WorkflowStatus} else None
    since = None
    if one("since"):
        try:
            since = int((time.time() if now is None else now) - parse_duration(one("since")))
        except UnumError:
            since = None
    page = int(one("page")) if one("page").isdigit() else 1
    return RunFilter(status=status, name=one("name") or None, search=one("q") or None, since=since, page=page)


def filter_form(names: list[str], query: Mapping[str, list[str]]) -> str:
    """The filter form (drawn once per page load: the list under it refreshes)."""
    def value(key: str) -> str:
        return html.escape((query.get(key) or [""])[0])

    statuses = "".join(f"<option value='{s.value}'{' selected' if value('status') == s.value else ''}>{s.value}</option>"
                       for s in WorkflowStatus if s is not WorkflowStatus.UNKNOWN)
    options = "".join(f"<option{' selected' if value('name') == html.escape(n) else ''}>{html.escape(n)}</option>"
                      for n in names)
    return ("<form id='filter' method='get' action='/'>"
            f"<input type='hidden' name='w' value='{value('w')}'>"
            f"<select name='status' id='f-status'><option value=''>any status</option>{statuses}</select> "
            f"<select name='name' id='f-name'><option value=''>any workflow</option>{options}</select> "
            f"<input name='since' id='f-since' size='4' placeholder='2d' value='{value('since')}' "
            "title='started within (90s, 15m, 6h, 2d)'> "
            f"<input name='q' id='f-q' size='16' placeholder='search id' value='{value('q')}'> "
            "<button id='f-apply'>filter</button></form>")


def list_fragment(result: RunPage, query: Mapping[str, list[str]], selected: str) -> str:
    """One page of runs: how many match, the table, links to newer and older pages."""
    def value(key: str) -> str:
        return html.escape((query.get(key) or [""])[0])

    parts = [f"<p id='count'>{result.total} run(s); page {result.page} of {result.pages}</p>"]
    if not result.rows:
        parts.append("<p id='empty'>No workflows in this store.</p>" if not any(value(k) for k in FILTER_KEYS[:4])
                     else "<p id='empty'>No workflow matches.</p>")
        return "".join(parts)
    parts.append("<table id='workflows'><tr><th>workflow</th><th>name</th><th>status</th><th>started</th>"
                 "<th>duration</th><th>objects</th><th>version</th></tr>")
    for row in result.rows:
        wid = html.escape(row["workflow"])
        cls = " class='selected'" if row["workflow"] == selected else ""
        link = _link(query, w=row["workflow"], tab=None)
        duration = "" if row["duration_ms"] is None else _duration(row["duration_ms"])
        parts.append(f"<tr{cls} data-workflow='{wid}'><td><a href='{link}'>{wid}</a></td>"
                     f"<td class='name'>{html.escape(row['name'])}</td>"
                     f"<td><span class='status {row['status'].replace(' ', '-')}'>{row['status']}</span></td>"
                     f"<td title='{row['age']} ago'>{row['started']}</td><td>{duration}</td><td>{row['objects']}</td>"
                     f"{_version_cell(row)}</tr>")
    parts.append("</table><p id='pages'>")
    if result.page > 1:
        parts.append(f"<a id='prev' href='{_link(query, page=str(result.page - 1))}'>&larr; newer</a> ")
    if result.page < result.pages:
        parts.append(f"<a id='next' href='{_link(query, page=str(result.page + 1))}'>older &rarr;</a>")
    parts.append("</p>")
    return "".join(parts)


def _version_cell(row: Mapping[str, Any]) -> str:
    """A run's version cell: the version it runs now and, when it was moved, how many times
    (each upgrade, from -> to and when, in its title)."""
    version = row.get("version")
    if not version:
        return "<td class='version'></td>"
    upgrades = row.get("upgrades") or []
    title = "; ".join(f"upgrade {u['number']}: {u['from']} -> {u['to']}" + (f" at {u['at']}" if u.get("at") else "")
                      for u in upgrades)
    note = f" <small class='upgrades'>({len(upgrades)} upgrade(s))</small>" if upgrades else ""
    attribute = f" title='{html.escape(title)}'" if title else ""
    return f"<td class='version'{attribute}><code>{html.escape(str(version))}</code>{note}</td>"


def _duration(ms: int) -> str:
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{ms // 60_000} min {ms % 60_000 // 1000} s"


def _link(query: Mapping[str, list[str]], **changes: Any) -> str:
    """`/?…` with the current query string changed as `changes` say (None: dropped)."""
    params = {key: values[0] for key, values in query.items() if values and values[0]}
    for key, new in changes.items():
        if new is None:
            params.pop(key, None)
        else:
            params[key] = new
    return html.escape("/?" + urlencode(params))
