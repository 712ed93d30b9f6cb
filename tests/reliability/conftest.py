"""The stack the fault tests share (tests/reliability/stack.py): started once for the module that asks for
it, its own PostgreSQL, Redis and Triton, so the tests may stop and restart them without touching the
machine's shared servers."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .stack import Stack

# Twenty raters: the burst test's (tests/reliability/test_faults.py); the other tests use the first four.
BURST_RATERS = 20


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with tempfile.TemporaryDirectory(prefix="arena-stack-") as folder:
        running = Stack(Path(folder), web_workers=2, worker_concurrency=4, raters=BURST_RATERS)
        try:
            running.start()
            yield running
        except BaseException:
            print(running.logs())
            raise
        finally:
            running.stop()
