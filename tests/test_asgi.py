"""Production's ASGI application (arena.asgi, core.asgi): async views on Django's ASGI handler, sync views on
its WSGI handler in threads. Driven here as uvicorn drives it, through the ASGI protocol; the load
benchmark and the reliability stack's tests run the same application under gunicorn and uvicorn."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from django.core.asgi import get_asgi_application
from django.core.handlers.wsgi import WSGIRequest
from django.core.wsgi import get_wsgi_application
from django.test import RequestFactory
from django.urls import URLResolver, resolve

from core.asgi import BODY_READ_AHEAD_MAX as WSGI_READ_AHEAD
from core.asgi import (
    RESOLVED,
    ResolvedWSGIHandler,
    SyncViewsOverWSGI,
    WSGIBridge,
    resolves_to_async_view,
    web_application,
)


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


def _serve_messages(app: Any, scope: dict, messages: list[dict], sent: list[dict] | None = None) -> list[dict]:
    """Everything the application sent (appended to ``sent`` as it goes, if given), given the request's
    messages in order; then a disconnect once the response is complete."""
    sent = [] if sent is None else sent

    async def run() -> None:
        done = asyncio.Event()
        queue = list(messages)

        async def receive() -> dict:
            if queue:
                return queue.pop(0)
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            sent.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                done.set()

        await asyncio.wait_for(app(scope, receive, send), timeout=30)

    asyncio.run(run())
    return sent


def _serve(app: Any, scope: dict, body: bytes = b"") -> tuple[int, dict[bytes, bytes], bytes]:
    sent = _serve_messages(app, scope, [{"type": "http.request", "body": body, "more_body": False}])
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {name.lower(): value for name, value in start["headers"]}, content


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
def test_the_router_resolves_a_sync_request_once_and_django_takes_its_match(monkeypatch: pytest.MonkeyPatch):
    """The router's match goes with the request: Django's WSGI handler serves the page without resolving the
    path again (one resolve a request, not two), with the same view and arguments; a path that resolves to
    nothing is still Django's 404, and a match made for another path is not taken."""
    calls: list[str] = []
    own = URLResolver.resolve

    def counted(self: URLResolver, path: str) -> Any:
        if self.pattern.regex.pattern in ("^/", ""):  # the root resolver only: includes recurse into their own
            calls.append(path)
        return own(self, path)

    monkeypatch.setattr(URLResolver, "resolve", counted)
    app = SyncViewsOverWSGI(asgi_app=get_asgi_application(), wsgi_app=ResolvedWSGIHandler(), threads=2)
    status, _, content = _serve(app, _scope("GET", "/accounts/login/"))
    assert status == 200 and b"csrfmiddlewaretoken" in content
    assert calls == ["/accounts/login/"]
    calls.clear()
    assert _serve(app, _scope("GET", "/no/such/page/"))[0] == 404
    assert calls == ["/no/such/page/", "/no/such/page/"]  # no match to hand over: Django resolves for its 404

    handler = ResolvedWSGIHandler()
    request = WSGIRequest({**RequestFactory().get("/accounts/login/").environ})
    request.META[RESOLVED] = ("/accounts/signup/", resolve("/accounts/signup/"))
    calls.clear()
    assert handler.resolve_request(request).url_name == "account_login"  # another path's match is not taken
    assert calls == ["/accounts/login/"]


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


def _with_length(scope: dict, length: int) -> dict:
    scope["headers"] = [*scope["headers"], (b"content-length", str(length).encode())]
    return scope


@pytest.mark.parametrize(
    ("size", "sized"),
    [(11, True), (WSGI_READ_AHEAD, True), (WSGI_READ_AHEAD + 1, True), (100_000, False)],
    ids=["short", "at the read-ahead limit", "past it", "no length"],
)
def test_the_view_reads_the_whole_body_however_it_arrives(size: int, sized: bool):
    """Read ahead on the event loop (a known length up to the limit) or as the view reads (longer, or no
    length): the body arrives in five messages, and the view reads every byte of it, in order."""
    spies = Spies()
    app = WSGIBridge(spies.wsgi, threads=2)
    body = bytes(i % 251 for i in range(size))
    cuts = [0, size // 5, size // 2, size // 2, size - 1, size]  # an empty message among them
    messages = [
        {"type": "http.request", "body": body[a:b], "more_body": b < size or i < 4}
        for i, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False))
    ]
    scope = _scope("POST", "/c/3/next/")
    sent = _serve_messages(app, _with_length(scope, size) if sized else scope, messages)
    assert sent[0]["status"] == 200
    assert b"".join(m.get("body", b"") for m in sent[1:]) == b"wsgi:" + body


def test_a_client_gone_before_its_body_arrived_runs_no_view():
    spies = Spies()
    app = WSGIBridge(spies.wsgi, threads=2)
    sent = _serve_messages(
        app,
        _with_length(_scope("POST", "/c/3/vote/"), 20),
        [{"type": "http.request", "body": b"choice=", "more_body": True}, {"type": "http.disconnect"}],
    )
    assert sent == [] and spies.environs == []


class _Answer:
    """A WSGI response iterable that records the threads it is produced and closed in, and what the client
    had been sent when each chunk was produced."""

    def __init__(self, chunks: list[bytes], *, streaming: bool, sent: list[dict]) -> None:
        self.chunks, self.streaming, self.sent = chunks, streaming, sent
        self.produced: list[tuple[int, int]] = []  # (thread, messages sent before this chunk)
        self.closed_in: int | None = None

    def __iter__(self) -> Any:
        for chunk in self.chunks:
            self.produced.append((threading.get_ident(), len(self.sent)))
            yield chunk

    def close(self) -> None:
        self.closed_in = threading.get_ident()


@pytest.mark.parametrize("streaming", [False, True], ids=["a page", "a stream"])
def test_the_answer_is_produced_and_closed_in_the_views_thread(streaming: bool):
    """Django's request_finished (which gives the thread's database connection back to the pool) fires
    when the answer is closed, so it must be closed in the thread that ran the view. A page is then sent
    from the event loop in two messages; a stream from the view's thread, each chunk before the next is made."""
    sent: list[dict] = []
    answers: list[_Answer] = []
    view_threads: list[int] = []

    def view(environ: dict, start_response: Any) -> _Answer:
        view_threads.append(threading.get_ident())
        start_response("201 Created", [("X-Kind", "stream" if streaming else "page")])
        answers.append(_Answer([b"one,", b"", b"two,", b"three"], streaming=streaming, sent=sent))
        return answers[0]

    _serve_messages(WSGIBridge(view, threads=2), _scope("GET", "/anything/"), [], sent=sent)
    loop_thread = threading.get_ident()  # asyncio.run's loop runs in this thread
    answer = answers[0]
    assert view_threads[0] != loop_thread
    assert answer.closed_in == view_threads[0] and {t for t, _ in answer.produced} == {view_threads[0]}
    assert sent[0] == {
        "type": "http.response.start",
        "status": 201,
        "headers": [(b"x-kind", b"stream" if streaming else b"page")],
    }
    assert b"".join(m.get("body", b"") for m in sent[1:]) == b"one,two,three"
    assert not sent[-1].get("more_body")
    if streaming:
        # Each chunk went out before the next was produced (the start with the first; the empty one sends
        # nothing): a long export is never held whole.
        assert [before for _, before in answer.produced] == [0, 2, 2, 3]
    else:
        assert len(sent) == 2  # start and the whole body, in one hand-over from the view's thread


@pytest.mark.django_db(transaction=True)
def test_djangos_request_finished_fires_in_the_views_thread_for_pages_and_streams(settings):
    """Through Django's own WSGI handler: a page (HttpResponse) and a stream (StreamingHttpResponse), each
    whole, with request_finished (which returns the database connection) in the thread that ran the view."""
    from django.core.signals import request_finished
    from django.http import HttpResponse, StreamingHttpResponse
    from django.urls import path

    threads: dict[str, int] = {}

    def page(request: Any) -> HttpResponse:
        threads["view"] = threading.get_ident()
        return HttpResponse(b"p" * 10_000)

    def stream(request: Any) -> StreamingHttpResponse:
        threads["view"] = threading.get_ident()
        return StreamingHttpResponse(f"row {i}\n".encode() for i in range(1000))

    def finished(**kwargs: Any) -> None:
        threads["finished"] = threading.get_ident()

    settings.ROOT_URLCONF = type("Urls", (), {"urlpatterns": [path("page/", page), path("stream/", stream)]})
    request_finished.connect(finished)
    try:
        app = WSGIBridge(get_wsgi_application(), threads=2)
        for url, expected in (
            ("/page/", b"p" * 10_000),
            ("/stream/", b"".join(f"row {i}\n".encode() for i in range(1000))),
        ):
            threads.clear()
            sent = _serve_messages(app, _scope("GET", url), [])
            assert sent[0]["status"] == 200, url
            assert b"".join(m.get("body", b"") for m in sent[1:]) == expected
            assert threads["finished"] == threads["view"], url
    finally:
        request_finished.disconnect(finished)
