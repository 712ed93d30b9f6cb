"""Production's ASGI application (arena.asgi, core.asgi): async views on Django's ASGI handler, sync views on
its WSGI handler in threads. Driven here as uvicorn drives it, through the ASGI protocol; the load
benchmark and the reliability stack's tests run the same application under gunicorn and uvicorn."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from django.core.asgi import get_asgi_application
from django.core.wsgi import get_wsgi_application

from core.asgi import SyncViewsOverWSGI, resolves_to_async_view, web_application


def _scope(method: str, path: str, *, root_path: str = "", client: tuple[str, int] = ("203.0.113.9", 50000)) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": root_path,
        "query_string": b"",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/x-www-form-urlencoded")],
        "client": client,
        "server": ("testserver", 80),
    }


def _serve(app: Any, scope: dict, body: bytes = b"") -> tuple[int, dict[bytes, bytes], bytes]:
    async def run() -> tuple[int, dict[bytes, bytes], bytes]:
        sent: list[dict] = []
        done = asyncio.Event()
        first = True

        async def receive() -> dict:
            nonlocal first
            if first:
                first = False
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            sent.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                done.set()

        await asyncio.wait_for(app(scope, receive, send), timeout=30)
        start = next(m for m in sent if m["type"] == "http.response.start")
        content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return start["status"], {name.lower(): value for name, value in start["headers"]}, content

    return asyncio.run(run())


class Spies:
    def __init__(self) -> None:
        self.asgi_scopes: list[dict] = []
        self.environs: list[dict] = []

    async def asgi(self, scope: dict, receive: Any, send: Any) -> None:
        self.asgi_scopes.append(scope)
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"x-handler", b"asgi")]})
            await send({"type": "http.response.body", "body": b"asgi"})

    def wsgi(self, environ: dict, start_response: Any) -> list[bytes]:
        self.environs.append(environ)
        body = environ["wsgi.input"].read()
        start_response("200 OK", [("X-Handler", "wsgi")])
        return [b"wsgi:" + body]


def test_the_stream_goes_to_the_asgi_handler_and_every_sync_view_to_the_wsgi_one():
    spies = Spies()
    app = SyncViewsOverWSGI(asgi_app=spies.asgi, wsgi_app=spies.wsgi, threads=2)
    battle = uuid.uuid4()

    assert _serve(app, _scope("GET", f"/b/{battle}/stream")) == (200, {b"x-handler": b"asgi"}, b"asgi")
    # The rater's cycle: next battle, the page, the vote; the body reaches the view whole.
    for method, path in (("POST", "/c/3/next/"), ("GET", f"/b/{battle}/"), ("POST", f"/b/{battle}/vote/")):
        status, headers, content = _serve(app, _scope(method, path), body=b"choice=left" if method == "POST" else b"")
        assert (status, headers[b"x-handler"]) == (200, b"wsgi"), path
        assert content == (b"wsgi:choice=left" if method == "POST" else b"wsgi:")
    # A path that names no view is the WSGI handler's to answer (its 404, or APPEND_SLASH's redirect).
    assert _serve(app, _scope("GET", "/no/such/page"))[1][b"x-handler"] == b"wsgi"
    # Mounted under a prefix: the prefix is not part of the route.
    assert _serve(app, _scope("GET", f"/arena/b/{battle}/stream", root_path="/arena"))[2] == b"asgi"
    assert [s["path"] for s in spies.asgi_scopes] == [f"/b/{battle}/stream", f"/arena/b/{battle}/stream"]


def test_the_wsgi_environ_carries_what_the_rate_limits_and_views_read():
    """The per-address rate limits key on REMOTE_ADDR: the client's address must arrive as the ASGI server saw it."""
    spies = Spies()
    app = SyncViewsOverWSGI(asgi_app=spies.asgi, wsgi_app=spies.wsgi, threads=2)
    _serve(app, _scope("POST", "/c/3/next/", client=("198.51.100.7", 40000)), body=b"prompt=hi")
    environ = spies.environs[-1]
    assert environ["REMOTE_ADDR"] == "198.51.100.7"
    assert (environ["REQUEST_METHOD"], environ["PATH_INFO"]) == ("POST", "/c/3/next/")
    assert environ["HTTP_HOST"] == "testserver"
    assert environ["CONTENT_TYPE"] == "application/x-www-form-urlencoded"


def test_only_coroutine_views_resolve_as_async():
    assert resolves_to_async_view(_scope("GET", f"/b/{uuid.uuid4()}/stream"))
    assert not resolves_to_async_view(_scope("GET", f"/b/{uuid.uuid4()}/"))
    assert not resolves_to_async_view(_scope("GET", "/accounts/login/"))
    assert not resolves_to_async_view(_scope("GET", "/nothing-here/"))


@pytest.mark.django_db(transaction=True)
def test_django_answers_through_both_handlers():
    """The real handlers: the sign-in page through the WSGI one, the stream (which wants a signed-in rater)
    through the ASGI one, each with the platform's own headers (its middleware ran)."""
    app = SyncViewsOverWSGI(asgi_app=get_asgi_application(), wsgi_app=get_wsgi_application(), threads=2)
    status, headers, content = _serve(app, _scope("GET", "/accounts/login/"))
    assert status == 200 and b"csrfmiddlewaretoken" in content
    assert b"content-security-policy" in headers
    status, headers, _ = _serve(app, _scope("GET", f"/b/{uuid.uuid4()}/stream"))
    assert status == 302 and b"/accounts/login/" in headers[b"location"]
    assert b"content-security-policy" in headers


def test_the_served_application_is_the_router_unless_asked_for_asgi_alone(settings):
    app = web_application()
    assert isinstance(app, SyncViewsOverWSGI) and app.threads == settings.ARENA_WEB_THREADS
    settings.ARENA_ASGI_SYNC_VIEWS = "asgi"
    assert not isinstance(web_application(), SyncViewsOverWSGI)
