"""Production's ASGI entry point, split by the kind of view: async views on Django's ASGI handler, every
sync view on Django's WSGI handler in a pool of threads.

Arena is served by gunicorn with uvicorn workers because the live battle's page holds a server-sent events
stream open (``battles.views.battle_stream``, an async view: many streams a worker). Every other view is
sync, and Django's ASGI handler runs a sync view through several thread hops a request (the request
signals, the middleware chain, the view, each through asgiref's ``sync_to_async``/``async_to_sync``).
Measured on the load benchmark's vote path (``benchmarks/load.py``, the same 2-core machine, the same hour):
63 ms of web CPU a rater's cycle under the ASGI handler against 45 ms under gunicorn's sync WSGI workers,
and the vote's p99 at half of peak 124 ms against 29 ms; this router, in process, serves the sign-in page in
6.2-6.7 ms of CPU against 9.8-11.0 ms (``benchmarks/vote_cost.py``). WSGI workers alone cannot hold the streams open,
so this router keeps both: a request whose URL resolves to a coroutine view goes to the ASGI handler, and
every other one to the WSGI handler in a worker thread (``WSGIBridge``). The same Django, settings,
middleware and URLs serve both; only the handler differs. A request that resolves to nothing goes to the
WSGI handler, which answers it as before (the 404 page, or ``APPEND_SLASH``'s redirect). The match the router
made goes with the request to the WSGI handler (``ResolvedWSGIHandler``), which does not resolve the path again.

``ARENA_WEB_THREADS`` (default: ``DB_POOL_MAX_SIZE``, 10 without a pool) bounds the sync requests a worker
process runs at once; more wait for a thread. Each holds at most one database connection, so a thread never
waits for the pool. ``ARENA_ASGI_SYNC_VIEWS=asgi`` serves everything through Django's ASGI handler as
before (a way back, should a deployment need it).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import io
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from a2wsgi.wsgi import Body, build_environ
from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest
from django.urls import Resolver404, ResolverMatch, resolve

Scope = MutableMapping[str, Any]
ASGIApp = Callable[..., Awaitable[None]]  # (scope, receive, send)


# The environ's key for the URL's match the router made, as (the path it resolved, the match): Django's WSGI
# handler below takes it instead of resolving the same path a second time.
RESOLVED = "arena.resolved"


def resolved(scope: Scope) -> tuple[str, ResolverMatch] | None:
    """The request's path (without the root path) and its match, as Django's handler would resolve it; None
    where nothing matches."""
    path: str = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    path = path or "/"
    try:
        return path, resolve(path)
    except Resolver404:
        return None


def _names_async_view(found: tuple[str, ResolverMatch] | None) -> bool:
    return found is not None and iscoroutinefunction(found[1].func)


def resolves_to_async_view(scope: Scope) -> bool:
    """Whether the request's path names a coroutine view (as Django's handler would resolve it)."""
    return _names_async_view(resolved(scope))


class ResolvedWSGIHandler(WSGIHandler):
    """Django's WSGI handler that takes the URL's match the router made for this request (``RESOLVED`` in the
    environ: the same resolver, the same path) instead of resolving the path again. A request whose path
    differs from the one resolved, or whose middleware set a ``urlconf`` of its own, is resolved as Django
    resolves it."""

    def resolve_request(self, request: HttpRequest) -> ResolverMatch:
        given = request.META.get(RESOLVED)
        if given is not None and given[0] == request.path_info and not hasattr(request, "urlconf"):
            request.resolver_match = given[1]
            return cast(ResolverMatch, given[1])
        return super().resolve_request(request)


# A request body up to this size is read on the event loop before the view runs (a form's POST, a vote, an API
# call); a larger or chunked one is read by the view as it asks for it, each read a hop to the event loop.
BODY_READ_AHEAD_MAX = 64 * 1024


class WSGIBridge:
    """A WSGI application served to an ASGI server, one hop into a worker thread a request.

    a2wsgi (which this replaced) crosses from the worker thread to the event loop and waits there for every
    message: the response's start, each body chunk, the body's end, and each read of the request body. That
    is three to four blocking hand-overs a request, each a wake-up of the event loop and of the thread, about
    0.9 ms of CPU a request on the load benchmark's machine. Here:

    - a request body of known length up to ``BODY_READ_AHEAD_MAX`` is read on the event loop first, so the
      view reads it from memory; a longer one, or one of unknown length, is read as the view asks for it
      (a2wsgi's ``Body``);
    - the application runs in a worker thread; a response that is not streaming (every page, redirect and
      API answer: Django has built its content already) is joined and closed in that thread and sent from
      the event loop, start and body, with no thread waiting;
    - a streaming response (an export, a static file) is sent from the worker thread as it is produced, each
      chunk handed to the event loop and waited for, as a2wsgi did, so a long one is never held in memory.

    The response is closed in the thread that ran the view, as WSGI servers do: Django's ``request_finished``
    signal, which returns the thread's database connection to the pool, fires there."""

    def __init__(self, app: Callable[..., Iterable[bytes]], *, threads: int = 10) -> None:
        self.app = app
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="WSGI")

    async def __call__(
        self, scope: Scope, receive: Any, send: Any, *, found: tuple[str, ResolverMatch] | None = None
    ) -> None:
        """``found``: the path's match as the router made it (``resolved``), handed to the application in the
        environ under ``RESOLVED``."""
        loop = asyncio.get_running_loop()
        body = await self._body(scope, receive, loop)
        if body is None:
            return  # the client left before its request's body arrived: there is no one to answer
        environ = cast(dict[str, Any], build_environ(scope, body))  # type: ignore[arg-type]  # a2wsgi's types
        if found is not None:
            environ[RESOLVED] = found
        context = contextvars.copy_context()
        run = functools.partial(context.run, self._run, environ, send, loop)
        answered = await loop.run_in_executor(self.executor, run)
        if answered is not None:
            start, content = answered
            await send(start)
            await send({"type": "http.response.body", "body": content})

    @staticmethod
    async def _body(scope: Scope, receive: Any, loop: asyncio.AbstractEventLoop) -> Any:
        """The request body as the view will read it: from memory when it is short and its length is known,
        else as the view asks for it; None when the client disconnected before sending it."""
        length = next((value for name, value in scope.get("headers") or () if name == b"content-length"), None)
        if length is None or not length.isdigit() or int(length) > BODY_READ_AHEAD_MAX:
            # Chunked, or HTTP/2 without a length, or long; a GET's, which Django never reads, costs nothing.
            return Body(loop, receive)
        if int(length) == 0:
            return io.BytesIO(b"")
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                return io.BytesIO(b"".join(chunks))

    def _run(
        self, environ: dict[str, Any], send: Any, loop: asyncio.AbstractEventLoop
    ) -> tuple[dict[str, Any], bytes] | None:
        """In the worker thread: the application's answer, joined, for the event loop to send; or None when
        it streamed and was sent from here."""
        start: dict[str, Any] = {}
        written: list[bytes] = []
        headers_sent = False

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if exc_info is not None and headers_sent:
                raise exc_info[1].with_traceback(exc_info[2])  # too late to change the status: PEP 3333
            start.update(
                type="http.response.start",
                status=int(status.split(" ", 1)[0]),
                headers=[
                    (name.strip().encode("latin1").lower(), value.strip().encode("latin1")) for name, value in headers
                ],
            )
            return written.append  # WSGI's legacy write(): its bytes go before the iterable's

        def hand_over(message: dict[str, Any]) -> None:
            asyncio.run_coroutine_threadsafe(send(message), loop).result()

        iterable = self.app(environ, start_response)
        try:
            if not getattr(iterable, "streaming", False):
                content = b"".join(iterable)
                if not start:
                    raise RuntimeError("The WSGI application returned without calling start_response.")
                return start, b"".join(written) + content
            for chunk in iterable:
                if not headers_sent:
                    hand_over(start)
                    headers_sent = True
                if written:
                    hand_over({"type": "http.response.body", "body": b"".join(written), "more_body": True})
                    written.clear()
                if chunk:
                    hand_over({"type": "http.response.body", "body": chunk, "more_body": True})
            if not headers_sent:
                hand_over(start)  # a stream with nothing in it
            hand_over({"type": "http.response.body", "body": b"".join(written)})
            return None
        finally:
            close = getattr(iterable, "close", None)
            if close is not None:
                close()


class SyncViewsOverWSGI:
    """An ASGI application: ``asgi_app`` for async views and anything not HTTP, ``wsgi_app`` (in ``threads``
    worker threads) for the rest."""

    def __init__(self, *, asgi_app: ASGIApp, wsgi_app: Callable[..., Any], threads: int = 10) -> None:
        self.asgi_app = asgi_app
        self.wsgi_app = WSGIBridge(wsgi_app, threads=threads)
        self.threads = threads

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            found = resolved(scope)
            if not _names_async_view(found):
                # The match goes with the request: Django's handler (ResolvedWSGIHandler) does not resolve again.
                await self.wsgi_app(scope, receive, send, found=found)
                return
        await self.asgi_app(scope, receive, send)


def web_application() -> ASGIApp:
    """The application production (``arena.asgi``), the demo and the browser tests serve: the router, or
    Django's ASGI handler alone where ``ARENA_ASGI_SYNC_VIEWS=asgi`` asks for it. Django must be set up."""
    django_asgi = get_asgi_application()
    if settings.ARENA_ASGI_SYNC_VIEWS == "asgi":
        return django_asgi
    return SyncViewsOverWSGI(  # Django is set up by get_asgi_application, as get_wsgi_application would
        asgi_app=django_asgi,
        wsgi_app=ResolvedWSGIHandler(),
        threads=settings.ARENA_WEB_THREADS,
    )
