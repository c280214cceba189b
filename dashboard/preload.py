"""plotly.js evaluated while the browser waits for the server: an ASGI middleware that adds to the page's HTML
Streamlit's own PlotlyChart chunk (4.7 MB, plotly.js inside), fetched at once and imported as soon as the page has
asked the server for its script run. Streamlit loads that chunk only once a chart's element has arrived, then evaluates
plotly.js in one main-thread task before it draws; here that task runs while the server runs the script. The URL is
the one Streamlit's frontend imports (`./PlotlyChart.<hash>.js` beside its entry script, static/js/), so the browser's
module map holds one module, evaluated once, and the frontend's own import finds it ready. Measured in
docs/benchmarks.md."""

from __future__ import annotations

import json
import logging
from pathlib import Path

CHUNK = "PlotlyChart"  # its name in Streamlit's build manifest, static/manifest.json
log = logging.getLogger(__name__)

# The first message the page sends on its websocket asks the server to run the script (Streamlit's frontend sends
# nothing else on it first); from then on the page waits for the server. Importing plotly.js before that would
# delay the session by the length of its evaluation.
IMPORT_AFTER_FIRST_SEND = """<script>(() => {
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (...message) {
    WebSocket.prototype.send = send;
    setTimeout(() => import("./%s"));
    return send.apply(this, message);
  };
})();</script>"""


def chunks(static: Path) -> list[str]:
    """The PlotlyChart chunk's path under Streamlit's static folder, then those of the chunks it imports (but the
    page's entry); none if the build manifest names no such chunk or its file is missing."""
    try:
        manifest = json.loads((static / "manifest.json").read_text())
        found = [key for key, entry in manifest.items() if entry.get("name") == CHUNK]
        paths = [manifest[key]["file"] for key in imported(manifest, found[0])] if len(found) == 1 else []
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return []
    return paths if paths and (static / paths[0]).is_file() else []


def imported(manifest: dict, key: str, seen: dict | None = None) -> dict:
    """`key` and the manifest keys of every chunk it imports, at any depth, in order; the page's entry left out."""
    seen = {} if seen is None else seen
    seen[key] = True
    for name in manifest[key].get("imports", []):
        if name not in seen and not manifest[name].get("isEntry"):
            imported(manifest, name, seen)
    return seen


def tags(paths: list[str], page: str) -> bytes:
    """What goes before the page's </head>: a modulepreload for each chunk the page does not already preload, and
    the import."""
    links = [f'<link rel="modulepreload" crossorigin href="./{path}">' for path in paths if f"./{path}" not in page]
    return ("".join(links) + IMPORT_AFTER_FIRST_SEND % paths[0]).encode()


class PreloadPlotly:
    """ASGI middleware: every uncompressed HTML page the app sends gets `tags` before its </head>; if Streamlit's
    static folder has no PlotlyChart chunk, pages go out unchanged (one line in the log says so)."""

    def __init__(self, app, static: Path | None = None):
        from streamlit import file_util

        self.app = app
        static = static or Path(file_util.get_static_dir())
        paths = chunks(static)
        self.tags = tags(paths, (static / "index.html").read_text()) if paths else None
        if not paths:
            log.warning("no %s chunk in %s/manifest.json: pages are served without plotly.js preloaded", CHUNK, static)

    async def __call__(self, scope, receive, send):
        if self.tags is None or scope["type"] != "http" or scope["method"] != "GET":
            return await self.app(scope, receive, send)
        held: list[dict] = []

        async def patched(message):
            if message["type"] == "http.response.start" and is_html(message):
                held.append(message)
            elif held and message["type"] == "http.response.body":
                held.append(message)
                if not message.get("more_body"):
                    for out in with_tags(held, self.tags):
                        await send(out)
            else:
                await send(message)

        await self.app(scope, receive, patched)


def is_html(start: dict) -> bool:
    """An uncompressed HTML response."""
    headers = dict(start["headers"])
    return headers.get(b"content-type", b"").startswith(b"text/html") and b"content-encoding" not in headers


def with_tags(held: list[dict], extra: bytes) -> list[dict]:
    """The held response as one start and one body, `extra` before its </head>, its length set and its ETag and
    Last-Modified dropped (they are the file's, not these bytes')."""
    start, body = held[0], b"".join(message.get("body", b"") for message in held[1:])
    if b"</head>" not in body:
        return [start, {"type": "http.response.body", "body": body}]
    body = body.replace(b"</head>", extra + b"</head>", 1)
    headers = [(k, v) for k, v in start["headers"] if k not in (b"content-length", b"etag", b"last-modified")]
    return [{**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]},
            {"type": "http.response.body", "body": body}]
