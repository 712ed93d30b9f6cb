"""Celery workers inside this process, in threads: one for the ``generation`` queue and one for every
other queue (``core.queues.ALL``).

For ``manage.py demo`` (and the browser tests): without Redis, tasks would run eagerly, which would
mean generating battles inside the rater's request (a live battle could then only show its finished
answers). Instead, while these real Celery workers (Celery's own WorkController with the thread pool)
run on the in-memory broker, tasks are not eager: they are sent through the broker and the workers run
them, as the workers of a deployment would (``ARENA_LIVE_STREAMING`` is on meanwhile, so typed prompts,
and pool battles the buffer had none ready for, stream). They share the process with the web server, so
the in-process live channel (battles/live.py) connects the two.

Two workers, as a deployment has one service per queue: generation holds its threads for as long as the
models write (seconds to a minute with the real models on a CPU), and a webhook delivery, an export or a
leaderboard recompute must not wait behind it (with one worker for every queue they waited up to 42 s).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from celery import current_app as app
from django.conf import settings

from core import queues

# Each battle keeps two model threads busy at once (one per side; the real models run one thread each):
# more battles at once than the cores can carry only queue inside the model server, where a rater's
# battle would wait behind all of them.
THREADS_PER_BATTLE = 2
WORKER_START_TIMEOUT_S = 60


def generation_concurrency() -> int:
    """How many battles the in-process generation worker generates at once: ARENA_GENERATION_CONCURRENCY,
    else what the machine's cores carry (one battle per two cores, at least one)."""
    configured = settings.ARENA_GENERATION_CONCURRENCY
    if configured:
        return int(configured)
    return max(1, (os.cpu_count() or 1) // THREADS_PER_BATTLE)


@contextmanager
def _worker(*, name: str, worker_queues: list[str], concurrency: int, loglevel: str) -> Iterator[Any]:
    consuming = threading.Event()
    worker = app.WorkController(
        app=app,
        # Called once the worker consumes its queues: the in-memory broker drops a message sent to a queue
        # no consumer has declared yet, so nothing is sent before.
        ready_callback=lambda consumer: consuming.set(),
        concurrency=concurrency,
        pool="threads",
        queues=worker_queues,
        loglevel=loglevel,
        # One task at a time per thread: a thread busy generating must not hold back tasks it prefetched.
        prefetch_multiplier=1,
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        hostname=f"arena-{name}-{threading.get_ident()}@localhost",
    )
    thread = threading.Thread(target=worker.start, name=f"arena-{name}-worker", daemon=True)
    thread.start()
    try:
        if not consuming.wait(WORKER_START_TIMEOUT_S):
            raise RuntimeError(f"the in-process {name} worker did not start in {WORKER_START_TIMEOUT_S} s")
        yield worker
    finally:
        worker.stop(in_sighandler=False)
        thread.join(timeout=10)


@contextmanager
def generation_worker(
    *,
    concurrency: int | None = None,
    loglevel: str = "WARNING",
    streaming: bool = True,
    other_concurrency: int = 2,
    separate: bool = True,
) -> Iterator[Any]:
    """Run a worker for the ``generation`` queue (``concurrency`` threads, default
    ``generation_concurrency()``) and one for every other queue (``other_concurrency`` threads) while the
    block runs, with tasks sent through the broker (not eager) meanwhile; with ``streaming``, rater-typed
    prompts and battles prepared for a rater go to it as live battles (``ARENA_LIVE_STREAMING``). Yields
    the generation worker. ``separate=False``: one worker for every queue (the browser tests, on Redis:
    two in-process workers on the Redis broker were seen to hang in ``stop`` when the suite's tests ran
    one after another; the demo's in-memory broker has not)."""
    previous = settings.ARENA_LIVE_STREAMING
    previous_eager = app.conf.task_always_eager
    others = [queue for queue in queues.ALL if queue != queues.GENERATION]
    with ExitStack() as stack:
        generation = stack.enter_context(
            _worker(
                name="generation",
                worker_queues=[queues.GENERATION] if separate else list(queues.ALL),
                concurrency=concurrency or generation_concurrency(),
                loglevel=loglevel,
            )
        )
        if separate:
            stack.enter_context(
                _worker(name="background", worker_queues=others, concurrency=other_concurrency, loglevel=loglevel)
            )
        settings.ARENA_LIVE_STREAMING = streaming
        app.conf.task_always_eager = False
        try:
            yield generation
        finally:
            app.conf.task_always_eager = previous_eager
            settings.ARENA_LIVE_STREAMING = previous
