"""A Celery worker for the ``generation`` queue inside this process, in a thread.

For ``manage.py demo`` (and the browser tests): without Redis every task runs eagerly, which for a live
battle would mean generating inside the rater's request, so the page could only show the finished
answers. The demo instead runs this real Celery worker (Celery's own WorkController with the thread
pool) on the in-memory broker, and live battles are sent to it (``ARENA_LIVE_STREAMING`` is on while
it runs: ``battles.services.battle_start_live`` then sends through the broker). It shares the process with
the web server, so the in-process live channel (battles/live.py) connects the two.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

from arena.celery import app

from .services import GENERATION_QUEUE


@contextmanager
def generation_worker(*, concurrency: int = 4, loglevel: str = "WARNING", streaming: bool = True) -> Iterator[Any]:
    """Run a worker consuming ``generation`` while the block runs; with ``streaming``, rater-typed prompts
    go to it as live battles meanwhile (``ARENA_LIVE_STREAMING``)."""
    previous = settings.ARENA_LIVE_STREAMING
    worker = app.WorkController(
        app=app,
        concurrency=concurrency,
        pool="threads",
        queues=[GENERATION_QUEUE],
        loglevel=loglevel,
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        hostname=f"arena-generation-{threading.get_ident()}@localhost",
    )
    thread = threading.Thread(target=worker.start, name="arena-generation-worker", daemon=True)
    thread.start()
    settings.ARENA_LIVE_STREAMING = streaming
    try:
        yield worker
    finally:
        settings.ARENA_LIVE_STREAMING = previous
        worker.stop(in_sighandler=False)
        thread.join(timeout=10)
