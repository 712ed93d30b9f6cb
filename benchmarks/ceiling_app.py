"""The load benchmark's ceiling: the least a web application can do for a rater's cycle, served by the same
gunicorn as the platform, so ``benchmarks/load.py`` can say what any Python web stack on this machine could
reach with the same client before Arena's own work is counted.

It answers the three requests of ``tests.reliability.stack.Rater``'s cycle at the same URLs and with the same
shapes, and does nothing else:

  POST /c/<campaign>/next/  302 to /b/<battle>/ (the battle id made in the process: no database)
  GET  /b/<battle>/         200, a page of the battle page's size with the vote form's ``name="choice"``
  POST /b/<battle>/vote/    the form read, ONE single-row INSERT into ``ceiling_vote`` (shaped like the table pgbench
                            fills; autocommit: a transaction of its own, as pgbench's), 302 to /b/<battle>/

No session, no CSRF check, no ORM, no template, no tenancy, no rate limit: an upper bound, not a design.
``CEILING_DSN`` names the database; ``CEILING_PAGE_BYTES`` the page's size (default 10,000).

    gunicorn benchmarks.ceiling_app:application --worker-class sync             # WSGI
    gunicorn benchmarks.ceiling_app:asgi_application --worker-class uvicorn_worker.UvicornWorker
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

import psycopg

TABLE = (
    "CREATE TABLE IF NOT EXISTS ceiling_vote (id bigserial PRIMARY KEY, battle bigint NOT NULL, "
    "choice varchar(16) NOT NULL, decision_ms integer NOT NULL, created_at timestamptz NOT NULL)"
)
INSERT = "INSERT INTO ceiling_vote (battle, choice, decision_ms, created_at) VALUES (%s, %s, 1200, now())"


def _page() -> bytes:
    size = int(os.environ.get("CEILING_PAGE_BYTES", "10000"))
    form = b'<form method="post" action="vote/"><button name="choice" value="left">A</button></form>'
    head = b"<!doctype html><html><head><title>Battle</title></head><body><p>"
    tail = b"</p>" + form + b"</body></html>"
    return head + b"x" * max(0, size - len(head) - len(tail)) + tail


PAGE = _page()
_counter = itertools.count(1)
_lock = threading.Lock()
_local = threading.local()


def _battle_id() -> int:
    # Unique across the server's processes without asking the database: the process id, then a counter.
    with _lock:
        return os.getpid() * 10_000_000 + next(_counter)


def _route(method: str, path: str) -> tuple[str, int]:
    """("next" | "page" | "vote" | "", battle id or 0)."""
    parts = [p for p in path.split("/") if p]
    if method == "POST" and len(parts) == 3 and parts[0] == "c" and parts[2] == "next":
        return "next", 0
    if len(parts) >= 2 and parts[0] == "b" and parts[1].isdigit():
        if method == "GET" and len(parts) == 2:
            return "page", int(parts[1])
        if method == "POST" and len(parts) == 3 and parts[2] == "vote":
            return "vote", int(parts[1])
    return "", 0


def _choice(body: bytes) -> str:
    return (parse_qs(body.decode("latin-1")).get("choice") or ["left"])[0][:16]


# -- WSGI (sync workers: one connection per worker process) ---------------------------------------------


def _connection() -> psycopg.Connection[Any]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = psycopg.connect(os.environ["CEILING_DSN"], autocommit=True)
        _local.conn = conn
    return conn


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    kind, battle = _route(environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""))
    if kind == "next":
        start_response("302 Found", [("Location", f"/b/{_battle_id()}/"), ("Content-Length", "0")])
        return [b""]
    if kind == "page":
        start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(PAGE)))])
        return [PAGE]
    if kind == "vote":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        _connection().execute(INSERT, [battle, _choice(body)])
        start_response("302 Found", [("Location", f"/b/{battle}/"), ("Content-Length", "0")])
        return [b""]
    start_response("404 Not Found", [("Content-Length", "0")])
    return [b""]


# -- ASGI (uvicorn workers, the deployment's server: one async connection per worker process) -------------

_aconn: psycopg.AsyncConnection[Any] | None = None


async def _aconnection() -> psycopg.AsyncConnection[Any]:
    global _aconn
    if _aconn is None or _aconn.closed:
        _aconn = await psycopg.AsyncConnection.connect(os.environ["CEILING_DSN"], autocommit=True)
    return _aconn


async def asgi_application(
    scope: dict[str, Any],
    receive: Callable[[], Awaitable[dict[str, Any]]],
    send: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    kind, battle = _route(scope["method"], scope["path"])
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    status, headers, content = 404, [(b"content-length", b"0")], b""
    if kind == "next":
        status = 302
        headers.append((b"location", f"/b/{_battle_id()}/".encode()))
    elif kind == "page":
        status, content = 200, PAGE
        headers = [(b"content-type", b"text/html; charset=utf-8"), (b"content-length", str(len(PAGE)).encode())]
    elif kind == "vote":
        connection = await _aconnection()
        await connection.execute(INSERT, [battle, _choice(body)])
        status = 302
        headers.append((b"location", f"/b/{battle}/".encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": content})
