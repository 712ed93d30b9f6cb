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
every other one to the WSGI handler through a2wsgi (one hop into a worker thread, the body streamed from
the event loop, the response streamed back). The same Django, settings, middleware and URLs serve both;
only the handler differs. A request that resolves to nothing goes to the WSGI handler, which answers it
as before (the 404 page, or ``APPEND_SLASH``'s redirect).

``ARENA_WEB_THREADS`` (default: ``DB_POOL_MAX_SIZE``, 10 without a pool) bounds the sync requests a worker
process runs at once; more wait for a thread. Each holds at most one database connection, so a thread never
waits for the pool. ``ARENA_ASGI_SYNC_VIEWS=asgi`` serves everything through Django's ASGI handler as
before (a way back, should a deployment need it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from a2wsgi import WSGIMiddleware
from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.core.asgi import get_asgi_application
from django.core.wsgi import get_wsgi_application
from django.urls import Resolver404, resolve

Scope = MutableMapping[str, Any]
ASGIApp = Callable[..., Awaitable[None]]  # (scope, receive, send)


def resolves_to_async_view(scope: Scope) -> bool:
    """Whether the request's path names a coroutine view (as Django's handler would resolve it)."""
    path: str = scope.get("path", "")
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    try:
        match = resolve(path or "/")
    except Resolver404:
        return False
    return iscoroutinefunction(match.func)


class SyncViewsOverWSGI:
    """An ASGI application: ``asgi_app`` for async views and anything not HTTP, ``wsgi_app`` (in ``threads``
    worker threads) for the rest."""

    def __init__(self, *, asgi_app: ASGIApp, wsgi_app: Callable[..., Any], threads: int = 10) -> None:
        self.asgi_app = asgi_app
        self.wsgi_app = WSGIMiddleware(wsgi_app, workers=threads)
        self.threads = threads

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not resolves_to_async_view(scope):
            await self.wsgi_app(scope, receive, send)  # type: ignore[arg-type]  # a2wsgi's own scope types
            return
        await self.asgi_app(scope, receive, send)


def web_application() -> ASGIApp:
    """The application production (``arena.asgi``), the demo and the browser tests serve: the router, or
    Django's ASGI handler alone where ``ARENA_ASGI_SYNC_VIEWS=asgi`` asks for it. Django must be set up."""
    django_asgi = get_asgi_application()
    if settings.ARENA_ASGI_SYNC_VIEWS == "asgi":
        return django_asgi
    return SyncViewsOverWSGI(
        asgi_app=django_asgi,
        wsgi_app=get_wsgi_application(),
        threads=settings.ARENA_WEB_THREADS,
    )
