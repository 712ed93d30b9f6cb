"""A Celery worker inside this process, in a thread, for every queue (``core.queues.ALL``).

For ``manage.py demo`` (and the browser tests): without Redis, tasks would run eagerly, which would
mean generating battles inside the rater's request (a live battle could then only show its finished
answers). Instead, while this real Celery worker (Celery's own WorkController with the thread pool)
runs on the in-memory broker, tasks are not eager: they are sent through the broker and this worker
runs them, as the workers of a deployment would (``ARENA_LIVE_STREAMING`` is on meanwhile, so typed
prompts stream). It shares the process with the web server, so the in-process live channel
(battles/live.py) connects the two.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import current_app as app
from django.conf import settings

from core import queues


@contextmanager
def generation_worker(*, concurrency: int = 4, loglevel: str = "WARNING", streaming: bool = True) -> Iterator[Any]:
    """Run a worker consuming every queue while the block runs, with tasks sent through the broker (not
    eager) meanwhile; with ``streaming``, rater-typed prompts go to it as live battles
    (``ARENA_LIVE_STREAMING``)."""
    previous = settings.ARENA_LIVE_STREAMING
    previous_eager = app.conf.task_always_eager
    worker = app.WorkController(
        app=app,
        concurrency=concurrency,
        pool="threads",
        queues=list(queues.ALL),
        loglevel=loglevel,
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        hostname=f"arena-generation-{threading.get_ident()}@localhost",
    )
    thread = threading.Thread(target=worker.start, name="arena-generation-worker", daemon=True)
    thread.start()
    settings.ARENA_LIVE_STREAMING = streaming
    app.conf.task_always_eager = False
    try:
        yield worker
    finally:
        app.conf.task_always_eager = previous_eager
        settings.ARENA_LIVE_STREAMING = previous
        worker.stop(in_sighandler=False)
        thread.join(timeout=10)
