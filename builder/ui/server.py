"""The local web page of `python -m builder ui`: a store's workflows, and per workflow its graph
(coloured by the replay of its run), status, results or failure — refreshed every second, like
the Step Functions console's execution view. Standard library only; bound to 127.0.0.1; no
script or style from elsewhere (works offline). Graphs are SVG drawn by Graphviz on the server,
or Mermaid text when `dot` is missing.

Routes: `/` (the page; `?w=ID` selects a workflow, `&tab=history` its History tab; `status=`,
`name=`, `q=`, `since=`, `page=` filter and page the list: builder.ui.list_view),
`/fragment/list`, `/fragment/workflow?w=ID[&tab=history]` (the HTML pieces the page's script
swaps in), `/api/workflows` (one page of runs), `/api/workflow?w=ID`, `/api/history?w=ID` (the
document of `inspect --history --json`), `/api/value?w=ID&k=KEY` (a value the history shows by
reference); POST `/action/stop`, `/action/redrive`, `/action/task-success`,
`/action/task-failure` (builder.ui.actions: Origin check and session token); `/static/app.js`
(the page's script).

Hardening (OWASP's rules): every answer carries `SECURITY_HEADERS` — `frame-ancestors 'none'` and
`X-Frame-Options: DENY` (no other site can frame the page to lure a click onto an action), a
Content-Security-Policy whose scripts come from this server's own file only (the page holds no
inline script and no event-handler attribute), `nosniff`, `same-origin` referrers; no action is taken by
GET; every workflow value is shown escaped.
"""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from builder.graphing.model import Graph, NodeState
from builder.graphing.style import FILL, STROKE
from builder.ui.listing import utc
from unum_entry.errors import UnumError
from unum_entry.stores.base import Store

HOST = "127.0.0.1"
REFRESH_MS = 1000
SCRIPT_PATH = "/static/app.js"
# No page elsewhere may frame the console (clickjacking onto Stop / Redrive), no script runs but
# the server's own file (a workflow value that slipped through escaping cannot execute), nothing
# is fetched from elsewhere, no content type is guessed, no URL leaks to another site in a Referer.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; "
                               "frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # (not no-referrer: a form's POST then says `Origin: null`, and the actions check the Origin)
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class UiServer:
    """Serves the page for `store` on 127.0.0.1:`port` (0: a free port). A context manager;
    `serve_forever` blocks, `start` serves from a thread (tests)."""

    def __init__(self, store: Store, *, port: int = 0, workflows: Sequence[str] = (),
                 ttl_seconds: int = 7 * 24 * 3600, store_url: str | None = None, host: str = HOST,
                 access_token: str | None = None) -> None:
        from builder.ui.access import Access

        if host != HOST and not access_token:
            raise UnumError(f"ui --host {host}: give an access token too (--access-token or $UNUM_UI_TOKEN): "
                            "anyone who reaches the page can stop and redrive workflows")
        self.host = host
        self.access = Access(host, access_token or None)
        self.store = store
        self.store_url = store_url  # how the page names the store in commands it suggests
        self.candidates = tuple(workflows)
        self.ttl_seconds = ttl_seconds
        self._graphs: dict[str, Graph] = {}
        self._lock = threading.Lock()
        from builder.ui.actions import new_token
        self.token = new_token()  # this server's session token: actions need it (builder.ui.actions)
        self._starts: dict[str, dict[str, Any]] = {}  # start records read so far (builder.ui.pages)
        from builder.ui.run_index import RunIndex
        self._index: RunIndex[Any] = RunIndex(self._list_runs)  # the runs, newest first, kept between requests
        try:
            self._httpd = ThreadingHTTPServer((host, port), _handler(self))
        except (OSError, OverflowError) as exc:
            raise UnumError(f"ui: cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from exc
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        shown = HOST if self.host in ("0.0.0.0", "::") else self.host
        return f"http://{shown}:{self.port}/"

    @property
    def origin(self) -> str:
        """What a browser sends as `Origin` from this server's own pages (at 127.0.0.1)."""
        return f"http://{HOST}:{self.port}"

    def serve_forever(self) -> None:
        self._index.prime()  # the list of runs is read while the browser opens the page
        self._httpd.serve_forever(poll_interval=0.2)

    def start(self) -> UiServer:
        self._thread = threading.Thread(target=self.serve_forever, name="unum-ui", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
        self._httpd.server_close()

    def __enter__(self) -> UiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- what the page shows -----------------------------------------------------------

    def runs(self, query: dict[str, list[str]]) -> Any:
        """One page of runs as the query string filters it (builder.ui.pages, builder.ui.list_view)."""
        from builder.ui.list_view import run_filter
        from builder.ui.pages import query_runs

        return query_runs(self.store, run_filter(query), ttl_seconds=self.ttl_seconds, runs=self._index.runs())

    def _list_runs(self) -> Any:
        """Every run, newest first (builder.ui.pages.index_runs; read in the background by the index)."""
        from builder.ui.pages import index_runs

        return index_runs(self.store, ttl_seconds=self.ttl_seconds, starts=self._starts)

    def workflow(self, workflow_id: str) -> dict[str, Any]:
        """Status, results, failure and the coloured graph (None when its definition is unknown)."""
        from builder.graphing.status import colour, replay
        from builder.ui.listing import _running_or_waiting
        from builder.ui.pages import workflow_versions
        from unum_entry.outcome import WorkflowStatus, read_outcome

        outcome = read_outcome(self.store, workflow_id)
        graph = self._definition(workflow_id)
        status = outcome.status
        if status is WorkflowStatus.RUNNING:  # a task-token wait, or what the embedded engine's queue says
            status = _running_or_waiting(self.store, workflow_id)
        shown: dict[str, Any] = {"workflow": workflow_id, "status": str(status.value),
                                 "results": outcome.results, "failure": outcome.failure,
                                 "retained_until": None if outcome.retained_until is None else utc(outcome.retained_until),
                                 "graph": None, "nodes": {}}
        if graph is not None:
            coloured = colour(graph, replay(graph, self.store, workflow_id))
            shown["graph"] = coloured
            shown["nodes"] = {name: state.value for name, state in coloured.states.items()}
        shown["states_svg"] = self._state_path(workflow_id)
        shown.update(workflow_versions(self.store, workflow_id))  # its version and upgrades (builder.ui.pages)
        if status is WorkflowStatus.WAITING:  # each waiting Task, its token and how to complete it
            from builder.runs import start_record
            from builder.program import callback_hint
            from unum_entry.asl.callbacks import waiting

            recorded = start_record.read(self.store, workflow_id)
            shown["waiting"] = [{"state": w.state, "function": w.function, "token": w.token}
                                for w in waiting(self.store, workflow_id)]
            shown["complete"] = callback_hint(self.store_url or ".unum/unum.db", recorded.folder if recorded else None)
        return shown

    def _state_path(self, workflow_id: str) -> str | None:
        """For a run of a state machine: its states as SVG, the path it took coloured
        (builder.graphing.states); None for an IR workflow, an unknown folder, or no Graphviz."""
        from builder.runs import start_record
        from builder.runs.path import run_path
        from builder.graphing.dot import GraphvizMissing, ImageFormat, render
        from builder.graphing.states import states_to_dot

        recorded = start_record.read(self.store, workflow_id)
        if recorded is None or not recorded.folder:
            return None
        try:
            view, ran, failed = run_path(self.store, workflow_id, recorded.folder)
            svg = render(states_to_dot(view, ran=ran, failed=failed), ImageFormat.SVG).decode()
        except (UnumError, GraphvizMissing):
            return None
        return svg[svg.find("<svg"):]

    def names(self) -> list[str]:
        """The workflow names of the runs listed so far (from the start records `runs` read)."""
        from builder.ui.pages import workflow_name

        return sorted({name for name in (workflow_name(r) for r in list(self._starts.values())) if name})

    def history(self, workflow_id: str) -> dict[str, Any]:
        """The workflow's execution history (builder.runs.history.history_document)."""
        from builder.runs import start_record
        from builder.runs.history import history_document
        from unum_entry.outcome import read_outcome

        outcome = read_outcome(self.store, workflow_id)
        record = start_record.read(self.store, workflow_id)
        return history_document(self.store, workflow_id, str(outcome.status.value), outcome.failure,
                                record.folder if record is not None else None)

    def _definition(self, workflow_id: str) -> Graph | None:
        """The graph of the workflow `workflow_id` ran: the folder its run recorded, else the
        first `--workflow` candidate whose entry invocation the store holds."""
        from builder.runs import start_record
        from builder.graphing.build import load_graph
        from builder.graphing.status import entry_committed

        record = start_record.read(self.store, workflow_id)
        if record is not None and record.folder:
            graph = self._load(record.folder, load_graph)
            if graph is not None:
                return graph
        for path in self.candidates:
            graph = self._load(path, load_graph)
            if graph is not None and entry_committed(graph, self.store, workflow_id):
                return graph
        return None

    def _load(self, path: str, load_graph: Any) -> Graph | None:
        with self._lock:
            if path not in self._graphs:
                try:
                    self._graphs[path] = load_graph(path)
                except UnumError:
                    return None
            return self._graphs[path]


def _handler(ui: UiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "unum-ui"

        def _admitted(self, query: dict[str, list[str]]) -> bool:
            """builder.ui.access: the Host it was addressed to, and the access token if one is set."""
            verdict = ui.access.admit(ui.port, {k: self.headers.get(k, "") for k in ("Host", "Cookie", "Authorization")},
                                      query)
            self._cookie = verdict.set_cookie
            if not verdict.allowed:
                self._send("text/plain", verdict.reason, verdict.status)
            return verdict.allowed

        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if not self._admitted(query):
                return
            selected = (query.get("w") or [""])[0]
            tab = (query.get("tab") or [""])[0]
            try:
                if url.path == "/":
                    self._send("text/html", page(selected))
                elif url.path == SCRIPT_PATH:
                    self._send("text/javascript", _SCRIPT)
                elif url.path == "/fragment/list":
                    from builder.ui.list_view import list_fragment as list_page
                    self._send("text/html", list_page(ui.runs(query), query, selected))
                elif url.path == "/fragment/filters":
                    from builder.ui.list_view import filter_form
                    self._send("text/html", filter_form(ui.names(), query))
                elif url.path == "/fragment/workflow" and selected and tab == "history":
                    self._send("text/html", history_fragment(ui.history(selected)))
                elif url.path == "/fragment/workflow" and selected:
                    self._send("text/html", workflow_fragment(ui.workflow(selected), token=ui.token))
                elif url.path == "/api/history" and selected:
                    self._send("application/json", json.dumps(ui.history(selected), default=str))
                elif url.path == "/api/value" and selected:
                    from unum_entry.history import value
                    key = (query.get("k") or [""])[0]
                    self._send("application/json", json.dumps(value(ui.store, selected, key), default=str, indent=2))
                elif url.path == "/api/workflows":
                    found = ui.runs(query)
                    self._send("application/json", json.dumps({"rows": found.rows, "total": found.total,
                                                               "page": found.page, "pages": found.pages}))
                elif url.path == "/api/workflow" and selected:
                    shown = ui.workflow(selected)
                    shown.pop("graph")
                    shown.pop("states_svg", None)
                    self._send("application/json", json.dumps(shown, default=str))
                else:
                    self._send("text/plain", "not found", HTTPStatus.NOT_FOUND)
            except UnumError as exc:
                self._send("text/plain", f"error: {exc}", HTTPStatus.INTERNAL_SERVER_ERROR)

        def do_POST(self) -> None:  # noqa: N802 - the http.server API
            """`/action/NAME` (builder.ui.actions): from this server's own page only."""
            from builder.ui.actions import Forbidden, check, run_action

            url = urlsplit(self.path)
            if not self._admitted(parse_qs(url.query)):
                return
            length = int(self.headers.get("Content-Length") or 0)
            if not url.path.startswith("/action/") or length > 64 * 1024:
                self._send("text/plain", "not found", HTTPStatus.NOT_FOUND)
                return
            form = parse_qs(self.rfile.read(length).decode("utf-8", errors="replace"))
            try:
                check({"Origin": self.headers.get("Origin", "")}, form, origin=f"http://{self.headers.get('Host', '')}",
                      token=ui.token)  # the Host was checked by _admitted
                workflow = run_action(ui.store, url.path.removeprefix("/action/"), form, store_url=ui.store_url)
            except Forbidden as exc:
                self._send("text/plain", f"forbidden: {exc}", HTTPStatus.FORBIDDEN)
                return
            except UnumError as exc:
                self._send("text/plain", f"error: {exc}", HTTPStatus.CONFLICT)
                return
            self.send_response(HTTPStatus.SEE_OTHER)
            self.send_header("Location", f"/?w={_quote(workflow)}")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _send(self, kind: str, body: str, status: HTTPStatus = HTTPStatus.OK) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", f"{kind}; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            cookie: str | None = getattr(self, "_cookie", None)
            if cookie:
                self.send_header("Set-Cookie", cookie)
            self.end_headers()
            try:
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the browser went away

        def end_headers(self) -> None:
            """OWASP's headers (module docstring: "Hardening") close the headers of every answer:
            the page's, the redirects, and the errors http.server writes itself (an unsupported
            method's 501, a malformed or overlong request line's 400 / 414)."""
            for name, value in SECURITY_HEADERS.items():
                self.send_header(name, value)
            super().end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the http.server API
            """Quiet: no line per request."""

    return Handler


# ---- HTML ------------------------------------------------------------------------------------

_STYLE = """
body{font-family:Helvetica,Arial,sans-serif;margin:0;display:flex;height:100vh;color:#222}
#list{width:34%;overflow:auto;border-right:1px solid #ddd;padding:8px}
#detail{flex:1;overflow:auto;padding:8px 16px}
table{border-collapse:collapse;width:100%;font-size:13px}
td,th{padding:4px 6px;border-bottom:1px solid #eee;text-align:left}
tr.selected{background:#eef4ff} a{color:#1a5fb4;text-decoration:none}
.status{padding:1px 6px;border-radius:8px;font-size:12px}
.succeeded{background:#93d37c}.failed{background:#f28b82}.running{background:#9fc5f8}.waiting{background:#fdd663}
.stopped{background:#c9c9c9}.timed-out{background:#f28b82}.interrupted{background:#f6b26b}
.tabs a{margin-right:12px;font-size:14px} .tabs a.on{font-weight:bold;border-bottom:2px solid #1a5fb4}
#history td.detail{font-family:monospace;font-size:12px;max-width:520px;overflow-wrap:anywhere}
#history td:not(.detail){white-space:nowrap}
pre{background:#f6f6f6;padding:8px;overflow:auto;font-size:12px}
.legend span{display:inline-block;padding:1px 8px;margin-right:4px;border:1px solid;border-radius:4px;font-size:12px}
"""

_SCRIPT = """
const params = new URLSearchParams(location.search);
const selected = params.get('w') || '';
const tab = params.get('tab') || '';
async function filters() {  // once: a form redrawn every second would lose what the user types
  const form = await fetch('/fragment/filters' + location.search);
  if (form.ok) document.getElementById('filters').innerHTML = await form.text();
}
let drawn = false;
async function refresh() {
  try {
    const list = await fetch('/fragment/list' + location.search);
    if (list.ok) document.getElementById('runs').innerHTML = await list.text();
    if (list.ok && !drawn) { drawn = true; filters(); }  // after the list: its names are known then
    if (selected) {
      const one = await fetch('/fragment/workflow?w=' + encodeURIComponent(selected) + (tab ? '&tab=' + tab : ''));
      if (one.ok) document.getElementById('detail').innerHTML = await one.text();
    }
    document.body.dataset.refreshed = String(Date.now());
  } finally { setTimeout(refresh, %d); }
}
refresh();
""" % REFRESH_MS


def page(selected: str) -> str:
    """The whole page: empty panes that the script fills and refreshes."""
    hint = "<p>Select a workflow.</p>" if not selected else "<p>Loading…</p>"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>unum workflows</title>"
            f"<style>{_STYLE}</style></head><body><div id='list'><h3>Workflows</h3><div id='filters'></div>"
            f"<div id='runs'><p>Loading…</p></div></div>"
            f"<div id='detail'>{hint}</div><script src='{SCRIPT_PATH}'></script></body></html>")


def _tabs(workflow: str, on: str) -> str:
    base = f"/?w={html.escape(_quote(workflow))}"
    return (f"<div class='tabs'><a id='tab-overview' class='{'on' if on == 'overview' else ''}' href='{base}'>Overview</a>"
            f"<a id='tab-history' class='{'on' if on == 'history' else ''}' href='{base}&amp;tab=history'>History</a></div>")


def _header(workflow: str, status: str, on: str) -> str:
    wid = html.escape(workflow)
    return f"<h2>{wid} <span id='status' class='status {status.replace(' ', '-')}'>{status}</span></h2>" + _tabs(workflow, on)


def history_fragment(document: dict[str, Any]) -> str:
    """The History tab: the workflow's input, start, end and duration, then every event as
    `inspect --history` numbers them; a value shown by reference links to /api/value."""
    workflow = document["workflow"]
    parts = [_header(workflow, document["status"], "history"),
             f"<p id='times'>started {html.escape(str(document['started'] or '-'))} · ended "
             f"{html.escape(str(document['ended'] or '-'))} · duration "
             f"{'-' if document['duration_ms'] is None else str(document['duration_ms']) + ' ms'}</p>",
             f"<h3>Input</h3><pre id='input'>{_value_html(workflow, document['input'])}</pre>",
             "<h3>Events</h3><table id='history'><tr><th>id</th><th>prev</th><th>type</th><th>step</th>"
             "<th>timestamp</th><th>ms</th><th>attempts</th><th>details</th></tr>"]
    for event in document["events"]:
        where = html.escape(str(event.get("function") or ""))
        if "index" in event:
            where += f" [{event['index']}/{event['size']}]"
        if "state" in event:
            where = f"{html.escape(event['state'])} ({where})"
        done = event["type"].endswith(("Succeeded", "Failed"))
        ms = event.get("durationMs") if done and event.get("durationMs") is not None else ""
        details = event.get("details") or {}
        parts.append(f"<tr data-type='{html.escape(event['type'])}'><td>{event['id']}</td><td>{event['previousEventId']}</td>"
                     f"<td>{html.escape(event['type'])}</td><td>{where}</td><td>{html.escape(str(event['timestamp']))}</td>"
                     f"<td>{ms}</td><td>{event.get('attempts', '')}</td>"
                     f"<td class='detail'>{_value_html(workflow, details) if details else ''}</td></tr>")
    parts.append("</table>")
    return "".join(parts)


def _value_html(workflow: str, value: Any) -> str:
    """A value as JSON text; each `{"$ref": KEY, "bytes": N}` as a link that fetches it whole."""
    text = html.escape(json.dumps(value, ensure_ascii=False, default=str))
    if "$ref" not in text:
        return text
    import re

    def link(match: re.Match[str]) -> str:
        key = match.group(1)
        return (f"<a class='ref' href='/api/value?w={html.escape(_quote(workflow))}&amp;k={key}' "
                f"target='_blank'>{match.group(0)}</a>")
    return re.sub(r'\{&quot;\$ref&quot;: &quot;([a-z]-[0-9a-f]{32})&quot;[^}]*\}', link, text)


def workflow_fragment(shown: dict[str, Any], *, token: str = "") -> str:
    from builder.ui.pages import versions_fragment

    parts = [_header(shown["workflow"], shown["status"], "overview")]
    if token and shown["status"] in ("running", "waiting", "interrupted"):
        parts.append(f"<form id='stop' method='post' action='/action/stop'><input type='hidden' name='token' "
                     f"value='{html.escape(token)}'><input type='hidden' name='w' value='{html.escape(shown['workflow'])}'>"
                     "<button id='stop-button'>Stop</button></form>")
    if shown.get("waiting"):
        parts.append("<h3>Waiting for task-token callbacks</h3><table id='waiting'><tr><th>state</th><th>function</th>"
                     "<th>token</th><th></th></tr>")
        for wait in shown["waiting"]:
            hidden = (f"<input type='hidden' name='token' value='{html.escape(token)}'>"
                      f"<input type='hidden' name='w' value='{html.escape(shown['workflow'])}'>"
                      f"<input type='hidden' name='task_token' value='{html.escape(wait['token'])}'>")
            parts.append(f"<tr><td>{html.escape(wait['state'])}</td><td>{html.escape(wait['function'])}</td>"
                         f"<td><code class='task-token'>{html.escape(wait['token'])}</code></td><td>"
                         f"<form class='task-success' method='post' action='/action/task-success'>{hidden}"
                         "<input name='output' size='14' value='{}' title='the Task output (JSON)'> "
                         "<button>Succeed</button></form>"
                         f"<form class='task-failure' method='post' action='/action/task-failure'>{hidden}"
                         "<input name='error' size='10' placeholder='Error'> <input name='cause' size='10' "
                         "placeholder='Cause'> <button>Fail</button></form></td></tr>")
        parts.append(f"</table><p>Or: <code id='complete'>{html.escape(shown['complete'])}</code></p>")
    if token and shown["status"] == "failed":
        parts.append(f"<form id='redrive' method='post' action='/action/redrive'><input type='hidden' name='token' "
                     f"value='{html.escape(token)}'><input type='hidden' name='w' value='{html.escape(shown['workflow'])}'>"
                     "<button id='redrive-button'>Redrive</button></form>")
    parts.append(versions_fragment(shown))  # builder.ui.pages: its version, upgrade n: from -> to, when
    graph: Graph | None = shown["graph"]
    if graph is None:
        parts.append("<p id='nograph'>Its workflow definition is unknown here: start the page with "
                     "<code>--workflow FOLDER</code> to draw it.</p>")
    else:
        parts.append(_legend() + f"<div id='graph'>{_graph_html(graph)}</div>")
    if shown.get("states_svg"):
        parts.append(f"<h3>States (the path this run took)</h3><div id='states'>{shown['states_svg']}</div>")
    if shown["failure"] is not None:
        parts.append(f"<h3>Failure</h3><pre id='failure'>{html.escape(json.dumps(shown['failure'], indent=2, default=str))}</pre>")
    if shown["results"]:
        parts.append(f"<h3>Results</h3><pre id='results'>{html.escape(json.dumps(shown['results'], indent=2, default=str))}</pre>")
    if shown["retained_until"]:
        parts.append(f"<p>Retained until {shown['retained_until']}.</p>")
    return "".join(parts)


def _legend() -> str:
    return "<div class='legend'>" + "".join(
        f"<span style='background:{FILL[s]};border-color:{STROKE[s]}'>{s.value}</span>" for s in NodeState) + "</div>"


def _graph_html(graph: Graph) -> str:
    """SVG from Graphviz, inline; Mermaid text when Graphviz is missing."""
    from builder.graphing.dot import GraphvizMissing, ImageFormat, render, to_dot
    from builder.graphing.mermaid import to_mermaid

    try:
        svg = render(to_dot(graph), ImageFormat.SVG).decode()
    except GraphvizMissing:
        return f"<pre>{html.escape(to_mermaid(graph))}</pre>"
    return svg[svg.find("<svg"):]


def _quote(text: str) -> str:
    from urllib.parse import quote
    return quote(text, safe="")
